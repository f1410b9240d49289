"""The history ledger as a terminal table: struck readings struck, with their reason.

On a terminal a struck value is drawn in rich's ``strike`` style; in plain text (a pipe, a
file, a test) it is written ``~~value~~``, the Markdown way, so the strike survives.
"""

from __future__ import annotations

from rich.text import Text

from afford.core.provenance import Struck, Tagged
from afford.report.rich_table import Table
from afford.report.terminal import LEGEND, fmt
from afford.schema.ledger import Reading


def struck_text(s: Struck, plain: bool) -> Text:
    """The struck value, and its status; ``~~...~~`` in plain text."""
    inner = fmt(s.value, "history")
    if plain:
        return Text(f"~~{inner}~~")
    return Text(inner, style="strike")


def value_cell(shown: Tagged | Struck, plain: bool) -> Text:
    if isinstance(shown, Struck):
        return struck_text(shown, plain)
    return Text(fmt(shown, "history"))


def note_cell(r: Reading) -> str:
    if r.noisy:
        return f"NOISY: {r.reason}"
    if not r.struck:
        return ""
    note = f"{r.status.upper()}: {r.reason}"
    return note + (f" (superseded by {r.superseded_by})" if r.superseded_by else "")


def history_table(rows: list[Reading], title: str, *, plain: bool) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("id", "date"):
        table.add_column(col, no_wrap=True)
    for col in ("device", "quantity", "value", "steps", "status"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.id, f"{r.date:%Y-%m-%d}", r.device, r.quantity,
                      value_cell(r.shown(), plain), r.step_indices or "-",
                      note_cell(r) or r.status)
    table.caption = LEGEND + ("; ~~struck~~ withdrawn or retracted, kept with the reason; "
                              "NOISY: read off a NOISY certificate, with its cause")
    return table
