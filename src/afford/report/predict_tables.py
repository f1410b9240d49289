"""``afford predict`` in the terminal: one row per workload at the asked (batch, seq), then
where each step time comes from (the model's form and held-out error, or the measured point).
Renders :class:`afford.planning.prediction.PredictResult`; computes nothing."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from afford.planning.prediction import PredictResult
from afford.report.model import Table
from afford.report.plan_tables import (
    Block,
    draw,
    fits_cell,
    matters,
    missed_line,
    noisy_brief,
    titled_lines,
)
from afford.report.terminal import LEGEND, fmt

COLUMNS = ("workload", "mode", "shape", "step", "tokens/s", "steps/chunk", "steps/h",
           "allocated", "proj. reserved", "of budget", "fits")


def predict_blocks(p: PredictResult) -> list[Block]:
    body, sources = [], []
    for x in p.rows:
        shape = ", ".join(f"{k}={v}" for k, v in x.shape.items()) or "-"
        r = x.row
        if r is None:
            body.append((x.workload, x.mode, shape, x.step_why, "-", "-", "-", "-", "-", "-",
                         "?"))
            continue
        body.append((x.workload, x.mode, shape, r.step_seconds if r.step_seconds else "-",
                     x.tokens_per_second, r.steps_per_chunk, r.steps_per_hour,
                     r.allocated_bytes, r.projected_reserved_bytes, r.budget_share,
                     fits_cell(r)))
        sources.append((f"{x.workload} ({x.mode})", "step",
                        r.step_seconds.source if r.step_seconds else x.step_why))
        sources += memory_sources(f"{x.workload} ({x.mode})", x.memory, x.memory_why)
    right = tuple(c for c in COLUMNS if c not in ("workload", "mode", "shape", "fits"))
    title = f"predicted at batch {p.batch}, seq {p.seq}" + \
        (f" on platform {p.platform}" if p.platform else "")
    return [Block(title, Table(COLUMNS, tuple(body)), right=right),
            Block("where each figure comes from", Table(("workload", "figure", "from"),
                                                         tuple(sources)))]


def memory_sources(who: str, m, why: str) -> list[tuple[str, str, str]]:
    """Where the memory figure comes from: its source, the other model where the two
    disagree, why it is extrapolated and what would settle it."""
    if m is None:
        return [(who, "memory", why)]
    out = [(who, "memory", f"{m.why}; {m.figure.source}")]
    if m.other is not None:
        out.append((who, "memory, other model", f"{fmt(m.other)}: {m.other.source}"))
    if m.extrapolated:
        out.append((who, "memory extrapolated", "; ".join(m.reasons)))
    if m.fits is not None and m.fits != "yes":
        out.append((who, f"fits: {m.fits}", m.fits_why + (f"; settle it: {m.settle}"
                                                          if m.settle else "")))
    return out


def render_predict(p: PredictResult, verbose: bool = False) -> Group:
    """The prediction first, then at most three lines of what matters for it (the NOISY,
    MISSED or UNJUDGED verdict in one line, the notes), then where each figure comes from;
    ``verbose``: the verdict's every reason and the certificate's every warning in full,
    before the sources."""
    parts: list[RenderableType] = [Text(f"afford predict: {p.certificate_device}",
                                        style="bold")]
    answer, sources = predict_blocks(p)
    parts += draw([answer])
    if verbose:
        if p.time_verdict == "MISSED":
            parts.append(Text(missed_line(p.noisy), style="yellow"))
        if p.time_verdict == "UNJUDGED":
            parts.append(Text("NOTE: the step-time model was judged at no held-out shape: "
                              + "; ".join(p.noisy) + ". These times are unchecked",
                              style="yellow"))
        if p.time_verdict == "NOISY":
            rule = f" (rule: {p.noisy_rule})" if p.noisy_rule else ""
            parts.append(Text("WARNING: the certificate's step times are NOISY: "
                              + "; ".join(p.noisy) + rule, style="bold red"))
        parts += titled_lines("certificate warnings", p.certificate_warnings, "yellow")
        parts += titled_lines("notes", p.notes, "yellow")
    else:
        parts += matters([noisy_brief(p.time_verdict, p.noisy), *p.notes],
                         hidden=len(p.certificate_warnings))
    parts += draw([sources])
    parts += titled_lines("assumed (not measured here)", p.assumptions, "yellow")
    parts.append(Text(LEGEND, style="dim"))
    return Group(*parts)
