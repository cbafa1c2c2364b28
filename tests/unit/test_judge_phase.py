"""Issue 39: the judge phase (measure/judge.py) makes the source bundle's session and check prompt once
(equivalence/check.CheckSource) and hands them to every check it runs: --check-outputs, equivalence
and --perplexity each used to open their own session of the source bundle and make their own prompt."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace as NS
from typing import Any

import pytest

from winml_perf.equivalence import perplexity
from winml_perf.measure.judge import judged_routes
from winml_perf.session import genai_session
from winml_perf.support.errors import BenchmarkFailure


@dataclass(frozen=True)
class _Recorded:
    perplexity: Any = None
    output_check: Any = None
    perplexity_not_measured: str | None = None


@dataclass(frozen=True)
class _Route:
    label: str
    session: Any
    route: _Recorded

    @property
    def recorded_route(self) -> _Recorded:
        return self.route


class _Session:
    made: list[str] = []
    prompts: list[int] = []

    def __init__(self, bundle, config=None) -> None:
        _Session.made.append(str(bundle))

    def synthetic_prompt(self, n_tokens: int, seed: int = 0) -> list[int]:
        _Session.prompts.append(n_tokens)
        return [10 + seed] * n_tokens

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def generate_timed(self, prompt_ids, n_new):
        return NS(token_ids=[5] * n_new)

    def encode(self, text: str) -> list[int]:
        return list(range(20))


@pytest.fixture
def sessions(monkeypatch):
    monkeypatch.setattr(_Session, "made", [])
    monkeypatch.setattr(_Session, "prompts", [])
    monkeypatch.setattr(genai_session, "GenaiSession", _Session)
    monkeypatch.setattr(
        "winml_perf.bundle.config.config_of",
        lambda path: NS(raw={"model": {}}, static_prompt_length=lambda: ("context", 6)),
    )

    def no_scorer(folder):
        raise BenchmarkFailure("not opened here", "")

    monkeypatch.setattr(perplexity, "open_scorer", no_scorer)  # the passes are not this test's subject
    return _Session


def test_every_check_uses_the_one_source_session_and_prompt(sessions, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("some words to score", encoding="utf-8")
    req = NS(
        token_based=True, path="b", seed=2, check_outputs=True, equivalence=True, reference_bundle=None,
        reference_route=None, equivalence_cache=False, perplexity=text, perplexity_chunk=4,
    )  # fmt: skip
    routes = [_Route("config", NS(path="b"), _Recorded())]
    out = judged_routes(req, routes)  # type: ignore[arg-type]
    assert sessions.made == ["b"]  # one session of the source bundle for the three checks
    assert sessions.prompts == [6]  # one check prompt, at the static stage's own length
    err = capsys.readouterr().err
    assert "equivalence: 0 route(s) against config" in err
    assert "note: --check-outputs: every route runs the bundle's own files" in err  # nothing to check: said
    assert out[0].route.perplexity_not_measured == "not opened here"


def test_the_output_check_generates_on_the_one_source_session(sessions, capsys):
    """A forced route in its own folder: the output check runs the source on the judge phase's session
    (opened once) and opens only the route's own."""
    req = NS(
        token_based=True, path="b", seed=2, check_outputs=True, equivalence=False, reference_bundle=None,
        reference_route=None, equivalence_cache=False, perplexity=None, perplexity_chunk=4,
    )  # fmt: skip
    routes = [_Route("config", NS(path="b"), _Recorded()), _Route("ep=x", NS(path="d"), _Recorded())]
    out = judged_routes(req, routes)  # type: ignore[arg-type]
    assert sessions.made == ["b", "d"]  # the source once (the check's generation included), the route once
    assert sessions.prompts == [6]
    assert out[0].route.output_check is None
    check = out[1].route.output_check
    assert check.prompt_tokens == 6 and check.first_difference is None
    assert "note: --check-outputs" not in capsys.readouterr().err


def test_the_reference_route_is_found_once_for_equivalence_and_perplexity(sessions, tmp_path, monkeypatch, capsys):
    from winml_perf.equivalence import check

    found: list[str] = []
    reference_of = check.reference_of

    def counted(routes, label):
        found.append(label)
        return reference_of(routes, label)

    monkeypatch.setattr(check, "reference_of", counted)
    text = tmp_path / "text.txt"
    text.write_text("some words to score", encoding="utf-8")
    req = NS(
        token_based=True, path="b", seed=0, check_outputs=False, equivalence=True, reference_bundle=None,
        reference_route="config", equivalence_cache=False, perplexity=text, perplexity_chunk=4,
    )  # fmt: skip
    judged_routes(req, [_Route("config", NS(path="b"), _Recorded())])  # type: ignore[arg-type]
    assert found == ["config"]  # chosen once (equivalence/check.CheckSource), read by both checks
    assert "equivalence: 0 route(s) against config" in capsys.readouterr().err


def test_the_reference_config_is_the_sources_own_or_the_reference_routes(monkeypatch):
    from winml_perf.equivalence.check import check_source

    monkeypatch.setattr(genai_session, "GenaiSession", _Session)
    read: list[str] = []

    def config_of(path):
        read.append(str(path))
        return NS(raw={"model": {}}, static_prompt_length=lambda: None, folder=str(path))

    monkeypatch.setattr("winml_perf.bundle.config.config_of", config_of)
    routes = [_Route("config", NS(path="b"), _Recorded()), _Route("ep=x", NS(path="b/_compiled/x"), _Recorded())]
    own = check_source("b", routes=routes)
    assert own.reference == "config" and own.reference_config is own.config and read == ["b"]  # read once
    moved = check_source("b", routes=routes, reference_route="ep=x")
    assert (moved.reference, moved.reference_path) == ("ep=x", "b/_compiled/x")
    assert moved.reference_config.folder == "b/_compiled/x" and read == ["b", "b", "b/_compiled/x"]
