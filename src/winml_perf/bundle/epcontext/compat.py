"""Is a compiled (EPContext) stage fit to reuse here? Asked honestly, and answered with where the answer came from.

1. The model's ``ep_compatibility_info.<EP>`` metadata is read and onnxruntime is asked
   (``get_model_compatibility_for_ep_devices``). ``EP_SUPPORTED_OPTIMAL``: compatible;
   ``EP_UNSUPPORTED`` / ``EP_SUPPORTED_PREFER_RECOMPILATION``: recompile.
2. Anything else is *unknown*: no info in the model, no device of the EP, ``EP_NOT_APPLICABLE``
   (what QNN answers on x86 for every string, garbage included: it validates NPU-type devices only),
   or an error. QNN's emulated CPU-type device is not asked at all: onnxruntime 1.32 raises "only
   supports OrtHardwareDeviceType_NPU" for it, and after a compile in the same process the call crashed
   the process (SIGSEGV, measured). Then a session is created with the run's provider options (0.2-0.8 s for QNN's HTP): it
   loads (verified) or fails, e.g. QNN_CONTEXT_ERROR_CREATE_FROM_BINARY for a soc_model=88 binary
   under htp_arch=68, or a truncated context binary (failed: recompile, saying why).

A session verdict is kept in ``compat.json`` beside the derived bundle's manifest, keyed by the
compiled files' identity (size, mtime_ns, inode), the options and the EP's plugin identity, so a
cache hit stays a file read; a changed or damaged file is verified again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.bundle import no_follow
from winml_perf.ep.table import emulator_of

if TYPE_CHECKING:
    from winml_perf.model.route import CompileOutcome

COMPAT_FILE = "compat.json"
RECOMPILE = ("EP_UNSUPPORTED", "EP_SUPPORTED_PREFER_RECOMPILATION")
NOT_ASKED = ("NO_INFO", "NO_DEVICE", "EMULATED_DEVICE")  # statuses of a question never put to onnxruntime
_ERROR_CHARS = 400
#: an EP's plugin identity as ep/plugins.py gives it (its library_sha256 is read); None: no plugin library
Plugin = Mapping[str, Any] | None


@dataclass(frozen=True)
class Verdict:
    verdict: str  # "compatible" | "recompile" | "verified" | "failed" | "unknown"
    source: str  # "onnxruntime" | "session" | "memo"
    status: str  # onnxruntime's answer: an OrtCompiledModelCompatibility name, NO_INFO, NO_DEVICE or ERROR
    info: str | None = None  # the model's ep_compatibility_info string
    detail: str = ""

    @property
    def fit(self) -> bool:
        return self.verdict in ("compatible", "verified")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ask_onnxruntime(model: Path, ep: str) -> Verdict:
    """Step 1: onnxruntime's own answer (a verdict of "unknown" when it cannot say)."""
    import onnxruntime as ort
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    from winml_perf.ep.plugins import registered_plugins

    try:
        info = C.get_compatibility_info_from_model(str(model), ep)
    except Exception as exc:  # a damaged model: the session step says what is wrong with it
        return Verdict(
            "unknown",
            "onnxruntime",
            "ERROR",
            None,
            "cannot read its metadata: " + " ".join(str(exc).split())[:_ERROR_CHARS],
        )
    if info is None:  # made device-free: the info sits under the name the EP was registered as then
        info = _virtual_info(model, ep)
    if info is None:
        return Verdict("unknown", "onnxruntime", "NO_INFO", None, f"no ep_compatibility_info.{ep} in the model")
    registered_plugins()  # so a plugin EP's devices are listed
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if not devices:
        return Verdict("unknown", "onnxruntime", "NO_DEVICE", info, f"no {ep} device here")
    if emulator_of(ep) is not None and all(_hw(d) == "cpu" for d in devices):
        # Not asked: QNN validates NPU-type devices only, and on its emulated CPU-type device the call raises
        # ("only supports OrtHardwareDeviceType_NPU") or, after a compile in the same process, crashes it (measured).
        return Verdict(
            "unknown",
            "onnxruntime",
            "EMULATED_DEVICE",
            info,
            f"the {ep} device here is an emulator of type CPU, which onnxruntime does not validate",
        )
    try:
        status = C.get_model_compatibility_for_ep_devices(devices, info).name
    except Exception as exc:  # QNN on a CPU-type device raises instead of answering
        return Verdict("unknown", "onnxruntime", "ERROR", info, " ".join(str(exc).split())[:_ERROR_CHARS])
    if status == "EP_SUPPORTED_OPTIMAL":
        return Verdict("compatible", "onnxruntime", status, info, f"checked against {len(devices)} device(s)")
    if status in RECOMPILE:
        return Verdict("recompile", "onnxruntime", status, info, f"checked against {len(devices)} device(s)")
    return Verdict("unknown", "onnxruntime", status, info, "onnxruntime cannot tell for the devices here")


def _virtual_info(model: Path, ep: str) -> str | None:
    """The info a device-free compile stored under ``ep_compatibility_info.<EP>.virtual``, read for ``ep``."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    try:
        info: str | None = C.get_compatibility_info_from_model(str(model), ep + ".virtual")
        return info
    except Exception:  # the first read already failed or succeeded on the same file
        return None


def _hw(device: Any) -> str:
    kind = device.device.type
    return str(getattr(kind, "name", kind)).rsplit(".", 1)[-1].lower()


def load_error(model: Path, ep: str, options: Mapping[str, str], level: str = "all") -> str | None:
    """Step 2: create a session on ``ep`` with ``options`` at graph optimisation ``level`` (the stage's);
    None when it loads, else onnxruntime's error."""
    import onnxruntime as ort

    from winml_perf.session.onnx_options import graph_optimization_enum

    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = graph_optimization_enum(level)
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if not devices:
        return f"no {ep} device here to load it on"
    so.add_provider_for_devices(devices[:1], {str(k): str(v) for k, v in options.items()})
    try:
        session = ort.InferenceSession(str(model), sess_options=so)
    except Exception as exc:
        return " ".join(str(exc).split())[:_ERROR_CHARS]
    del session
    return None


def check(
    model: Path, ep: str, options: Mapping[str, str], asked: Verdict | None = None, level: str = "all"
) -> Verdict:
    """onnxruntime's answer, and a session with the run's options when that answer is "unknown"."""
    asked = asked or ask_onnxruntime(model, ep)
    if asked.verdict != "unknown":
        return asked
    error = load_error(model, ep, options, level)
    why = _why_unknown(asked)
    if error is None:
        return Verdict(
            "verified", "session", asked.status, asked.info, f"{why}; a session with the run's options loads it"
        )
    return Verdict(
        "failed", "session", asked.status, asked.info, f"{why}; a session with the run's options fails: {error}"
    )


def _why_unknown(asked: Verdict) -> str:
    """Why onnxruntime's answer did not settle it, in words true to what happened."""
    if asked.status in NOT_ASKED:
        return f"onnxruntime was not asked ({asked.detail})"
    if asked.status == "ERROR":
        return f"onnxruntime could not answer ({asked.detail})"
    return f"onnxruntime answered {asked.status} ({asked.detail})"


# -- the memo of session verdicts, in the derived bundle --------------------------------------------
def memo_key(folder: Path, files: list[str], ep: str, options: Mapping[str, str], plugin: Plugin) -> str:
    """The memo's key of a verdict: the compiled files' identity, the EP, its options and its plugin
    library (``plugin``: the EP's plugin identity, ep/plugins.py; None: no plugin library serves it)."""
    idents = []
    for rel in files:
        try:
            st = (Path(folder) / rel).stat()
            idents.append([rel, st.st_size, st.st_mtime_ns, st.st_ino])
        except OSError:
            idents.append([rel, None])
    text = json.dumps(
        {"files": idents, "ep": ep, "options": dict(options), "library_sha256": (plugin or {}).get("library_sha256")},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compiled_files(folder: Path, output: str) -> list[str]:
    """The compiled model and its side files (``<stem>_qnn.bin`` ..., its external data ``<output>.data``)."""
    return sorted(p.name for p in Path(folder).iterdir() if is_compiled_file(p.name, output))


def is_compiled_file(name: str, output: str) -> bool:
    return name == output or name.startswith(Path(output).stem + "_") or name.startswith(output + ".")


def read_memo(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((Path(folder) / COMPAT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_memo(folder: Path, memo: dict[str, Any]) -> None:
    """Atomically; the memo is optional (a folder we cannot write is verified again next time)."""
    tmp = Path(folder) / f".{COMPAT_FILE}.{os.getpid()}"
    try:
        no_follow.write_new(tmp, json.dumps(memo, indent=2))  # a link planted there is not written through
        os.replace(tmp, Path(folder) / COMPAT_FILE)
    except OSError:
        tmp.unlink(missing_ok=True)


def check_stage(folder: Path, output: str, ep: str, options: Mapping[str, str], level: str = "all") -> Verdict:
    """``check_stage_with`` the plugin library that serves ``ep`` here (a prepared plain model's reuse; a
    derived bundle's stages are checked under the plugin identities its key holds)."""
    from winml_perf.ep.plugins import plugin_identity

    return check_stage_with(folder, output, ep, options, plugin_identity(ep), level)


def check_stage_with(
    folder: Path, output: str, ep: str, options: Mapping[str, str], plugin: Plugin, level: str = "all"
) -> Verdict:
    """``check`` of one compiled stage in a derived bundle (a session at ``level``), through the memo of earlier
    verdicts (``plugin``: the EP's plugin identity, part of the memo's key)."""
    asked = ask_onnxruntime(Path(folder) / output, ep)  # cheap, and always asked: its "recompile" wins
    if asked.verdict != "unknown":
        return asked
    memo = read_memo(folder)
    key = memo_key(folder, compiled_files(folder, output), ep, options, plugin)
    known = memo.get(output)
    if isinstance(known, dict) and known.get("key") == key and known.get("verdict", {}).get("verdict") == "verified":
        v = known["verdict"]
        return Verdict(
            v["verdict"], "memo", v["status"], v.get("info"), f"{v.get('detail', '')} (verdict kept in {COMPAT_FILE})"
        )
    verdict = check(Path(folder) / output, ep, options, asked, level)
    if verdict.fit:  # kept; a failed verdict is not, so the rebuilt artifact is verified afresh
        memo[output] = {"key": key, "verdict": verdict.to_dict()}
        write_memo(folder, memo)
    return verdict


def remember(
    folder: Path,
    outcomes: Sequence[CompileOutcome],
    options: Mapping[str, Mapping[str, str]],
    plugins: Mapping[str, Plugin],
) -> None:
    """Keep the compile children's session verdicts in ``folder``'s compat.json (so a hit needs no session);
    ``options``: stage -> the provider options it runs with (its first provider's); ``plugins``: EP -> its
    plugin identity (an EP without one has none)."""
    memo = read_memo(folder)
    for o in outcomes:
        v = o.compatibility
        if o.status != "compiled" or o.output is None or not isinstance(v, dict) or v.get("verdict") != "verified":
            continue
        key = memo_key(folder, compiled_files(folder, o.output), o.ep, options.get(o.stages[0], {}), plugins.get(o.ep))
        memo[o.output] = {"key": key, "verdict": dict(v)}
    if memo:
        write_memo(folder, memo)
