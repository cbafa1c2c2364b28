"""A dashboard page worker's start (dashboard_page.ready): at the worker's exit every live object is
frozen, so the interpreter's final collection skips them (it took ~0.4 s of each worker's exit,
which the dashboard waits for)."""

from __future__ import annotations

import os
import subprocess
import sys

_EXIT = """
import sys
from winml_perf.publish import dashboard_page

class Loop:
    def __del__(self):
        print("collected at exit", flush=True)

if sys.argv[1] == "ready":
    dashboard_page.ready()
loop = Loop()
loop.self = loop  # garbage only a collection finds
del loop
"""


def _exit_output(tmp_path, mode):
    script = tmp_path / "worker_exit.py"
    script.write_text(_EXIT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_ready_worker_skips_the_final_collection(tmp_path):
    assert _exit_output(tmp_path, "plain") == "collected at exit\n"  # the final collection runs without it
    assert _exit_output(tmp_path, "ready") == ""
