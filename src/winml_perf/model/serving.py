"""Serving under load (``winml serve``): what a load point is, what one request did, and the record's
``serving`` section. Plain frozen data with to_dict/from_dict at the JSON edges.

A *load point* is closed loop (``concurrency`` N: N requests in flight, a new one begun as one ends)
or open loop (``rate_per_s``: Poisson arrivals drawn with a seed), over ``requests`` requests whose
prompt and output lengths are fixed or drawn uniformly from a range with the same seed. A
``sequential`` point runs the same requests one after another, each in its own batch-1 generator:
the baseline the batching gain is measured against.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from winml_perf.support.errors import UsageError

#: How the requests of a cell were served. ``engine``: onnxruntime-genai's Engine (continuous
#: batching); ``batch1-generators``: one batch-1 og.Generator per request in flight, stepped in turn
#: in one thread (the fallback where the Engine refuses a route; concurrent, never batched);
#: ``sequential-generators``: one batch-1 generator per request, one request at a time (baseline).
ENGINE = "engine"
BATCH1 = "batch1-generators"
SEQUENTIAL = "sequential-generators"
SERVERS = (ENGINE, BATCH1, SEQUENTIAL)

Mode = Literal["closed", "open", "sequential"]

#: A serving cell's primary metric (its headline's ``primary_metric``; no stopping rule watches it):
#: the schema's primary_metric enum holds it beside model/metrics.py's PRIMARY_METRICS.
SERVING_PRIMARY = "serve_goodput_requests_per_s"


@dataclass(frozen=True)
class Lengths:
    """A token length: ``low`` == ``high`` fixed, else uniform over [low, high] drawn with the seed."""

    low: int
    high: int

    @property
    def fixed(self) -> bool:
        return self.low == self.high

    @property
    def text(self) -> str:
        return str(self.low) if self.fixed else f"{self.low}-{self.high}"

    @classmethod
    def parse(cls, text: str, flag: str) -> Lengths:
        """``N`` or ``LOW-HIGH`` (uniform, seeded); exit 2 naming the flag otherwise."""
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
        low = int(m.group(1)) if m else 0
        high = int(m.group(2)) if m and m.group(2) else low
        if not m or low < 1 or high < low:
            raise UsageError(
                f"{flag} {text!r} is neither a length N nor a range LOW-HIGH of whole numbers >= 1",
                f"e.g. {flag} 32 (fixed) or {flag} 16-64 (uniform, drawn with --seed)",
            )
        return cls(low, high)


@dataclass(frozen=True)
class Slo:
    """Service-level objectives a request must meet to count toward goodput."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @property
    def text(self) -> str:
        pairs = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2e", self.e2e_ms))
        return ",".join(f"{k}={v:g}ms" for k, v in pairs if v is not None)

    def met(self, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None) -> bool:
        """Whether a request's figures meet every objective set (a missing figure meets none)."""
        for limit, value in ((self.ttft_ms, ttft_ms), (self.tpot_ms, tpot_ms), (self.e2e_ms, e2e_ms)):
            if limit is None:
                continue
            if value is None or not math.isfinite(value) or value > limit:
                return False
        return True

    @classmethod
    def parse(cls, text: str) -> Slo:
        """``ttft=200ms,tpot=50ms[,e2e=2s]``: exit 2 naming the part that is wrong."""
        example = "e.g. --slo ttft=200ms,tpot=50ms"
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = (x.strip() for x in part.partition("="))
            m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)?", value)
            if not sep or key not in ("ttft", "tpot", "e2e") or key in values or not m:
                raise UsageError(f"--slo {text!r}: {part!r} is not ttft|tpot|e2e=NUMBER[ms|s], once each", example)
            values[key] = float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)
        if not values:
            raise UsageError(f"--slo {text!r} sets no objective", example)
        return cls(values.get("ttft"), values.get("tpot"), values.get("e2e"))

    def to_dict(self) -> dict[str, float | None]:
        return {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Slo:
        return cls(d.get("ttft_ms"), d.get("tpot_ms"), d.get("e2e_ms"))


def check_in_flight(concurrency: int, requests: int) -> None:
    """A closed loop of ``concurrency`` over ``requests``: exit 2 when it could never hold that many in
    flight (the load point would carry a concurrency it never had)."""
    if requests < concurrency:
        raise UsageError(
            f"--requests {requests} is fewer than --concurrency {concurrency}: the loop would never hold "
            f"{concurrency} in flight",
            f"pass --requests {4 * concurrency} (a few times the concurrency) or a lower --concurrency",
        )


@dataclass(frozen=True)
class LoadSpec:
    """One load point (see the module doc)."""

    mode: Mode
    requests: int
    prompt_tokens: Lengths
    max_new_tokens: Lengths
    concurrency: int | None = None
    rate_per_s: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise UsageError(f"--requests must be 1 or more, got {self.requests}", "e.g. --requests 16")
        if self.mode == "closed" and (self.concurrency is None or self.concurrency < 1):
            raise UsageError(f"--concurrency must be 1 or more, got {self.concurrency}", "e.g. --concurrency 1,4")
        if self.mode == "closed" and self.concurrency is not None:
            check_in_flight(self.concurrency, self.requests)
        if self.mode == "open" and (self.rate_per_s is None or not self.rate_per_s > 0):
            raise UsageError(f"--request-rate must be above 0/s, got {self.rate_per_s}", "e.g. --request-rate 2,8/s")

    @property
    def key(self) -> str:
        """``c4``, ``r8/s`` or ``seq``: the load in a cell key and a series."""
        if self.mode == "closed":
            return f"c{self.concurrency}"
        if self.mode == "open":
            return f"r{self.rate_per_s:g}/s"
        return "seq"

    @property
    def label(self) -> str:
        if self.mode == "closed":
            return f"concurrency {self.concurrency}"
        if self.mode == "open":
            return f"{self.rate_per_s:g} req/s (Poisson)"
        return "sequential"

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "key": self.key,
            "requests": self.requests,
            "concurrency": self.concurrency,
            "rate_per_s": self.rate_per_s,
            "prompt_tokens": self.prompt_tokens.text,
            "max_new_tokens": self.max_new_tokens.text,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadSpec:
        return cls(
            d["mode"],
            int(d["requests"]),
            Lengths.parse(str(d["prompt_tokens"]), "prompt_tokens"),
            Lengths.parse(str(d["max_new_tokens"]), "max_new_tokens"),
            d.get("concurrency"),
            d.get("rate_per_s"),
            int(d.get("seed", 0)),
        )


@dataclass(frozen=True)
class RequestTiming:
    """One request as served, times in seconds from the start of the load point: when it arrived
    (was due), when the engine step that gave its first token began (``scheduled_s``), when each
    token came back, and its lengths."""

    index: int
    arrival_s: float
    scheduled_s: float
    token_s: tuple[float, ...]
    prompt_tokens: int
    max_new_tokens: int
    finish_reason: str = ""

    @property
    def generated(self) -> int:
        return len(self.token_s)

    @property
    def ttft_ms(self) -> float | None:
        return (self.token_s[0] - self.arrival_s) * 1000.0 if self.token_s else None

    @property
    def e2e_ms(self) -> float | None:
        return (self.token_s[-1] - self.arrival_s) * 1000.0 if self.token_s else None

    @property
    def queue_ms(self) -> float:
        """Waiting before the step that ran its prompt (the harness's own lateness included)."""
        return max(0.0, self.scheduled_s - self.arrival_s) * 1000.0

    @property
    def itl_ms(self) -> tuple[float, ...]:
        t = self.token_s
        return tuple((b - a) * 1000.0 for a, b in zip(t, t[1:], strict=False))

    @property
    def tpot_ms(self) -> float | None:
        """Mean time per output token after the first (None with fewer than 2 tokens)."""
        if len(self.token_s) < 2:
            return None
        return (self.token_s[-1] - self.token_s[0]) * 1000.0 / (len(self.token_s) - 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "arrival_s": self.arrival_s,
            "scheduled_s": self.scheduled_s,
            "prompt_tokens": self.prompt_tokens,
            "max_new_tokens": self.max_new_tokens,
            "generated_tokens": self.generated,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "e2e_ms": self.e2e_ms,
            "queue_ms": self.queue_ms,
            "finish_reason": self.finish_reason,
            "token_s": list(self.token_s),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RequestTiming:
        return cls(
            int(d["index"]),
            float(d["arrival_s"]),
            float(d["scheduled_s"]),
            tuple(float(x) for x in d.get("token_s") or ()),
            int(d["prompt_tokens"]),
            int(d["max_new_tokens"]),
            str(d.get("finish_reason") or ""),
        )


@dataclass(frozen=True)
class StepPoint:
    """One engine step: when it began and ended (s from the load point's start), the requests that
    got a token in it (the batch occupancy) and the requests waiting for a slot after it."""

    start_s: float
    end_s: float
    batch: int
    waiting: int

    def to_list(self) -> list[float | int]:
        return [self.start_s, self.end_s, self.batch, self.waiting]

    @classmethod
    def from_list(cls, v: Sequence[Any]) -> StepPoint:
        return cls(float(v[0]), float(v[1]), int(v[2]), int(v[3]))


@dataclass(frozen=True)
class ServedInvocation:
    """What one load point did in one invocation (a fresh process)."""

    invocation: int
    server: str
    requests: tuple[RequestTiming, ...]
    steps: tuple[StepPoint, ...]
    wall_s: float
    pid: int | None = None
    peak_rss_bytes: int | None = None
    speculative: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "invocation": self.invocation,
            "server": self.server,
            "pid": self.pid,
            "wall_s": self.wall_s,
            "peak_rss_bytes": self.peak_rss_bytes,
            "speculative": None if self.speculative is None else dict(self.speculative),
            "requests": [r.to_dict() for r in self.requests],
            "steps": [s.to_list() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServedInvocation:
        return cls(
            int(d["invocation"]),
            str(d["server"]),
            tuple(RequestTiming.from_dict(r) for r in d.get("requests") or ()),
            tuple(StepPoint.from_list(s) for s in d.get("steps") or ()),
            float(d["wall_s"]),
            d.get("pid"),
            d.get("peak_rss_bytes"),
            d.get("speculative"),
        )


@dataclass(frozen=True)
class ServingSection:
    """A serving cell's section of the record: the load, how it was served (``server``, with the
    reason when not by the Engine), the Engine's capabilities, the figures over invocations
    (``figures``: name -> {estimate, low, high, ...}), the verdict on saturation, and the raw
    invocations."""

    load: LoadSpec
    slo: Slo
    server: str
    server_note: str | None
    capabilities: Mapping[str, Any]
    figures: Mapping[str, Mapping[str, Any]]
    saturation: Mapping[str, Any]
    invocations: tuple[ServedInvocation, ...] = ()
    speculative: Mapping[str, Any] = field(default_factory=dict)

    def figure(self, name: str) -> float | None:
        value = (self.figures.get(name) or {}).get("estimate")
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "load": self.load.to_dict(),
            "slo": self.slo.to_dict(),
            "server": self.server,
            "server_note": self.server_note,
            "capabilities": dict(self.capabilities),
            "figures": {k: dict(v) for k, v in self.figures.items()},
            "saturation": dict(self.saturation),
            "speculative": dict(self.speculative),
            "invocations": [i.to_dict() for i in self.invocations],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServingSection:
        return cls(
            LoadSpec.from_dict(d["load"]),
            Slo.from_dict(d.get("slo") or {}),
            str(d["server"]),
            d.get("server_note"),
            dict(d.get("capabilities") or {}),
            {k: dict(v) for k, v in (d.get("figures") or {}).items()},
            dict(d.get("saturation") or {}),
            tuple(ServedInvocation.from_dict(i) for i in d.get("invocations") or ()),
            dict(d.get("speculative") or {}),
        )
