"""genai_config.json as a list of stages: load, validate, rewrite provider options, write back.

Every bundle is a list of stages. A flat decoder is one stage named ``decoder``. A pipeline
(``model.type == "decoder-pipeline"``) has its named stages, with ``model.decoder.pipeline`` given
either as a list of objects of named stages (usually one) or as that object directly. A stage without
``session_options`` inherits the decoder's. Keys this module does not model are kept untouched when
the config is written back: every rewrite works on a deep copy of the raw JSON.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from winml_perf.ep.table import CPU_EP, ep_from_genai_provider
from winml_perf.onnxfile import integrity
from winml_perf.support.errors import BundleError, UsageError, WinmlPerfError
from winml_perf.support.json_input import json_of_bytes, read_json

CONFIG_NAME = "genai_config.json"
FLAT_STAGE = "decoder"
PIPELINE_TYPE = "decoder-pipeline"


def bundles_in(folder: Path) -> list[Path]:
    """The bundle folders (holding genai_config.json) directly inside ``folder``, by name."""
    try:
        return sorted((p for p in Path(folder).iterdir() if (p / CONFIG_NAME).is_file()), key=lambda p: p.name)
    except OSError:
        return []


def refuse_no_bundle_folder(bundle: Path) -> None:
    """Exit 2 when ``bundle`` is missing, a file (one inside a bundle, say) or a folder of bundles rather
    than one (naming them and how to pick one); a folder without genai_config.json passes here."""
    if not bundle.exists():
        raise BundleError(
            f"bundle folder {bundle} does not exist", "pass the path of a folder holding genai_config.json"
        )
    if not bundle.is_dir():
        raise BundleError(f"{bundle} is not a folder", "pass the bundle folder, not a file inside it")
    inside = [] if (bundle / CONFIG_NAME).is_file() else bundles_in(bundle)
    if inside:  # a folder of bundles (`winml perf bundles`)
        shown = ", ".join(p.name for p in inside[:8]) + (f" and {len(inside) - 8} more" if len(inside) > 8 else "")
        raise BundleError(
            f"{bundle} is a folder of {len(inside)} bundle(s), not a bundle: {shown}",
            f"pass one of them, e.g. {inside[0]}",
        )


def load_config_dict(bundle: Path, data: bytes | None = None) -> dict[str, Any]:
    """Read a bundle's genai_config.json, with errors that name the path and the fix (``data``: its
    bytes, read already)."""
    bundle = Path(bundle)
    refuse_no_bundle_folder(bundle)
    path = bundle / CONFIG_NAME
    if not path.is_file():
        raise BundleError(
            f"{bundle} holds no {CONFIG_NAME}",
            "pass an onnxruntime-genai bundle folder (built by the model builder or `winml bundle synth`)",
        )
    parsed = read_json(path) if data is None else json_of_bytes(data, path)
    if (
        not isinstance(parsed, dict)
        or not isinstance(parsed.get("model"), dict)
        or not isinstance(parsed["model"].get("decoder"), dict)
    ):
        raise BundleError(
            f"{path}: key model.decoder is missing or not an object", "a genai_config.json needs model.decoder"
        )
    return parsed


@dataclass(frozen=True)
class Stage:
    """One ONNX session of a bundle. ``provider_options`` is the effective list (own or inherited);
    ``ep`` the canonical EP its first entry names (the CPU EP when there is none; a name the EP table
    does not know as written, ``ep_known`` False) and ``ep_options`` that entry's options, both read
    once where the config is parsed."""

    name: str
    filename: str
    provider_options: tuple[dict[str, Any], ...]
    inherits_session_options: bool
    key_path: str
    run_on_prompt: bool = True
    run_on_token_gen: bool = True
    is_lm_head: bool = False
    ep: str = CPU_EP
    ep_known: bool = True
    ep_options: dict[str, Any] | None = None

    @property
    def files(self) -> tuple[str, ...]:
        return (self.filename,)

    @property
    def provider_keys(self) -> tuple[str, ...]:
        """Genai provider names in order; empty means the CPU EP."""
        return tuple(next(iter(entry)) for entry in self.provider_options)

    def options_for(self, provider_key: str) -> dict[str, Any] | None:
        for entry in self.provider_options:
            key, value = next(iter(entry.items()))
            if key == provider_key:
                found: dict[str, Any] = copy.deepcopy(value)
                return found
        return None


@dataclass(frozen=True)
class GenaiConfig:
    """A validated genai_config.json. ``raw`` is never mutated; rewrites return a new GenaiConfig."""

    bundle: Path
    raw: dict[str, Any] = field(repr=False)
    kind: str  # "flat" | "pipeline"
    pipeline_form: str | None  # "list" | "object" | None
    stages: tuple[Stage, ...]

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def decoder_provider_options(self) -> tuple[dict[str, Any], ...]:
        so = self.raw["model"]["decoder"].get("session_options") or {}
        return tuple(copy.deepcopy(so.get("provider_options") or []))

    def static_prompt_length(self) -> tuple[str, int] | None:
        """(stage, S) when a stage that runs on the prompt takes exactly S tokens (static shapes), else None."""
        from winml_perf.onnxfile.header import input_shapes

        for stage in self.stages:
            if not stage.run_on_prompt or not (self.bundle / stage.filename).is_file():
                continue
            shapes = input_shapes(self.bundle / stage.filename)
            dims = shapes.get("input_ids") or shapes.get("inputs_embeds") or ()
            if len(dims) >= 2 and isinstance(dims[1], int):
                return stage.name, dims[1]
        return None

    def static_prompt(self, asked: Sequence[int] | None, asked_text: str | None = None) -> tuple[str, int] | None:
        """The rule `winml perf`, `serve` and `tune` follow for a stage that takes exactly S prompt
        tokens (``static_prompt_length``): None when no stage does; else (stage, S), which the run
        takes when nothing or only S was ``asked`` (the caller says so in a note when nothing was).
        Any other length asked is exit 2 naming it (``asked_text``: the flag's value as given;
        default: the lengths other than S), the stage and the fix."""
        static = self.static_prompt_length()
        if static is None:
            return None
        stage, length = static
        wrong = [n for n in asked or () if n != length]
        if wrong:
            raise UsageError(
                f"--prompt-tokens {asked_text or ','.join(map(str, wrong))}: stage `{stage}` of {self.bundle} has a "
                f"static prompt length of {length} tokens",
                f"pass --prompt-tokens {length}, or leave it out",
            )
        return static

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)

    def dumps(self) -> str:
        """The config as genai_config.json text (stable: 4-space indent, key order kept)."""
        return json.dumps(self.raw, indent=4, ensure_ascii=False) + "\n"

    def with_provider_options(
        self, updates: Mapping[str, list[Any]], decoder_options: list[Any] | None = None
    ) -> GenaiConfig:
        """A new config whose named stages (and optionally the decoder level) get these provider_options.

        A stage that inherited the decoder's session_options gets its own copy of them, so the
        rewrite reaches it without changing stages that keep inheriting.
        """
        raw = copy.deepcopy(self.raw)
        decoder = raw["model"]["decoder"]
        for name, options in updates.items():
            node = decoder if self.kind == "flat" else _pipeline_stage_dicts(decoder)[name]
            if "session_options" not in node or not isinstance(node["session_options"], dict):
                node["session_options"] = (
                    copy.deepcopy(decoder.get("session_options") or {}) if node is not decoder else {}
                )
            node["session_options"]["provider_options"] = copy.deepcopy(list(options))
        if decoder_options is not None and self.kind == "pipeline":
            decoder.setdefault("session_options", {})["provider_options"] = copy.deepcopy(list(decoder_options))
        return parse_config(self.bundle, raw, check_files=False)

    def with_session_entries(self, entries: Mapping[str, Mapping[str, str]]) -> GenaiConfig:
        """A new config whose named stages get these extra session_options keys (e.g. enable_profiling);
        a stage that inherited the decoder's session_options gets its own copy of them first."""
        raw = copy.deepcopy(self.raw)
        decoder = raw["model"]["decoder"]
        for name, extra in entries.items():
            node = decoder if self.kind == "flat" else _pipeline_stage_dicts(decoder)[name]
            if not isinstance(node.get("session_options"), dict):
                node["session_options"] = (
                    copy.deepcopy(decoder.get("session_options") or {}) if node is not decoder else {}
                )
            node["session_options"].update(extra)
        return parse_config(self.bundle, raw, check_files=False)

    def replace_filenames(self, filenames: Mapping[str, str]) -> GenaiConfig:
        """A new config whose named stages load other files (used for compiled EPContext models)."""
        raw = copy.deepcopy(self.raw)
        decoder = raw["model"]["decoder"]
        for name, filename in filenames.items():
            node = decoder if self.kind == "flat" else _pipeline_stage_dicts(decoder)[name]
            node["filename"] = filename
        return parse_config(self.bundle, raw, check_files=False)


#: (bundle as given, its real path) -> (the genai_config.json bytes parsed, the config they gave).
_PARSED: dict[tuple[Path, Path], tuple[bytes, GenaiConfig]] = {}
_PARSED_MAX = 64


def load_config(bundle: Path) -> GenaiConfig:
    """Load and validate a bundle's config, including that every stage's model file is there.

    A bundle whose genai_config.json holds the same bytes as when this process last parsed it is not
    parsed again (one run reads a bundle's config from several rooms); its stage files are checked anew."""
    bundle = Path(bundle)
    try:
        text = (bundle / CONFIG_NAME).read_bytes()
    except OSError:
        text = None  # load_config_dict says what is wrong
    key = (bundle, bundle.resolve())
    hit = _PARSED.get(key)
    if text is not None and hit is not None and hit[0] == text:
        for stage in hit[1].stages:
            _check_file(bundle, bundle / CONFIG_NAME, stage)
        return hit[1]
    config = parse_config(bundle, load_config_dict(bundle, text), check_files=True)
    if text is not None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = (text, config)
    return config


def config_identity(bundle: Path) -> tuple[int, int, int] | None:
    """(inode, mtime_ns, size) of a bundle's genai_config.json; None when it cannot be read."""
    try:
        st = (Path(bundle) / CONFIG_NAME).stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class ConfigBook:
    """The genai configs one run reads, by bundle folder: each loaded (``load_config``) once, then handed
    to every room that reads it after: passed down (prepare, the roofline), or, while the run is
    ``reading`` it, found by ``config_of`` (equivalence, its variants, perplexity). A folder whose
    genai_config.json is no longer the file it was ((path, inode, mtime_ns, size)) is loaded again."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[tuple[int, int, int], GenaiConfig]] = {}

    def add(self, config: GenaiConfig) -> GenaiConfig:
        """Keep ``config`` (just loaded from its folder) for the rest of the run."""
        identity = config_identity(config.bundle)
        if identity is not None:
            self._known[Path(config.bundle).resolve()] = (identity, config)
        return config

    def known(self, bundle: str | Path) -> GenaiConfig | None:
        """The config of ``bundle`` when this run loaded it and its file is unchanged; None otherwise."""
        key = Path(bundle).resolve()
        hit = self._known.get(key)
        return hit[1] if hit is not None and hit[0] == config_identity(key) else None

    def of(self, bundle: str | Path) -> GenaiConfig:
        """The config of ``bundle``: the one this run loaded, else loaded now (BundleError as load_config's)."""
        known = self.known(bundle)
        return known if known is not None else self.add(load_config(Path(bundle)))

    @contextmanager
    def reading(self) -> Iterator[ConfigBook]:
        """While inside, ``config_of`` (in this thread and context) reads from this book."""
        token = _READING.set(self)
        try:
            yield self
        finally:
            _READING.reset(token)


_READING: ContextVar[ConfigBook | None] = ContextVar("winml_perf_config_book", default=None)


def config_of(bundle: str | Path) -> GenaiConfig:
    """A bundle's config: from the run's ConfigBook while one is ``reading`` (read once a run), else ``load_config``."""
    book = _READING.get()
    return book.of(bundle) if book is not None else load_config(Path(bundle))


def parse_config(bundle: Path, data: dict[str, Any], check_files: bool = True) -> GenaiConfig:
    where = Path(bundle) / CONFIG_NAME
    model = data["model"]
    decoder = model["decoder"]
    decoder_so = _session_options(where, decoder, "model.decoder")
    decoder_po = _provider_options(where, decoder_so, "model.decoder.session_options")
    if "pipeline" in decoder:
        if model.get("type") != PIPELINE_TYPE:
            raise BundleError(
                f"{where}: model.decoder.pipeline is present but model.type is {model.get('type')!r}",
                f'set model.type to "{PIPELINE_TYPE}" (onnxruntime-genai fails with a misleading error otherwise)',
            )
        form = "list" if isinstance(decoder["pipeline"], list) else "object"
        stages = tuple(
            _pipeline_stage(where, name, node, path, decoder_po)
            for name, node, path in _iter_pipeline(where, decoder["pipeline"])
        )
        kind = "pipeline"
    else:
        if model.get("type") == PIPELINE_TYPE:
            raise BundleError(
                f"{where}: model.type is {PIPELINE_TYPE!r} but model.decoder.pipeline is missing",
                "add the pipeline stages or fix model.type",
            )
        filename = _filename(where, decoder, "model.decoder")
        ep, known, ep_options = _stage_ep(decoder_po)
        stages = (
            Stage(FLAT_STAGE, filename, decoder_po, False, "model.decoder", True, True, False, ep, known, ep_options),
        )
        kind, form = "flat", None
    if check_files:
        for stage in stages:
            _check_file(Path(bundle), where, stage)
    return GenaiConfig(Path(bundle), data, kind, form, stages)


def _iter_pipeline(where: Path, pipeline: Any) -> Iterator[tuple[str, Any, str]]:
    if isinstance(pipeline, dict):
        groups = [(pipeline, "model.decoder.pipeline")]
    elif isinstance(pipeline, list) and pipeline and all(isinstance(g, dict) for g in pipeline):
        groups = [(g, f"model.decoder.pipeline[{i}]") for i, g in enumerate(pipeline)]
    else:
        raise BundleError(
            f"{where}: model.decoder.pipeline must be an object of named stages or a list of such objects",
            "see the onnxruntime-genai config reference",
        )
    seen: set[str] = set()
    for group, prefix in groups:
        for name, node in group.items():
            if name in seen:
                raise BundleError(f"{where}: pipeline stage {name!r} is defined twice", "give each stage a unique name")
            seen.add(name)
            yield name, node, f"{prefix}.{name}"
    if not seen:
        raise BundleError(f"{where}: model.decoder.pipeline has no stages", "add the pipeline stages")


def _pipeline_stage_dicts(decoder: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pipeline = decoder["pipeline"]
    groups = pipeline if isinstance(pipeline, list) else [pipeline]
    return {name: node for group in groups for name, node in group.items()}


def _pipeline_stage(where: Path, name: str, node: Any, path: str, decoder_po: tuple[dict[str, Any], ...]) -> Stage:
    if not isinstance(node, dict):
        raise BundleError(f"{where}: {path} must be an object", "each pipeline stage is an object with a filename")
    filename = _filename(where, node, path)
    own = "session_options" in node
    options = (
        _provider_options(where, _session_options(where, node, path), f"{path}.session_options") if own else decoder_po
    )
    flags = {}
    for key, default in (("run_on_prompt", True), ("run_on_token_gen", True), ("is_lm_head", False)):
        value = node.get(key, default)
        if not isinstance(value, bool):
            raise BundleError(f"{where}: {path}.{key} must be true or false, not {value!r}", "fix the stage entry")
        flags[key] = value
    ep, known, ep_options = _stage_ep(options)
    return Stage(name, filename, options, not own, path, **flags, ep=ep, ep_known=known, ep_options=ep_options)


def _stage_ep(provider_options: tuple[dict[str, Any], ...]) -> tuple[str, bool, dict[str, Any] | None]:
    """A stage's ``ep``, ``ep_known`` and ``ep_options`` (see Stage) from its provider options."""
    if not provider_options:
        return CPU_EP, True, None
    key, options = next(iter(provider_options[0].items()))
    try:
        return ep_from_genai_provider(key), True, copy.deepcopy(options)
    except WinmlPerfError:
        return key, False, copy.deepcopy(options)


def _session_options(where: Path, node: dict[str, Any], path: str) -> dict[str, Any]:
    so = node.get("session_options", {})
    if not isinstance(so, dict):
        raise BundleError(f"{where}: {path}.session_options must be an object", "fix or remove it")
    return so


def _provider_options(where: Path, so: dict[str, Any], path: str) -> tuple[dict[str, Any], ...]:
    po = so.get("provider_options", [])
    key = f"{path}.provider_options"
    if not isinstance(po, list):
        raise BundleError(
            f'{where}: {key} must be a list of one-key objects such as [{{"QNN": {{}}}}]', "fix the list ([] means CPU)"
        )
    for entry in po:
        if not (isinstance(entry, dict) and len(entry) == 1 and isinstance(next(iter(entry.values())), dict)):
            raise BundleError(
                f"{where}: {key} holds {entry!r}, not a one-key object of options",
                'write each provider as {"<name>": {<options>}}',
            )
    return tuple(copy.deepcopy(po))


def _filename(where: Path, node: dict[str, Any], path: str) -> str:
    filename = node.get("filename")
    if not isinstance(filename, str) or not filename:
        raise BundleError(
            f"{where}: {path}.filename is missing or not a string",
            "name the stage's .onnx file, relative to the bundle folder",
        )
    if (
        os.path.isabs(filename)
        or PurePosixPath(filename).is_absolute()
        or PureWindowsPath(filename).is_absolute()
        or PureWindowsPath(filename).drive
    ):
        raise BundleError(
            f"{where}: {path}.filename {filename!r} is an absolute path", "use a path relative to the bundle folder"
        )
    if ".." in PureWindowsPath(filename).parts or ".." in PurePosixPath(filename).parts:
        raise BundleError(
            f"{where}: {path}.filename {filename!r} reaches outside the bundle with '..'",
            "keep stage files inside the bundle folder",
        )
    return filename


def _check_file(bundle: Path, where: Path, stage: Stage) -> None:
    for name in stage.files:
        path = bundle / name
        if not path.is_file():
            raise BundleError(
                f"{where}: stage `{stage.name}` names {name!r} ({stage.key_path}.filename), which is not in {bundle}",
                "restore the file or fix the filename",
            )
        if not os.access(path, os.R_OK):
            raise BundleError(f"{path}: stage `{stage.name}`'s model file cannot be read", "fix its permissions")
        damaged = integrity.problem(path) if path.suffix == ".onnx" else None
        if damaged:
            raise BundleError(
                f"{where}: stage `{stage.name}` names {name!r} ({stage.key_path}.filename), which {damaged}",
                "restore the file (copy or download it again) or fix the filename",
            )
