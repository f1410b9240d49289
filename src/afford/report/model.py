"""The typed report: what ``afford report`` shows, built from certificates, plans, a manifest
and a ledger, before any format is chosen (docs/DESIGN.md section 2: measure, fit, plan,
*render*; renderers format what they are given and compute nothing).

Every cell of every table is text (a label), a :class:`~afford.core.provenance.Tagged` value, a
:class:`~afford.core.provenance.Struck` one or :class:`~afford.core.provenance.NotExecutable`; the
renderers raise on anything else, so an untagged number cannot reach a page. Plots carry
their series as plain floats, each series labelled with the tag of the figures it draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from afford.core.provenance import NotExecutable, Struck, Tag, Tagged

Cell = Union[str, Tagged, Struck, NotExecutable, None]


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} cells in a table of "
                                 f"{len(self.columns)} columns ({self.caption or self.columns})")


@dataclass(frozen=True)
class Series:
    """One line or set of markers on a plot, all of one provenance."""

    label: str
    tag: Tag
    x: tuple[float, ...]
    y: tuple[float, ...]
    style: Literal["points", "line", "linepoints", "dashed", "excluded", "heldout",
                   "predicted"] = "points"


@dataclass(frozen=True)
class Plot:
    id: str                                  # slug; the file name under --plots-dir
    kind: Literal["throughput", "memory", "residency", "ladder", "breakdown"]
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...] = ()
    residuals: tuple[Series, ...] = ()       # throughput: relative residuals in percent
    bars: tuple[tuple[str, float], ...] = ()  # residency: (label, percent of the card)
    limits: tuple[tuple[float, str], ...] = ()  # horizontal lines: (y, label)
    stacks: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()  # breakdown: one
    # stacked bar per label, its (class, value) segments bottom to top
    log_x: bool = True
    log_y: bool = True
    caption: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    notes: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    plots: tuple[str, ...] = ()               # Plot ids shown in this section
    command: str = ""                         # the exact command to run (empty slots)
    subsections: tuple["Section", ...] = ()


@dataclass(frozen=True)
class Report:
    title: str
    inputs: tuple[str, ...]
    sections: tuple[Section, ...]
    plots: tuple[Plot, ...] = ()
    legend: str = ""

    def plot(self, plot_id: str) -> Plot:
        return next(p for p in self.plots if p.id == plot_id)
