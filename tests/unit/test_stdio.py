"""own_stdout: what native code writes on fd 1 goes to stderr; what we print reaches the real stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, sys, json
    from winml_perf.support.stdio import own_stdout
    with own_stdout():
        os.write(1, b" # LIBNATIVE: a native library talking\\n")  # what libQnnHtp does
        print(json.dumps({"ok": True}))
    print("after")
    os.write(1, b"fd1 again\\n")
""")


def test_native_writes_on_fd1_go_to_stderr_and_our_prints_stay_on_stdout():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0]) == {"ok": True}
    assert lines[1:] == ["after", "fd1 again"]  # put back on exit
    assert "LIBNATIVE" in proc.stderr and "LIBNATIVE" not in proc.stdout


def test_a_replaced_sys_stdout_is_left_alone(capsys):
    from winml_perf.support.stdio import own_stdout

    with own_stdout():
        print("captured")
    assert capsys.readouterr().out == "captured\n"
