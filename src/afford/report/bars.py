"""Terminal tables for ``afford bars`` and ``afford milestones`` (render only; every number
through :func:`~afford.report.terminal.fmt`). No bar is shown without its window's hash: the
bars table names the full SHA-256 in its title and the first 12 digits on every row."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from afford.report.terminal import LEGEND, fmt
from afford.schema.bars import BarsFile, MilestonesResult
from afford.units import format_bytes


def bars_lines(doc: BarsFile) -> list[str]:
    """What the bars are on: data (pinned or not), window (how cut), training part."""
    d, w, c = doc.data, doc.window, doc.counting
    pin = f"pinned as {d.source!r} in {d.manifest}" if d.pinned else "NOT PINNED: provisional (?)"
    lines = [f"data    {escape(d.path)}  {format_bytes(d.size_bytes, binary=False)}  "
             f"sha256 {d.sha256}  {pin}",
             f"window  {escape(w.spec)}: {w.arithmetic} at offset {w.offset_bytes:,} "
             f"({w.cut})  sha256 {w.sha256}",
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


def milestones_table(res: MilestonesResult) -> Table:
    table = Table(title=f"milestones: {res.ladder}", title_justify="left")
    cols = ["rung", "status", "bar / curve", "reading", "margin", "step", "tokens", "window"]
    plan = any(r.tokens_needed is not None for r in res.rungs)
    if plan:
        cols += ["params", "tokens needed", "tokens/week", "weeks"]
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in res.rungs:
        status = r.status + ("?" if r.provisional else "")
        style = "green" if r.status == "PASSED" else "yellow"
        against = fmt(r.bar, r.name) + f" ({r.bar_label})" if r.kind == "bar" else \
            (fmt(r.baseline, r.name) if r.baseline else "-")
        row = [escape(r.name), f"[{style}]{status}[/]", against, fmt(r.reading, r.name),
               fmt(r.margin, r.name), "-" if r.step is None else f"{r.step:,}",
               fmt(r.tokens, r.name), r.window_sha256[:12]]
        if plan:
            row += [fmt(r.params), fmt(r.tokens_needed), fmt(r.tokens_per_week),
                    fmt(r.weeks_needed)]
        table.add_row(*row)
    table.caption = LEGEND + "; ? provisional (bar on data not pinned)"
    return table


def milestone_notes(res: MilestonesResult) -> list[str]:
    return [f"{r.name}: {r.reason}" for r in res.rungs if r.reason] + list(res.notes)
