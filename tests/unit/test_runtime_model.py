"""model/runtime.py: the runtimes are values chosen once; names are only parsed at the edges."""

from __future__ import annotations

from pathlib import Path

import pytest

from winml_perf.model.runtime import GENAI, ONNX, RUNTIMES, runtime_for_path, runtime_named
from winml_perf.support.errors import UsageError


def test_runtimes_are_looked_up_by_name_and_carry_what_callers_ask():
    assert runtime_named("winml-genai") is GENAI and runtime_named("winml") is ONNX
    assert runtime_named(GENAI) is GENAI
    assert GENAI.token_based and not ONNX.token_based
    assert (GENAI.default_device, ONNX.default_device) == ("config", "auto")
    assert set(RUNTIMES) == {"winml-genai", "winml"}


def test_an_unknown_runtime_is_a_usage_error_naming_the_flag_and_the_choices():
    with pytest.raises(UsageError) as info:
        runtime_named("onnx")
    assert "--runtime 'onnx'" in str(info.value) and "winml-genai" in str(info.value) and "winml (" in str(info.value)


def test_the_path_picks_the_runtime(tmp_path: Path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    assert runtime_for_path(model) is ONNX
    assert runtime_for_path(tmp_path) is GENAI
    folder = tmp_path / "odd.onnx"
    folder.mkdir()
    assert runtime_for_path(folder) is GENAI  # a folder is a bundle whatever its name
