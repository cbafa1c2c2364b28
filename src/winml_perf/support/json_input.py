"""Strict reading of the JSON files we are handed (genai_config.json and friends).

Python's ``json`` keeps the last of two equal keys while onnxruntime-genai acts on the first, so a
duplicate key would make us report one thing while another runs: it is refused, naming the file,
the key and where it sits. Bytes that are not UTF-8 and nesting too deep for the parser are input
errors too. Every refusal is the caller's error class (exit 2), never a bare ValueError.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from winml_perf.support.errors import BundleError, WinmlPerfError


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _LoneSurrogate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> bool:
    """A string (or a list's string) holding half of a UTF-16 pair: no text encoder accepts it."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value if isinstance(v, str | list))
    return False


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        if _lone_surrogate(key) or _lone_surrogate(value):
            raise _LoneSurrogate(key)
        out[key] = value
    return out


def _where_duplicate(text: str, key: str) -> str:
    """The key path of the first object holding ``key`` twice (parsed again, keeping lists of pairs)."""

    def walk(node: Any, path: str) -> str | None:
        if isinstance(node, list) and all(isinstance(p, tuple) and len(p) == 2 for p in node):  # an object's pairs
            names = [k for k, _ in node]
            if names.count(key) > 1:
                return f"{path}.{key}" if path else key
            for k, v in node:
                found = walk(v, f"{path}.{k}" if path else k)
                if found:
                    return found
        elif isinstance(node, list):
            for i, v in enumerate(node):
                found = walk(v, f"{path}[{i}]")
                if found:
                    return found
        return None

    try:
        return walk(json.loads(text, object_pairs_hook=list), "") or key
    except RecursionError:
        return key


def parse_json_text(text: str, where: str, error: type[WinmlPerfError] = BundleError) -> Any:
    """Parse JSON text strictly; ``where`` names the file in the error."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise error(
            f"{where}: key {_where_duplicate(text, exc.key)!r} appears twice in one object "
            "(onnxruntime-genai would act on the first, Python readers on the last)",
            "keep one of them",
        ) from None
    except _LoneSurrogate as exc:
        raise error(
            f"{where}: key {exc.key!r} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), "
            "which is no text",
            "fix or regenerate the file",
        ) from None
    except json.JSONDecodeError as exc:
        raise error(
            f"{where}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", "fix or regenerate the file"
        ) from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read", "fix or regenerate the file") from None
    except ValueError as exc:  # an integer literal past Python's digit limit
        raise error(f"{where}: unreadable JSON ({exc})", "fix or regenerate the file") from None


def read_json(path: Path, error: type[WinmlPerfError] = BundleError) -> Any:
    """Read and parse a JSON file strictly: UTF-8, no duplicate keys, bounded nesting."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc.strerror or exc}", "check the file and its permissions") from None
    return json_of_bytes(data, path, error)


def json_of_bytes(data: bytes, path: Path, error: type[WinmlPerfError] = BundleError) -> Any:
    """``read_json`` of the bytes of ``path``, read already."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start})", "save the file as UTF-8 JSON") from None
    return parse_json_text(text, str(path), error)
