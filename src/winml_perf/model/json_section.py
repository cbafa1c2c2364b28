"""The base of a record section read from JSON (model/record_context.py, model/record_measures.py):
typed fields for the keys this version names, the keys it does not name (``extra``), and the order
the keys were written in (``written``).

A record is written back key for key: the measuring side builds these sections from the dicts it
collects, in its own key order, and a stored record of an older version may lack keys a new one
writes (or hold a key as null where another leaves it out). ``written`` keeps both, so ``to_dict``
gives the dict the section was read from, and ``schemas/record.schema.json`` stays the one
description of the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

S = TypeVar("S", bound="JsonSection")

#: Values a copy shares rather than copies (immutable).
_ATOMS = (str, int, float, bool, type(None))


def json_value(value: Any) -> Any:
    """``value`` as JSON data: a section or other typed value by its ``to_dict``, tuples as lists,
    mappings as new dicts (a copy: the caller may change what it gets)."""
    t = type(value)
    if t in _ATOMS:
        return value
    if isinstance(value, Mapping):
        return {k: v if type(v) in _ATOMS else json_value(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [v if type(v) in _ATOMS else json_value(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    return value


@dataclass(frozen=True)
class JsonSection:
    """Typed fields (set by subclasses; None: not in the record) and two of their own: ``extra``,
    keys this version does not name, as written; ``written``, every key in the record's order
    (empty: a section made here). Keys are written in that order, then every other field that is
    set, in field order."""

    #: Fields read through a converter (a nested section, a list read as a tuple), by name.
    NESTED: ClassVar[Mapping[str, Any]] = {}

    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True)  # keys this version does not name
    # the keys in the order they were read: how the section is written, not what it holds (no part of ==)
    written: tuple[str, ...] = field(default=(), kw_only=True, compare=False, repr=False)

    @classmethod
    def named(cls) -> tuple[str, ...]:
        """The record keys this section names: its fields but ``extra`` and ``written``, in order."""
        names = _NAMES.get(cls)
        if names is None:
            names = _NAMES.setdefault(cls, tuple(f.name for f in fields(cls) if f.name not in ("extra", "written")))
        return names

    @classmethod
    def from_dict(cls: type[S], d: Mapping[str, Any]) -> S:
        """The section of ``d``, its values taken as they are (the caller copies what it must)."""
        names = cls.named()
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for k, v in d.items():
            if k in names:
                convert = cls.NESTED.get(k)
                known[k] = v if convert is None or v is None else convert(v)
            else:
                extra[k] = v
        return cls(**known, extra=extra, written=tuple(d))

    def to_dict(self) -> dict[str, Any]:
        """The section's JSON: the keys as read (or the set fields, then ``extra``), values as JSON data."""
        written, extra = self.written, self.extra
        keys = (
            *written,
            *(k for k in self.named() if k not in written and getattr(self, k) is not None),
            *(k for k in extra if k not in written),
        )
        return {k: json_value(extra[k] if k in extra else getattr(self, k)) for k in keys}


#: Each section class's named keys in field order, computed once.
_NAMES: dict[type, tuple[str, ...]] = {}


def tuple_of(convert: Any = None) -> Any:
    """A converter reading a JSON list as a tuple (each item through ``convert`` when given)."""
    if convert is None:
        return tuple
    return lambda items: tuple(convert(i) for i in items)
