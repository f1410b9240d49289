"""The report as a Markdown lab notebook. Formats the typed :class:`Report` and computes
nothing; every cell passes :func:`afford.report.cells.cell_text`, which raises on an untagged
number. Tables are padded to aligned columns so the raw file reads as well as the render.
"""

from __future__ import annotations

from afford.report.cells import cell_text
from afford.report.model import Report, Section, Table


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(t: Table, where: str) -> list[str]:
    head = [_escape(c) or " " for c in t.columns]
    body = [[_escape(cell_text(c, f"{where}: {t.columns[i]}")) for i, c in enumerate(row)]
            for row in t.rows]
    widths = [max([len(h), 3] + [len(r[i]) for r in body]) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [line(head), "| " + " | ".join("-" * w for w in widths) + " |"]
    out.extend(line(r) for r in body)
    if t.caption:
        out.extend(["", f"*{_escape(t.caption)}*"])
    return out + [""]


def _plot_lines(report: Report, plot_ids: tuple[str, ...], plots_href: str | None) -> list[str]:
    out = []
    for pid in plot_ids:
        p = report.plot(pid)
        if plots_href is not None:
            out.append(f"![{p.title}]({plots_href}/{p.id}.svg)")
        else:
            out.append(f"*Plot: {p.title} (drawn in the HTML report, or as files with "
                       "--plots-dir).*")
        out.append("")
    return out


def section(report: Report, s: Section, level: int, plots_href: str | None) -> list[str]:
    out = [f"{'#' * level} {s.title}", ""]
    for note in s.notes:
        out.extend([note, ""])
    if s.command:
        out.extend(["```bash", s.command, "```", ""])
    for t in s.tables:
        out.extend(table(t, s.title))
    out.extend(_plot_lines(report, s.plots, plots_href))
    for sub in s.subsections:
        out.extend(section(report, sub, min(level + 1, 6), plots_href))
    return out


def render(report: Report, plots_href: str | None = None) -> str:
    """Markdown text; ``plots_href`` (relative to the file) links exported SVG plots."""
    out = [f"# {report.title}", "", "Inputs: " + ", ".join(f"`{i}`" for i in report.inputs),
           "", f"*{report.legend}*", ""]
    for s in report.sections:
        out.extend(section(report, s, 2, plots_href))
    return "\n".join(out).rstrip() + "\n"
