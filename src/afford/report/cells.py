"""One table cell as text, for the Markdown and HTML renderers. Text passes; a tagged
value is formatted with its tag (:func:`afford.report.terminal.fmt`); a struck one is struck
with its reason; NOT EXECUTABLE says so with the error; any bare number raises TypeError
(docs/DESIGN.md section 3, rule 5: the renderer refuses an untagged number)."""

from __future__ import annotations

from afford.core.provenance import NotExecutable, Struck, Tagged, require_tagged
from afford.report.terminal import fmt


def struck_note(s: Struck) -> str:
    note = f"{s.status}: {s.reason}"
    return note + (f"; superseded by {s.superseded_by}" if s.superseded_by else "")


def cell_text(cell: object, where: str) -> str:
    """The cell as plain text (Markdown marks a strike with ``~~``)."""
    if cell is None:
        return "-"
    if isinstance(cell, str):
        return cell
    if isinstance(cell, Struck):
        return f"~~{fmt(cell.value, where)}~~ ({struck_note(cell)})"
    if isinstance(cell, NotExecutable):
        return f"NOT EXECUTABLE: {cell.reason}"
    return fmt(require_tagged(cell, where), where)


def tagged_parts(cell: Tagged, where: str) -> tuple[str, str]:
    """(value text with markers, tag letter) of a tagged value, for richer markup."""
    text = fmt(cell, where)
    value, _, letters = text.rpartition(" ")
    return value, letters
