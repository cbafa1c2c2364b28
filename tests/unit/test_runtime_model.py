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


class RecordingSession:
    """A session class a fake runtime names by its dotted path."""

    def __init__(self, path: str, **options) -> None:
        self.path, self.options = path, options


def test_each_runtime_names_a_session_class_the_factory_can_import():
    from winml_perf.session.factory import session_class
    from winml_perf.session.genai_session import GenaiSession
    from winml_perf.session.onnx_session import OnnxSession

    assert session_class(GENAI) is GenaiSession and session_class(ONNX) is OnnxSession
    for runtime in RUNTIMES.values():
        assert isinstance(session_class(runtime), type) and hasattr(session_class(runtime), "load")


def test_a_runtime_is_one_value_the_factory_opens_by_its_session_path(monkeypatch):
    from winml_perf.model.runtime import Runtime
    from winml_perf.model.spec import SessionSpec
    from winml_perf.session.factory import open_session

    fake = Runtime("fake", False, "auto", "fake models", session=f"{__name__}:RecordingSession")
    monkeypatch.setitem(RUNTIMES, fake.name, fake)
    session = open_session(SessionSpec("fake", "m.fake", options={"threads": 2}))
    assert isinstance(session, RecordingSession) and (session.path, session.options) == ("m.fake", {"threads": 2})


def test_a_missing_session_module_is_a_usage_error_where_the_runtime_gives_a_remedy():
    from winml_perf.model.runtime import Runtime
    from winml_perf.session.factory import session_class

    with pytest.raises(UsageError) as info:
        session_class(Runtime("x", False, "auto", "x", session="winml_perf.no_such:S", missing_remedy="use y"))
    assert "runtime 'x' needs winml_perf.no_such, which this install lacks" in str(info.value)
    assert info.value.remedy == "use y"
    with pytest.raises(ImportError):
        session_class(Runtime("x", False, "auto", "x", session="winml_perf.no_such:S"))
