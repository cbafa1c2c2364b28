"""Placement of the config route: where each stage of the bundle *as shipped* puts its nodes.

A forced route keeps its placement in its derived bundle (placement.py). The config route loads the
source bundle, which is never written, so its placement is a placement-only artifact in the same
cache (``_compiled/placement-<key12>/placement.json``, or the cache's fallback folder when the bundle
is read-only). Its key: the bundle's config, the identity of every source file, the identity of the
EPs involved (plugin library and devices) and the placement format, so a second run reads one file.
A result that describes this process rather than the model (an EP missing here, a silent fallback)
is returned but not kept.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from winml_perf.bundle import cache
from winml_perf.bundle import placement as pl
from winml_perf.bundle.config import GenaiConfig
from winml_perf.model.route import StagePlacement

PREFIX = "placement"
SHAPE = {"stages": list}


class _NotKept(Exception):
    def __init__(self, stages: tuple[StagePlacement, ...], why: str) -> None:
        super().__init__(why)
        self.stages, self.why = stages, why


def config_placement(config: GenaiConfig) -> pl.RoutePlacement:
    """Placement of every stage of ``config``'s bundle as its config says: cached, else measured."""
    from winml_perf.bundle.derive import source_files

    t0 = time.perf_counter()
    bundle = Path(config.bundle)
    identity = pl.ep_identity([s.ep for s in config.stages])
    settings = {
        "config_sha256": cache.text_sha256(json.dumps(config.raw, sort_keys=True)),
        "eps": identity,
        "placement_format": pl.FORMAT_VERSION,
    }
    request = cache.Request(
        bundle,
        PREFIX,
        "placement of the config route",
        settings,
        cache.source_identities(bundle, source_files(bundle)),
        {"eps": "EP identity (plugin library, devices)", "config_sha256": "genai_config.json"},
        SHAPE,
    )

    def build(tmp: Path) -> dict[str, Any]:
        stages = tuple(pl.measure_config(config, bundle))
        why = pl._transient(stages)
        if why:
            raise _NotKept(stages, why)
        (tmp / pl.PLACEMENT_FILE).write_text(json.dumps([s.to_dict() for s in stages], indent=2), encoding="utf-8")
        return {"stages": [s.to_dict() for s in stages]}

    try:
        entry = cache.get_or_build(request, build)
    except _NotKept as exc:
        return pl.RoutePlacement(exc.stages, None, f"measured; not saved: {exc.why}", _ms(t0))
    if [s["stage"] for s in entry.manifest["stages"]] != list(config.stage_names):
        return pl.RoutePlacement(
            tuple(pl.measure_config(config, bundle)), None, "cached stages differ; measured", _ms(t0)
        )
    stages = tuple(StagePlacement.from_dict(s) for s in entry.manifest["stages"])
    reason = "placement-only artifact made under this key" if entry.cache == "hit" else f"measured: {entry.reason}"
    return pl.RoutePlacement(stages, entry.cache, reason, _ms(t0), entry.key)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
