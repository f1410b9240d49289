"""Rich rendering of a plan and a preflight verdict. Renders, never computes: every number
comes from :mod:`afford.plan.result` and passes :func:`afford.report.terminal.fmt`."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from afford.plan.result import ChunkRow, PlanResult, Verdict
from afford.provenance import Tagged
from afford.report.terminal import LEGEND, fmt


def _f(t: Tagged | None, none: str = "-") -> str:
    if t is not None and t.value is None:
        return none
    return fmt(t)


def _kv(title: str, rows: list[tuple[str, Tagged | None, str]]) -> Table:
    """A figure / value / where-it-comes-from table."""
    table = Table(title=title, title_justify="left", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("from", overflow="fold", style="dim")
    for label, t, none in rows:
        table.add_row(label, _f(t, none), t.source if t is not None else "")
    return table


def _yes(b: bool | None) -> str:
    return {True: "yes", False: "NO", None: "?"}[b]


def chunk_section(p: PlanResult) -> list[RenderableType]:
    c = p.chunk
    no_cap = c.cap_seconds.value is None
    rows = [("session cap", c.cap_seconds, "none"),
            ("margin", None if no_cap else c.margin_seconds, "-"),
            ("chunk = cap - margin", c.chunk_seconds, "no cap: one session"),
            ("startup total", c.startup.total_seconds, "-"),
            ("restart (startup before step 1)", c.startup.restart_seconds, "-"),
            ("margin covers startup", c.margin_covers, "-")]
    comps = Table(title="startup components", title_justify="left")
    for col in ("component", "what", "seconds", "from"):
        comps.add_column(col, overflow="fold", style="dim" if col == "from" else None)
    for s in c.startup.components:
        comps.add_row(s.name, s.what, fmt(s.seconds), s.seconds.source)
    out: list[RenderableType] = [_kv("chunk and margin", rows), comps]
    if c.covered is False:
        out.append(Text("the margin does NOT cover the startup", style="bold red"))
    return out


def memory_section(p: PlanResult) -> Table:
    m = p.memory
    return _kv("memory budget (against reserved memory)", [
        ("device memory", m.device_memory_bytes, "-"), ("budget fraction", m.fraction, "-"),
        ("budget", m.budget_bytes, "-"),
        ("worst reserved / allocated", m.reserved_ratio, "-")])


def chunk_table(rows: tuple[ChunkRow, ...]) -> Table:
    table = Table(title="chunk table", title_justify="left", caption_justify="left")
    for col in ("workload", "mode", "value", "step", "steps/chunk", "steps/h", "allocated",
                "proj. reserved", "of budget", "fits", "note"):
        text = col in ("workload", "mode", "note")
        table.add_column(col, overflow="fold", no_wrap=not text,
                         justify="left" if text else "right")
    excluded: list[str] = []
    for r in rows:
        name = f"[bold]{r.workload} (run)[/]" if r.is_run else r.workload
        notes = [r.note] if r.note else []
        if r.excluded:
            excluded.append(f"({len(excluded) + 1}) {r.workload} {r.sweep_param}={r.value}: "
                            f"{r.excluded}")
            notes.append(f"excluded ({len(excluded)})")
        table.add_row(name, r.mode, f"{r.sweep_param}={r.value}", fmt(r.step_seconds),
                      _f(r.steps_per_chunk), fmt(r.steps_per_hour), fmt(r.allocated_bytes),
                      fmt(r.projected_reserved_bytes), fmt(r.budget_share), _yes(r.fits),
                      "; ".join(notes))
    if excluded:
        table.caption = "\n".join(excluded)
    return table


def run_section(p: PlanResult) -> Table | None:
    if p.run is None:
        return None
    row = next(r for r in p.rows if r.is_run)
    shape = ", ".join(f"{k}={v}" for k, v in p.run.shape.items())
    return _kv(f"run {p.run.name}: {p.run.workload} {p.run.mode} ({shape})", [
        ("tokens per step", p.run.tokens_per_step, "-"),
        ("tokens per chunk", row.tokens_per_chunk, "-"), ("parameters", row.params, "-")])


def quota_section(p: PlanResult) -> Table | None:
    q = p.quota
    if q is None:
        return None
    return _kv("weekly quota (startup charged per chunk)", [
        ("weekly quota", q.quota_seconds, "-"),
        ("[red]naive: quota / chunk (WRONG: charges nothing for startup)[/]", q.naive_chunks, "-"),
        ("[red]naive steps a week (WRONG)[/]", q.naive_steps, "-"),
        ("billed per chunk = chunk + startup", q.billed_seconds_per_chunk, "-"),
        ("whole chunks a week", q.whole_chunks, "-"),
        ("remainder", q.remainder_seconds, "-"),
        ("trainable remainder (less one startup)", q.trainable_remainder_seconds, "-"),
        ("steps a week", q.steps_per_week, "-"), ("tokens a week", q.tokens_per_week, "-")])


def target_section(p: PlanResult) -> Table | None:
    t = p.target
    if t is None:
        return None
    return _kv(f"to the target ({t.limited_by})", [
        ("target steps", t.target_steps, "-"), ("target tokens", t.target_tokens, "-"),
        ("sessions", t.sessions, "-"), ("GPU time billed", t.gpu_seconds, "-"),
        ("weeks", t.weeks, "out of reach")])


def cadence_section(p: PlanResult) -> Table | None:
    c = p.cadence
    if c is None:
        return None
    per = "chunk" if p.chunk.chunk_seconds is not None else "run"
    return _kv("checkpoint cadence", [
        ("checkpoint write", c.write_seconds, "-"), ("overhead budget", c.overhead_budget, "-"),
        ("save_every", c.save_every, "-"), ("interval = save_every x step + write",
                                            c.interval_seconds, "-"),
        ("write share of the interval", c.overhead_share, "-"),
        (f"writes per {per}", c.writes_per_chunk, "-"),
        (f"write time per {per}", c.write_seconds_per_chunk, "-"),
        (f"share of the {per}", c.share_of_chunk, "-"),
        ("budget needed to reach one checkpoint", c.min_budget_to_reach, "-")])


def failures_section(p: PlanResult) -> list[RenderableType]:
    f = p.failures
    if f is None:
        return []
    table = Table(title="failure ledger: GPU time one kill costs", title_justify="left")
    for col in ("kill point", "how", "without ckpts", "with ckpts", "ratio",
                "of quota (without)", "of quota (with)"):
        table.add_column(col, overflow="fold")
    for r in f.rows:
        table.add_row(r.point, r.how, fmt(r.without) if r.without else "n/a", fmt(r.with_),
                      fmt(r.ratio), fmt(r.share_of_quota_without), fmt(r.share_of_quota_with))
    out: list[RenderableType] = [table]
    d = f.daly
    if d is not None:
        out.append(_kv("with a mean time between failures (Young 1974, Daly 2006)", [
            ("mean time between failures M", d.mtbf_seconds, "-"),
            ("checkpoint write d", d.write_seconds, "-"), ("restart R", d.restart_seconds, "-"),
            ("Young: sqrt(2 d M)", d.young_interval_seconds, "-"),
            ("Daly eq. 37 interval", d.daly_interval_seconds, "-"),
            ("expected waste at Daly's interval", d.daly_waste, "-"),
            ("expected loss per failure at Daly's", d.daly_loss_per_failure_seconds, "-"),
            ("overhead-budget interval", d.budget_interval_seconds, "-"),
            ("expected waste at the budget interval", d.budget_waste, "-"),
            ("expected loss per failure at the budget's", d.budget_loss_per_failure_seconds, "-")]))
    return out


def disk_section(p: PlanResult) -> Table | None:
    d = p.disk
    if d is None:
        return None
    table = _kv("disk", [
        ("disk", d.disk_bytes, "unknown"), ("checkpoint", d.checkpoint_bytes, "-"),
        ("copies that fit", d.copies_fit, "-"), ("live copies kept", d.live_copies, "-"),
        ("steady share (live copies)", d.steady_share, "-"),
        ("peak share (live + the one being written)", d.peak_share, "-")])
    table.caption = f"fits: {_yes(d.fits)}"
    return table


def _lines(title: str, items, style: str) -> list[RenderableType]:
    if not items:
        return []
    return [Text(title, style="bold")] + [Text(f"  - {x}", style=style) for x in items]


def render_plan(p: PlanResult) -> Group:
    head = f"afford plan: {p.certificate_device} on platform {p.platform}"
    if p.platform_device:
        head += f" ({p.platform_device})"
    parts: list[RenderableType] = [Text(head, style="bold")]
    parts += _lines("notes", p.notes, "yellow")
    parts += chunk_section(p) + [memory_section(p), chunk_table(p.rows)]
    for section in (run_section(p), quota_section(p), target_section(p), cadence_section(p)):
        if section is not None:
            parts.append(section)
    parts += failures_section(p)
    if disk_section(p) is not None:
        parts.append(disk_section(p))
    parts += _lines("assumed (not measured here)", p.assumptions, "yellow")
    parts.append(Text(LEGEND + "; ? provisional (data not pinned)", style="dim"))
    return Group(*parts)


def render_verdict(v: Verdict) -> Group:
    p = v.plan
    word = Text("GO" if v.go else "NO-GO", style="bold green" if v.go else "bold red")
    head = Text.assemble(word, f"  {p.run.name if p.run else ''} on {p.platform} "
                         f"(certificate: {p.certificate_device})")
    parts: list[RenderableType] = [head]
    parts += _lines("reasons", v.reasons, "red")
    parts += _lines("warnings", v.warnings, "yellow")
    row = next((r for r in p.rows if r.is_run), None)
    if row is not None:
        rows = [("step", row.step_seconds, "-"), ("steps per chunk", row.steps_per_chunk,
                                                   "no cap"),
                ("projected reserved", row.projected_reserved_bytes, "-"),
                ("of the budget", row.budget_share, "-"),
                ("startup", p.chunk.startup.total_seconds, "-"),
                ("margin covers startup", p.chunk.margin_covers, "-")]
        if p.cadence:
            rows.append(("save_every", p.cadence.save_every, "-"))
        if p.target:
            rows.append(("weeks to target", p.target.weeks, "out of reach"))
        if p.disk:
            rows.append(("disk at peak", p.disk.peak_share, "unknown"))
        parts.append(_kv("the run's figures (afford plan shows all of them)", rows))
    parts.append(Text(LEGEND + "; ? provisional (data not pinned)", style="dim"))
    return Group(*parts)
