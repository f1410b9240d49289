"""Rendering of a plan and a preflight verdict. Renders, never computes: every number comes
from :mod:`afford.planning.result` and passes :func:`afford.report.terminal.fmt`.

Each part of a plan is first a :class:`Block` (a title and a :class:`~afford.report.model.Table`
of labels and tagged figures), then drawn: :func:`render_plan` draws the blocks with Rich for
the terminal, :func:`plan_sections` hands the same blocks to the Markdown / HTML report, so the
two show the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.text import Text

from afford.core.provenance import Tagged
from afford.planning.result import ChunkRow, PlanResult, Verdict
from afford.report.cells import cell_text
from afford.report.model import Cell, Section, Table
from afford.report.rich_table import Table as RichTable
from afford.report.terminal import LEGEND, fmt

WRONG = "WRONG"


@dataclass(frozen=True)
class Block:
    """One table of a plan before a format is chosen. ``wrong``: rows shown as wrong (red in
    the terminal; their label says WRONG in every format); ``alarm``: a line shown after it."""

    title: str
    table: Table
    wrong: frozenset[int] = frozenset()
    alarm: str = ""
    right: tuple[str, ...] = ()   # columns right-justified in the terminal


def _v(t: Tagged | None, none: str = "-") -> Cell:
    """The figure, or ``none`` (text) where it holds no value."""
    if t is not None and t.value is None:
        return none
    return t


def _kv(title: str, rows: list[tuple[str, Tagged | None, str]]) -> Block:
    """A figure / value / where-it-comes-from block."""
    body = tuple((label, _v(t, none), t.source if t is not None else "") for label, t, none in rows)
    wrong = frozenset(n for n, (label, _, _) in enumerate(rows) if WRONG in label)
    return Block(title, Table(("figure", "value", "from"), body), wrong, right=("value",))


def _gpu(t: Tagged | None) -> Tagged | None:
    """Seconds billed against a quota, shown as the quota is written: GPU-hours."""
    return t.model_copy(update={"unit": "GPU-s"}) if t is not None and t.unit == "s" else t


def _yes(b: bool | None) -> str:
    return {True: "yes", False: "NO", None: "?"}[b]


FITS_CELL = {"yes": "yes", "likely": "likely*", "uncertain": "UNCERTAIN", "no": "NO"}


def fits_cell(r: ChunkRow) -> str:
    """The memory answer's verdict: ``likely*`` and ``UNCERTAIN`` where the figure is
    extrapolated (afford.figures.memory_at)."""
    return FITS_CELL[r.fits_level] if r.fits_level else _yes(r.fits)


def _na(t: Tagged | None) -> Cell:
    return t if t is not None else "n/a"


def chunk_blocks(p: PlanResult) -> list[Block]:
    c = p.chunk
    no_cap = c.cap_seconds.value is None
    rows = [("session cap", c.cap_seconds, "none"),
            ("margin", None if no_cap else c.margin_seconds, "-"),
            ("chunk = cap - margin", c.chunk_seconds, "no cap: one session"),
            ("startup total", c.startup.total_seconds, "-"),
            ("of it measured here", c.startup.measured_seconds, "nothing measured"),
            ("restart (startup before step 1)", c.startup.restart_seconds, "-"),
            ("margin covers startup", c.margin_covers, "-")]
    comps = Table(("component", "what", "seconds", "from"), tuple(
        (s.name, s.what, s.seconds, s.seconds.source) for s in c.startup.components))
    alarm = "the margin does NOT cover the startup" if c.covered is False else ""
    return [_kv("chunk and margin", rows), Block("startup components", comps, alarm=alarm)]


def memory_block(p: PlanResult) -> Block:
    m = p.memory
    return _kv("memory budget (against reserved memory)", [
        ("device memory", m.device_memory_bytes, "-"), ("budget fraction", m.fraction, "-"),
        ("budget", m.budget_bytes, "-")])


CHUNK_COLUMNS = ("workload", "mode", "value", "step", "steps/chunk", "steps/h", "allocated",
                 "proj. reserved", "of budget", "fits", "note")


def chunk_table(rows: tuple[ChunkRow, ...]) -> Block:
    body: list[tuple[Cell, ...]] = []
    excluded: list[str] = []
    for r in rows:
        notes = [r.note] if r.note else []
        if r.excluded:
            excluded.append(f"({len(excluded) + 1}) {r.workload} {r.sweep_param}={r.value}: "
                            f"{r.excluded}")
            notes.append(f"excluded ({len(excluded)})")
        body.append((f"{r.workload} (run)" if r.is_run else r.workload, r.mode,
                     f"{r.sweep_param}={r.value}", r.step_seconds, _v(r.steps_per_chunk),
                     r.steps_per_hour, r.allocated_bytes, r.projected_reserved_bytes,
                     r.budget_share, fits_cell(r), "; ".join(notes)))
    right = tuple(c for c in CHUNK_COLUMNS if c not in ("workload", "mode", "note"))
    return Block("chunk table", Table(CHUNK_COLUMNS, tuple(body), "\n".join(excluded)),
                 right=right)


def run_block(p: PlanResult) -> Block | None:
    if p.run is None:
        return None
    row = next(r for r in p.rows if r.is_run)
    shape = ", ".join(f"{k}={v}" for k, v in p.run.shape.items())
    rows = [("warm step", row.step_seconds, p.run.step_why or "-"),
            ("tokens per step", p.run.tokens_per_step, "-"),
            ("tokens per chunk", row.tokens_per_chunk, "-")]
    if row.params is not None:  # not counted at a shape no point measured: no empty row
        rows.append(("parameters", row.params, "-"))
    return _kv(f"run {p.run.name}: {p.run.workload} {p.run.mode} ({shape})", rows)


def quota_block(p: PlanResult) -> Block | None:
    q = p.quota
    if q is None:
        return None
    return _kv("weekly quota (startup charged per chunk)", [
        ("weekly quota", _gpu(q.quota_seconds), "-"),
        (f"naive: quota / chunk ({WRONG}: charges nothing for startup)", q.naive_chunks, "-"),
        (f"naive steps a week ({WRONG})", q.naive_steps, "-"),
        ("billed per chunk = chunk + startup", _gpu(q.billed_seconds_per_chunk), "-"),
        ("whole chunks a week", q.whole_chunks, "-"),
        ("remainder", _gpu(q.remainder_seconds), "-"),
        ("trainable remainder (less one startup)", _gpu(q.trainable_remainder_seconds), "-"),
        ("steps a week", q.steps_per_week, "-"), ("tokens a week", q.tokens_per_week, "-")])


def target_block(p: PlanResult) -> Block | None:
    t = p.target
    if t is None:
        return None
    return _kv(f"to the target ({t.limited_by})", [
        ("target steps", t.target_steps, "-"), ("target tokens", t.target_tokens, "-"),
        ("sessions", t.sessions, "-"), ("GPU time billed", _gpu(t.gpu_seconds), "-"),
        ("weeks", t.weeks, "out of reach")])


def cadence_block(p: PlanResult) -> Block | None:
    c = p.cadence
    if c is None:
        return None
    per = "chunk" if p.chunk.chunk_seconds is not None else "run"
    return _kv("checkpoint cadence", [
        ("checkpoint write", c.write_seconds, "-"), ("overhead budget", c.overhead_budget, "-"),
        ("save_every", c.save_every, "-"), ("interval = save_every x step + write",
                                            c.interval_seconds, "-"),
        *([("write share = write / (save_every x step)", c.overhead_share, "-")]
          if c.share_of_chunk is None else []),
        (f"writes per {per}", c.writes_per_chunk, "-"),
        (f"write time per {per}", c.write_seconds_per_chunk, "-"),
        (f"write share = write seconds / {per}", c.share_of_chunk, "-"),
        ("budget needed to reach one checkpoint", c.min_budget_to_reach, "-")])


def failures_blocks(p: PlanResult) -> list[Block]:
    f = p.failures
    if f is None:
        return []
    body = tuple((r.point, r.how, _na(r.worst_without), _na(r.worst_with), r.worst_ratio,
                  _na(r.expected_without), _na(r.expected_with),
                  r.restart if r.restart else "in the loss") for r in f.rows)
    caption = ("worst: the COSTS file's figure (a kill at the worst moment); expected: a "
               "kill at a uniform moment; a kill costs loss + restart")
    if f.worth is not None:
        w = f.worth
        caption += (f"\nperiodic checkpoints are worth {fmt(w.ratio)} on a worst mid-chunk "
                    f"kill, {fmt(w.saved_seconds)} per kill"
                    + (f", {fmt(w.saved_share_of_quota)} of the weekly quota"
                       if w.saved_share_of_quota else ""))
    out = [Block("failure ledger: work one kill loses since the last durable save (restart "
                 "apart)", Table(("kill point", "how", "worst without", "worst with",
                                  "worst ratio", "expected without", "expected with",
                                  "restart"), body, caption))]
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


def disk_block(p: PlanResult) -> Block | None:
    d = p.disk
    if d is None:
        return None
    b = _kv("disk", [
        ("disk", d.disk_bytes, "unknown"), ("checkpoint", d.checkpoint_bytes, "-"),
        ("copies that fit", d.copies_fit, "-"), ("live copies kept", d.live_copies, "-"),
        ("steady share (live copies)", d.steady_share, "-"),
        ("peak share (live + the one being written)", d.peak_share, "-")])
    t = b.table
    return Block(b.title, Table(t.columns, t.rows, f"fits: {_yes(d.fits)}"), b.wrong,
                 right=b.right)


def plan_blocks(p: PlanResult) -> list[Block]:
    """Every table of a plan, in the order the terminal shows them."""
    out = chunk_blocks(p) + [memory_block(p), chunk_table(p.rows)]
    out += [b for b in (run_block(p), quota_block(p), target_block(p), cadence_block(p))
            if b is not None]
    out += failures_blocks(p)
    disk = disk_block(p)
    return out + ([disk] if disk is not None else [])


def rich_table(b: Block) -> RichTable:
    """A block drawn for the terminal: ``from`` dim, WRONG rows red."""
    table = RichTable(title=Text(b.title), title_justify="left", caption_justify="left")
    for i, col in enumerate(b.table.columns):
        right = col in b.right or _figures(row[i] for row in b.table.rows)
        table.add_column(col, justify="right" if right else "left", no_wrap=right,
                         overflow="fold", style="dim" if col == "from" else None)
    for n, row in enumerate(b.table.rows):
        table.add_row(*(Text(_cell(c, col, b.title)) for c, col in zip(row, b.table.columns)),
                      style="red" if n in b.wrong else None)
    if b.table.caption:
        table.caption = Text(b.table.caption)
    return table


def _cell(c: Cell, col: str, title: str) -> str:
    """A cell's text; a figure under a header that names its unit (``steps/h``,
    ``tokens/s``) without the unit again (``19906 C``, not ``19906 steps/h C``)."""
    text = cell_text(c, f"{title}: {col}")
    if isinstance(c, Tagged) and c.unit and col == c.unit:
        return text.replace(f" {c.unit} ", " ", 1)
    return text


def _figures(cells) -> bool:
    """A column of figures (every cell tagged, or empty): kept whole, never wrapped."""
    cells = [c for c in cells if c not in (None, "", "-")]
    return bool(cells) and all(isinstance(c, Tagged) for c in cells)


def draw(blocks: list[Block]) -> list[RenderableType]:
    out: list[RenderableType] = []
    for b in blocks:
        out.append(rich_table(b))
        if b.alarm:
            out.append(Text(b.alarm, style="bold red"))
    return out


def plan_sections(p: PlanResult) -> tuple[Section, ...]:
    """The plan's blocks as report sections (Markdown, HTML): the terminal's tables."""
    return tuple(Section(b.title, notes=(b.alarm,) if b.alarm else (), tables=(b.table,))
                 for b in plan_blocks(p))


def titled_lines(title: str, items, style: str) -> list[RenderableType]:
    if not items:
        return []
    return [Text(title, style="bold")] + [Text(f"  - {x}", style=style) for x in items]


def noisy_line(p: PlanResult) -> str:
    """The NOISY warning a plan opens with (or the UNJUDGED note); empty when the step
    times are judged and not NOISY."""
    if p.time_verdict == "UNJUDGED":
        return ("NOTE: the certificate's step-time model was judged at no held-out shape: "
                + "; ".join(p.noisy) + ". The times below are its predictions, unchecked")
    if p.time_verdict == "MISSED":
        return missed_line(p.noisy)
    if p.time_verdict != "NOISY":
        return ""
    rule = f" (rule: {p.noisy_rule})" if p.noisy_rule else ""
    return ("WARNING: the certificate's step times are NOISY: " + "; ".join(p.noisy) + rule
            + ". Every time below rests on them; afford preflight checks the decision at "
            "the slow end of their spread too (NO-GO where it flips, unless --accept-noisy)")


#: lines of what matters for the answer, under it (the rest: -v, and the JSON)
MATTERS = 3


def noisy_brief(time_verdict: str | None, noisy: tuple[str, ...]) -> str:
    """The NOISY, MISSED or UNJUDGED verdict in one line under an answer: the first reason
    and how many more (``-v`` lists them); empty when the step times are judged and hold."""
    if time_verdict not in ("NOISY", "MISSED", "UNJUDGED") or not noisy:
        return ""
    more = f" and {len(noisy) - 1} more (-v lists them)" if len(noisy) > 1 else ""
    if time_verdict == "UNJUDGED":
        return f"the step-time model is unchecked: {noisy[0]}{more}"
    if time_verdict == "MISSED":
        return (f"the step-time model missed a held-out shape beyond its tolerance (its "
                f"error, reproduced): {noisy[0]}{more}")
    return f"the certificate's step times are NOISY: {noisy[0]}{more}"


def matters(lines: list[str], hidden: int = 0) -> list[RenderableType]:
    """At most :data:`MATTERS` lines of what matters for the answer, under it: the first
    lines as given, then, where more were left out (and ``hidden`` more, such as the
    certificate's warnings about figures the answer did not use), one line saying how many
    and where they are (``-v``, and the JSON)."""
    lines = [x for x in lines if x]
    left = len(lines) + hidden
    shown = lines if left <= MATTERS else lines[:MATTERS - 1]
    out: list[RenderableType] = [Text(f"  - {x}", style="yellow") for x in shown]
    if left > len(shown):
        out.append(Text(f"  - {left - len(shown)} more warning(s) and note(s): -v prints "
                        "them, --json holds them", style="dim"))
    return out


def missed_line(reasons) -> str:
    """The verdict MISSED in one line: each held-out shape the model missed, with its error."""
    return ("NOTE: the step-time model missed held-out shape(s) beyond its tolerance, "
            "reproduced on re-measurement (the model's error, not noise): "
            + "; ".join(reasons) + ". Times near those shapes carry that error")


def warning_notes(p: PlanResult) -> tuple[str, ...]:
    """The NOISY warning and the certificate's warnings, as report notes."""
    line = noisy_line(p)
    return ((line,) if line else ()) + tuple(f"Certificate warning: {w}"
                                             for w in p.certificate_warnings)


def render_plan(p: PlanResult, verbose: bool = False) -> Group:
    """The plan: its answer first (the run's figures; without a run, the chunk table), at
    most three lines of what matters, then every table with where each figure came from.
    ``verbose``: every warning and note in full, before the tables."""
    head = f"afford plan: {p.certificate_device} on platform {p.platform}"
    if p.platform_device:
        head += f" ({p.platform_device})"
    parts: list[RenderableType] = [Text(head, style="bold")]
    answer = run_figures_block(p) or chunk_table(p.rows)
    parts += draw([answer])
    if verbose:
        if noisy_line(p):
            parts.append(Text(noisy_line(p), style="bold red"))
        parts += titled_lines("certificate warnings", p.certificate_warnings, "yellow")
        parts += titled_lines("notes", p.notes, "yellow")
    else:
        parts += matters([noisy_brief(p.time_verdict, p.noisy), *p.notes],
                         hidden=len(p.certificate_warnings))
    parts += draw([b for b in plan_blocks(p) if b.title != answer.title])
    parts += titled_lines("assumed (not measured here)", p.assumptions, "yellow")
    parts.append(Text(LEGEND + "; ? provisional (data not pinned)", style="dim"))
    return Group(*parts)


def run_figures_block(p: PlanResult, title: str = "the run's figures") -> Block | None:
    """The run's figures in one table (step, steps per chunk, memory, startup, cadence,
    weeks to the target, disk), each with where it came from; None without a run."""
    row = next((r for r in p.rows if r.is_run), None)
    if row is None:
        return None
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
    return _kv(title, rows)


def verdict_warnings(v: Verdict) -> tuple[list[str], int]:
    """(the warnings that matter for the decision, how many others): the NOISY spread and
    the run's own caveats first; the fallbacks the plan assumed (its figures' sources say
    so) and the certificate's warnings about figures the decision did not use after."""
    later = ("assumed: ", "certificate: ")
    first = [w for w in v.warnings if not w.startswith(later)]
    return first, len(v.warnings) - len(first)


def render_verdict(v: Verdict, verbose: bool = False) -> Group:
    """GO or NO-GO and every reason (the answer), at most three lines of the warnings that
    matter (``verbose``: every warning), then the run's figures with their sources."""
    p = v.plan
    word = Text("GO" if v.go else "NO-GO", style="bold green" if v.go else "bold red")
    head = Text.assemble(word, f"  {p.run.name if p.run else ''} on {p.platform} "
                         f"(certificate: {p.certificate_device})")
    parts: list[RenderableType] = [head]
    parts += titled_lines("reasons", v.reasons, "red")
    if verbose:
        parts += titled_lines("warnings", v.warnings, "yellow")
    elif v.warnings:
        first, hidden = verdict_warnings(v)
        parts += [Text("warnings", style="bold")] + matters(first, hidden)
    block = run_figures_block(p, "the run's figures (afford plan shows all of them)")
    if block is not None:
        parts += draw([block])
    parts.append(Text(LEGEND + "; ? provisional (data not pinned)", style="dim"))
    return Group(*parts)
