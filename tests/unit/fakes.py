"""FakeSession: a deterministic session with scripted timings at the measurement seam (generate_timed / run_timed).

It sleeps for nothing: generate_timed returns the timings its script says, instantly, so runner,
statistics, sweeps, interleaving and isolation tests are exact and fast. Script keys (all in
SessionSpec.options):

    prompt_ms_per_token  (0.5)   prefill time per prompt token
    sample_ms            (0.05)  the first generate_next_token (sampling only)
    decode_ms            (10.0)  each later decode step
    scales               ([1.0]) per-call multipliers, cycled (call 1 uses scales[0])
    jitter_pct, jitter_seed      deterministic multiplicative noise, uniform in ±jitter_pct
    drift_pct_per_call   (0)     slow drift: call k is (1 + k * drift/100) times slower
    load_ms              (5.0)
    vocab_size           (512)
    report_new_tokens            lie about the number of new tokens produced
    raise_on_load                raise RuntimeError(message) from load()
    raise_on_call                raise RuntimeError on that call (1-based, counting warmups)
    kill_on_call                 SIGKILL this process on that call
    kill_once_path               with kill_on_call: only if this file does not exist yet (it is
                                 created first), so a respawned child survives
    exit_on_call, exit_code      os._exit(exit_code) on that call
    hang_on_call                 sleep for an hour on that call
    actual_route                 what actual_route() reports ({stage: EP that ran})
    log_path                     append "<label> <call>" per call (to observe execution order)
    label                        name written to log_path and load_log_path
    load_log_path                append "<label>" per load() (one line per session: an invocation)
    session_scales               with load_log_path: multiplier of every call of the n-th session
                                 loaded (n = lines already in that file, cycled), across processes

With runtime 'winml' it is a plain inference session: ``run_timed()`` returns decode_ms * scale.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from winml_perf.model.sample import GenerationTiming
from winml_perf.model.spec import SessionSpec


class FakeSession:
    def __init__(self, spec: SessionSpec) -> None:
        self.spec = spec
        self.o = dict(spec.options)
        self.calls = 0
        self.loaded = False
        self._rng = random.Random(self.o.get("jitter_seed", 0))
        self.vocab_size = int(self.o.get("vocab_size", 512))

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> FakeSession:
        if "raise_on_load" in self.o:
            raise RuntimeError(self.o["raise_on_load"])
        self.loaded = True
        self.load_ms = float(self.o.get("load_ms", 5.0))
        self.session_scale = 1.0
        log = self.o.get("load_log_path")
        if log:
            previous = Path(log).read_text().splitlines() if Path(log).exists() else []
            scales = self.o.get("session_scales") or [1.0]
            self.session_scale = float(scales[len(previous) % len(scales)])
            with open(log, "a") as f:
                f.write(f"{self.o.get('label', self.spec.path)}\n")
        return self

    def unload(self) -> None:
        self.loaded = False

    # -- prompts ---------------------------------------------------------------------------------
    def synthetic_prompt(self, n_tokens: int, seed: int = 0) -> list[int]:
        return [10 + (seed + i) % (self.vocab_size - 10) for i in range(n_tokens)]

    def encode(self, text: str) -> list[int]:
        return [ord(c) % self.vocab_size for c in text]

    def apply_chat_template(self, text: str) -> str:
        return f"<user>{text}</user><assistant>"

    # -- the script ----------------------------------------------------------------------------
    def _scale(self) -> float:
        scales = self.o.get("scales") or [1.0]
        s = float(scales[(self.calls - 1) % len(scales)]) * getattr(self, "session_scale", 1.0)
        s *= 1.0 + self.calls * float(self.o.get("drift_pct_per_call", 0.0)) / 100.0
        jitter = float(self.o.get("jitter_pct", 0.0))
        if jitter:
            s *= 1.0 + self._rng.uniform(-jitter, jitter) / 100.0
        return s

    def _events(self) -> None:
        self.calls += 1
        if self.o.get("log_path"):
            with open(self.o["log_path"], "a") as f:
                f.write(f"{self.o.get('label', self.spec.path)} {self.calls}\n")
        if self.o.get("kill_on_call") == self.calls:
            once = self.o.get("kill_once_path")
            if once is None or not Path(once).exists():
                if once is not None:
                    Path(once).touch()
                os.kill(os.getpid(), signal.SIGKILL)
        if self.o.get("exit_on_call") == self.calls:
            os._exit(int(self.o.get("exit_code", 3)))
        if self.o.get("hang_on_call") == self.calls:
            time.sleep(3600)
        if self.o.get("raise_on_call") == self.calls:
            raise RuntimeError(f"scripted failure on call {self.calls}")

    def generate_timed(self, prompt_ids, max_new_tokens: int) -> GenerationTiming:
        assert self.loaded, "generate_timed before load()"
        self._events()
        scale = self._scale()
        prompt_ms = len(prompt_ids) * float(self.o.get("prompt_ms_per_token", 0.5)) * scale
        ttft_ms = prompt_ms + float(self.o.get("sample_ms", 0.05))
        steps = tuple(float(self.o.get("decode_ms", 10.0)) * scale for _ in range(max_new_tokens - 1))
        new_tokens = int(self.o.get("report_new_tokens", max_new_tokens))
        return GenerationTiming(
            prompt_tokens=len(prompt_ids),
            new_tokens=new_tokens,
            prompt_ms=prompt_ms,
            ttft_ms=ttft_ms,
            decode_step_ms=steps,
            e2e_ms=ttft_ms + sum(steps),
            token_ids=tuple(range(1, new_tokens + 1)),
            generator_ms=None if self.o.get("generator_ms", 1.5) is None else float(self.o.get("generator_ms", 1.5)),
        )

    def actual_route(self) -> dict:
        return dict(self.o.get("actual_route") or {})

    def run_timed(self) -> float:
        assert self.loaded, "run_timed before load()"
        self._events()
        return float(self.o.get("decode_ms", 10.0)) * self._scale()


def open_fake_session(spec: SessionSpec) -> FakeSession:
    """Picklable session factory for the runner (works in spawned children)."""
    return FakeSession(spec)


def read_log(path: Path) -> list[tuple[str, int]]:
    if not Path(path).exists():
        return []
    return [(a, int(b)) for a, b in (line.split() for line in Path(path).read_text().splitlines())]


#: An environment dict that satisfies record.schema.json, for records built in unit tests.
FAKE_ENV = {
    "timestamp_utc": "2026-01-01T00:00:00Z",
    "hostname": "fake",
    "testbed_id": "fake-testbed",
    "testbed_id_source": "env",
    "versions": {"winml-perf": "0.1.0", "onnxruntime": "1.31.1", "onnxruntime-genai": "0.18.0", "python": "3.11"},
    "os": {"system": "Linux"},
    "cpu": {"model": "fake cpu", "logical_cores": 2},
    "gpu": {"gpus": []},
    "git": {"commit": None, "dirty": None},
}


def fake_spec(path: str = "fake", runtime: str = "winml-genai", **options) -> SessionSpec:
    return SessionSpec(runtime, path, options=options)
