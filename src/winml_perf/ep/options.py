"""EP provider options as an input: parsing ``KEY=VALUE``, per-EP defaults and the keys each EP knows. Data, no I/O.

``--ep-option KEY=VALUE`` (repeatable) and ``options=KEY=VALUE,KEY=VALUE`` inside ``--route`` end in the
forced stages' provider options, so they are part of the rewritten config, hence of the derived
bundle's cache key, of every compile job's key and of the record. Defaults fill what was not given:

* QNN: ``backend_type=htp``. Without a backend_type the QNN EP cannot even be created ("Could not
  determine default backend path for device"), and genai's ``{"qnn": {}}`` fails to load.

QNN ignores keys it does not know, silently, through every API (measured with onnxruntime-qnn 2.7.0:
a session with ``bogus_key=1`` is created without a word, even at log severity 0), so an unknown key
is refused here, against the option names the QNN EP library itself carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from winml_perf.support.errors import UsageError

QNN = "QNNExecutionProvider"

DEFAULTS: Mapping[str, Mapping[str, str]] = {QNN: {"backend_type": "htp"}}
#: A default is not added when one of these keys is given (QNN: backend_path excludes backend_type).
EXCLUDED_BY: Mapping[str, tuple[str, ...]] = {"backend_type": ("backend_path",)}

#: Provider option names of the QNN EP (onnxruntime-qnn 2.x; the strings its library holds).
KNOWN_KEYS: Mapping[str, frozenset[str]] = {
    QNN: frozenset(
        {
            "backend_type",
            "backend_path",
            "profiling_level",
            "profiling_file_path",
            "rpc_control_latency",
            "vtcm_mb",
            "htp_performance_mode",
            "qnn_saver_path",
            "qnn_context_priority",
            "htp_graph_finalization_optimization_mode",
            "soc_model",
            "htp_arch",
            "device_id",
            "enable_htp_fp16_precision",
            "offload_graph_io_quantization",
            "enable_htp_spill_fill_buffer",
            "enable_htp_shared_memory_allocator",
            "dump_json_qnn_graph",
            "json_qnn_graph_dir",
            "op_affinity",
            "op_packages",
            "extended_udma",
            "disable_file_mapped_weights",
            "skip_qnn_version_check",
            "htp_bf16_enable",
            "enable_htp_graph_splitting",
            "enable_htp_fp16_clamp_overflow",
            "dump_qnn_ir_dlc",
            "dump_qnn_ir_dlc_dir",
            "qnn_ir_backend_path",
            "enable_vtcm_backup_buffer_sharing",
            "enable_htp_weight_sharing",
            "htp_shared_memory_allocator",
            "enable_htp_prepare_only",
            "num_graph_prepare_threads",
        }
    )
}


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


def check_keys(ep: str, options: Mapping[str, str], where: str = "--ep-option") -> None:
    """UsageError for a key ``ep`` does not know (only EPs with a known key list are checked)."""
    known = KNOWN_KEYS.get(ep)
    if known is None:
        return
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(
            f"{where} {unknown[0]}: {ep} has no provider option {unknown[0]!r} "
            "(the EP would ignore it silently, so the run would not be what was asked)",
            "use one of: " + ", ".join(sorted(known)),
        )


def with_defaults(ep: str, options: Mapping[str, str], asked: Mapping[str, str] | None = None) -> dict[str, str]:
    """The stage's options, then ``asked`` on top, then the EP's defaults for keys still missing."""
    out = {**dict(options), **dict(asked or {})}
    for key, value in DEFAULTS.get(ep, {}).items():
        if not any(k in out for k in (key, *EXCLUDED_BY.get(key, ()))):
            out[key] = value
    return out


def label_suffix(options: Mapping[str, str]) -> str:
    """``(htp_arch=73,soc_model=60)`` for a route label; empty without options."""
    return "(" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) + ")" if options else ""
