"""--check-outputs (equivalence/greedy.py): the source bundle's session makes the prompt and the
reference, its config read once; every other route's greedy tokens are compared with them."""

from __future__ import annotations

from types import SimpleNamespace

from winml_perf.equivalence import greedy
from winml_perf.equivalence.check import check_source
from winml_perf.session import genai_session


class _Session:
    made: list[str] = []
    loaded: list[str] = []

    def __init__(self, bundle, config=None) -> None:
        assert config == {"model": {"told": True}}  # told the config the run read, not reading it itself
        self.bundle = str(bundle)
        _Session.made.append(self.bundle)

    def synthetic_prompt(self, n_tokens: int, seed: int = 0) -> list[int]:
        return [10 + seed] * n_tokens

    def __enter__(self):
        _Session.loaded.append(self.bundle)
        return self

    def __exit__(self, *exc) -> None:
        pass

    def generate_timed(self, prompt_ids, n_new):
        last = 7 if self.bundle.endswith("moved") else 5
        return SimpleNamespace(token_ids=[*([5] * (n_new - 1)), last])


def test_the_source_session_makes_prompt_and_reference_once(monkeypatch):
    monkeypatch.setattr(_Session, "made", [])
    monkeypatch.setattr(_Session, "loaded", [])
    monkeypatch.setattr(genai_session, "GenaiSession", _Session)
    monkeypatch.setattr(  # no static stage in "b"
        "winml_perf.bundle.config.config_of",
        lambda path: SimpleNamespace(raw={"model": {"told": True}}, static_prompt_length=lambda: None),
    )
    routes = [
        SimpleNamespace(label="config", session=SimpleNamespace(path="b")),
        SimpleNamespace(label="ep=cpu", session=SimpleNamespace(path="b/_compiled/moved")),
    ]
    checks = greedy.check_routes(check_source("b", 1, 3), routes, n_new=2)
    assert _Session.made == ["b", "b/_compiled/moved"] and _Session.loaded == _Session.made
    (check,) = checks.values()
    assert list(checks) == ["ep=cpu"] and check.config_token_ids == (5, 5) and check.route_token_ids == (5, 7)
    assert check.first_difference == 1
