"""The report as one self-contained HTML file: inline CSS, inline SVG plots, no script and no
network (nothing is fetched: no link, no src, no font). Formats the typed :class:`Report` and
computes nothing; every tagged value shows its tag letter with its provenance as a tooltip,
struck values are ``<del>`` with the reason, an impossible one is FAILED with its cause, and an
untagged number raises (through :func:`afford.report.cells.cell_text`). The page fits a
1400-pixel window: tables no wider than the page, cells wrapping anywhere but in a figure,
which stays whole.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from afford.core.provenance import NotExecutable, Struck, Tagged, impossible
from afford.report.cells import cell_text, struck_note, tagged_parts
from afford.report.model import Report, Section, Table
from afford.report.terminal import FAILED, refused

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 1320px; padding: 0 1em; color: #1b1f23; }
p, li, caption, figcaption, pre, code { overflow-wrap: anywhere; }
p.note, p.legend { max-width: 110ch; }
h1 { font-size: 1.6em; } h2 { border-bottom: 2px solid #d0d7de; padding-bottom: .2em; }
h3 { margin-top: 1.6em; } h4 { margin-top: 1.2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; max-width: 100%; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { overflow-wrap: normal; word-break: normal; }
th { background: #f6f8fa; } td.num { text-align: right; white-space: nowrap; }
caption { caption-side: bottom; text-align: left; font-style: italic; color: #57606a; }
.tag { font-size: 10px; font-weight: 600; padding: 0 3px; margin-left: 3px; border-radius: 3px;
       background: #eaeef2; cursor: help; }
.tag-M { background: #dafbe1; } .tag-F { background: #ddf4ff; } .tag-C { background: #fbefff; }
.tag-I { background: #fff8c5; } .tag-A { background: #ffebe9; }
del { color: #8c959f; } .struck-note { color: #8c959f; font-size: 12px; }
.notexec { color: #9a6700; font-weight: 600; }
.note { color: #57606a; } .legend { color: #57606a; font-style: italic; }
pre { background: #f6f8fa; padding: .6em 1em; border-radius: 4px; white-space: pre-wrap; }
figure { margin: 1em 0 2em; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #57606a; font-size: 12px; }
.slot td { background: #fffbe6; }
"""


def _tagged_html(t: Tagged, where: str) -> str:
    why = impossible(t)
    if why is not None:  # refused: the failed measurement and its cause, never the figure
        return f'<span class="notexec">{FAILED}</span>: {escape(refused(t, why)[len(FAILED) + 2:])}'
    value, letters = tagged_parts(t, where)
    letter = letters[0]
    tip = f"{t.tag.value}: {t.source}" + (" (extrapolated)" if t.extrapolated else "") + \
        (" (provisional: unpinned data)" if t.provisional else "")
    return (f'{escape(value)}<span class="tag tag-{letter}" title="{escape(tip)}">'
            f"{escape(letters)}</span>")


def cell_html(cell: object, where: str) -> str:
    if isinstance(cell, Tagged):
        return _tagged_html(cell, where)
    if isinstance(cell, Struck):
        return (f'<del title="{escape(struck_note(cell))}">{_tagged_html(cell.value, where)}'
                f'</del> <span class="struck-note">{escape(struck_note(cell))}</span>')
    if isinstance(cell, NotExecutable):
        return f'<span class="notexec">NOT EXECUTABLE</span>: {escape(cell.reason)}'
    return escape(cell_text(cell, where))


def table(t: Table, where: str, css_class: str = "") -> str:
    cls = f' class="{css_class}"' if css_class else ""
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    rows = []
    for row in t.rows:
        cells = "".join(
            f'<td{" class=num" if isinstance(c, (Tagged, Struck)) else ""}>'
            f"{cell_html(c, f'{where}: {t.columns[i]}')}</td>" for i, c in enumerate(row))
        rows.append(f"<tr>{cells}</tr>")
    cap = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return f"<table{cls}>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def figure(report: Report, plot_id: str, draw: Callable[[object], str] | None) -> str:
    p = report.plot(plot_id)
    body = draw(p) if draw is not None else \
        f'<p class="note">{escape(MISSING)}</p>'
    return (f'<figure id="plot-{escape(p.id)}" data-kind="{p.kind}">{body}'
            f"<figcaption>{escape(p.caption or p.title)}</figcaption></figure>")


MISSING = "Plot omitted: matplotlib is not installed (pip install 'afford[plots]')."


def section(report: Report, s: Section, level: int, draw) -> str:
    slot = s.command != ""
    parts = [f"<section><h{level}>{escape(s.title)}</h{level}>"]
    parts.extend(f'<p class="note">{escape(n)}</p>' for n in s.notes)
    if s.command:
        parts.append(f"<pre><code>{escape(s.command)}</code></pre>")
    parts.extend(table(t, s.title, "slot" if slot else "") for t in s.tables)
    parts.extend(figure(report, pid, draw) for pid in s.plots)
    parts.extend(section(report, sub, min(level + 1, 6), draw) for sub in s.subsections)
    return "".join(parts) + "</section>"


def render(report: Report, draw: Callable[[object], str] | None = None,
           plots_note: str = "") -> str:
    """One HTML document; ``draw(plot) -> '<svg ...>'`` inlines each plot (None: a note)."""
    body = [f"<h1>{escape(report.title)}</h1>",
            "<p class=note>Inputs: " + ", ".join(f"<code>{escape(i)}</code>"
                                                 for i in report.inputs) + "</p>",
            f'<p class="legend">{escape(report.legend)}</p>']
    if plots_note:
        body.append(f'<p class="note">{escape(plots_note)}</p>')
    body.extend(section(report, s, 2, draw) for s in report.sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(report.title)}</title><style>{CSS}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")
