"""The rich table every terminal renderer of afford builds (issue 14: rich markup in a user's
names). Its plain ``str`` cells, column headers, title and caption are shown literally: a
workload, device, source or reason named ``[/]`` or ``[bold red]x`` prints as written and
never raises a markup error or restyles the table. A cell afford styles on purpose is
passed as rich ``Text``, made by :func:`styled` from afford's own markup with every user
part escaped (:func:`rich.markup.escape`), or by :func:`labelled`.

The command line's consoles (:mod:`afford.cli.common`) print with markup off as well, so a
string printed there is shown as written whatever it holds; styling is always a ``Text``.
"""

from __future__ import annotations

from rich import table as _rich
from rich.markup import escape
from rich.text import Text

__all__ = ["Table", "escape", "labelled", "literal", "styled"]


def literal(x):
    """``x`` shown as written: a ``str`` becomes ``Text``; anything else is left alone."""
    return Text(x) if isinstance(x, str) else x


def styled(markup: str) -> Text:
    """afford's own markup (``"[green]PASS[/]"``); escape every user part inside it."""
    return Text.from_markup(markup)


def labelled(label: str, text: str) -> Text:
    """afford's styled label (``"[yellow]warning:[/]"``), a space, then ``text`` as written."""
    return styled(label) + Text(" " + text)


class Table(_rich.Table):
    """A ``rich.table.Table`` whose ``str`` cells, headers, title and caption are literal."""

    def __init__(self, *headers, title=None, caption=None, **kw) -> None:
        super().__init__(*(literal(h) for h in headers), title=literal(title),
                         caption=literal(caption), **kw)

    def __setattr__(self, name, value) -> None:
        if name in ("title", "caption"):
            value = literal(value)
        super().__setattr__(name, value)

    def add_column(self, header="", *args, **kw) -> None:
        super().add_column(literal(header), *args, **kw)

    def add_row(self, *cells, **kw) -> None:
        super().add_row(*(literal(c) for c in cells), **kw)
