"""The edge of the tool: output paths, strict JSON, flag bounds, the store's lock and read-only stores."""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import TINY_FLAT
from winml_perf.measure.orchestrate import PerfRequest, RouteRequest
from winml_perf.measure.prepare import prepare_request
from winml_perf.measure.validate import validate_request
from winml_perf.results.locking import StoreLockTimeout, WriterLock
from winml_perf.results.store import open_store
from winml_perf.session import onnx_inputs
from winml_perf.support.errors import BundleError, StoreError, UsageError
from winml_perf.support.json_input import read_json
from winml_perf.support.output import check_output, write_output


# -- output.py -------------------------------------------------------------------------------------
def test_output_new_file_written_whole_with_its_folder(tmp_path):
    out = tmp_path / "a" / "b" / "run.json"
    check_output(out)
    write_output(out, "{}\n")
    assert out.read_text() == "{}\n" and sorted(p.name for p in out.parent.iterdir()) == ["run.json"]


def test_output_existing_file_keeps_its_permission_bits(tmp_path):
    out = tmp_path / "run.json"
    out.write_text("old")
    out.chmod(0o640)
    write_output(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640


def test_output_symlink_stays_a_link_and_its_target_is_written(tmp_path):
    target = tmp_path / "real" / "run.json"
    target.parent.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(target)  # dangling until written
    check_output(link)
    write_output(link, "x")
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "x"


def test_output_fifo_is_written_in_place_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so opening for writing does not block
    try:
        check_output(fifo)
        write_output(fifo, "through the pipe")
        assert os.read(fd, 100) == b"through the pipe"
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_output_dev_null_stays_a_device():
    check_output(Path("/dev/null"))
    write_output(Path("/dev/null"), "gone")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize(
    "path, why",
    [
        ("/proc/winml-perf-test", "pseudo filesystem"),
        ("/sys/kernel/x", "pseudo filesystem"),
        ("/proc/self/status", "pseudo filesystem"),
    ],
)
def test_output_pseudo_filesystems_refused(path, why):
    with pytest.raises(UsageError, match=why):
        check_output(Path(path))


def test_output_folder_and_symlink_to_folder_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "d")
    for p in (tmp_path / "d", tmp_path / "l"):
        with pytest.raises(UsageError, match="is a folder"):
            check_output(p)


def test_output_socket_refused(tmp_path):
    import socket

    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        with pytest.raises(UsageError, match="special file"):
            check_output(path)
    finally:
        sock.close()


def test_output_under_a_file_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="Not a directory|cannot create its folder"):
        check_output(tmp_path / "f" / "run.json")


# -- json_input.py ---------------------------------------------------------------------------------
def test_json_duplicate_key_named_with_its_path(tmp_path):
    p = tmp_path / "genai_config.json"
    p.write_text(
        '{"model": {"decoder": {"session_options": {"provider_options": [{"cuda": {}}], "provider_options": []}}}}'
    )
    with pytest.raises(BundleError) as e:
        read_json(p)
    assert str(p) in str(e.value) and "model.decoder.session_options.provider_options" in str(e.value)


def test_json_duplicate_key_inside_a_list_named_with_its_index(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"a": [{"x": 1}, {"y": 1, "y": 2}]}')
    with pytest.raises(BundleError, match=r"a\[1\]\.y"):
        read_json(p)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"a": "\xe9"}', "not UTF-8"),
        (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
        (b"{", "malformed JSON"),
        (b"", "malformed JSON"),
    ],
)
def test_json_bad_bytes_are_bundle_errors_naming_the_file(tmp_path, data, why):
    p = tmp_path / "genai_config.json"
    p.write_bytes(data)
    with pytest.raises(BundleError, match=why) as e:
        read_json(p)
    assert str(p) in str(e.value)


def test_json_utf8_bom_and_equal_keys_in_different_objects_are_fine(tmp_path):
    p = tmp_path / "c.json"
    p.write_bytes(b'\xef\xbb\xbf{"a": {"k": 1}, "b": {"k": 2}}')
    assert read_json(p) == {"a": {"k": 1}, "b": {"k": 2}}


# -- validate.py -----------------------------------------------------------------------------------
def _req(bundle: Path = TINY_FLAT, **kw) -> PerfRequest:
    return PerfRequest(path=bundle, **kw)


@pytest.mark.parametrize(
    "kw, flag",
    [
        ({"seed": -1}, "--seed"),
        ({"seed": 2**64}, "--seed"),
        ({"prompt": ""}, "--prompt is empty"),
        ({"prompt": " \n\t"}, "--prompt is empty"),
        ({"apply_template": True}, "--apply-template needs --prompt"),
        ({"prompt_tokens": (1000,), "max_new_tokens": (25,)}, "exceeds the bundle's context of 1024"),
        ({"prompt_tokens": (16, 10**9)}, "--prompt-tokens"),
        ({"prompt": "hi", "max_new_tokens": (1024,)}, "--max-new-tokens"),
        ({"max_new_tokens": (1000,)}, "128 \\+ 1000"),  # the default synthetic prompt counts too
        ({"cell_timeout_s": float("inf")}, "--cell-timeout"),
        ({"cell_timeout_s": 1e300}, "--cell-timeout"),
        ({"compile_timeout_s": float("nan")}, "--compile-timeout"),
    ],
)
def test_flag_values_the_bundle_cannot_take_are_usage_errors(kw, flag):
    with pytest.raises(UsageError, match=flag):
        validate_request(_req(**kw), (128,))


def test_prompt_plus_new_tokens_equal_to_the_context_is_allowed():
    validate_request(_req(prompt_tokens=(1000,), max_new_tokens=(24,)), (128,))


def test_context_from_search_max_length_when_model_has_none(bundle_copy):
    b = bundle_copy(TINY_FLAT)
    cfg = json.loads((b / "genai_config.json").read_text())
    del cfg["model"]["context_length"]
    cfg["search"]["max_length"] = 64
    (b / "genai_config.json").write_text(json.dumps(cfg))
    with pytest.raises(UsageError, match="context of 64"):
        validate_request(_req(b, prompt_tokens=(60,), max_new_tokens=(8,)), (128,))


def test_length_bounded_by_memory_when_the_bundle_gives_no_context(bundle_copy, monkeypatch):
    b = bundle_copy(TINY_FLAT)
    cfg = json.loads((b / "genai_config.json").read_text())
    del cfg["model"]["context_length"], cfg["search"]["max_length"]
    (b / "genai_config.json").write_text(json.dumps(cfg))
    monkeypatch.setattr("winml_perf.measure.validate.available_memory_bytes", lambda: 10**6)
    with pytest.raises(UsageError, match="memory available"):
        validate_request(_req(b, prompt_tokens=(10**6,)), (128,))


def test_template_on_a_bundle_without_one_names_the_bundle(bundle_copy):
    b = bundle_copy(TINY_FLAT)
    (b / "chat_template.jinja").unlink()
    cfg = json.loads((b / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (b / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(BundleError, match="no chat template"):
        validate_request(_req(b, prompt="hi", apply_template=True), (128,))


@pytest.mark.parametrize(
    "gone, named", [(("tokenizer_config.json",), "tokenizer_config.json"), (("tokenizer.json",), "tokenizer.json")]
)
def test_text_prompt_on_a_bundle_without_tokenizer_names_the_missing_file(bundle_copy, gone, named):
    b = bundle_copy(TINY_FLAT)
    for name in gone:
        (b / name).unlink()
    with pytest.raises(BundleError, match=named):
        validate_request(_req(b, prompt="hi"), (128,))
    validate_request(_req(b, prompt_tokens=(16,)), (128,))  # synthetic tokens need no tokenizer


@pytest.mark.parametrize(
    "field, value",
    [
        ("vocab_size", "512"),
        ("context_length", -5),
        ("context_length", 1.5),
        ("vocab_size", True),
        ("eos_token_id", ["x"]),
    ],
)
def test_config_numbers_of_the_wrong_kind_are_bundle_errors(bundle_copy, field, value):
    b = bundle_copy(TINY_FLAT)
    cfg = json.loads((b / "genai_config.json").read_text())
    cfg["model"][field] = value
    (b / "genai_config.json").write_text(json.dumps(cfg))
    with pytest.raises(BundleError, match=field):
        validate_request(_req(b), (128,))


def test_routes_equal_after_normalising_are_refused_naming_both():
    req = _req(routes=(RouteRequest(ep="cpu"), RouteRequest(ep="CPU")))
    with pytest.raises(UsageError) as e:
        prepare_request(req)
    assert "--route ep=cpu" in str(e.value) and "--route ep=CPU" in str(e.value)
    with pytest.raises(UsageError, match="same route"):
        prepare_request(
            _req(
                routes=(
                    RouteRequest(ep="cpu", stages=("decoder",)),
                    RouteRequest(ep="CPUExecutionProvider", stages=("decoder",)),
                )
            )
        )


def test_shape_too_big_for_memory_is_refused_before_allocating():
    info = onnx_inputs.TensorInfo("x", "tensor(float)", ("batch", 8))
    with pytest.raises(UsageError, match="--shape: input 'x'.*memory available"):
        onnx_inputs.plan_inputs([info], {"batch": (10**12,)})
    assert onnx_inputs.plan_inputs([info], {"batch": (4,)})[0].shape == (4, 8)


# -- the store ---------------------------------------------------------------------------------------
def test_lock_wait_announced_then_times_out_naming_the_lock_file_and_holder(tmp_path):
    path = tmp_path / "s.db.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"4242")
    said: list[str] = []
    lock = WriterLock(path, timeout_s=1.3, notice=said.append)
    try:
        with pytest.raises(StoreLockTimeout) as e:
            with lock:
                pass
        assert str(path) in str(e.value) and "pid 4242" in str(e.value) and e.value.exit_code == 2
        assert len(said) == 1 and "waiting" in said[0] and "pid 4242" in said[0]
    finally:
        os.close(fd)
        lock.close()


def test_lock_taken_once_free_and_holder_pid_cleared_after(tmp_path):
    path = tmp_path / "s.db.lock"
    lock = WriterLock(path, timeout_s=5)
    with lock:
        assert path.read_text() == str(os.getpid())
    assert path.read_text() == ""
    lock.close()


def test_lock_timeout_env_must_be_a_positive_number(tmp_path, monkeypatch):
    monkeypatch.setenv("WINML_PERF_STORE_LOCK_TIMEOUT", "-3")
    with pytest.raises(StoreError, match="WINML_PERF_STORE_LOCK_TIMEOUT"):
        with WriterLock(tmp_path / "l"):
            pass


@pytest.mark.parametrize("target", ["/dev/null", "fifo"])
def test_store_on_a_special_file_refused_and_nothing_created_beside_it(tmp_path, target):
    path = Path(target) if target.startswith("/") else tmp_path / target
    if not target.startswith("/"):
        os.mkfifo(path)
    before = set(os.listdir(path.parent))
    with pytest.raises(StoreError, match="not a regular file"):
        open_store(str(path))
    assert set(os.listdir(path.parent)) == before


def test_store_under_proc_refused():
    with pytest.raises(StoreError, match="pseudo filesystem"):
        open_store("/proc/winml-perf.db")


def test_huge_numeric_id_is_no_record(tmp_path):
    with open_store(str(tmp_path / "s.db")) as s:
        with pytest.raises(StoreError, match="no record"):
            s.get("9" * 40)


def test_a_relative_output_under_a_deleted_working_folder_is_refused_naming_it(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(UsageError) as info:
        check_output(Path("out.json"), "--export-json")
    assert str(info.value).startswith(
        "--export-json out.json: is relative to the working folder, which no longer exists"
    )
