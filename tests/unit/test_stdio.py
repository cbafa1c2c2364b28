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
        os.write(1, b"another native line\\n")
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
    assert "LIBNATIVE" not in proc.stdout  # never on stdout; and filtered as noise (issue 38)
    assert proc.stderr == "another native line\n"  # every other native line reaches stderr


def test_a_replaced_sys_stdout_is_left_alone(capsys):
    from winml_perf.support.stdio import own_stdout

    with own_stdout():
        print("captured")
    assert capsys.readouterr().out == "captured\n"


def test_a_childs_captured_output_loses_the_libnative_line_only():
    from winml_perf.support.stdio import without_native_noise

    text = " # LIBNATIVE: No alternate configuration present in libnative_tls.conf\nreal error\n"
    assert without_native_noise(text) == "real error\n"
    assert without_native_noise("nothing to drop\n") == "nothing to drop\n"
