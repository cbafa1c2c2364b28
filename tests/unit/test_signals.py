"""SIGTERM is handled like SIGINT at any moment: exit 128 + 15, never "unexpected <Error>", and a
command it stops leaves nothing half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from winml_perf import cli
from winml_perf.commands import devices
from winml_perf.support import signals


@pytest.fixture(autouse=True)
def _restore_handlers():
    saved = {s: signal.getsignal(s) for s in signals.HANDLED}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
    signals._received.clear()


def test_an_exception_a_signal_caused_is_reported_as_the_signal(monkeypatch, capsys):
    def interrupted_import():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises Interrupted here
            time.sleep(5)  # not reached: the signal is delivered at the next bytecode
        except KeyboardInterrupt as exc:
            raise ImportError("import numpy failed") from exc  # what numpy's __init__ does
        return []

    monkeypatch.setattr(devices, "list_ep_devices", interrupted_import)
    with pytest.raises(SystemExit) as done:
        cli._main(["devices"])
    assert done.value.code == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM" in err and "unexpected" not in err


def test_the_entry_point_handles_signals_before_importing_the_cli():
    probe = (
        "import signal, sys; import winml_perf.__main__ as m; "
        "print(signal.getsignal(signal.SIGTERM).__name__, 'winml_perf.cli' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["_exit_now", "False"]


@pytest.mark.parametrize("delay_s", [0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 0.9, 1.0, 1.1, 1.2, 1.4, 2.0])
def test_sigterm_at_any_moment_of_bundle_prepare_is_exit_143(tiny_flat, bundle_copy, delay_s):
    bundle = bundle_copy(tiny_flat)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "winml_perf", "bundle", "prepare", str(bundle), "--ep", "cpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(delay_s)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    finished = proc.returncode == 0  # a fast machine may finish first: then nothing to check
    assert finished or proc.returncode in (143, -signal.SIGTERM), err
    # numpy's C import may print the interrupted import's traceback itself; the verdict is ours
    said = err.rstrip().endswith("interrupted by SIGTERM")
    before_python_ran_ours = proc.returncode == -signal.SIGTERM  # the interpreter's own start-up
    assert "unexpected" not in err and (finished or said or before_python_ran_ours), err
    compiled = bundle / "_compiled"
    leftovers = [p.name for p in compiled.iterdir() if p.name.startswith(".tmp-")] if compiled.exists() else []
    assert leftovers == []
