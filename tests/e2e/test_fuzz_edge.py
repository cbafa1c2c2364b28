"""Fuzz: genai_config.json shapes and flag values given to `winml perf` and `winml bundle show`.

Whatever they are, the command ends with exit 0, 1 or 2, says nothing "unexpected", prints no
traceback, and leaves the source bundle's bytes as they were. Derandomized (the same examples on
every run), and few enough for CI on two cores.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.conftest import TINY_FLAT  # noqa: E402
from winml_perf import cli  # noqa: E402

pytestmark = pytest.mark.e2e

KEY_PATHS = (
    ("model",),
    ("model", "context_length"),
    ("model", "vocab_size"),
    ("model", "eos_token_id"),
    ("model", "bos_token_id"),
    ("model", "type"),
    ("model", "decoder"),
    ("model", "decoder", "filename"),
    ("model", "decoder", "session_options"),
    ("model", "decoder", "session_options", "provider_options"),
    ("model", "decoder", "num_hidden_layers"),
    ("model", "decoder", "head_size"),
    ("model", "decoder", "pipeline"),
    ("search",),
    ("search", "max_length"),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, 2, 511, 1024, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["model.onnx", "../model.onnx", "/dev/null", "missing.onnx", "cpu"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
EDITS = st.lists(st.tuples(st.sampled_from(KEY_PATHS), st.one_of(st.just("<delete>"), VALUES)), max_size=3)
# mostly well-formed JSON, so the values inside reach the code that reads them
TEXT_EDITS = st.sampled_from(["none"] * 8 + ["duplicate-key", "truncate", "bom", "latin-1", "deep"])
COUNTS = st.sampled_from(["1", "8", "0", "-1", "1000000000000", "8,8", "a", "", "2,1100", "1023"])
FLAGS = st.fixed_dictionaries(
    {
        "--prompt-tokens": st.one_of(st.none(), COUNTS),
        "--max-new-tokens": st.one_of(st.none(), COUNTS),
        "--seed": st.one_of(st.none(), st.sampled_from(["0", "-1", "18446744073709551616", "7"])),
        "--prompt": st.one_of(st.none(), st.sampled_from(["", "hi", " ", "\u00e9\u4e2d"])),
        "--apply-template": st.booleans(),
        "--route": st.one_of(
            st.none(), st.sampled_from(["config", "ep=cpu", "ep=bogus", "device=npu", "ep=cpu;stages=x"])
        ),
        "--cell-timeout": st.one_of(st.none(), st.sampled_from(["0", "inf", "nan", "1e308", "30"])),
    }
)


def _apply(cfg: dict, path: tuple[str, ...], value) -> None:
    node = cfg
    for key in path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return
        node = node[key]
    if isinstance(node, dict):
        if value == "<delete>":
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value


def _config_bytes(edits, text_edit: str) -> bytes:
    cfg = json.loads((TINY_FLAT / "genai_config.json").read_text())
    for path, value in edits:
        _apply(cfg, path, value)
    text = json.dumps(cfg, indent=1)
    if text_edit == "duplicate-key":
        text = text.replace('"model": {', '"model": {"vocab_size": 7, ', 1)
    elif text_edit == "truncate":
        text = text[: len(text) // 2]
    elif text_edit == "deep":
        text = text.replace('"search": {', '"search": {"x": ' + "[" * 20000 + "]" * 20000 + ", ", 1)
    data = text.encode()
    if text_edit == "bom":
        data = b"\xef\xbb\xbf" + data
    elif text_edit == "latin-1":
        data = data.replace(b'"qwen2"', b'"qw\xe9n2"')
    return data


def _flags(flags: dict) -> list[str]:
    out: list[str] = []
    for flag, value in flags.items():
        if value is True:
            out.append(flag)
        elif value not in (None, False):
            out += [flag, value]
    return out


def _run(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                cli.main(args)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    return code, err.getvalue()


def _sources(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "_compiled" not in p.parts
    }


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=EDITS, text_edit=TEXT_EDITS, flags=FLAGS, show=st.booleans())
def test_any_config_and_flags_end_in_0_1_or_2_without_a_crash(tmp_path_factory, edits, text_edit, flags, show):
    bundle = tmp_path_factory.mktemp("fuzz") / "bundle"
    shutil.copytree(TINY_FLAT, bundle, ignore=shutil.ignore_patterns("_compiled"))
    (bundle / "genai_config.json").write_bytes(_config_bytes(edits, text_edit))
    before = _sources(bundle)
    args = (
        ["bundle", "show", str(bundle)]
        if show
        else [
            "perf",
            "--invocations",
            "1",
            str(bundle),
            "--no-store",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--quiet",
            *_flags(flags),
        ]
    )
    if not show and flags["--max-new-tokens"] is None:
        args += ["--max-new-tokens", "2"]
    code, err = _run(args)
    assert code in (0, 1, 2), err
    assert "unexpected" not in err and "Traceback" not in err, err
    assert _sources(bundle) == before
