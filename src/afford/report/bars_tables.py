"""Terminal tables for ``afford bars`` and ``afford milestones`` (render only; every number
through :func:`~afford.report.terminal.fmt`). No bar is shown without its window's hash: the
bars table names the full SHA-256 in its title and the first 12 digits on every row."""

from __future__ import annotations

from rich import box
from rich.markup import escape

from afford.core.provenance import Tagged
from afford.core.units import format_bytes
from afford.report.rich_table import Table, styled
from afford.report.terminal import LEGEND, fmt
from afford.schema.bars_file import BarsFile, MilestonesResult


def bars_lines(doc: BarsFile) -> list[str]:
    """What the bars are on: data (pinned or not), window (how cut), training part."""
    d, w, c = doc.data, doc.window, doc.counting
    pin = f"pinned as {d.source!r} in {d.manifest}" if d.pinned else "NOT PINNED: provisional (?)"
    lines = [f"data    {d.path}  {format_bytes(d.size_bytes, binary=False)}  "
             f"sha256 {d.sha256}  {pin}",
             f"window  {w.spec}: {w.arithmetic} at offset {w.offset_bytes:,} "
             f"({w.cut})  sha256 {w.sha256}"
             + (f"  bytes in {w.bytes_path}" if w.bytes_path else ""),
             f"train   {doc.train_bytes:,} bytes outside the window in "
             f"{len(doc.train_segments)} segment(s); {c.method} counts in {c.seconds:.2f} s"]
    if c.method == "streaming":
        lines.append(f"hashing {c.buckets:,} slots per hashed order, "
                     f"{format_bytes(c.table_bytes or 0)} of tables: " + ", ".join(
                         f"order {h.order} " + ("exact" if h.direct else
                                                f"{h.dropped_share:.2%} dropped")
                         for h in c.hashing))
        lines.append(f"        {c.approximation}")
    return lines


def bars_table(doc: BarsFile) -> Table:
    table = Table(title=f"n-gram bars on window {doc.window.sha256}", title_justify="left")
    for col in ("order", "smoothing", "BPB", "window"):
        table.add_column(col, no_wrap=True)
    table.add_column("discount per level / k", overflow="fold")
    for b in doc.bars:
        param = " ".join(f"{d:.2f}" for d in b.discounts) if b.smoothing == "kneser-ney" \
            else f"k = {b.k:g}"
        table.add_row(str(b.order), b.smoothing, fmt(b.bpb, b.label), b.window_sha256[:12],
                      param)
    table.caption = LEGEND + "; ? provisional (data not pinned)"
    return table


def _bare(t: Tagged | None) -> Tagged | None:
    """The figure without its unit, for a column whose header names the unit."""
    return None if t is None else t.model_copy(update={"unit": ""})


def milestones_table(res: MilestonesResult) -> Table:
    """One row per rung (numbered; :func:`milestone_notes` names them): PASSED / NOT YET (?
    on a provisional bar), the bar or the other curve, the run's BPB, the margin (> 0
    beats), the step, the tokens, the window."""
    table = Table(title=f"milestones: {res.ladder}", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("#", "status", "bar (bit/B)", "run", "margin", "step", "tokens", "window"):
        table.add_column(col, no_wrap=True)
    for i, r in enumerate(res.rungs, 1):
        style = "green" if r.status == "PASSED" else "yellow"
        label = (r.bar_label or "").replace("kneser-ney", "kn")
        against = f"{label} {fmt(_bare(r.bar))}" if r.kind == "bar" else \
            f"curve {fmt(_bare(r.baseline))}"
        mark = "?" if r.provisional else ""
        table.add_row(str(i), styled(f"[{style}]{escape(r.status)}{mark}[/]"),
                      against, fmt(_bare(r.reading)), fmt(_bare(r.margin)),
                      "-" if r.step is None else f"{r.step:,}", fmt(r.tokens),
                      r.window_sha256[:12])
    table.caption = "? provisional (bar on data not pinned); margin > 0 beats; " + LEGEND
    return table


def plan_table(res: MilestonesResult) -> Table | None:
    """Tokens each rung needs beside what the box affords a week (None: nothing to show)."""
    if not any(r.tokens_needed is not None for r in res.rungs):
        return None
    title = "tokens each rung needs" + (f", beside {res.plan}" if res.plan else "")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for col in ("#", "params", "tokens needed", "tokens a week", "weeks"):
        table.add_column(col, no_wrap=True)
    for i, r in enumerate(res.rungs, 1):
        table.add_row(str(i), fmt(r.params), fmt(r.tokens_needed), fmt(r.tokens_per_week),
                      fmt(_bare(r.weeks_needed)))
    return table


def milestone_notes(res: MilestonesResult) -> list[str]:
    """``1. name: why`` per rung, then the result's notes."""
    return [f"{i}. {r.name}: {r.reason}" for i, r in enumerate(res.rungs, 1)] + list(res.notes)
