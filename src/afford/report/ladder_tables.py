"""The scale ladder and the levers as terminal tables. Every number passes ``fmt``."""

from __future__ import annotations

from afford.core.provenance import SHARE, Tagged, fitted, module, require_tagged
from afford.core.units import format_count, format_duration
from afford.fit.time.verdicts import FIXED_SHARE_MAX
from afford.planning.lever_rows import LeverRow
from afford.planning.scale_ladder import Ladder, LadderRow
from afford.report.prose import prose
from afford.report.rich_table import Table
from afford.report.terminal import ABBREV, LEGEND, fmt


def yes_no(t: Tagged | None) -> str:
    """A tagged verdict as ``yes C`` / ``no A`` / ``?``."""
    if t is None:
        return "?"
    t = require_tagged(t, "verdict")
    return f"{'yes' if t.value else 'no'} {ABBREV[t.tag]}"


def _shape(r: LadderRow) -> str:
    if not r.shape:
        return "-"
    return "".join(f"{k}{v}" for k, v in r.shape.items() if k in ("d", "L", "H"))


def _error(r: LadderRow) -> str:
    """(a)'s stated error and, beyond the sizes fitted, the factor: ``±18% x4.9``."""
    if r.wall_a is None:
        return "-"
    err = f"±{fmt(r.wall_a_error)}" if r.wall_a_error is not None else "unchecked"
    return err + (f" x{r.beyond:.2g} beyond" if r.beyond else "")


def _mfu(r: LadderRow) -> str:
    if r.mfu_measured is None and r.mfu_datasheet is None:
        return "-"
    return f"{fmt(r.mfu_measured) if r.mfu_measured else '-'} / " \
        f"{fmt(r.mfu_datasheet) if r.mfu_datasheet else '-'}"


def ladder_table(lad: Ladder) -> Table:
    shape = f", batch x seq {lad.batch}x{lad.seq}" if lad.batch else ""
    family = "" if lad.workload == "tinylm" else f" for {lad.workload}"
    table = Table(title=f"scale ladder{family} on {lad.device} ({lad.mode}{shape}), budget "
                  f"{format_duration(lad.budget_seconds)}, {lad.ratio:g} tokens/param",
                  title_justify="left")
    mfu = any(r.mfu_measured or r.mfu_datasheet for r in lad.rows)
    for col in ("N", "shape", "tokens", "FLOPs", "step (a)", "(a) size law", "(a) error",
                "(b) roofline floor", "memory", "resident", "affordable", "loss (refit)"):
        table.add_column(col, overflow="fold")
    if mfu:
        table.add_column("MFU by (a): measured / datasheet peak", overflow="fold")
    for r in lad.rows:
        cells = [format_count(r.params), _shape(r), fmt(r.tokens), fmt(r.flops),
                 fmt(r.step) if r.step else "-", fmt(r.wall_a), _error(r), fmt(r.wall_b),
                 fmt(r.memory), yes_no(r.resident), yes_no(r.affordable), fmt(r.loss)]
        if mfu:
            cells.append(_mfu(r))
        table.add_row(*cells)
    table.caption = LEGEND + "; (a) and (b) are separate columns, never pooled"
    return table


def ladder_notes(lad: Ladder) -> list[str]:
    """The law, its checks, the reasons and the notes under the table (each said once)."""
    notes = [f"(a) law: {lad.law}" if lad.law else None,
             f"(a) from: {lad.law_how}" if lad.law_how else None,
             f"(a) checked: {lad.law_checks}" if lad.law_checks else None]
    for label, attr in (("(a)", "wall_a_note"), ("(b)", "wall_b_note"),
                        ("memory", "memory_note")):
        seen = dict.fromkeys(getattr(r, attr) for r in lad.rows if getattr(r, attr))
        notes.extend(f"{label}: {n}" for n in seen if "beyond the largest" not in n)
    notes.extend(f"{format_count(r.params)} shape {r.shape_note}" for r in lad.rows
                 if r.shape_note and r.shape_note != "given")
    notes.extend(f"{format_count(r.params)}: {r.reason}" for r in lad.rows if r.reason)
    if lad.finding:
        notes.append(f"phase split ({lad.premise}): {lad.finding}")
    return [n for n in notes if n]


def offload_table(lad: Ladder) -> Table | None:
    """The offload variant beside the ladder (optimizer state on the host)."""
    rows = [r for r in lad.rows if r.offload is not None]
    if not rows:
        return None
    table = Table(title="offload variant: optimizer state on the host (Ren et al. 2021)",
                  title_justify="left")
    for col in ("N", "device memory", "host memory", "link per step", "(a) + link",
                "resident", "affordable"):
        table.add_column(col, overflow="fold")
    for r in rows:
        o = r.offload
        table.add_row(format_count(r.params), fmt(o.device_memory), fmt(o.host_memory),
                      fmt(o.link_seconds_per_step), fmt(o.wall), yes_no(o.resident),
                      yes_no(o.affordable))
    notes = dict.fromkeys(r.offload.note for r in rows if r.offload.note)
    table.caption = LEGEND + "; " + "; ".join(notes)
    return table


def references_table(lad: Ladder) -> Table | None:
    """Cited throughput measured elsewhere: INHERITED, never pooled with this box's."""
    if not lad.references:
        return None
    table = Table(title="reference points measured elsewhere (INHERITED; not this box)",
                  title_justify="left")
    for col in ("N", "device", "mode", "tokens/s", f"wall at {lad.ratio:g} tokens/param"):
        table.add_column(col, overflow="fold")
    for f in lad.references:
        table.add_row(format_count(f.params), f.device, f.mode + (f" seq {f.seq}" if f.seq
                                                                  else ""),
                      fmt(f.tokens_per_second), fmt(f.wall))
    table.caption = LEGEND
    return table


def lever_figures_table(lad: Ladder) -> Table | None:
    if not lad.levers:
        return None
    table = Table(title="levers measured on this box (figures only; not applied above)",
                  title_justify="left")
    for col in ("workload", "lever", "speedup", "range"):
        table.add_column(col, overflow="fold")
    for f in lad.levers:
        table.add_row(f.workload, f.description, fmt(f.speedup),
                      f"{fmt(f.speedup_min)} .. {fmt(f.speedup_max)}")
    return table


def levers_table(rows: list[LeverRow], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "lever", "A", "B", "speedup", "range", "B step 0",
                "FLOP/s A -> B", "MFU A -> B"):
        table.add_column(col, overflow="fold")
    for r in rows:
        if r.not_executable is not None:
            table.add_row(r.workload, r.description, fmt(r.a_seconds), fmt(r.b_seconds),
                          "NOT EXECUTABLE", r.not_executable.reason, "", "", "")
            continue
        table.add_row(r.workload, r.description, fmt(r.a_seconds), fmt(r.b_seconds),
                      fmt(r.speedup), f"{fmt(r.speedup_min)} .. {fmt(r.speedup_max)}",
                      fmt(r.b_step0), f"{fmt(r.achieved_a)} -> {fmt(r.achieved_b)}",
                      f"{fmt(r.mfu_a)} -> {fmt(r.mfu_b)}")
    table.caption = LEGEND + "; speedup > 1: B (with the lever) is faster"
    return table


def stage_lines(sizes, levers) -> list[str]:
    """One line each for the sizes and levers sections after ``afford certify``."""
    out = []
    if sizes is not None:
        law = sizes.size_law or sizes.law
        text = fitted(law.describe(), "", "the size law fitted over the sizes measured") \
            if law else "no law (" + "; ".join(sizes.warnings) + ")"
        out.append(prose("sizes ({}, batch x seq {}x{}, {} sizes): {}; phase split: {}",
                         sizes.mode, str(sizes.batch), str(sizes.seq), str(len(sizes.sizes)),
                         text, sizes.premise))
    if levers is not None:
        done = [lv for run in levers.runs for lv in run.levers if lv.speedup is not None]
        left = sum(len(r.levers) for r in levers.runs) - len(done)
        out.append(f"levers: {len(done)} measured, {left} NOT EXECUTABLE "
                   "(the table: afford levers; the figures beside the ladder: afford ladder)")
    return out


def batch_lines(section) -> list[str]:
    """The batch ladder of each run: t = F + c tokens and the fixed share at batch x1."""
    out = []
    for run in section.runs:
        if run.batch_law is None or run.fixed_share is None:
            continue
        p = run.batch_law.params
        if run.fixed_share > FIXED_SHARE_MAX:  # a failed fit: never quoted as a fixed cost
            out.append(f"{run.workload} batch ladder: the fit t = F + c tokens failed (F / t "
                       "at batch x1 above 100%: the step did not grow with the batch beyond "
                       "its noise); no fixed cost is quoted")
            continue
        src = f"{run.workload} batch ladder: t = F + c tokens (fit_linear_floor)"
        share = module(run.fixed_share, SHARE, "F / t at batch x1 (fit_linear_floor)")
        out.append(prose("{} batch ladder: t = {} + {} x tokens (R^2 {}); fixed share at "
                         "batch x1 {}", run.workload, fitted(p["F"], "s", src),
                         fitted(p["c"], "s/token", src),
                         module(round(run.batch_law.r2, 4), "", src + ": R^2"), share))
    return out


def batch_table(rungs: list) -> Table | None:
    """The batch A/B per rung (the ladder note, item 4): step, tokens/s, the marginal gain
    over the previous rung and the memory each costs, so that whether a bigger batch buys
    speed or only gradient quality reads off the rows."""
    if not rungs:
        return None
    table = Table(title="batch A/B: each rung against the one before", title_justify="left")
    for col in ("workload", "batch", "step", "tokens/s", "gain over previous", "peak memory",
                "memory over previous"):
        table.add_column(col, overflow="fold")
    for r in rungs:
        batch = f"x{r.multiplier}" + (f" ({r.batch})" if r.batch else "")
        table.add_row(r.workload, batch, fmt(r.step), fmt(r.tokens_per_second),
                      fmt(r.gain) if r.gain else "-", fmt(r.memory) if r.memory else "-",
                      fmt(r.memory_ratio) if r.memory_ratio else "-")
    table.caption = LEGEND
    return table
