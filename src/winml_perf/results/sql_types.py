"""Names for SQLAlchemy's query types where any columns go: its stubs make a select and a row
generic over their column types (variadic since SQLAlchemy 2.1), so ``Select[Any]`` would mean one
column. Annotations only: nothing here is subscripted at run time."""

from __future__ import annotations

from typing import Any, TypeAlias

import sqlalchemy as sa

AnySelect: TypeAlias = "sa.Select[*tuple[Any, ...]]"
AnyRow: TypeAlias = "sa.Row[*tuple[Any, ...]]"
