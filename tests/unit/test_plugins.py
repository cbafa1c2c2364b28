"""Plugin EP discovery, parsing and registration (real onnxruntime calls for the failure paths)."""

from __future__ import annotations

import importlib
import os
import re
import textwrap

import pytest

from winml_perf.ep import plugins
from winml_perf.ep.plugins import (
    ENV_VAR,
    PluginRegistration,
    collect_specs,
    parse_env,
    parse_library_spec,
    register_plugin_eps,
)
from winml_perf.support.errors import EXIT_USAGE, PluginError, UsageError


def test_parse_library_spec_normalises_known_names():
    spec = parse_library_spec("webgpu=/opt/lib.so", "flag")
    assert (spec.ep_name, spec.library_path, spec.origin) == ("WebGpuExecutionProvider", "/opt/lib.so", "flag")
    assert parse_library_spec(" AcmeNpu = /x/y.so ", "env").ep_name == "AcmeNpu"
    assert parse_library_spec("a=b=c", "flag").library_path == "b=c"


@pytest.mark.parametrize("bad", ["nolibrary", "=/x.so", "name=", "  =  "])
def test_parse_library_spec_rejects_malformed(bad):
    with pytest.raises(UsageError, match="--ep-library .* is not NAME=PATH"):
        parse_library_spec(bad, "flag")


def test_env_var_parsing():
    value = os.pathsep.join(["webgpu=/a/webgpu.so", "", "  ", "Acme=/b/acme.so"])
    specs = parse_env({ENV_VAR: value})
    assert [(s.ep_name, s.library_path, s.origin) for s in specs] == [
        ("WebGpuExecutionProvider", "/a/webgpu.so", "env"),
        ("Acme", "/b/acme.so", "env"),
    ]
    assert parse_env({}) == []
    with pytest.raises(UsageError, match=ENV_VAR):
        parse_env({ENV_VAR: "broken"})


def test_flag_wins_over_env_for_the_same_ep():
    specs = collect_specs(["webgpu=/flag.so"], env={ENV_VAR: "WebGpuExecutionProvider=/env.so"}, discover=False)
    assert [(s.library_path, s.origin) for s in specs] == [("/flag.so", "flag")]


def test_same_source_naming_an_ep_twice_with_two_paths_is_an_error():
    with pytest.raises(UsageError, match="given twice"):
        collect_specs(["acme=/a.so", "acme=/b.so"], env={}, discover=False)


def test_missing_file_names_the_path_and_flag(tmp_path):
    missing = tmp_path / "nope.so"
    with pytest.raises(PluginError) as info:
        register_plugin_eps([f"AcmeMissing={missing}"], env={}, discover=False)
    assert str(missing) in str(info.value) and "--ep-library" in str(info.value)
    assert info.value.exit_code == EXIT_USAGE
    assert "AcmeMissing" not in plugins.registered_plugins()


def test_missing_file_from_env_is_skipped_with_a_warning_naming_the_env_var(tmp_path, monkeypatch, capsys):
    """An env entry asks nothing of this command: it is skipped, said once on stderr, and kept for a
    route that asks for its EP (which then fails naming the library)."""
    monkeypatch.setattr(plugins, "_SKIPPED", {})
    missing = tmp_path / "x.so"
    assert register_plugin_eps(env={ENV_VAR: f"AcmeEnv={missing}"}, discover=False) == []
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("warning: plugin EP library for AcmeEnv not found") and str(missing) in err
    assert f"or drop AcmeEnv from {ENV_VAR}" in err
    register_plugin_eps(env={ENV_VAR: f"AcmeEnv={missing}"}, discover=False)
    assert capsys.readouterr().err == ""  # said once
    with pytest.raises(PluginError) as info:
        plugins.refuse_if_skipped("AcmeEnv")
    assert "AcmeEnv was asked for" in str(info.value) and str(missing) in str(info.value)
    assert info.value.exit_code == EXIT_USAGE
    assert "AcmeEnv" not in plugins.registered_plugins()


def test_bogus_library_fails_in_onnxruntime(tmp_path):
    bogus = tmp_path / "libbogus_ep.so"
    bogus.write_bytes(b"\x7fELF this is not a shared library" * 4)
    with pytest.raises(PluginError) as info:
        register_plugin_eps([f"AcmeBogus={bogus}"], env={}, discover=False)
    text = str(info.value)
    assert str(bogus) in text and "onnxruntime could not register" in text
    assert "AcmeBogus" not in plugins.registered_plugins()


def _write_module(folder, name, body):
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


def test_discovery_of_onnxruntime_ep_modules(tmp_path, monkeypatch, capsys):
    _write_module(
        tmp_path,
        "onnxruntime_ep_acmetest",
        f"""
        def get_library_path():
            return {str(tmp_path / "libacme.so")!r}
        def get_ep_name():
            return "AcmeTestExecutionProvider"
        """,
    )
    _write_module(tmp_path, "onnxruntime_ep_notaplugin", "X = 1\n")
    _write_module(tmp_path, "unrelated_acme_module", "raise RuntimeError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setitem(plugins._STATE, "discovered", None)  # forget this process's discovery, so it runs again
    specs = {s.ep_name: s for s in plugins.discover_plugin_packages()}
    acme = specs["AcmeTestExecutionProvider"]
    assert acme.library_path == str(tmp_path / "libacme.so") and acme.origin == "package:onnxruntime_ep_acmetest"
    # the discovered library does not exist: registration skips it and says so, naming package and path
    monkeypatch.setattr(plugins, "_SKIPPED", {})
    assert "AcmeTestExecutionProvider" not in {r.ep_name for r in register_plugin_eps(env={})}
    assert re.search(r"^warning: .*libacme\.so.*package:onnxruntime_ep_acmetest", capsys.readouterr().err, re.S)
    with pytest.raises(PluginError, match="libacme.so.*package:onnxruntime_ep_acmetest"):
        plugins.refuse_if_skipped("AcmeTestExecutionProvider")


def test_broken_plugin_package_is_reported(tmp_path, monkeypatch):
    _write_module(
        tmp_path,
        "onnxruntime_ep_brokentest",
        """
        def get_library_path():
            raise RuntimeError("Expected exactly one library")
        def get_ep_name():
            return "BrokenExecutionProvider"
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.raises(PluginError, match="onnxruntime_ep_brokentest.*Expected exactly one library"):
        plugins.discover_plugin_packages()


def test_real_webgpu_plugin_registers_once_per_process():
    webgpu = pytest.importorskip("onnxruntime_ep_webgpu")
    path = webgpu.get_library_path()
    first = register_plugin_eps([f"webgpu={path}"], env={}, discover=False)
    again = register_plugin_eps([f"WebGpuExecutionProvider={path}"], env={}, discover=False)
    assert len(first) == 1 and again == first
    reg = first[0]
    assert reg.ep_name == "WebGpuExecutionProvider" and reg.library_path == path and reg.registration_ms >= 0
    assert PluginRegistration.from_dict(reg.to_dict()) == reg
    assert plugins.registered_plugins()["WebGpuExecutionProvider"] == reg
    # discovery finds the installed package and maps to the same, already registered library
    assert [r for r in register_plugin_eps(env={}) if r.ep_name == "WebGpuExecutionProvider"] == first
    with pytest.raises(PluginError, match="already registered from"):
        register_plugin_eps(["webgpu=/some/other/libwebgpu.so"], env={}, discover=False)


def _write_dist(site, dist: str, version: str, module: str, body: str, requires: str = "onnxruntime>=1.24") -> None:
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nRequires-Dist: {requires}\n"
    )
    (info / "top_level.txt").write_text(module + "\n")
    (site / module).mkdir()
    (site / module / "__init__.py").write_text(textwrap.dedent(body))


def test_discovery_by_protocol_finds_a_plugin_whatever_its_module_is_called(tmp_path, monkeypatch):
    lib = tmp_path / "libacme_npu.so"
    lib.write_bytes(b"not really a library")
    _write_dist(
        tmp_path,
        "acme-npu-runtime",
        "3.1.4",
        "acme_npu",
        f"""
        class build_and_package_info:
            qnn_version = "9.9.9"
        def get_library_path():
            return {str(lib)!r}
        def get_ep_name():
            return "AcmeNpuExecutionProvider"
        """,
    )
    # requires onnxruntime but is no plugin: its module is read, never imported
    _write_dist(tmp_path, "acme-tools", "1.0", "acme_tools", "raise RuntimeError('must not be imported')\n")
    # a plugin-looking module of a distribution that neither is onnxruntime-* nor needs it: not a candidate
    _write_dist(
        tmp_path,
        "other-thing",
        "1.0",
        "other_thing",
        "def get_library_path(): raise RuntimeError('no')\n",
        requires="numpy",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    specs = {s.ep_name: s for s in plugins.discover_plugin_packages()}
    acme = specs["AcmeNpuExecutionProvider"]
    assert acme.library_path == str(lib) and acme.origin == "package:acme_npu"
    assert plugins._PACKAGES["AcmeNpuExecutionProvider"] == {
        "package": "acme-npu-runtime",
        "module": "acme_npu",
        "version": "3.1.4",
        "sdk_version": "9.9.9",
    }
    assert "other_thing" not in {m for m, _, _ in plugins.candidate_modules()}


def test_discovery_can_be_turned_off_by_env(monkeypatch):
    monkeypatch.setenv(plugins.NO_DISCOVERY_ENV, "1")
    assert collect_specs([], env={}) == []


def test_library_digest_is_the_file_sha256_and_follows_changes(tmp_path):
    import hashlib

    lib = tmp_path / "lib.so"
    lib.write_bytes(b"one")
    assert plugins.library_digest(str(lib)) == hashlib.sha256(b"one").hexdigest()
    lib.write_bytes(b"other bytes")
    os.utime(lib, ns=(1, 2))
    assert plugins.library_digest(str(lib)) == hashlib.sha256(b"other bytes").hexdigest()
    assert plugins.library_digest(str(tmp_path / "absent.so")) is None


def test_installed_qnn_plugin_identity_names_package_sdk_and_digest():
    qnn = pytest.importorskip("onnxruntime_qnn")
    ident = plugins.plugin_identity("QNNExecutionProvider")
    assert ident["package"] == "onnxruntime-qnn" and ident["version"] == qnn.build_and_package_info.__version__
    assert ident["sdk_version"] == qnn.build_and_package_info.qnn_version
    assert ident["library_path"] == qnn.get_library_path() and len(ident["library_sha256"]) == 64


def _given_by_flag(monkeypatch, ep: str, path: str) -> None:
    """``ep`` registered from ``--ep-library`` in a process that discovered nothing (a child, or discovery off)."""
    registration = PluginRegistration(ep, path, "flag", 1.0)
    monkeypatch.setattr(plugins, "registered_plugins", lambda: {ep: registration})
    monkeypatch.setattr(plugins, "_PACKAGES", {})
    monkeypatch.setitem(plugins._STATE, "discovered", [])


def test_a_library_given_by_path_inside_a_package_is_recorded_with_its_package(tmp_path, monkeypatch):
    """Issue 23 finding 7: --ep-library QNN=... was recorded with package, version and SDK None."""
    _write_dist(tmp_path, "acme-qnn", "2.0.1", "acme_qnn", "class build_and_package_info:\n    qnn_version = '7.7'\n")
    lib = tmp_path / "acme_qnn" / "libacme.so"
    lib.write_bytes(b"lib")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    _given_by_flag(monkeypatch, "AcmeQnnExecutionProvider", str(lib))
    ident = plugins.plugin_identity("AcmeQnnExecutionProvider")
    assert (ident["package"], ident["module"], ident["version"], ident["sdk_version"]) == (
        "acme-qnn",
        "acme_qnn",
        "2.0.1",
        "7.7",
    )
    assert "package_unknown" not in ident and ident["origin"] == "flag"


def test_a_library_in_no_package_says_why_its_package_is_unknown(tmp_path, monkeypatch):
    lib = tmp_path / "libloose.so"
    lib.write_bytes(b"lib")
    _given_by_flag(monkeypatch, "LooseExecutionProvider", str(lib))
    ident = plugins.plugin_identity("LooseExecutionProvider")
    assert ident["package"] is None and ident["version"] is None and ident["sdk_version"] is None
    assert "lies in no Python package folder" in ident["package_unknown"] and str(tmp_path) in ident["package_unknown"]


def test_the_installed_qnn_library_given_by_flag_names_its_package_and_sdk(monkeypatch):
    qnn = pytest.importorskip("onnxruntime_qnn")
    _given_by_flag(monkeypatch, "QNNExecutionProvider", qnn.get_library_path())
    ident = plugins.plugin_identity("QNNExecutionProvider")
    assert ident["package"] == "onnxruntime-qnn" and ident["version"] == qnn.build_and_package_info.__version__
    assert ident["sdk_version"] == qnn.build_and_package_info.qnn_version == "2.51.0"
