"""Draw the report's plots with matplotlib (the optional extra ``afford[plots]``): SVG to
inline in the HTML report, and SVG/PNG files with ``--plots-dir``. Draws the series it is
given (:mod:`afford.report.plotdata`) and computes nothing.

Without matplotlib :func:`available` is False and the report renders with a note instead.
SVG output is reproducible: no date in the metadata, ids salted with the plot's id (so
several inline SVGs never share an id), text kept as text.
"""

from __future__ import annotations

import functools
import io
import re
from pathlib import Path

from afford.core.io import atomic_write_bytes, atomic_write_text
from afford.report.model import Plot, Series
from afford.report.terminal import ABBREV

MISSING_NOTE = ("Plots omitted: matplotlib is not installed here "
                "(pip install 'afford[plots]' draws them).")
_STYLE = {"points": dict(linestyle="none", marker="o", markersize=5),
          "excluded": dict(linestyle="none", marker="x", markersize=8, color="#c0392b"),
          "line": dict(linestyle="-", linewidth=1.8),
          "linepoints": dict(linestyle="-", linewidth=1.5, marker="o", markersize=5),
          "dashed": dict(linestyle="--", linewidth=1.2),
          "heldout": dict(linestyle="none", marker="s", markersize=7, fillstyle="none"),
          "predicted": dict(linestyle="none", marker="x", markersize=7)}


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _label(s: Series) -> str:
    return f"{s.label} [{ABBREV[s.tag]}]"


def _draw_series(ax, plot: Plot, series: tuple[Series, ...]) -> None:
    for s in series:
        ax.plot(s.x, s.y, label=_label(s), **_STYLE[s.style])
    for y, label in plot.limits:
        ax.axhline(y, color="#7f8c8d", linestyle=":", linewidth=1.2, label=label)
    if plot.log_x:
        ax.set_xscale("log")
    if plot.log_y:
        ax.set_yscale("log")
    ax.set_ylabel(plot.y_label)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _draw_bars(ax, plot: Plot) -> None:
    labels = [b[0] for b in plot.bars]
    values = [b[1] for b in plot.bars]
    colors = ["#2e86c1" if v <= 100.0 else "#c0392b" for v in values]
    ax.barh(range(len(values)), values, color=colors)
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    for x, label in plot.limits:
        ax.axvline(x, color="#7f8c8d", linestyle=":", linewidth=1.2, label=label)
    ax.set_xlabel(plot.x_label)
    ax.legend(fontsize=8)


BREAKDOWN_COLORS = ("#2e86c1", "#85c1e9", "#8e44ad", "#f5b041", "#27ae60", "#a9dfbf",
                    "#bdc3c7")


def _draw_stacked(ax, plot: Plot) -> None:
    """One stacked bar per label, segments bottom to top, one colour per class."""
    labels = [s[0] for s in plot.stacks]
    classes = [c for c, _ in plot.stacks[0][1]]
    bottom = [0.0] * len(labels)
    for i, name in enumerate(classes):
        values = [dict(s[1]).get(name, 0.0) for s in plot.stacks]
        ax.bar(range(len(labels)), values, bottom=bottom, label=name.replace("_", " "),
               color=BREAKDOWN_COLORS[i % len(BREAKDOWN_COLORS)])
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel(plot.y_label)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def figure(plot: Plot):
    """A matplotlib Figure (no pyplot: nothing global, safe in a library)."""
    from matplotlib.figure import Figure

    if plot.kind == "breakdown":
        fig = Figure(figsize=(max(6.0, 1.1 * len(plot.stacks) + 3.0), 4.4),
                     layout="constrained")
        _draw_stacked(fig.add_subplot(), plot)
    elif plot.kind == "residency":
        fig = Figure(figsize=(7.5, 1.2 + 0.28 * len(plot.bars)), layout="constrained")
        _draw_bars(fig.add_subplot(), plot)
    elif plot.residuals:
        fig = Figure(figsize=(7.5, 5.2), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
        _draw_series(top, plot, plot.series)
        for s in plot.residuals:
            bottom.plot(s.x, s.y, label=_label(s), **_STYLE["points"])
        bottom.axhline(0.0, color="#7f8c8d", linewidth=1.0)
        bottom.set_ylabel("residual %")
        bottom.grid(True, alpha=0.3)
        bottom.set_xlabel(plot.x_label)
    else:
        fig = Figure(figsize=(7.5, 4.2), layout="constrained")
        ax = fig.add_subplot()
        _draw_series(ax, plot, plot.series)
        ax.set_xlabel(plot.x_label)
    fig.suptitle(plot.title, fontsize=10)
    return fig


@functools.lru_cache(maxsize=128)
def _save(plot: Plot, fmt: str) -> bytes:
    """The plot drawn once per format (cached: a report that inlines SVGs and exports files
    draws each plot once; a :class:`Plot` is frozen, so the cache cannot go stale)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": plot.id, "svg.fonttype": "none"}):
        metadata = {"Date": None} if fmt == "svg" else {}
        figure(plot).savefig(buf, format=fmt, metadata=metadata, dpi=110)
    return buf.getvalue()


def _scoped(text: str, prefix: str) -> str:
    """Prefix every element id (and every ``#id`` reference to it) so that several SVGs
    inlined in one page never share an id (matplotlib names each ``figure_1``)."""
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', text)
    return re.sub(r"#([A-Za-z_][\w.\-]*)",
                  lambda m: f"#{prefix}-{m.group(1)}" if m.group(1) in ids else m.group(0),
                  text)


def svg(plot: Plot) -> str:
    """The plot as one ``<svg>`` element to inline: the XML prolog and doctype dropped,
    ids scoped by the plot's id."""
    text = _save(plot, "svg").decode("utf-8")
    return _scoped(text[text.index("<svg"):], plot.id)


def png(plot: Plot) -> bytes:
    return _save(plot, "png")


def export(plots: tuple[Plot, ...], folder: str | Path, *, overwrite: bool = False
           ) -> list[Path]:
    """``<id>.svg`` and ``<id>.png`` of every plot into ``folder`` (created if absent).
    An existing file of the same name is an InputError unless ``overwrite``; every file is
    written atomically."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for p in plots:
        written.append(atomic_write_text(out / f"{p.id}.svg", svg(p), overwrite=overwrite))
        written.append(atomic_write_bytes(out / f"{p.id}.png", png(p), overwrite=overwrite))
    return written
