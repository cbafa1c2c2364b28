"""child.py: how children end (exit code, signal, timeout) and what each receives (plugins, env, sys.path)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from winml_perf.ep import child, plugins

REPO = str(Path(__file__).resolve().parents[2])
PROBE = "tests.unit.child_probes"


def _context(**kw) -> child.ChildContext:
    return child.ChildContext(sys_path=(REPO,), **kw)


def test_exit_code_and_last_stderr_line():
    result = child.run_module(PROBE, ["exit", "7"], _context())
    assert (result.exit.exit_code, result.exit.signal, result.exit.timed_out, result.ok) == (7, None, False, False)
    assert result.failure() == "probe exits with 7" and result.exit.text == "exited with code 7"


def test_a_signal_is_named():
    result = child.run_module(PROBE, ["signal", "SIGTERM"], _context())
    assert (result.exit.exit_code, result.exit.signal_name, result.ok) == (None, "SIGTERM", False)
    assert result.failure() == "child was killed by SIGTERM"
    assert child.describe_exit(-9) == {
        "exit_code": None,
        "signal": 9,
        "signal_name": "SIGKILL",
        "text": "was killed by SIGKILL",
    }


def test_timeout_kills_the_child():
    result = child.run_module("tests.unit.child_hangs", [], _context(), timeout_s=0.5)
    assert result.exit.timed_out and not result.ok and result.exit.signal_name == "SIGKILL"
    assert result.exit.text == "did not finish within 0.5 s and was killed"


def test_plugins_env_and_sys_path_are_carried():
    webgpu = pytest.importorskip("onnxruntime_ep_webgpu")
    path = webgpu.get_library_path()
    context = _context(plugin_libraries=(f"webgpu={path}",), env={"WINML_PERF_PROBE": "carried"})
    result = child.run_module(PROBE, ["report"], context)
    assert result.ok, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["registered"] == {"WebGpuExecutionProvider": path}
    assert report["discovered"] is False  # registered from the spec it was handed, not found by itself
    assert report["probe_env"] == "carried" and REPO in report["sys_path"]


def test_from_parent_hands_the_registry_specs(monkeypatch):
    monkeypatch.setattr(plugins, "registered_specs", lambda: ("AcmeExecutionProvider=/opt/acme.so",))
    context = child.ChildContext.from_parent(env={"A": "1"})
    assert context.plugin_libraries == ("AcmeExecutionProvider=/opt/acme.so",) and context.env == {"A": "1"}
    assert tuple(sys.path) == context.sys_path
    assert child.ChildContext.from_json(context.to_json()) == context


def test_a_failing_plugin_is_reported_and_the_child_goes_on(tmp_path):
    context = _context(plugin_libraries=(f"AcmeExecutionProvider={tmp_path / 'missing.so'}",))
    result = child.run_module(PROBE, ["report"], context)
    assert result.ok and "plugin registration:" in result.stderr and "missing.so" in result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["registered"] == {}


def test_worker_gets_the_context_and_reports_its_exit():
    from tests.unit import child_probes

    worker = child.Worker(child_probes.worker_report, ("m1",), _context(env={"WINML_PERF_PROBE": "w"}), "probe")
    worker.conn.send("go")
    reply = worker.conn.recv()
    assert (reply["marker"], reply["probe_env"]) == ("m1", "w")
    assert worker.end(5.0, terminate_first=True) == child.ChildExit(0)
    dying = child.Worker(child_probes.worker_exit, (5,), _context(), "probe")
    assert dying.end(5.0, terminate_first=False).exit_code == 5


def test_a_pool_maps_in_order_in_other_processes_that_got_the_context():
    from tests.unit import child_probes

    pool = child.started_pool(2, _context(env={"WINML_PERF_PROBE": "pool"}))
    try:
        out = list(pool.map(child_probes.pool_item, range(6)))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert [r["item"] for r in out] == list(range(6))
    assert {r["probe_env"] for r in out} == {"pool"} and os.getpid() not in {r["pid"] for r in out}
    assert len({r["pid"] for r in out}) <= 2


def test_a_started_pool_has_its_processes_running_before_the_items_come():
    from tests.unit import child_probes

    pool = child.started_pool(2, _context(), child_probes.pool_setup, ("ready",), now=2)
    try:
        assert len(pool._processes) == 2  # started before any item was mapped
        out = list(pool.map(child_probes.set_up_item, range(6)))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert [r["item"] for r in out] == list(range(6))
    assert all(r["set_up"] == ["ready"] for r in out) and os.getpid() not in {r["pid"] for r in out}
    assert len({r["pid"] for r in out}) <= 2


_OWN_STDOUT_EXIT = """
import sys, time
from winml_perf.ep import child
from winml_perf.support.stdio import own_stdout

if __name__ == "__main__":
    with own_stdout():
        pool = child.started_pool(1, child.ChildContext.from_parent(plugin_libraries=()))
        pool.shutdown(wait=True)
        start = time.perf_counter()
    print(f"{time.perf_counter() - start:.3f}")
"""


@pytest.mark.skipif(os.name != "posix", reason="multiprocessing's resource tracker is a POSIX process")
def test_a_spawned_pool_does_not_hold_the_clis_stdout_pipe_open(tmp_path):
    """The resource tracker a spawn starts lives until the process exits: started on own_stdout's
    pipe, it kept the pipe open and own_stdout's exit waited out its 1 s timeout."""
    import subprocess

    script = tmp_path / "own_stdout_exit.py"
    script.write_text(_OWN_STDOUT_EXIT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[-1]) < 0.5  # 1.0 (the timeout) while the tracker held the pipe


def test_an_error_in_a_pool_job_is_raised_in_the_parent():
    from tests.unit import child_probes

    pool = child.started_pool(2, _context())
    try:
        with pytest.raises(ValueError, match="negative item -1"):
            list(pool.map(child_probes.pool_item, [1, -1, 2]))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def test_run_command_reports_and_missing_program_raises():
    result = child.run_command([sys.executable, "-c", "import sys; print('out'); sys.exit(4)"], timeout_s=30)
    assert (result.exit.exit_code, result.stdout.strip()) == (4, "out")
    with pytest.raises(OSError):
        child.run_command(["winml-perf-no-such-program"])


def test_module_child_exit_status_wraps_errors(capsys):
    def boom() -> None:
        raise ValueError("bad\ninput")

    assert child.exit_status(boom) == child.FAILED
    assert capsys.readouterr().err.strip() == child.ERROR_MARK + "ValueError: bad input"
    logged = child.ChildResult(
        child.ChildExit(3), "", child.ERROR_MARK + "ValueError: bad input\n[W:native] a log after it\n", 0.1
    )
    assert logged.failure() == "ValueError: bad input"  # found among native logs written after it
    assert child.exit_status(lambda: None) == 0


def test_a_worker_starts_where_the_platform_has_no_signal_masks(monkeypatch):
    """Windows has no pthread_sigmask: a child starts there as before, unmasked, and still answers."""
    from tests.unit import child_probes

    monkeypatch.delattr(child._signal, "pthread_sigmask")
    worker = child.Worker(child_probes.worker_report, ("m2",), _context(), "probe")
    worker.conn.send("go")
    assert worker.conn.recv()["marker"] == "m2"
    assert worker.end(5.0, terminate_first=True) == child.ChildExit(0)


def test_ctrl_c_while_serving_kills_the_child_before_the_grace_wait(monkeypatch):
    """The serving child ignores SIGINT, so the parent's Ctrl-C must end it at once (kill), not wait
    out end()'s grace for an invocation that keeps going."""
    import types

    from winml_perf.measure.serving import run as serving_run

    calls: list[str] = []

    class InterruptedWorker:
        def __init__(self, *args: object) -> None:
            self.conn = types.SimpleNamespace(poll=self._poll)

        def _poll(self, timeout: float) -> bool:
            raise KeyboardInterrupt

        def kill(self) -> None:
            calls.append("kill")

        def end(self, grace_s: float, terminate_first: bool) -> child.ChildExit:
            calls.append("end")
            return child.ChildExit(-9)

    monkeypatch.setattr(child, "Worker", InterruptedWorker)
    monkeypatch.setattr(child.ChildContext, "from_parent", classmethod(lambda cls, *a, **k: None))
    route = types.SimpleNamespace(session=types.SimpleNamespace(plugin_libraries=()), label="config")
    with pytest.raises(KeyboardInterrupt):
        serving_run.serve_invocation(route, types.SimpleNamespace(invocation=0), 60.0)  # type: ignore[arg-type]
    assert calls == ["kill", "end"]
