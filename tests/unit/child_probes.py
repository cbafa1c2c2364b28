"""A module child for child.py's tests: ``main(argv)`` does what ``argv[0]`` says.

exit N      exit with status N, after a line on stderr
signal SIG  end by that signal
report      print, as JSON: the plugins registered here, whether discovery ran, the env var
            WINML_PERF_PROBE, sys.path
anything else: called as a compile child (SRC OUT EP OPTIONS): write the same report to OUT
            (framed as a model file: bundle_fakes.unframed reads it back)
"""

import json
import os
import signal
import sys


def _report() -> dict:
    from winml_perf.ep import plugins

    return {
        "registered": {name: r.library_path for name, r in plugins._REGISTERED.items()},
        "discovered": plugins._STATE["discovered"] is not None,
        "probe_env": os.environ.get("WINML_PERF_PROBE"),
        "sys_path": sys.path,
    }


def main(argv: list[str]) -> int:
    command = argv[0]
    if command == "exit":
        print(f"probe exits with {argv[1]}", file=sys.stderr)
        return int(argv[1])
    if command == "signal":
        os.kill(os.getpid(), getattr(signal, argv[1]))
        return 0
    if command == "report":
        print(json.dumps(_report()))
        return 0
    from tests.unit.bundle_fakes import fake_model_bytes

    with open(argv[1], "wb") as f:  # framed as a whole model file, so the derived config accepts it
        f.write(fake_model_bytes(json.dumps(_report()).encode()))
    return 0


def worker_report(conn, marker: str) -> None:
    """A child.Worker target: answer one message with the report and the marker, then return."""
    conn.recv()
    conn.send({**_report(), "marker": marker})


def worker_exit(conn, code: int) -> None:
    """A child.Worker target that ends its process with ``code`` at once."""
    os._exit(code)


def pool_item(item: int) -> dict:
    """A pool job: the item back with this process's id and the env var the context set."""
    if item < 0:
        raise ValueError(f"negative item {item}")
    return {"item": item, "pid": os.getpid(), "probe_env": os.environ.get("WINML_PERF_PROBE")}


_SET_UP: list[str] = []


def pool_setup(marker: str) -> None:
    """A started_pool setup: leaves ``marker`` where ``set_up_item`` finds it."""
    _SET_UP.append(marker)


def set_up_item(item: int) -> dict:
    """A started_pool job: the item back with what this process's setup left."""
    return {"item": item, "pid": os.getpid(), "set_up": list(_SET_UP)}
