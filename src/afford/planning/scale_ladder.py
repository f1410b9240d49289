"""The scale ladder: which model sizes this box can train in a budget (pure; docs/DESIGN.md
section 4, and the ladder note).

For each parameter count N (a rung; its shape given as ``1B:d2048L16`` or chosen at the
family's measured aspect, :mod:`afford.planning.ladder_steps`):

- tokens D = r x N, r = 20 by default (Hoffmann et al. 2022, Chinchilla);
- FLOPs = 6 N D (Kaplan et al. 2020, section 2.1), plus the attention term 12 L H Q T per
  token (PaLM, Chowdhery et al. 2022, appendix B; H Q = d) at the rung's shape;
- wall clock (a): D / tokens per step x the step the size law predicts at the rung
  (:mod:`afford.fit.time.size_law`: ``max(host, device + gap)``, each device coefficient
  bounded by the measured GEMM rate and bandwidth), FITTED, extrapolated beyond the sizes
  fitted and tagged so, with the law's stated error beside it (leave-one-out within the
  sizes, the largest size held out beyond them) and the factor beyond;
- wall clock (b): the roofline floor, FLOPs / the *measured* GEMM rate of the dtype (MODULE).
  Never a datasheet rate: without a measured rate the column is empty, with the reason.
  (a) and (b) are two fields and are never pooled into one number;
- memory: the reserved bytes every command reads at the rung's shape and parameters
  (:func:`afford.figures.memory_figures.memory_answer`: the memory law, or the allocator
  replay where it answers), else model states only at 16 B/param (ZeRO), tagged ASSUMED;
- affordable: yes, no, or unknown with the one reason: not resident; or over the budget by
  (a); or within it by (a); or, without (a), ruled out when even the floor (b) is over the
  budget, else unknown with what (a) lacks. Where (a) is below the floor (b) by more than
  the law's stated error, the two disagree (the note's "internal inconsistency worth
  naming": (a) would need more than the measured GEMM rate): the row names it and believes
  (b), a lower bound;
- MFU by (a) against the measured GEMM rate and the datasheet peak, shown only where it is a
  share of a whole (at most 100 %);
- the loss the Besiroglu et al. 2024 refit predicts at (N, D) (optional context);
- the offload variant (Ren et al. 2021, ZeRO-Offload; the note gates 1B on it): the
  optimizer's state on the host. Device memory drops by the state moved (the memory law's
  accounting: AdamW's two fp32 moments, 8 B/param; ZeRO's: all but fp16 weights and
  gradients, 4 B/param left); each step the gradients cross the link down and the updated
  weights come back up (8 / 4 B/param), priced with the host link bandwidth *measured* by the
  probes in each direction and added to (a) as a serial upper bound (frameworks overlap
  part of it). The host's own optimizer step is not timed here, and the row says so.

Levers measured on this box and reference points measured elsewhere are listed beside the
ladder (:mod:`afford.planning.ladder_beside`); they never change a column.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from afford.core.errors import InputError
from afford.core.provenance import SHARE, Tag, Tagged, assumed, fitted, module
from afford.core.published_constants import MEMORY_FRACTION, ScalingConstants, check_fraction
from afford.core.units import format_count, format_duration
from afford.figures import memory_figures, probes_figures
from afford.planning.ladder_beside import (
    LeverFigure,
    ReferenceFigure,
    lever_figures,
    reference_figures,
)
from afford.planning.ladder_steps import (
    DEFAULT_FAMILY,
    Ceilings,
    Entry,
    RungStep,
    StepSource,
    ceilings,
    gemm_dtype,
    law_checks,
    row_shape,
    rung_shape,
    rung_step,
    shape_note,
    step_source,
)
from afford.schema.cert import Certificate

LADDER_SCHEMA = "afford.ladder/1"
DEFAULT_PARAMS = "7.5M,20M,124M,1B"


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class OffloadRow(_Frozen):
    """The offload variant of one ladder row."""

    device_memory: Tagged
    host_memory: Tagged
    link_seconds_per_step: Tagged | None = None
    wall: Tagged | None = None
    resident: Tagged | None = None
    affordable: Tagged | None = None
    reason: str = ""
    note: str = ""


class LadderRow(_Frozen):
    params: float
    shape: dict[str, int] | None = None
    shape_note: str = Field("", description="how the shape was had: given, or chosen")
    tokens: Tagged
    flops_6nd: Tagged
    flops_attention: Tagged | None = None
    flops: Tagged
    step: Tagged | None = Field(None, description="(a)'s warm step at the rung's shape")
    wall_a: Tagged | None = None
    wall_a_error: Tagged | None = Field(None, description="the size law's stated error here")
    beyond: float | None = Field(None, description="N over the largest size fitted, beyond")
    wall_a_note: str = ""
    wall_b: Tagged | None = None
    wall_b_note: str = ""
    memory: Tagged
    memory_note: str = ""
    resident: Tagged | None = None
    affordable: Tagged | None = None
    reason: str = ""
    inconsistency: str = Field("", description="(a) below the floor (b) beyond the law's "
                               "error: named, and (b) believed")
    mfu_measured: Tagged | None = None
    mfu_datasheet: Tagged | None = None
    loss: Tagged | None = None
    offload: OffloadRow | None = None


class Ladder(_Frozen):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", populate_by_name=True)

    schema_id: str = Field(LADDER_SCHEMA, alias="schema")
    device: str
    mode: str
    workload: str = DEFAULT_FAMILY
    budget_seconds: float
    ratio: float
    law: str | None = None
    law_how: str = ""
    law_checks: str = ""
    law_range: tuple[float, float] | None = None
    batch: int | None = None
    seq: int | None = None
    memory_budget: Tagged | None = None
    premise: str = "untested"
    finding: str = ""
    rows: list[LadderRow]
    levers: list[LeverFigure] = []
    references: list[ReferenceFigure] = []
    warnings: list[str] = []


@dataclass(frozen=True)
class _Context:
    """What every row reads: the step source, the rates and the memory budget."""

    cert: Certificate
    src: StepSource
    mode: str
    budget_seconds: float
    ratio: float
    constants: ScalingConstants
    ceil: Ceilings
    rate: Tagged | None
    rate_note: str
    peak: Tagged | None
    memory_budget: Tagged | None
    link: tuple[Tagged, Tagged] | None = None


def default_mode(cert: Certificate, workload: str | None = None) -> str:
    if workload not in (None, DEFAULT_FAMILY):
        modes = [r.mode for r in cert.workloads if r.name.partition("@")[0] == workload
                 or r.name == workload]
        if modes:
            return modes[0]
    if cert.sizes is not None:
        return cert.sizes.mode
    return cert.workloads[0].mode if cert.workloads else "fp32"


def build_ladder(cert: Certificate, entries: list[Entry], *, budget_seconds: float,
                 constants: ScalingConstants, ratio: float | None = None,
                 mode: str | None = None, memory_fraction: float = MEMORY_FRACTION,
                 workload: str | None = None) -> Ladder:
    """The ladder for ``entries`` from ``cert`` (``workload``: the family, default tinylm's
    sizes): two wall-clock columns, never pooled."""
    if budget_seconds <= 0:
        raise InputError("--budget must be a positive duration, e.g. 7d")
    check_fraction(memory_fraction, "--memory-fraction")
    r = constants.tokens_per_param if ratio is None else ratio
    if r <= 0:
        raise InputError("--ratio must be a positive number of tokens per parameter")
    mode = mode or default_mode(cert, workload)
    ctx = _context(cert, workload, mode, budget_seconds, r, constants, memory_fraction)
    rows = [ladder_row(ctx, e) for e in entries]
    src, s = ctx.src, cert.sizes
    law = src.law
    return Ladder(device=cert.environment.device_name, mode=mode, workload=src.workload,
                  budget_seconds=budget_seconds, ratio=r, law=law.describe() if law else None,
                  law_how=src.how, law_checks=law_checks(src), batch=src.batch, seq=src.seq,
                  law_range=law.params_range if law else None,
                  memory_budget=ctx.memory_budget,
                  premise=s.premise if s else "untested", finding=s.finding if s else "",
                  rows=rows, levers=lever_figures(cert),
                  references=reference_figures(constants, r, [e.params for e in entries]),
                  warnings=_warnings(ctx, rows))


def _context(cert: Certificate, workload: str | None, mode: str, budget: float, ratio: float,
             constants: ScalingConstants, fraction: float) -> _Context:
    dtype = gemm_dtype(cert, mode)
    ceil, rate, note = ceilings(cert, workload, mode, constants)
    mem = cert.environment.device_memory_bytes
    what = "host memory" if cert.environment.device_type == "cpu" else "device memory"
    budget_b = module(fraction * mem, "B", f"{fraction:.2f} x {what} "
                      f"({mem} B, measured on {cert.environment.device_name})") if mem else None
    return _Context(cert=cert, src=step_source(cert, workload, mode, ceil), mode=mode,
                    budget_seconds=budget, ratio=ratio, constants=constants, ceil=ceil,
                    rate=rate, rate_note=note, peak=probes_figures.datasheet_peak(cert, dtype),
                    memory_budget=budget_b, link=probes_figures.host_link(cert))


def ladder_row(ctx: _Context, e: Entry) -> LadderRow:
    n = e.params
    d_tokens = ctx.ratio * n
    tokens = module(d_tokens, "tokens", f"{ctx.ratio:g} tokens/param x N "
                    f"({ctx.constants.tokens_per_param_citation.split(',')[0]})")
    f6 = module(6.0 * n * d_tokens, "FLOP", "6 N D (Kaplan et al. 2020, section 2.1)")
    shape = rung_shape(ctx.src, e)
    attn, attn_note = attention_flops(shape, ctx.src.seq, d_tokens)
    total = module(f6.value + (attn.value if attn else 0.0), "FLOP",
                   "6 N D + 12 L d T D (PaLM appendix B)" if attn else "6 N D (attention "
                   f"term omitted: {attn_note})")
    got = rung_step(ctx.src, e, ctx.ceil.bytes_per_param, ctx.cert.environment.device_name)
    wall_a, note_a = wall_clock_law(ctx, got, d_tokens)
    wall_b, note_b = wall_clock_floor(ctx, total)
    memory, mem_note = memory_bytes(ctx, e, shape)
    resident = _resident(ctx, memory)
    error = got.error if got else None
    ok, reason = affordable(ctx, wall_a, wall_b, memory, resident, error)
    return LadderRow(params=n, shape=row_shape(shape, ctx.src),
                     shape_note=shape_note(ctx.src, e, shape),
                     tokens=tokens, flops_6nd=f6, flops_attention=attn, flops=total,
                     step=got.seconds if got else None, wall_a=wall_a,
                     wall_a_error=got.error if got else None, beyond=got.beyond if got else None,
                     wall_a_note=note_a, wall_b=wall_b, wall_b_note=note_b, memory=memory,
                     memory_note=mem_note, resident=resident, affordable=ok, reason=reason,
                     inconsistency=disagreement(wall_a, wall_b, error),
                     mfu_measured=_mfu(total, wall_a, ctx.rate, "measured GEMM rate"),
                     mfu_datasheet=_mfu(total, wall_a, ctx.peak, "datasheet peak"),
                     loss=predicted_loss(ctx.constants, n, d_tokens),
                     offload=offload_row(ctx, n, d_tokens, memory, wall_a, wall_b, error))


def offload_row(ctx: _Context, n: float, d_tokens: float, memory: Tagged,
                wall_a: Tagged | None, wall_b: Tagged | None, error: Tagged | None = None
                ) -> OffloadRow | None:
    """The row with the optimizer's state on the host (Ren et al. 2021); ``None`` without
    the constants. Memory from the row's own figure, less the state moved; the link time per
    step from the measured host link, added to (a) serially (an upper bound)."""
    c = ctx.constants.offload
    if c is None:
        return None
    if memory.tag is Tag.ASSUMED:  # ZeRO's 16 B/param accounting
        kept, link_bytes = c.zero_device_bytes_per_param, c.zero_link_bytes_per_param
        moved = ctx.constants.state_bytes_per_param - kept
        dev = assumed(kept * n, "B", f"fp16 weights and gradients only, {kept:g} B/param "
                      f"({c.citation.split(':')[0]})")
        how = f"ZeRO's accounting: {moved:g} B/param of optimizer state on the host"
    else:  # the memory law's: AdamW's fp32 moments move, weights and gradients stay
        moved, link_bytes = c.fp32_offloaded_bytes_per_param, c.fp32_link_bytes_per_param
        dev = module(memory.value - moved * n, "B",
                     f"{memory.tag.value} memory less AdamW's two fp32 moments ({moved:g} "
                     f"B/param) moved to the host ({c.citation.split(':')[0]})")
        how = f"AdamW's fp32 moments ({moved:g} B/param) on the host"
    host = module(moved * n, "B", how)
    resident = _resident(ctx, dev)
    link = wall = None
    note = "the host's optimizer step is not timed here (it runs on the host CPU)"
    if ctx.link is None:
        note = ("no measured host link in this certificate (its probes predate the host-copy "
                "probe, or did not run): the link time is not priced; " + note)
    else:
        up, down = ctx.link
        per_step = n * link_bytes / 2 / down.value + n * link_bytes / 2 / up.value
        link = module(per_step, "s", f"{link_bytes / 2:g} B/param down at {down.value:.3g} "
                      f"B/s + {link_bytes / 2:g} B/param up at {up.value:.3g} B/s, host link "
                      f"measured ({down.source})")
        tps = ctx.src.tokens_per_step
        if wall_a is not None and tps:
            steps = d_tokens / tps
            wall = module(wall_a.value + steps * per_step, "s",
                          f"(a) + {format_count(steps)} steps x the link time per step, not "
                          "overlapped (an upper bound)").model_copy(
                              update={"extrapolated": wall_a.extrapolated})
    ok, reason = affordable(ctx, wall, wall_b, dev, resident, error)
    if wall is None and wall_a is not None and not (resident is not None and
                                                     resident.value is False):
        ok, reason = None, "the offload wall clock needs the host link measured by the probes"
    return OffloadRow(device_memory=dev, host_memory=host, link_seconds_per_step=link,
                      wall=wall, resident=resident, affordable=ok, reason=reason, note=note)


def attention_flops(shape: tuple[int, int, int] | None, seq: int | None, d_tokens: float
                    ) -> tuple[Tagged | None, str]:
    """12 L H Q T per token x D (PaLM appendix B, with H Q = d); T is the measured seq."""
    if shape is None:
        return None, "shape unknown: give N:d<width>L<layers>"
    if seq is None:
        return None, "no sizes measured: the sequence length T is unknown"
    d, L, _ = shape
    per_token = 12.0 * L * d * seq
    return module(per_token * d_tokens, "FLOP",
                  f"12 L d T x D with L={L}, d={d}, T={seq} (PaLM appendix B)"), ""


def wall_clock_law(ctx: _Context, got: RungStep | None, d_tokens: float
                   ) -> tuple[Tagged | None, str]:
    """(a): steps x the size law's step at the rung (FITTED; extrapolated beyond the sizes
    fitted, the factor in the note); None with what it lacks."""
    src = ctx.src
    if got is None:
        return None, src.lacks or "no size law for this family"
    steps = d_tokens / src.tokens_per_step
    wall = fitted(steps * got.seconds.value, "s",
                  f"{format_count(steps)} steps of {src.batch}x{src.seq} tokens x "
                  f"{format_duration(got.seconds.value)} per step ({got.seconds.source})",
                  extrapolated=got.seconds.extrapolated)
    note = f"x{got.beyond:.2g} beyond the largest size fitted" if got.beyond else ""
    return wall, note


def wall_clock_floor(ctx: _Context, flops: Tagged) -> tuple[Tagged | None, str]:
    """(b): FLOPs / the measured GEMM rate of the dtype (MODULE); None without a rate."""
    if ctx.rate is None:
        return None, ctx.rate_note
    return module(flops.value / ctx.rate.value, "s",
                  f"roofline floor: FLOPs / measured GEMM rate {ctx.rate.value:.4g} FLOP/s "
                  f"({ctx.rate.source})"), ""


def memory_bytes(ctx: _Context, e: Entry, shape: tuple[int, int, int] | None
                 ) -> tuple[Tagged, str]:
    """The budgeted reserved bytes at the rung's shape and parameters where the
    certificate has a memory law for the family; else states at 16 B/param, ASSUMED."""
    src = ctx.src
    if shape is not None and src.batch and src.seq:
        d, L, H = shape
        got = memory_figures.memory_answer(ctx.cert, src.workload, {
            "batch": src.batch, "seq": src.seq, "d": d, "L": L, "H": H,
            "params": round(e.params)}, ctx.mode)
        if got is not None:
            return got.figure, (f"reserved: {got.why}" + (
                f" (extrapolated: {'; '.join(got.reasons)})" if got.extrapolated else ""))
    k = ctx.constants.state_bytes_per_param
    why = ("shape unknown" if shape is None else
           f"no memory law for {src.workload} in this certificate")
    return assumed(k * e.params, "B", f"model states only at {k:g} B/param "
                   f"({ctx.constants.state_bytes_citation.split(':')[0]}); activations not "
                   f"counted: {why}"), f"states only ({why})"


def _resident(ctx: _Context, memory: Tagged) -> Tagged | None:
    if ctx.memory_budget is None:
        return None
    fits = memory.value <= ctx.memory_budget.value
    tag = Tag.ASSUMED if memory.tag is Tag.ASSUMED else Tag.MODULE
    return Tagged(value=fits, tag=tag, source=f"memory {memory.value:.4g} B vs budget "
                  f"{ctx.memory_budget.value:.4g} B ({memory.tag.value} memory)")


def _err(error: Tagged | None) -> float:
    return float(error.value) if error is not None else 0.0


def disagreement(wall_a: Tagged | None, wall_b: Tagged | None, error: Tagged | None) -> str:
    """'' when (a) and (b) agree within (a)'s stated error; else the inconsistency, named:
    (a) is below the roofline floor (b), a lower bound no step beats, by more than the law's
    stated error."""
    if wall_a is None or wall_b is None or not wall_b.value:
        return ""
    err = _err(error)
    if wall_a.value * (1.0 + err) >= wall_b.value:
        return ""
    share = wall_b.value / wall_a.value
    return (f"(a) {format_duration(wall_a.value)} is below the roofline floor (b) "
            f"{format_duration(wall_b.value)} by more than the law's stated error "
            f"({err:.0%}): it implies {share:.0%} of the measured GEMM rate, which no step "
            "reaches; this row believes (b)")


def affordable(ctx: _Context, wall_a: Tagged | None, wall_b: Tagged | None, memory: Tagged,
               resident: Tagged | None, error: Tagged | None = None
               ) -> tuple[Tagged | None, str]:
    """Yes, no, or unknown (``None``) with the one reason: not resident; (a) and (b) in
    disagreement past (a)'s stated error (:func:`disagreement`: (b) decides, never the
    optimistic column); over or within the budget by (a); without (a), ruled out when even
    the floor (b) is over the budget, else unknown with what (a) lacks."""
    budget = format_duration(ctx.budget_seconds)
    if resident is not None and resident.value is False:
        return _verdict(False, "memory"), (f"not resident: needs {memory.value:.3g} B "
                                           f"({memory.tag.value}), budget "
                                           f"{ctx.memory_budget.value:.3g} B")
    clash = disagreement(wall_a, wall_b, error)
    if clash and wall_b.value > ctx.budget_seconds:
        return _verdict(False, "(b)"), (f"{clash}: even the floor (b) needs "
                                        f"{format_duration(wall_b.value)} > budget {budget}")
    if clash:
        return None, (f"{clash}: (b) fits within {budget}, but it is a lower bound, and (a) "
                      "cannot be believed here")
    if wall_a is not None:
        star = " (extrapolated)" if wall_a.extrapolated else ""
        pm = f", stated error {_err(error):.0%}" if error is not None else ""
        if wall_a.value > ctx.budget_seconds:
            return _verdict(False, "(a)"), (f"needs {format_duration(wall_a.value)} by the "
                                            f"measured law (a){star}{pm} > budget {budget}")
        caveat = "" if resident is not None and resident.tag is not Tag.ASSUMED else \
            "; residency from model states only (ASSUMED)"
        return _verdict(True, "(a)"), (f"(a){star} {format_duration(wall_a.value)}{pm} "
                                       f"within {budget}{caveat}")
    lacks = ctx.src.lacks or "no size law"
    if wall_b is not None and wall_b.value > ctx.budget_seconds:
        return _verdict(False, "(b)"), (f"even the roofline floor (b) needs "
                                        f"{format_duration(wall_b.value)} > budget {budget}")
    if wall_b is not None:
        return None, (f"(a) unknown ({lacks}); the floor (b) fits within {budget}, but it is "
                      "a lower bound")
    return None, f"(a) unknown ({lacks}) and (b) unknown ({ctx.rate_note})"


def _verdict(ok: bool, by: str) -> Tagged:
    return module(ok, "", f"ladder: affordable decided by {by}")


def _mfu(flops: Tagged, wall_a: Tagged | None, peak: Tagged | None, what: str
         ) -> Tagged | None:
    """The utilisation that wall clock (a) implies against ``peak`` (PaLM appendix B), shown
    only as a share of a whole: above 100 % it is no utilisation (:func:`disagreement` and
    the warnings name it)."""
    if wall_a is None or peak is None or not peak.value:
        return None
    v = flops.value / wall_a.value / peak.value
    if v > 1.0:
        return None
    return module(v, SHARE, f"FLOPs / wall clock (a) / {what} ({peak.tag.value}: {peak.source})")


def predicted_loss(c: ScalingConstants, n: float, d_tokens: float) -> Tagged:
    law = c.loss_law
    return module(law.loss(n, d_tokens), "nats/token",
                  f"E + A/N^alpha + B/D^beta, E={law.E}, A={law.A}, B={law.B}, "
                  f"alpha={law.alpha}, beta={law.beta} ({law.citation.split(':')[0]})")


def _warnings(ctx: _Context, rows: list[LadderRow]) -> list[str]:
    out = []
    src = ctx.src
    if src.law is not None:
        out.append(f"(a) is {src.workload}'s size law ({src.how}): a model of N parameters "
                   "with another shape or vocabulary steps at another rate")
        beyond = [r for r in rows if r.beyond]
        if beyond:
            lo, hi = src.law.params_range
            out.append(f"wall clock (a) marked * is extrapolated beyond the sizes fitted "
                       f"({format_count(lo)}..{format_count(hi)} params), up to "
                       f"x{max(r.beyond for r in beyond):.2g}; its stated error is the "
                       "largest size held out's")
        out.extend(f"size law: {n}" for n in src.law.notes)
    if any(r.shape_note.startswith("chosen") for r in rows):
        out.append("a rung without a shape is given one at the family's measured aspect; "
                   "name it as N:d<width>L<layers> to choose")
    impossible = [r for r in rows if r.wall_a is not None and r.wall_b is not None
                  and r.wall_a.value < r.wall_b.value]
    if impossible:
        names = ", ".join(format_count(r.params) for r in impossible)
        out.append(f"wall clock (a) implies more than 100 % of the measured GEMM rate at "
                   f"{names}: there (b) is the honest lower bound")
    sec = ctx.cert.sizes
    if sec is not None and src.workload == DEFAULT_FAMILY:  # not the stored power law's
        old = sec.law.warnings if sec.law is not None and sec.size_law is None else []
        out.extend(f"sizes: {w}" for w in sec.warnings if w not in old)
    return out
