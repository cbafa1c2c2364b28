"""`winml bundle show | prepare | clean`: inspect a bundle's routing, derive a forced route, remove derived bundles.

``--ep X`` is taken as asked, without requiring X on this machine (a QNN route can be prepared and
inspected on a laptop without an NPU); ``--device D`` is resolved against this machine's devices.
``--compile`` runs the EP, so with it ``--ep X`` must have a device here (exit 2 before anything is
written, as `winml perf --ep X` does).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from winml_perf.bundle import cache, derive
from winml_perf.bundle.config import refuse_no_bundle_folder
from winml_perf.bundle.prepare import Compiling, RunHoldings, plan_for, prepare_route
from winml_perf.commands.bundle_travel import export_prepared, import_prepared
from winml_perf.commands.from_gguf import from_gguf
from winml_perf.commands.help_style import PlainTyper
from winml_perf.commands.option_groups import option_groups
from winml_perf.commands.synth import synth
from winml_perf.ep import table as eps
from winml_perf.ep.options import parse_options
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.route import COMPILE_FAILURES, OK, StageRoute, with_placements
from winml_perf.model.runtime import GENAI
from winml_perf.publish.formats import Offer, check_format, format_help, format_named, json_text, result_text
from winml_perf.support.errors import BenchmarkFailure, UsageError
from winml_perf.support.text_table import fill, fitted

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig
    from winml_perf.bundle.epcontext.compile import JobRunner
    from winml_perf.bundle.placement_nodes import StageNodes
    from winml_perf.ep.devices import Target
    from winml_perf.ep.effective import EffectiveOptions
    from winml_perf.model.route import Route

app = PlainTyper(help="Make, inspect, prepare and clean model bundles.", no_args_is_help=True)
app.command("synth")(synth)
app.command("from-gguf")(from_gguf)
app.command("export-prepared")(export_prepared)
app.command("import-prepared")(import_prepared)

# The route options `show` and `prepare` share, declared once.
EpOpt = Annotated[
    str | None, typer.Option("--ep", metavar="NAME", help="force this EP (any spelling: cpu, qnn, OpenVINO, ...)")
]
DeviceOpt = Annotated[
    str | None, typer.Option("--device", metavar="CLASS", help="force the best EP for cpu|gpu|npu|auto here")
]
StagesOpt = Annotated[
    str | None,
    typer.Option("--stages", metavar="A,B", help="limit the forced route to these stages (comma-separated)"),
]
EpOptionOpt = Annotated[
    list[str] | None,
    typer.Option("--ep-option", metavar="KEY=VALUE", help="EP provider option of the forced route (repeatable)"),
]
EpLibraryOpt = Annotated[
    list[str] | None,
    typer.Option("--ep-library", metavar="NAME=PATH", help="a plugin EP library (repeatable)"),
]


def parse_stages(stages: str | None) -> list[str] | None:
    if not stages:
        return None
    names = [s.strip() for s in stages.split(",") if s.strip()]
    if not names:
        raise UsageError(
            f"--stages {stages!r} names no stage",
            "give stage names separated by commas, e.g. --stages context,iterator",
        )
    return names


def target_for(
    ep: str | None,
    device: str | None,
    ep_library: list[str] | None = None,
    asked: dict[str, str] | None = None,
    *,
    here: bool = False,
) -> Target:
    """The Target for these flags: ``--ep`` planned as `winml perf` runs it where the EP is here, else on
    its home device (no availability check); ``--device`` resolved here. A ``device_type`` in ``asked``
    (``--ep-option``) names the device. ``--ep-library`` plugins are registered first, so compile
    children and device resolution see them. ``here``: ``--ep`` resolved as `winml perf` resolves it,
    its EP and device required on this machine (compiling runs the EP); resolved once either way."""
    from winml_perf.ep.devices import Target, planned_target, resolve_target
    from winml_perf.ep.effective import device_from_options
    from winml_perf.ep.plugins import register_plugin_eps
    from winml_perf.ep.table import normalize_ep_name

    if ep_library:
        register_plugin_eps(ep_library)
    if ep is not None:
        canonical = normalize_ep_name(ep)  # the EP as spelled, normalised once
        resolve = resolve_target if here else planned_target
        return resolve(ep, device_from_options(canonical, device, asked), GENAI, canonical=canonical)
    if device is None or device == "config":
        return Target("config", None, device, None, None)
    return resolve_target(None, device, GENAI)


def _ep_label(name: str | None) -> str:
    return eps.ep_alias(name) if name is not None and eps.is_known_ep(name) else f"{name} (unknown)"


def stage_rows(stages: Sequence[StageRoute]) -> list[list[str]]:
    rows = []
    for s in stages:
        flags = "".join(
            ("P" if s.run_on_prompt else "-", "T" if s.run_on_token_gen else "-", " lm_head" if s.is_lm_head else "")
        )
        before, after = _ep_label(s.ep_before), _ep_label(s.ep_after)
        route = f"{before} -> {after}" if s.forced else f"{before} (config)"
        opts = json.dumps(list(s.provider_options_after)) if s.provider_options_after else "[] (cpu)"
        rows.append([s.stage, ", ".join(s.files), flags, route, opts])
    return rows


_HEADERS: tuple[str, ...] = ("stage", "file", "P/T", "EP before -> after", "provider_options after")
_PLACEMENT_HEADERS: tuple[str, ...] = ("nodes per EP", "CPU fallback ops")
#: The columns that leave a narrow terminal, in this order (stage, EP before -> after and nodes per EP stay).
_DROP_ORDER = ("provider_options after", "file", "P/T", "CPU fallback ops")


def placement_cells(stage: StageRoute) -> list[str]:
    from winml_perf.bundle.placement import nodes_text, ops_text

    p = stage.placement
    if p is None or p.status != OK:
        return [nodes_text(p), (p.error if p is not None else None) or "-"]
    ops = ops_text(p.cpu_fallback_ops) or "-"
    return [nodes_text(p), ops + (f" (all on {_ep_label(stage.ep_actual)})" if stage.ep_actual else "")]


@app.command("show")
def show_command(
    bundle: Annotated[Path, typer.Argument(metavar="BUNDLE", help="bundle folder (holds genai_config.json)")],
    ep: EpOpt = None,
    device: DeviceOpt = None,
    stages: StagesOpt = None,
    format: Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.ROWS))] = "table",
    placement: Annotated[
        bool,
        typer.Option(
            "--placement",
            help="open each stage's model on its EP and show where its nodes are placed (nodes per EP, ops that fall back to CPU)",
        ),
    ] = False,
    placement_nodes: Annotated[
        bool,
        typer.Option(
            "--placement-nodes",
            help="with --placement: also one line per node (stage, node, op type, EP), as each stage's session assigned it",
        ),
    ] = False,
    ep_option: EpOptionOpt = None,
    ep_library: EpLibraryOpt = None,
) -> None:
    """Print each stage: file, prompt/token-gen flags (P/T), EP before -> after. Writes nothing."""
    check_format(Offer.ROWS, format)
    placement = placement or placement_nodes
    asked = parse_options(ep_option or ())
    target = target_for(ep, device, ep_library, asked)
    plan = plan_for(bundle, target, parse_stages(stages), asked)
    route_stages = plan.stages
    if placement:
        from winml_perf.bundle.placement import measure_config

        route_stages = with_placements(plan.stages, measure_config(plan.config))
    nodes = _nodes_of(plan.config) if placement_nodes else None
    rows, headers = stage_rows(route_stages), _HEADERS
    if placement:
        rows, headers = [r + placement_cells(s) for r, s in zip(rows, route_stages)], _HEADERS + _PLACEMENT_HEADERS
    if not format_named(format).terminal:  # the table is this command's own view, below
        items = [s.to_dict() for s in route_stages]
        payload = {
            "bundle": str(bundle),
            "kind": plan.config.kind,
            "target": target.to_dict(),
            **plan.to_dict(),
            "stages": items,
            **({"nodes": [n.to_dict() for n in nodes]} if nodes is not None else {}),
        }
        sys.stdout.write(result_text(format, payload, items, list(headers), rows))
        return
    print(fill(f"{bundle}  ({plan.config.kind})  requested={plan.requested}  route={plan.route}"))
    print(fitted(headers, rows, drop=_DROP_ORDER, pipes=True), end="")
    for line in _target_lines(target, plan.options):
        print(fill(line))
    if nodes is not None:
        from winml_perf.bundle.placement_nodes import node_lines

        print("\nplacement per node (stage, node, op type, EP), from each stage's session:")
        print("\n".join(node_lines(nodes)))
    for w in plan.warnings:
        print(fill(f"warning: {w}"), file=sys.stderr)


def _nodes_of(config: GenaiConfig) -> list[StageNodes]:
    from winml_perf.bundle.placement_nodes import stage_nodes

    return stage_nodes(config)


@dataclass(frozen=True)
class PlainModelFlags:
    """`bundle prepare` of an .onnx model: its session options."""

    graph_optimization_level: Annotated[
        str,
        typer.Option(
            "--graph-optimization-level", metavar="LEVEL", help=".onnx: disable, basic, extended, layout or all"
        ),
    ] = "all"
    session_config: Annotated[
        list[str] | None,
        typer.Option("--session-config", metavar="KEY=VALUE", help=".onnx: session config entry (repeatable)"),
    ] = None


@dataclass(frozen=True)
class CompileFlags:
    """`bundle prepare --compile`: compile the stages, in how long, keyed how."""

    compile: Annotated[
        bool,
        typer.Option("--compile", help="compile stages on EPContext EPs (QNN, OpenVINO, VitisAI, TensorRT-RTX)"),
    ] = False
    compile_timeout: Annotated[
        float, typer.Option("--compile-timeout", metavar="S", help="seconds per compile child process")
    ] = DEFAULTS.compile_timeout_s
    verify_sources: Annotated[
        bool, typer.Option("--verify-sources", help="hash source files' contents into the cache key")
    ] = False


@dataclass(frozen=True)
class PluginFlags:
    """Plugin EP libraries and the EP's provider options."""

    ep_library: EpLibraryOpt = None
    ep_option: EpOptionOpt = None


@dataclass(frozen=True)
class DeviceFreeFlags:
    """`--compile --device-free`: compile with no device of the EP."""

    device_free: Annotated[
        bool,
        typer.Option(
            "--device-free",
            help="with --compile --ep X: compile with no X device (X's library registered as X.virtual in a child; "
            "the target from --ep-option soc_model/htp_arch/device_type)",
        ),
    ] = False
    strict: Annotated[
        bool,
        typer.Option("--strict", help="with --device-free: fail the compile when a node would fall back to CPU"),
    ] = False


@app.command("prepare")
@option_groups
def prepare_command(
    bundle: Annotated[
        Path, typer.Argument(metavar="BUNDLE", help="bundle folder (holds genai_config.json), or an .onnx model")
    ],
    ep: EpOpt = None,
    device: DeviceOpt = None,
    stages: StagesOpt = None,
    plain: PlainModelFlags = PlainModelFlags(),
    build: CompileFlags = CompileFlags(),
    format: Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.SUMMARY))] = "table",
    plugins: PluginFlags = PluginFlags(),
    free: DeviceFreeFlags = DeviceFreeFlags(),
) -> None:
    """Derive (and compile) the forced route's bundle without loading it; print the derived path."""
    check_format(Offer.SUMMARY, format)
    if (free.device_free or free.strict) and (not build.compile or ep is None):
        raise UsageError(
            "--device-free and --strict need --compile and --ep X", "e.g. --ep qnn --compile --device-free"
        )
    if ep is None and device in (None, "config") and not build.compile:
        raise UsageError(
            "winml bundle prepare needs --ep X, --device D or --compile (the config route compiled)",
            "e.g. --ep cpu, --device npu or --compile",
        )
    if build.compile_timeout <= 0:
        raise UsageError(
            f"--compile-timeout must be positive, not {build.compile_timeout}",
            "give seconds, e.g. --compile-timeout 600",
        )
    from winml_perf.ep.plugins import plugins_here

    asked = parse_options(plugins.ep_option or ())
    here = plugins_here(plugins.ep_library or ())  # registered first, once: the derived bundle is keyed by them
    # compiling on a device (not device-free) needs the EP and its device here
    target = target_for(ep, device, None, asked, here=build.compile and not free.device_free)
    runner = _device_free_runner(target.ep, free.strict) if free.device_free else None
    session_config = plain.session_config
    if free.strict and bundle.suffix == ".onnx":  # a plain model's compile takes it as session config (and key)
        session_config = [*(session_config or []), "session.disable_cpu_ep_fallback=1"]
    if bundle.suffix == ".onnx" and not bundle.is_dir():
        if stages:
            raise UsageError("--stages applies to genai bundles, not to an .onnx model", "drop --stages")
        return _prepare_onnx_model(
            bundle,
            target,
            plain.graph_optimization_level,
            session_config,
            build.compile_timeout,
            build.verify_sources,
            plugins.ep_library,
            format,
            asked,
            free.device_free,
        )
    with cache.holding(bundle):  # the command's one hold: no `bundle clean` while the route is prepared
        route = prepare_route(
            bundle,
            target,
            parse_stages(stages),
            Compiling(build.compile_timeout, runner) if build.compile else None,
            build.verify_sources,
            require_available=False,
            ep_options=asked,
            holdings=RunHoldings(plugins=here.identities),
        )
    for w in route.warnings:
        print(fill(f"warning: {w}"), file=sys.stderr)
    if format_named(format).holds_document:
        sys.stdout.write(json_text(route.to_dict(), format))
        _fail_on_compile_failure(route)
        return
    rows = [r + placement_cells(s) for r, s in zip(stage_rows(route.stages), route.stages)]
    print(fitted(_HEADERS + _PLACEMENT_HEADERS, rows, drop=_DROP_ORDER, pipes=True), end="", file=sys.stderr)
    print(
        fill(
            f"route={route.effective} cache={route.cache} ({route.cache_reason}) prepare={route.prepare_ms:.0f} ms"
            + (f" compile={route.compile_ms:.0f} ms" if build.compile else "")
            + f" placement={route.placement_cache or 'not cached'} ({route.placement_reason})"
        ),
        file=sys.stderr,
    )
    for line in _target_lines(target, None, (route.target or {}).get("options")):
        print(fill(line), file=sys.stderr)
    for c in route.compile:
        print(f"compile {', '.join(c.stages)}: {c.status}" + (f" ({c.reason})" if c.reason else ""), file=sys.stderr)
    if free.device_free and route.path is not None:
        from winml_perf.bundle.epcontext.device_free import placement_lines

        for line in placement_lines(route.path):
            print(line, file=sys.stderr)
    print(route.path)
    _fail_on_compile_failure(route)


def _device_free_runner(ep: str | None, strict: bool) -> JobRunner:
    """device_free.runner for ``ep``, after refusing (exit 2) an EP or version that cannot compile device-free."""
    from winml_perf.bundle.epcontext import device_free

    assert ep is not None  # --device-free needs --ep (checked above)
    from winml_perf.support.optional import require

    require("--device-free (it reads the compiled graph's placement)", "onnx")
    device_free.refuse_unless_possible(ep)
    return device_free.runner(strict)


def _target_lines(
    target: Target, options: EffectiveOptions | None = None, recorded: dict[str, Any] | None = None
) -> list[str]:
    """Where the forced route's device and options came from (ep/effective.py), one line each."""
    from winml_perf.ep.effective import options_lines

    lines = [f"device: {target.device} ({target.device_source})"] if getattr(target, "device_source", None) else []
    return lines + options_lines(options.to_dict() if options is not None else recorded)


def _fail_on_compile_failure(route: Route) -> None:
    """Exit 1 when a compile failed or timed out: what was asked for was not made (nothing was published)."""
    failed = [c for c in route.compile if c.status in COMPILE_FAILURES]
    if failed:
        raise BenchmarkFailure(
            "compile failed: "
            + "; ".join(f"{', '.join(c.stages)} ({c.source} on {eps.ep_alias(c.ep)}): {c.status}" for c in failed)
            + f"; nothing compiled was published and {route.path} runs the source models",
            "see the compile lines above for the compiler's message; fix the model or options, or prepare without --compile",
        )


def _prepare_onnx_model(
    model: Path,
    target: Target,
    level: str,
    session_config: list[str] | None,
    compile_timeout: float,
    verify_sources: bool,
    ep_library: list[str] | None,
    format: str,
    asked: dict[str, str],
    device_free: bool = False,
) -> None:
    from winml_perf.bundle.onnx_prepare import EpSettings, OnnxBuild, prepare_onnx
    from winml_perf.ep.effective import plain_provider_options
    from winml_perf.session.onnx_options import parse_graph_optimization_level, parse_session_config

    if not model.is_file():
        raise UsageError(f"model {model} does not exist", "pass the path of an .onnx file")
    if getattr(target, "ep", None) is None:
        raise UsageError("preparing a plain .onnx model needs an EP", "add --ep NAME or --device CLASS")
    ep_settings = EpSettings(
        plain_provider_options(target, asked)[1],  # --ep-option, checked, with the EP's defaults
        parse_session_config(session_config or []),
    )
    prepared = prepare_onnx(
        model,
        target,
        parse_graph_optimization_level(level),  # the flag parsed once, here
        ep_settings=ep_settings,
        build=OnnxBuild(compile_timeout_s=compile_timeout, device_free=device_free),
        verify_sources=verify_sources,
        plugin_libraries=list(ep_library or ()),
    )
    if format_named(format).holds_document:
        sys.stdout.write(json_text(prepared.to_dict(), format))
        return
    d = prepared.to_dict()
    print(
        f"{d.get('kind')} model for {target.label}: cache={d.get('cache')} ({d.get('cache_reason')}) "
        f"prepare={d.get('prepare_ms') or 0:.0f} ms",
        file=sys.stderr,
    )
    compat = d.get("compatibility") or {}
    if compat:
        made = (compat.get("prepared") or {}).get("built") or {}
        print(
            f"compatibility: {compat.get('verdict')} ({compat.get('detail')}); made {made.get('made')} "
            f"on {made.get('registered_as')}, matched {(compat.get('prepared') or {}).get('matched')}",
            file=sys.stderr,
        )
    if device_free:
        from winml_perf.bundle.epcontext.device_free import placement_lines

        for line in placement_lines(prepared.folder):
            print(line, file=sys.stderr)
    print(prepared.path)


def _say_waiting(root: Path) -> None:
    print(
        f"waiting: a run is measuring from (or building into) {root}; it is cleaned when that ends (Ctrl-C to leave it)",
        file=sys.stderr,
        flush=True,
    )


@app.command("clean")
def clean_command(
    bundle: Annotated[Path, typer.Argument(metavar="BUNDLE", help="bundle folder, or an .onnx model")],
) -> None:
    """Remove the bundle's derived bundles (`_compiled/`, and its cache folder if any); waits for runs measuring from them."""
    if bundle.suffix == ".onnx" and bundle.is_file():
        from winml_perf.bundle.onnx_prepare import clean_onnx

        removed = clean_onnx(bundle, on_wait=_say_waiting)
        for path in removed:
            print(f"removed {path}", file=sys.stderr)
        if not removed:
            print(f"nothing to remove for {bundle}", file=sys.stderr)
        return
    refuse_no_bundle_folder(bundle)  # a file, or the folder above the bundles, cleans nothing
    removed = derive.clean(bundle, on_wait=_say_waiting)
    for path in removed:
        print(f"removed {path}", file=sys.stderr)
    if not removed:
        print(f"nothing to remove for {bundle}", file=sys.stderr)
