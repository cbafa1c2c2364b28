"""Which flags asked for a route, so a message about the route names only flags the user has: every
routing command takes ``--ep/--device/--stages/--ep-option``; a route given as a ``--route`` spec
(`winml perf`, `winml serve`) has its own ``device=``, ``;stages=`` and ``;options=`` parts too."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RouteFlags:
    """``spec``: the route was asked with ``--route`` (its parts are then named beside the flags)."""

    spec: bool = False

    def part(self, flag: str, key: str) -> str:
        """``flag`` (``--stages``), and with a ``--route`` spec where its ``key`` (``;stages=``) goes."""
        return f"{flag}, or {key} in --route" if self.spec else flag


FLAGS = RouteFlags()  # --ep/--device/--stages/--ep-option only (`winml bundle show|prepare`, `winml tune`)
ROUTE_SPEC = RouteFlags(spec=True)
