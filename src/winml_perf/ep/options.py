"""EP provider options as an input: parsing ``KEY=VALUE``, adding an EP's defaults and checking its keys. No I/O.

``--ep-option KEY=VALUE`` (repeatable) and ``options=KEY=VALUE,KEY=VALUE`` inside ``--route`` end in the
forced stages' provider options, so they are part of the rewritten config, hence of the derived
bundle's cache key, of every compile job's key and of the record. Defaults fill what was not given.

Which defaults and which keys each EP has is written in its entry in ``table.py``
(``EPInfo.default_options``, ``EPInfo.option_keys``). An EP that ignores unknown keys silently (QNN,
through every API: a session with ``bogus_key=1`` is created without a word, measured with
onnxruntime-qnn 2.7.0) lists its keys there per version, and ep/effective.py refuses an unknown key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from winml_perf.ep.table import EPS
from winml_perf.support.errors import UsageError


def parse_options(items: Iterable[str], where: str = "--ep-option") -> dict[str, str]:
    """``["soc_model=60", "htp_arch=73"]`` -> ``{"soc_model": "60", "htp_arch": "73"}``; UsageError naming ``where``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = (part.strip() for part in str(item).partition("="))
        if not sep or not key or not value:
            raise UsageError(f"{where} {item!r} is not KEY=VALUE", f"e.g. {where} soc_model=60")
        if key in out and out[key] != value:
            raise UsageError(f"{where} gives {key} twice ({out[key]} and {value})", "give each key once")
        out[key] = value
    return out


def with_defaults(ep: str, options: Mapping[str, str], asked: Mapping[str, str] | None = None) -> dict[str, str]:
    """The stage's options, then ``asked`` on top, then the EP's defaults for keys still missing."""
    out = {**dict(options), **dict(asked or {})}
    info = EPS.get(ep)
    for default in info.default_options if info else ():
        if not any(k in out for k in (default.key, *default.unless)):
            out[default.key] = default.value
    return out


def label_suffix(options: Mapping[str, str]) -> str:
    """``(htp_arch=73,soc_model=60)`` for a route label; empty without options."""
    return "(" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) + ")" if options else ""
