"""Lines of prose whose numbers carry their tags, as table cells do (docs/DESIGN.md section 3,
rule 5: "the renderer refuses an untagged number").

A line is a template and its figures: ``prose("took {}", elapsed)``. Each figure goes through
:func:`~afford.report.terminal.fmt` (value, unit, tag letter), which refuses a bare number;
the template itself is refused when it holds a number with a unit or a decimal point, the
mark of a figure interpolated by hand (``f"{x:.1f} s"``) rather than passed tagged. Counts and
names that are part of the words (``3 children``, ``seq=512``, ``x2``) stay in the template.
"""

from __future__ import annotations

import re

from afford.core.provenance import Tagged
from afford.report.terminal import fmt

#: a figure written into words: a decimal or scientific number, or a number with a unit
FIGURE = re.compile(r"(?<![\w.=])(?:\d+\.\d+(?:e[+-]?\d+)?|\d+e[+-]?\d+|"
                    r"\d+(?:\.\d+)?\s?(?:s|ms|us|ns|%|B|KiB|MiB|GiB|TiB|kB|MB|GB|TB|"
                    r"FLOP/s|B/s|tokens/s)(?![\w/]))")


def untagged_figures(template: str) -> list[str]:
    """The figures written into a template's words (none may be)."""
    return [m.group(0) for m in FIGURE.finditer(template.replace("{}", ""))]


def prose(template: str, *figures: Tagged | str) -> str:
    """``template`` with each ``{}`` filled by a figure, tagged (``fmt``), or by a label (a
    name: a device, a workload, a count of the words). TypeError for a bare number;
    ValueError for a template that carries a figure of its own."""
    bad = untagged_figures(template)
    if bad:
        raise ValueError(f"untagged number {bad[0]!r} in the prose {template!r}: pass it as a "
                         "tagged figure")
    parts = [f if isinstance(f, str) else fmt(f, f"the prose {template!r}") for f in figures]
    if template.count("{}") != len(parts):
        raise ValueError(f"{template!r} has {template.count('{}')} slot(s), given "
                         f"{len(parts)} figure(s)")
    return template.format(*parts)
