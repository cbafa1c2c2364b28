"""A cell's status, as its result and record carry it and the store keeps it."""

from __future__ import annotations

from enum import StrEnum


class CellStatus(StrEnum):
    """Whether a cell was measured: ``ok``, or ``failed`` (its record's ``failure`` says why). A
    StrEnum: equal to its text, which is what records, JSON and the store hold."""

    OK = "ok"
    FAILED = "failed"
