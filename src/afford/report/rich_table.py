"""The rich table every terminal renderer of afford builds, safe against rich markup in a
user's names. Its plain ``str`` cells, column headers, title and caption are shown literally: a
workload, device, source or reason named ``[/]`` or ``[bold red]x`` prints as written and never
raises a markup error or restyles the table. A cell afford styles on purpose is passed as rich
``Text``, made by :func:`styled` from afford's own markup with every user part escaped
(:func:`rich.markup.escape`), or by :func:`labelled`.

The command line's consoles (:mod:`afford.cli.common`) print with markup off as well, so a
string printed there is shown as written whatever it holds; styling is always a ``Text``.

Tables that fit: a table needs, per column, the width its cells need: a
cell of :data:`WRAP_MIN` characters or fewer, and every cell of a column kept whole
(``no_wrap``: figures), stays on one line; a longer one may wrap at words onto lines no
narrower than its longest word and than a :data:`MAX_LINES`-th of it. Given that width or
more, every column gets its need, the columns closest to whole are made whole (headers,
names) and the widest share the rest; below it the table is drawn as one record per block,
``header: value`` lines (a pipe or an 80-column terminal shows a chunk table's ``workload``
whole, never one letter a line). No cell is broken inside a word either way.
"""

from __future__ import annotations

from rich import table as _rich
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.style import Style
from rich.text import Text

__all__ = ["Table", "escape", "labelled", "literal", "styled"]

#: a cell may wrap (at words) onto lines no narrower than this, a figure never (a cell
#: shorter than it stays on one line) ...
WRAP_MIN = 8
#: ... and onto no more lines than this (prose gets the width that takes)
MAX_LINES = 6
WIDE = 10_000  # measuring width: a cell's own widths, never the console's


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

    # --- widths that never break a word; records below them --------------------------------

    def _ranges(self, console: Console, options: ConsoleOptions) -> list[tuple[int, int]]:
        """(need, widest) of each column, padding included (see the module docstring);
        measured once per console and table contents (a table asks when it is laid out,
        and again when it is drawn)."""
        wide = options.update_width(WIDE)
        key = (id(console), len(self.columns), len(self.rows), wide)
        memo = getattr(self, "_measured", None)
        if memo is not None and memo[0] == key:
            return memo[1]
        out = []
        for column in self.columns:
            pad = self._get_padding_width(column._index)
            if column.width is not None:
                out.append((column.width + pad, column.width + pad))
                continue
            need = most = 1
            for cell in self._get_cells(console, column._index, column):
                lo, hi = Measurement.get(console, wide, cell.renderable)
                need = max(need, hi if column.no_wrap else _cell_need(lo, hi, pad))
                most = max(most, hi)
            out.append((need, most))
        self._measured = (key, out)
        return out

    def needed_width(self, console: Console, options: ConsoleOptions) -> int:
        """The width below which this table is drawn as records."""
        return sum(n for n, _ in self._ranges(console, options)) + self._extra_width

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        ranges = self._ranges(console, options)
        needs, most = [n for n, _ in ranges], [m for _, m in ranges]
        spare = options.max_width - sum(needs)
        if sum(most) <= options.max_width or spare < 0 or self.expand:
            return super()._calculate_column_widths(console, options)
        return _share(needs, most, options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = self.width or options.max_width
        if self.columns and self.rows and self.needed_width(console, options) > width:
            yield from self._records(console, options.update_width(width))
            return
        yield from super().__rich_console__(console, options)

    def plain(self) -> tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...], str]:
        """(title, headers, rows, caption) as plain text: the same table for the report,
        whose cells were formatted (every figure tagged) when the terminal table was
        built."""
        def text(x) -> str:
            return x.plain if isinstance(x, Text) else str(x or "")

        rows = tuple(tuple(text(c._cells[n]) for c in self.columns)
                     for n in range(len(self.rows)))
        return (text(self.title), tuple(text(c.header) for c in self.columns), rows,
                text(self.caption))

    def _records(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """One block per row, ``header: value`` lines wrapped at words with a hanging
        indent (an empty or ``-`` cell left out), a blank line after each; a table without
        headers gives one ``first: rest`` line per row."""
        if self.title:
            yield _annotation(self.title, self.title_style or "table.title")
        for n in range(len(self.rows)):
            cells = [(c.header, c._cells[n]) for c in self.columns]
            style = self.rows[n].style or ""
            if not self.show_header:
                (_, key), *rest = cells
                cells = [(key, Text("  ").join(_as_text(v) for _, v in rest))] if rest else \
                    [("", key)]
            for header, value in cells:
                yield from _field(console, options.max_width, header, value, style)
            if self.show_header:
                yield Text("")
        if self.caption:
            yield _annotation(self.caption, self.caption_style or "table.caption")


def _cell_need(lo: int, hi: int, pad: int) -> int:
    """The width a cell needs (padding included): its longest word, and a line of
    :data:`WRAP_MIN` or of a :data:`MAX_LINES`-th of it, whichever is wider."""
    text = hi - pad
    return max(lo, min(hi, pad + max(WRAP_MIN, -(-text // MAX_LINES))))


def _share(needs: list[int], most: list[int], width: int) -> list[int]:
    """Column widths summing to ``width``: every column its need, then whole the columns
    closest to whole (a header, a short name), then what is left to the rest, widest
    first down to one common width."""
    widths, spare = list(needs), width - sum(needs)
    for i in sorted(range(len(needs)), key=lambda i: most[i] - needs[i]):
        if most[i] - widths[i] <= spare:
            spare -= most[i] - widths[i]
            widths[i] = most[i]
    cut = [i for i in range(len(widths)) if widths[i] < most[i]]
    while spare > 0 and cut:  # the narrowest cut column grows first: one common width
        i = min(cut, key=lambda i: (widths[i], -most[i]))
        widths[i] += 1
        spare -= 1
        if widths[i] == most[i]:
            cut.remove(i)
    return widths


def _as_text(x) -> Text:
    return x if isinstance(x, Text) else Text(str(x))


def _annotation(x, style) -> Text:
    text = _as_text(x).copy()
    text.stylize(style)
    return text


def _field(console: Console, width: int, header, value, style) -> RenderResult:
    """``header: value`` wrapped at ``width``, continuation lines indented two spaces."""
    if not isinstance(value, (str, Text)):
        yield Text.assemble(_as_text(header), ":")
        yield value
        return
    key, text = _as_text(header), _as_text(value)
    if text.plain.strip() in ("", "-"):
        return  # nothing to say: the table's empty cell
    line = Text.assemble(key, ": ", text) if key.plain else text.copy()
    if style:
        line.stylize(Style.parse(style) if isinstance(style, str) else style)
    lines = line.wrap(console, max(width - 2, 8), overflow="fold")
    for i, part in enumerate(lines):
        yield part if i == 0 else Text("  ") + part
