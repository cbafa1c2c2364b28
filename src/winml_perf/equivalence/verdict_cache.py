"""Equivalence verdicts kept by content (issue 34), so a second run over the same bundles judges nothing.

Two kinds of entry, each one JSON file: the reference's bands (noise floor, precision band and, with
layers, their error at every decoder layer) and one route's Equivalence. An entry's key is the sha256
of everything its verdict depends on:

- every file the reference bundle holds and, for a route, every file its prepared bundle holds, each
  by its sha256 read afresh in this process (the tool's own bookkeeping beside them, ``manifest.json``
  and ``placement.json``, and ``_compiled/`` are left out: the runtime reads none of them);
- the prompt's token ids, the steps, whether decoder layers are judged;
- onnxruntime and onnxruntime-genai versions, the plugin library of every EP either bundle names, and
  the host's name and machine type (a GPU EP's figures are this machine's; a driver update on the same
  host is not seen: ``--no-equivalence-cache`` or ``winml bundle clean``);
- the source of the modules that compute a verdict (``CODE``): a change to them misses every entry.

The key is recomputed from content on every run and must equal the one stored in the file; a file's
name (``equivalence-<key12>-bands.json`` / ``-route.json``) only finds it. A damaged entry is warned
about, ignored and rewritten (support/cache_file.py). Entries live in the bundle's artifact root
(``_compiled/``, else its folder under the user cache dir, bundle/cache.py), so ``winml bundle clean``
removes them with the derived bundles.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from winml_perf.model.equivalence import Band, Equivalence

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig

FORMAT = 1
FAMILY = "equivalence"
T = TypeVar("T")
#: Files the tool writes beside a bundle's own: the runtime reads none of them.
BOOKKEEPING = frozenset({"manifest.json", "placement.json"})
#: The modules whose code decides a verdict: the check and every module of this room it runs
#: (tests/unit/test_equivalence_room.py holds it so), its math and types, and the variants it builds.
#: What only says or records a verdict (report.py, attach.py) is left out: a change there judges nothing again.
CODE = (
    "winml_perf.equivalence.check",
    "winml_perf.equivalence.bands",
    "winml_perf.equivalence.layers",
    "winml_perf.equivalence.verdict_cache",
    "winml_perf.equivalence.passes.genai_logits",
    "winml_perf.equivalence.passes.genai_passes",
    "winml_perf.equivalence.passes.layer_outputs",
    "winml_perf.equivalence.passes.shared_passes",
    "winml_perf.equivalence.passes.layers_ahead",
    "winml_perf.equivalence.passes.kept_variants",
    "winml_perf.equivalence.passes.model_pool",
    "winml_perf.model.equivalence",
    "winml_perf.stats.equivalence",
    "winml_perf.stats.layer_equivalence",
    "winml_perf.bundle.variants",
)

# sha256 of each file read in this process, by its identity: a file linked into several derived
# bundles is read once per run; a changed file (size or mtime) is read again
_DIGESTS: dict[tuple[int, int, int, int], str] = {}


def _file_sha256(path: Path) -> str:
    from winml_perf.bundle.cache import file_sha256

    st = os.stat(path)
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if ident not in _DIGESTS:
        _DIGESTS[ident] = file_sha256(path)
    return _DIGESTS[ident]


def bundle_digest(folder: str | Path) -> str:
    """sha256 over every file of the bundle at ``folder`` (its path and its content's sha256)."""
    from winml_perf.bundle.derive import source_files

    folder = Path(folder)
    h = hashlib.sha256()
    for rel in source_files(folder):
        if rel in BOOKKEEPING:
            continue
        h.update(f"{rel}\0{_file_sha256(folder / rel)}\n".encode())
    return h.hexdigest()


def code_digest() -> str:
    """sha256 of the source of the modules in ``CODE`` (read from their files, none imported)."""
    h = hashlib.sha256()
    for name in CODE:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ImportError(f"{name}: no source to hash")
        h.update(name.encode() + b"\0" + Path(spec.origin).read_bytes())
    return h.hexdigest()


def _plugins(folder: str | Path, config: GenaiConfig | None = None) -> dict[str, Any]:
    """The plugin library of each EP the bundle at ``folder`` names (none for CPU or a built-in EP), as its
    ``config`` says: the one the caller holds, else the run's (``config_of``)."""
    from winml_perf.bundle.config import config_of
    from winml_perf.ep.plugins import plugin_identity
    from winml_perf.ep.table import CPU_EP, ep_from_genai_provider

    config = config if config is not None else config_of(folder)
    named = {ep_from_genai_provider(key) for s in config.stages for o in s.provider_options for key in o}
    out = {}
    for ep in sorted(named - {CPU_EP}):
        ident = plugin_identity(ep)
        if ident is not None:
            out[ep] = {k: ident.get(k) for k in ("package", "version", "sdk_version", "library_sha256")}
    return out


def _sha(components: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CachedBands:
    """The reference's bands as stored: the noise floor, the precision band, and each band's error per
    decoder layer (LayerBands' errors, local_errors and failures; None when layers were not judged)."""

    noise: Band
    precision: Band | None
    layers: dict[str, Any] | None

    def fits(self, layer_bands: Any) -> bool:
        """Whether these bands serve a check that judges layers (``layer_bands``) or not (None)."""
        return (self.layers is None) == (layer_bands is None)

    def fill(self, layer_bands: Any) -> None:
        """Give ``layer_bands`` each band's error per layer, as stored."""
        if layer_bands is not None and self.layers is not None:
            layer_bands.errors, layer_bands.local_errors = self.layers["errors"], self.layers["local_errors"]
            layer_bands.failures = list(self.layers["failures"])


@dataclass
class VerdictCache:
    """The entries of one judgement (a reference, a prompt, steps) in ``root``."""

    bundle: Path  # the bundle whose artifact root holds the entries
    base: dict[str, Any]  # what every key of this judgement holds
    keys_ms: float = 0.0  # time spent hashing content
    _route_keys: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        bundle: str | Path,
        reference: str | Path,
        reference_config: GenaiConfig,
        prompt_ids: Sequence[int],
        steps: int,
        layers: bool,
    ) -> VerdictCache:
        """The cache of ``bundle``'s artifact root for judging against ``reference`` (its folder, and its
        genai config as the check already holds it) on ``prompt_ids``."""
        import time

        from winml_perf.bundle.cache import runtime_versions

        t0 = time.perf_counter()
        base = {
            "format": FORMAT,
            "code": code_digest(),
            "versions": runtime_versions(),
            "host": [platform.node(), platform.machine()],  # a verdict is measured on this machine's devices
            "reference": bundle_digest(reference),
            "reference_plugins": _plugins(reference, reference_config),
            "prompt_ids": [int(t) for t in prompt_ids],
            "steps": int(steps),
            "layers": bool(layers),
        }
        return cls(Path(bundle), base, (time.perf_counter() - t0) * 1000.0)

    def route_key(self, path: str | Path) -> str:
        """The key of the route whose prepared bundle is at ``path`` (hashed once per path)."""
        import time

        path = str(path)
        if path not in self._route_keys:
            t0 = time.perf_counter()
            self._route_keys[path] = _sha({**self.base, "route": bundle_digest(path), "route_plugins": _plugins(path)})
            self.keys_ms += (time.perf_counter() - t0) * 1000.0
        return self._route_keys[path]

    @property
    def bands_key(self) -> str:
        return _sha(self.base)

    def _path(self, key: str, kind: str) -> Path:
        from winml_perf.bundle.cache import root_for

        return root_for(self.bundle) / f"{FAMILY}-{key[:12]}-{kind}.json"

    def _read(self, key: str, kind: str, parse: Callable[[Any], T]) -> T | None:
        from winml_perf.support.cache_file import read_cache

        parsed: list[T] = []

        def valid(data: dict[str, Any]) -> bool:
            if data.get("key") != key or data.get("kind") != kind:
                return False
            parsed.append(parse(data["value"]))
            return True

        return parsed[0] if read_cache(self._path(key, kind), valid) is not None else None

    def _write(self, key: str, kind: str, value: dict[str, Any]) -> None:
        from winml_perf.bundle.cache import holding
        from winml_perf.support.cache_file import write_cache

        with holding(self.bundle):
            write_cache(self._path(key, kind), {"key": key, "kind": kind, "value": value})

    def verdict(self, key: str) -> Equivalence | None:
        return self._read(key, "route", Equivalence.from_dict)

    def save_verdict(self, key: str, e: Equivalence) -> None:
        self._write(key, "route", e.to_dict())

    def bands(self) -> CachedBands | None:
        return self._read(self.bands_key, "bands", _bands_from)

    def save_bands(self, noise: Band, precision: Band | None, layer_bands: Any) -> None:
        layers = None
        if layer_bands is not None:
            layers = {
                "errors": layer_bands.errors,
                "local_errors": layer_bands.local_errors,
                "failures": list(layer_bands.failures),
            }
        value = {"noise": noise.to_dict(), "precision": precision.to_dict() if precision else None, "layers": layers}
        self._write(self.bands_key, "bands", value)


def _bands_from(d: Mapping[str, Any]) -> CachedBands:
    layers = d["layers"]
    if layers is not None:
        layers = {
            "errors": _per_layer(layers["errors"]),
            "local_errors": _per_layer(layers["local_errors"]),
            "failures": [str(f) for f in layers["failures"]],
        }
    return CachedBands(
        Band.from_dict(d["noise"]), Band.from_dict(d["precision"]) if d["precision"] is not None else None, layers
    )


def _per_layer(d: Mapping[str, Mapping[str, float]]) -> dict[str, dict[int, float]]:
    """{band: {layer: error}} read back from JSON (whose keys are strings)."""
    return {str(band): {int(k): float(v) for k, v in errors.items()} for band, errors in d.items()}
