"""No password of a store URL in any record, export, page or log (support/secrets.py is the one mask)."""

from __future__ import annotations

import json

import pytest

from winml_perf.model.record import RunRecord
from winml_perf.record.build import run_record
from winml_perf.support.secrets import mask, mask_argv

SECRET = "S3cret-pw_42"


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://winml:{SECRET}@127.0.0.1:5432/db",
        f"--store=postgresql+psycopg://winml:{SECRET}@db.example/perf?sslmode=require",
        f"postgres://u:{SECRET}@h/db",
        f"postgresql://h/db?user=u&password={SECRET}&connect_timeout=2",
        f"host=h user=u password={SECRET} dbname=x",
        f"postgresql://u:p@{SECRET}@h/db",  # a raw '@' in the password
    ],
)
def test_mask_hides_every_password_form(text):
    masked = mask(text)
    assert SECRET not in masked and "***" in masked


@pytest.mark.parametrize("text", ["results/winml-perf.db", "sqlite:///x.db", "postgresql://u@h:5432/db", "a=b"])
def test_mask_leaves_text_without_a_password_alone(text):
    assert mask(text) == text


def _argv():
    return ["bundles/b", "--store", f"postgresql://winml:{SECRET}@127.0.0.1/db", "-o", "run.json"]


def test_a_built_run_record_keeps_no_password_in_argv():
    run = run_record([], run_id="r", environment={}, started_utc="t", finished_utc="t", sweep={}, argv=_argv())
    assert run.argv == mask_argv(_argv()) and run.argv[2] == "postgresql://winml:***@127.0.0.1/db"
    assert SECRET not in run.to_json()


def test_a_run_record_read_from_json_keeps_no_password_in_argv():
    doc = RunRecord("r", "t", "t", "ok", {}, {}).to_dict()
    doc["argv"] = _argv()
    assert SECRET not in json.dumps(RunRecord.from_dict(doc).to_dict())


def test_an_error_message_naming_a_bad_store_url_hides_the_password(winml, tmp_path):
    done = winml("results", "list", "--store", f"postgresql://u:{SECRET}@h:notaport/db", cwd=tmp_path)
    assert done.returncode == 2 and "--store" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def _mask_by_patterns_alone(text: str) -> str:
    """The mask before its look-behind-'=' shortcut: both patterns tried over the whole text."""
    from winml_perf.support import secrets

    text = secrets._URL_PASSWORD.sub(lambda m: f"{m['head']}:***@", text)
    return secrets._KEY_VALUE.sub(lambda m: f"{m['head']}***", text)


@pytest.mark.parametrize(
    "text",
    [
        "password=x",
        "=password=x",
        "PassWord \t\n = 'a b' and sslkey= k",
        "ſslkey=abc",  # a long s folds to 's' under IGNORECASE
        "\u212aey passfile\u3000=\u2003/x",  # Kelvin sign; ideographic and em spaces are \s
        "xpassword=1 _pwd=2 pwd=3",  # a key inside a word is no key
        '{"argv": ["--store", "host=h password=secret dbname=d"], "n": 1}',
        "a = b, c== d, =, password",
        "postgresql://u:p@h/db?sslpassword=q",
    ],
)
def test_mask_is_the_patterns_result_exactly(text):
    assert mask(text) == _mask_by_patterns_alone(text)


def test_mask_matches_the_patterns_on_random_texts():
    import random

    rng = random.Random(37)
    pieces = ["password", "PWD", "passwd", "sslcert", "=", " ", "\t", "\n", "'", "a", "_", "://", "@", ":", "x", "ſ"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert mask(text) == _mask_by_patterns_alone(text), repr(text)
