"""Derived bundles: key, hit/miss and why, links not copies, lock + atomic publish, SIGKILL, cache fallback."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.bundle_fakes import (
    FLAT_QNN,
    derive_worker,
    ep_target,
    fake_model_bytes,
    make_bundle,
    pipeline_config,
    tree_digest,
)
from winml_perf.bundle import cache, derive
from winml_perf.bundle.prepare import prepare_route
from winml_perf.support.errors import BundleError


def _prep(bundle, ep="cpu", **kw):
    return prepare_route(bundle, ep_target(ep), require_available=False, **kw)


def _derived(bundle: Path) -> list[Path]:
    root = bundle / "_compiled"
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.exists() else []


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(tmp_path, pipeline_config(), extra={"sub/extra.bin": b"x" * 100})


def test_miss_then_hit_with_links_and_manifest(bundle):
    before = tree_digest(bundle)
    first = _prep(bundle)
    assert first.cache == "miss" and first.cache_reason == "no derived bundle for this route yet"
    assert (
        first.path.parent == bundle / "_compiled" and first.path.name.startswith("cpu-") and len(first.path.name) == 16
    )
    second = _prep(bundle)
    assert second.cache == "hit" and second.path == first.path
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["key"].startswith(first.path.name[4:]) and manifest["links"]["copy"] == 0
    assert manifest["plan"]["route"] == "ep=cpu" and manifest["source"]["bundle"] == str(bundle.resolve())
    assert os.path.samefile(first.path / "transformer.onnx.data", bundle / "transformer.onnx.data")
    assert os.path.samefile(first.path / "sub" / "extra.bin", bundle / "sub" / "extra.bin")
    derived_cfg = json.loads((first.path / "genai_config.json").read_text())
    stages = derived_cfg["model"]["decoder"]["pipeline"][0]
    assert all(s["session_options"]["provider_options"] == [] for s in stages.values())
    assert not os.path.samefile(first.path / "genai_config.json", bundle / "genai_config.json")
    assert tree_digest(bundle) == before


def test_miss_on_config_change(bundle):
    old = _prep(bundle)
    raw = json.loads((bundle / "genai_config.json").read_text())
    raw["search"]["max_length"] = 128
    (bundle / "genai_config.json").write_text(json.dumps(raw))
    new = _prep(bundle)
    assert new.cache == "miss" and new.path != old.path and "genai_config.json" in new.cache_reason


def test_miss_on_source_change_names_the_file(bundle):
    old = _prep(bundle)
    st = (bundle / "lm_head.onnx").stat()
    os.utime(bundle / "lm_head.onnx", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    new = _prep(bundle)
    assert new.cache == "miss" and new.path != old.path
    assert "source files changed" in new.cache_reason and "lm_head.onnx" in new.cache_reason


def test_verify_sources_hashes_content(bundle):
    a = _prep(bundle, verify_sources=True)
    data = bundle / "lm_head.onnx.data"
    st = data.stat()
    data.write_bytes(b"\1" * 4096)  # same size, same mtime, same inode: only the content differs
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _prep(bundle).path == _prep(bundle).path  # identity-only keys do not see it
    b = _prep(bundle, verify_sources=True)
    assert b.cache == "miss" and b.path != a.path


def test_miss_on_version_change(bundle, monkeypatch):
    old = _prep(bundle)
    monkeypatch.setattr(cache, "runtime_versions", lambda: {"onnxruntime": "9.9.9", "onnxruntime_genai": "0.18.0"})
    new = _prep(bundle)
    assert (
        new.cache == "miss"
        and new.path != old.path
        and "onnxruntime" in new.cache_reason
        and "9.9.9" in new.cache_reason
    )


def test_untrusted_folder_at_final_name_is_rebuilt(bundle):
    good = _prep(bundle)
    (good.path / "manifest.json").unlink()
    again = _prep(bundle)
    assert again.cache == "miss" and "no valid manifest" in again.cache_reason
    assert (again.path / "manifest.json").is_file()


def test_unwritable_bundle_goes_to_cache_dir(bundle, tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_writable", lambda b: False)
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    prepared = _prep(bundle)
    assert tmp_path / "cache" in prepared.path.parents and not (bundle / "_compiled").exists()
    assert _prep(bundle).cache == "hit"
    removed = derive.clean(bundle)
    assert removed and not prepared.path.exists()


def test_write_failure_leaves_nothing_half_made(bundle, monkeypatch):
    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(derive, "_link_tree", boom)
    with pytest.raises(BundleError, match="No space left on device"):
        _prep(bundle)
    assert _derived(bundle) == [] and not list((bundle / "_compiled").glob(".tmp-*"))


def test_clean_removes_compiled(bundle):
    _prep(bundle)
    before = tree_digest(bundle)
    assert derive.clean(bundle) == [bundle / "_compiled"]
    assert not (bundle / "_compiled").exists() and tree_digest(bundle) == before


def test_four_processes_derive_one_bundle(bundle):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(derive_worker, [str(bundle)] * 4)
    paths = {p for p, _ in results}
    assert len(paths) == 1 and sorted(c for _, c in results).count("miss") == 1
    assert len(_derived(bundle)) == 1 and not list((bundle / "_compiled").glob(".tmp-*"))


def test_sigkill_mid_derivation_then_rerun(bundle, tmp_path):
    marker = tmp_path / "paused"
    # The child replaces cache.publish (the seam between a finished build and its rename) with a pause.
    code = (
        "import os, sys, time; from pathlib import Path; from winml_perf.bundle import cache;"
        "from tests.unit.bundle_fakes import derive_worker;"
        "cache.publish = lambda tmp, final: (Path(sys.argv[2]).write_text(str(os.getpid())), time.sleep(3600));"
        "derive_worker(sys.argv[1])"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), str(Path(cache.__file__).parents[2])]),
    }
    child = subprocess.Popen([sys.executable, "-c", code, str(bundle), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), "the child never reached the pause point"
        assert list((bundle / "_compiled").glob(".tmp-*")) and _derived(bundle) == []
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    prepared = _prep(bundle)  # the dead child's lock is released; its temp folder is never trusted
    assert prepared.cache == "miss" and (prepared.path / "manifest.json").is_file()
    assert not list((bundle / "_compiled").glob(".tmp-*")) and len(_derived(bundle)) == 1
    assert _prep(bundle).cache == "hit"


def test_flat_bundle_derives_and_source_is_untouched(tmp_path):
    bundle = make_bundle(tmp_path, FLAT_QNN)
    before = tree_digest(bundle)
    prepared = _prep(bundle)
    raw = json.loads((prepared.path / "genai_config.json").read_text())
    assert raw["model"]["decoder"]["session_options"]["provider_options"] == []
    assert raw["model"]["future_model_key"] == {"kept": [1, 2]}
    assert tree_digest(bundle) == before


def test_the_plugin_identity_is_part_of_the_derived_bundle_key(tiny_flat, bundle_copy):
    """The identity the caller registered (RunHoldings.plugins: ep/plugins.py plugins_here) is keyed."""
    from winml_perf.bundle.prepare import RunHoldings, prepare_route
    from winml_perf.ep.devices import Target

    ident = {"package": "onnxruntime-qnn", "version": "2.7.0", "sdk_version": "2.51.0", "library_sha256": "a" * 64}
    bundle = bundle_copy(tiny_flat)
    qnn = Target("ep", "qnn", None, "QNNExecutionProvider", "npu")

    def registered() -> RunHoldings:
        return RunHoldings(plugins={"QNNExecutionProvider": dict(ident)})

    first = prepare_route(bundle, qnn, require_available=False, holdings=registered())
    ident["sdk_version"] = "2.52.0"  # a new QNN SDK
    second = prepare_route(bundle, qnn, require_available=False, holdings=registered())
    assert second.path != first.path and second.cache == "miss" and "plugin EP" in second.cache_reason


def test_a_hits_compiled_stages_are_checked_under_the_plugin_identity_the_key_holds(tmp_path, monkeypatch):
    """The freshness check of a hit's compiled stages reads the plugin identities derive_bundle keyed the
    bundle under, as the caller handed them (RunHoldings.plugins): none is asked (it used to ask one per
    compiled stage, then one a route). Each stage is checked once, with its options: the route shows
    that verdict (it used to check every stage again)."""
    from winml_perf.bundle.epcontext import compat
    from winml_perf.bundle.prepare import Compiling, RunHoldings
    from winml_perf.ep import plugins
    from winml_perf.model.route import CompileOutcome

    qnn = "QNNExecutionProvider"
    ident = {"package": "onnxruntime-qnn", "version": "2.7.0", "sdk_version": "2.51", "library_sha256": "a" * 64}
    checked = []
    monkeypatch.setattr(plugins, "plugin_identity", lambda ep: pytest.fail(f"the plugin identity of {ep} asked"))
    fit = compat.Verdict("compatible", "onnxruntime", "EP_SUPPORTED_OPTIMAL", "v", "checked")
    monkeypatch.setattr(
        compat, "check_stage_with", lambda folder, out, ep, opts, plugin, *a: checked.append((opts, plugin)) or fit
    )

    def fake(jobs, src_dir, out_dir, timeout_s):
        for job in jobs:
            (out_dir / job.output).write_bytes(fake_model_bytes(b"compiled"))
        return [CompileOutcome(j.stages, j.source, j.ep, j.output, "compiled", "", 1.0) for j in jobs]

    bundle = make_bundle(tmp_path, FLAT_QNN)
    held = RunHoldings(plugins={qnn: dict(ident)})
    _prep(bundle, "qnn", compile=Compiling(runner=fake), holdings=held)
    again = _prep(bundle, "qnn", compile=Compiling(runner=fake), holdings=held)
    assert again.cache == "hit", again.cache_reason
    # the freshness check, once, with the stage's options and the key's identity; the route shows its verdict
    ((stage_options,),) = [s.provider_options_after for s in again.stages]
    assert checked == [({k: str(v) for k, v in stage_options["qnn"].items()}, ident)]
    assert checked[0][0]["htp_performance_mode"] == "burst"  # the stage's own, kept by the route
    assert [c.compatibility for c in again.compile if c.status == "compiled"] == [fit.to_dict()]


def test_a_hits_compiled_stages_are_checked_with_the_plans_options_not_the_folders_config(tmp_path, monkeypatch):
    """Each stage's options are taken once a route from the plan's config, which the derived bundle's
    config is written from (derive.py's _Sources): a hit's freshness check reads no config of the
    derived folder for them (its config is verified with the folder's contents). It used to load it."""
    from winml_perf.bundle import config as config_module
    from winml_perf.bundle.epcontext import compat
    from winml_perf.bundle.epcontext import compile as compiler
    from winml_perf.bundle.prepare import plan_for
    from winml_perf.model.route import CompileOutcome

    def fake(jobs, src_dir, out_dir, timeout_s):
        for job in jobs:
            (out_dir / job.output).write_bytes(fake_model_bytes(b"compiled"))
        return [CompileOutcome(j.stages, j.source, j.ep, j.output, "compiled", "", 1.0) for j in jobs]

    checked = []
    fit = compat.Verdict("compatible", "onnxruntime", "EP_SUPPORTED_OPTIMAL", "v", "checked")
    monkeypatch.setattr(compat, "check_stage_with", lambda folder, out, ep, opts, *a: checked.append(opts) or fit)
    bundle = make_bundle(tmp_path, FLAT_QNN)
    plan = plan_for(bundle, ep_target("qnn"), ep_options={"soc_model": "60"})
    jobs, _ = compiler.compile_jobs(plan)
    first = derive.derive_bundle(plan, jobs=jobs, runner=fake)
    assert first.cache == "miss" and [o.status for o in first.compile] == ["compiled"]

    def no_read(folder):
        raise AssertionError(f"the derived folder's config read: {folder}")

    monkeypatch.setattr(config_module, "load_config", no_read)
    again = derive.derive_bundle(plan, jobs=jobs, runner=fake)
    assert again.cache == "hit", again.reason
    assert checked == [{k: str(v) for k, v in (plan.config.stage("decoder").ep_options or {}).items()}]
    assert checked[0]["soc_model"] == "60"
    assert [o.compatibility for o in again.compile] == [fit.to_dict()]
