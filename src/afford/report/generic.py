"""Sections the report does not know by name, shown from their tagged figures.

Later stages add certificate sections (memory, probes, determinism, gates, ladder, ...) and
plans are written by ``afford plan``; the report shows any of them without knowing its
schema: it walks the object and keeps what can be shown honestly —
:class:`~afford.core.provenance.Tagged`, :class:`~afford.core.provenance.Struck` and
:class:`~afford.core.provenance.NotExecutable` values (as models, or as their JSON dicts in a
plan file), and text. A bare number is not shown (it has no provenance); the section says
how many were left out and where, so the stage that wrote them can tag them.

A list of records (models or dicts) becomes a table with one column per field; anything
else becomes ``field / value`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ValidationError

from afford.core.provenance import NotExecutable, Struck, Tagged
from afford.report.model import Cell, Section, Table

_TAGGED_KEYS = {"value", "unit", "tag", "source", "extrapolated", "provisional"}
MAX_LISTED = 6


def as_leaf(obj: Any) -> Cell | None:
    """A showable leaf, or ``None`` when ``obj`` is a container or an untagged number."""
    if isinstance(obj, (Tagged, Struck, NotExecutable)):
        return obj
    if isinstance(obj, dict):
        return _leaf_from_json(obj)
    if isinstance(obj, bool):
        return "yes" if obj else "no"
    if isinstance(obj, Enum):
        return str(obj.value)
    if isinstance(obj, str):
        return obj
    return None


def _leaf_from_json(d: dict) -> Cell | None:
    try:
        if "tag" in d and "value" in d and set(d) <= _TAGGED_KEYS:
            return Tagged.model_validate(d)
        if d.get("status") == "NOT EXECUTABLE" and set(d) <= {"what", "reason", "status"}:
            return NotExecutable.model_validate(d)
        if isinstance(d.get("value"), dict) and "reason" in d and \
                set(d) <= {"value", "status", "reason", "superseded_by"}:
            return Struck.model_validate(d)
    except ValidationError:
        return None
    return None


def _is_number(obj: Any) -> bool:
    return isinstance(obj, (int, float)) and not isinstance(obj, bool)


def items_of(obj: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(obj, BaseModel):
        return ((k, getattr(obj, k)) for k in type(obj).model_fields)
    if isinstance(obj, dict):
        return ((str(k), v) for k, v in obj.items())
    return ()


class _Walk:
    """Collects ``(path, leaf)`` rows, record tables, and the paths of bare numbers."""

    def __init__(self, provisional: bool = False) -> None:
        self.rows: list[tuple[str, Cell]] = []
        self.tables: list[Table] = []
        self.untagged: list[str] = []
        self.provisional = provisional

    def leaf(self, cell: Cell) -> Cell:
        if self.provisional and isinstance(cell, Tagged):
            return cell.model_copy(update={"provisional": True})
        return cell

    def visit(self, obj: Any, path: str) -> None:
        leaf = as_leaf(obj)
        if leaf is not None:
            self.rows.append((path, self.leaf(leaf)))
        elif _is_number(obj):
            self.untagged.append(path)
        elif isinstance(obj, (list, tuple)):
            self.visit_list(list(obj), path)
        else:
            for k, v in items_of(obj):
                if v is not None:
                    self.visit(v, f"{path}.{k}" if path else k)

    def visit_list(self, items: list, path: str) -> None:
        records = [i for i in items if as_leaf(i) is None and list(items_of(i))]
        if items and len(records) == len(items):
            self.tables.append(self.record_table(records, path))
            return
        if items and all(_is_number(i) for i in items):
            self.untagged.append(f"{path}[{len(items)} values]")
            return
        for n, item in enumerate(items):
            self.visit(item, f"{path}[{n}]")

    def record_table(self, records: list, path: str) -> Table:
        flat = [self.flatten(r, f"{path}[{n}]") for n, r in enumerate(records)]
        columns = list(dict.fromkeys(k for row in flat for k in row))
        rows = tuple(tuple(row.get(c) for c in columns) for row in flat)
        return Table(columns=tuple(columns), rows=rows, caption=path)

    def flatten(self, record: Any, path: str, prefix: str = "") -> dict[str, Cell]:
        out: dict[str, Cell] = {}
        for k, v in items_of(record):
            key = f"{prefix}{k}"
            leaf = as_leaf(v)
            if leaf is not None:
                out[key] = self.leaf(leaf)
            elif _is_number(v):
                self.untagged.append(f"{path}.{key}")
            elif v is not None and not isinstance(v, (list, tuple)) and list(items_of(v)):
                out.update(self.flatten(v, path, f"{key}."))
            elif isinstance(v, (list, tuple)) and v:
                self.untagged.append(f"{path}.{key}[{len(v)} items]")
        return out


def generic_section(title: str, obj: Any, *, provisional: bool = False,
                    notes: tuple[str, ...] = ()) -> Section:
    """A section showing ``obj``'s tagged figures and text; bare numbers are counted."""
    w = _Walk(provisional)
    w.visit(obj, "")
    tables = list(w.tables)
    if w.rows:
        tables.insert(0, Table(columns=("field", "value"), rows=tuple(w.rows)))
    extra = list(notes)
    if w.untagged:
        listed = ", ".join(w.untagged[:MAX_LISTED])
        more = f" and {len(w.untagged) - MAX_LISTED} more" if len(w.untagged) > MAX_LISTED else ""
        extra.append(f"Not shown, because they carry no provenance tag: {listed}{more}.")
    if not tables and not w.untagged:
        extra.append("This section holds nothing to show.")
    return Section(title=title, notes=tuple(extra), tables=tuple(tables))


def find_key(obj: Any, key: str, depth: int = 3) -> list[Any]:
    """Every value stored under ``key`` in ``obj`` (models or dicts), ``depth`` levels deep."""
    found: list[Any] = []
    if depth < 0:
        return found
    for k, v in items_of(obj):
        if k == key:
            found.append(v)
        elif v is not None:
            found.extend(find_key(v, key, depth - 1))
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found.extend(find_key(item, key, depth - 1))
    return found
