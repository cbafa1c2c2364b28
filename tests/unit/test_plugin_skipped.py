"""A plugin EP library that does not load: named with --ep-library it stops the command (exit 2,
naming the library); from WINML_PERF_EP_LIBRARIES it is skipped with a warning, so a command that
asks nothing of its EP runs, `winml devices` lists it as skipped, and a route that asks for its EP
fails naming the library and the fix."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_FLAT


@pytest.fixture
def broken(tmp_path):
    library = tmp_path / "libbroken_ep.so"
    library.write_bytes(b"\x7fELF not a shared library" * 4)
    return library


def _env(entry: str) -> dict[str, str]:
    return {"WINML_PERF_EP_LIBRARIES": entry, "WINML_PERF_NO_PLUGIN_DISCOVERY": "1"}


def test_a_broken_env_library_does_not_stop_a_command_that_does_not_ask_for_it(winml, broken):
    ran = winml("devices", "--format", "json", env=_env(f"webgpu={broken}"))
    assert ran.returncode == 0, ran.stderr
    (skipped,) = ran.json()["plugins_skipped"]
    assert skipped["ep_name"] == "WebGpuExecutionProvider" and str(broken) in skipped["error"]
    err = " ".join(ran.stderr.split())
    assert err.startswith("warning: onnxruntime could not register plugin EP library") and str(broken) in err
    assert (
        "WebGpuExecutionProvider is skipped" in err
        and "drop WebGpuExecutionProvider from WINML_PERF_EP_LIBRARIES" in err
    )
    prepared = winml("bundle", "prepare", TINY_FLAT, "--ep", "cpu", env=_env(f"webgpu={broken}"))
    assert prepared.returncode == 0, prepared.stderr


@pytest.mark.parametrize("route", [("--ep", "webgpu"), ("--route", "stages=decoder:webgpu")])
def test_a_route_that_asks_for_a_skipped_plugin_fails_naming_its_library(winml, broken, route):
    ran = winml("perf", TINY_FLAT, "--no-store", *route, env=_env(f"webgpu={broken}"))
    err = " ".join(ran.stderr.split())
    assert ran.returncode == 2, err
    assert "error: WebGpuExecutionProvider was asked for, but its plugin EP library did not load" in err
    assert str(broken) in err.partition("error:")[2] and "WINML_PERF_EP_LIBRARIES" in err.partition("error:")[2]
    assert "Traceback" not in ran.stderr


def test_a_broken_library_named_by_flag_stops_the_command(winml, broken):
    ran = winml("devices", "--ep-library", f"webgpu={broken}", env={"WINML_PERF_NO_PLUGIN_DISCOVERY": "1"})
    err = " ".join(ran.stderr.split())
    assert ran.returncode == 2 and ran.stdout == ""
    assert err.startswith(f"error: onnxruntime could not register plugin EP library {broken}")
    assert "(from --ep-library)" in err and "or drop WebGpuExecutionProvider from --ep-library" in err
    assert "Traceback" not in ran.stderr


@pytest.mark.qnn
def test_a_skipped_library_is_said_once_a_run_not_once_a_process(winml, broken):
    """Each measuring child read the env again and warned again (5 times for 2 routes x 2 invocations):
    a child registers what its parent handed it (the installed QNN plugin here), and no env."""
    ran = winml(
        "perf", TINY_FLAT, "--no-store", "--invocations", "2", "--iterations", "1", "--warmup", "0",
        "--prompt-tokens", "8", "--max-new-tokens", "2", "-q",
        env={"WINML_PERF_EP_LIBRARIES": f"webgpu={broken}"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.count("warning: onnxruntime could not register plugin EP library") == 1, ran.stderr
