"""Terminal tables of a certificate's ``distributed`` section. Every number passes
:func:`afford.report.terminal.fmt` (tagged, or refused)."""

from __future__ import annotations

from afford.core.provenance import measured, module
from afford.core.units import format_bytes
from afford.figures.distributed_figures import on_node
from afford.report.rich_table import Table
from afford.report.terminal import LEGEND, fmt
from afford.schema.distributed_section import DistributedSection


def _gbps(v: float | None, src: str):
    return measured(v / 1e9, "GB/s", src) if v is not None else None


def collectives_table(d: DistributedSection, run: str) -> Table | None:
    c = d.collectives
    if c is None:
        return None
    table = Table(title=f"collectives on {c.world_size} rank(s), {c.backend}, {c.dtype} "
                  "(time: slowest rank's median)", title_justify="left")
    for col in ("op", "size", "time", "algbw", "busbw", "rank spread"):
        table.add_column(col, overflow="fold")
    for p in c.points:
        src = f"{p.op} {p.bytes} B, {run}"
        table.add_row(p.op, format_bytes(p.bytes), fmt(measured(p.seconds, "s", src)),
                      fmt(_gbps(p.algbw_bytes_per_second, src)),
                      fmt(_gbps(p.busbw_bytes_per_second, src)),
                      fmt(module((max(p.rank_medians) - min(p.rank_medians))
                                 / max(p.rank_medians), "ratio",
                                 "(max - min) / max of the rank medians")))
    for f in c.fits:
        beta = f"{f.beta_bytes_per_second / 1e9:.3g} GB/s" if f.beta_bytes_per_second else "-"
        table.add_row(f"{f.op} fit", "", fmt(module(f.alpha_seconds, "s", "alpha")), beta,
                      "", f"R^2 {fmt(module(round(f.r2, 5), '', 'fit_alpha_beta'))}")
    for ne in c.not_executable:
        table.add_row(ne.what, "", ne.status, "", "", ne.reason[:80])
    table.caption = LEGEND
    return table


def scaling_table(d: DistributedSection, run: str) -> Table:
    table = Table(title="data-parallel scaling of the tinylm step (weak: batch per rank "
                  "fixed; step: slowest rank's median)", title_justify="left")
    for col in ("strategy", "devices", "step", "efficiency", "throughput x",
                "exposed all-reduce", "peak memory per rank"):
        table.add_column(col, overflow="fold")
    for s in d.data_parallel:
        if s.not_executable and not s.runs:
            table.add_row(s.strategy, "-", s.not_executable.status, "", "", "",
                          s.not_executable.reason[:80])
            continue
        for r in s.runs:
            sc = on_node(d, r.world_size, s.strategy)
            share = module(r.exposed_comm_share, "ratio", "(step - no_sync) / step") \
                if r.exposed_comm_share is not None else None
            mem = r.rank_peak_reserved_bytes if any(r.rank_peak_reserved_bytes) \
                else r.rank_peak_rss_bytes
            table.add_row(s.strategy, str(r.world_size), fmt(sc.step_seconds), fmt(sc.efficiency),
                          fmt(sc.throughput_multiplier), fmt(share),
                          " ".join(fmt(measured(v, "B", f"rank {i}, {run}")) for i, v in
                                   enumerate(mem) if v is not None))
        if s.law is not None:
            table.add_row(s.strategy, "law", s.law.describe(), "", "", "", "")
        if s.not_executable and s.runs:
            table.add_row(s.strategy, "-", s.not_executable.status, "", "", "",
                          s.not_executable.reason[:80])
    table.caption = LEGEND
    return table


def status_line(d: DistributedSection) -> str:
    ranks = ", ".join(f"{r.rank}:{r.device}" for r in d.ranks)
    head = (f"distributed: {d.status}, {d.world_size} rank(s) on {d.nodes} node(s), "
            f"{d.backend}, timeout {d.timeout_seconds:g} s; ranks {ranks}")
    if d.error:
        head += f"\nerror: {d.error}\nranks finished: {d.ranks_finished or 'none'}"
    return head
