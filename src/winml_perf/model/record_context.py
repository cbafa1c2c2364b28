"""Sections of a cell record (model/record.py) that say what was measured and where: the prompt, the
output's fingerprint, the machine (environment) and the --explain breakdown.

Each is a JsonSection (model/json_section.py): typed fields for the keys this version names, read
and written back key for key. Inner objects stay mappings where their content is what another
system reports (the OS, CPU and GPU descriptions) or belongs to a higher room (explain's phases,
read by explain/breakdown.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from winml_perf.model.json_section import JsonSection, tuple_of


@dataclass(frozen=True)
class Prompt(JsonSection):
    """The prompt fed each iteration (session_host.build_prompt_ids; `winml serve`: its lengths)."""

    mode: str | None = None  # "synthetic" | "text" | "inputs"
    text: str | None = None
    apply_template: bool | None = None
    seed: int | None = None
    fitted: bool | None = None  # the text's tokens were tiled or cut to the asked length
    text_sha256: str | None = None
    encoded_tokens: int | None = None  # the text's own token count
    tokens: int | None = None  # what the prompt came to
    lengths: str | None = None  # `winml serve`: the prompt lengths of the load point


@dataclass(frozen=True)
class Output(JsonSection):
    """What the route generated: a digest of the first iteration's tokens, whether every iteration
    generated the same, and the text when the session gave one."""

    NESTED: ClassVar[Mapping[str, Any]] = {"first_token_ids": tuple_of()}

    tokens_sha256: str | None = None
    first_token_ids: tuple[int, ...] | None = None
    identical_across_iterations: bool | None = None
    text: str | None = None


@dataclass(frozen=True)
class Environment(JsonSection):
    """The machine and software a cell ran on (record/environment.py collect_environment)."""

    timestamp_utc: str | None = None
    hostname: str | None = None
    testbed_id: str | None = None
    testbed_id_source: str | None = None  # "env" | "hash"
    versions: Mapping[str, str | None] | None = None  # package -> version
    # as the OS, the CPU and GPU probes and git report them: free-form by machine
    os: Mapping[str, Any] | None = None
    cpu: Mapping[str, Any] | None = None
    gpu: Mapping[str, Any] | None = None
    git: Mapping[str, Any] | None = None
    cwd: str | None = None  # the folder the run was measured in
    ep_devices: Mapping[str, Any] | None = None
    plugin_eps: Mapping[str, Any] | None = None

    def version(self, package: str) -> str | None:
        value = (self.versions or {}).get(package)
        return None if value is None else str(value)

    @property
    def git_commit(self) -> str | None:
        value = (self.git or {}).get("commit")
        return None if value is None else str(value)


@dataclass(frozen=True)
class Explain(JsonSection):
    """--explain: onnxruntime's profile of a separate session, per phase (or why it failed)."""

    method: str | None = None
    profiled: Mapping[str, Any] | None = None  # which generations were profiled
    error: str | None = None
    # phase -> its stages and operators, as explain/breakdown.py writes and reads them
    phases: Mapping[str, Mapping[str, Any]] | None = None
