"""The scale ladder: which model sizes this box can train in a budget (pure; docs/DESIGN.md
section 4).

For each parameter count N:

- tokens D = r x N, r = 20 by default (Hoffmann et al. 2022, Chinchilla);
- FLOPs = 6 N D (Kaplan et al. 2020, section 2.1), plus the attention term 12 L H Q T per
  token (PaLM, Chowdhery et al. 2022, appendix B; H Q = d) when the shape is known;
- wall clock (a): D / tokens per step x step seconds from the size law measured on this
  box (FITTED; extrapolated beyond the sizes measured, and tagged so);
- wall clock (b): the roofline floor, FLOPs / the *measured* GEMM rate of the dtype (MODULE).
  Never a datasheet rate: without a measured rate the column is empty, with the reason.
  (a) and (b) are two fields and are never pooled into one number;
- memory: states + activations at the measured batch x seq from the memory law where the
  certificate has one, else model states only at 16 B/param (ZeRO), tagged ASSUMED;
- affordable: within the budget by (a) (or, without (a), ruled out when even the floor (b)
  is over it) and resident within the memory budget; the reason when not. Where (a) is
  below the floor (b) by more than the law's own leave-one-out error, the two disagree (the
  note's "internal inconsistency worth naming": (a) would need more than the measured GEMM
  rate); the row names it and believes (b), a lower bound: not affordable when (b) is over
  the budget, undecided when it is not;
- the loss the Besiroglu et al. 2024 refit predicts at (N, D) (optional context);
- the offload variant (Ren et al. 2021, ZeRO-Offload; the note gates 1B on it): the
  optimizer's state on the host. Device memory drops by the state moved (the memory law's
  accounting: AdamW's two fp32 moments, 8 B/param; ZeRO's: all but fp16 weights and
  gradients, 4 B/param left); each step the gradients cross the link down and the updated
  weights come back up (8 / 4 B/param), priced with the host link bandwidth *measured* by the
  probes in each direction and added to (a) as a serial upper bound (frameworks overlap
  part of it). The host's own optimizer step is not timed here, and the row says so;
- reference points measured elsewhere (LLMQ, quoted by the note) beside the ladder, their
  tokens/s and the wall clock they imply at the row's D, INHERITED and never pooled with a
  column measured here.

Levers measured on this box are listed beside the ladder as measured figures; they never
change a column (a lever is measured or absent, never promised).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from afford import figures
from afford.core.errors import InputError
from afford.core.provenance import (
    SHARE,
    Tag,
    Tagged,
    assumed,
    fitted,
    inherited,
    measured,
    module,
    run_label,
)
from afford.core.published_constants import MEMORY_FRACTION, ScalingConstants, check_fraction
from afford.core.units import (
    MAX_DIM,
    UnitError,
    bounded,
    format_count,
    format_duration,
    parse_count,
    whole,
)
from afford.schema.cert import Certificate
from afford.schema.sizes_section import SizesSection

LADDER_SCHEMA = "afford.ladder/1"
DEFAULT_PARAMS = "7.5M,20M,124M,1B"
HEAD_DIM = 64  # heads assumed for a shape given without H (used by the memory law only)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class Entry:
    """One requested size: N, and its width and depth when given (``124M:d768L12``)."""

    params: float
    d: int | None = None
    L: int | None = None
    H: int | None = None


def parse_entries(text: str) -> list[Entry]:
    """``"7.5M,20M,124M:d768L12,1B"`` -> entries; InputError when malformed."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        count, _, shape = item.partition(":")
        try:  # at least 1, at most MAX_COUNT (1e18): beyond, tokens and FLOPs overflow
            n = bounded(parse_count(count), "a parameter count", low=1, low_open=False)
        except UnitError as exc:
            raise InputError(f"--params {item!r}: {exc}") from None
        out.append(Entry(n, *_shape(item, shape)) if shape else Entry(n))
    if not out:
        raise InputError("--params: give at least one parameter count, e.g. 7.5M,124M,1B")
    return out


def _shape(item: str, text: str) -> tuple[int, int, int | None]:
    """``d768L12H12`` -> (768, 12, 12): whole numbers from 1 to 2**40 each."""
    m = re.fullmatch(r"d([0-9]+)L([0-9]+)(?:H([0-9]+))?", text)
    try:
        dims = [whole(g, "a dimension", high=MAX_DIM) if g is not None else None
                for g in m.groups()] if m else None
    except UnitError:
        dims = None
    if dims is None:
        raise InputError(f"--params {item!r}: write a shape as N:d<width>L<layers>[H<heads>], "
                         "e.g. 124M:d768L12H12 (each a whole number from 1 to 2**40)")
    return dims[0], dims[1], dims[2]


class LadderRow(_Frozen):
    params: float
    shape: dict[str, int] | None = None
    tokens: Tagged
    flops_6nd: Tagged
    flops_attention: Tagged | None = None
    flops: Tagged
    wall_a: Tagged | None = None
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


class ReferenceFigure(_Frozen):
    """A throughput measured elsewhere, and the wall clock it implies at D = r x N."""

    device: str
    params: float
    mode: str
    seq: int | None = None
    tokens_per_second: Tagged
    wall: Tagged


class LeverFigure(_Frozen):
    workload: str
    lever: str
    description: str
    speedup: Tagged
    speedup_min: Tagged
    speedup_max: Tagged


class Ladder(_Frozen):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_id: str = Field(LADDER_SCHEMA, alias="schema")
    device: str
    mode: str
    budget_seconds: float
    ratio: float
    law: str | None = None
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
    """What every row reads: the certificate's law, rates and memory budget."""

    cert: Certificate
    sizes: SizesSection | None
    mode: str
    budget_seconds: float
    ratio: float
    constants: ScalingConstants
    rate: Tagged | None
    rate_note: str
    peak: Tagged | None
    memory_budget: Tagged | None
    link: tuple[Tagged, Tagged] | None = None


def gemm_dtype(cert: Certificate, mode: str) -> str:
    """The matmul dtype of a mode: bf16, fp16, or fp32 (tf32 when the run allowed it)."""
    if mode in ("bf16", "fp16"):
        return mode
    return "tf32" if cert.environment.tf32_matmul else "fp32"


def default_mode(cert: Certificate) -> str:
    if cert.sizes is not None:
        return cert.sizes.mode
    return cert.workloads[0].mode if cert.workloads else "fp32"


def build_ladder(cert: Certificate, entries: list[Entry], *, budget_seconds: float,
                 constants: ScalingConstants, ratio: float | None = None,
                 mode: str | None = None, memory_fraction: float = MEMORY_FRACTION) -> Ladder:
    """The ladder for ``entries`` from ``cert``: two wall-clock columns, never pooled."""
    if budget_seconds <= 0:
        raise InputError("--budget must be a positive duration, e.g. 7d")
    check_fraction(memory_fraction, "--memory-fraction")
    r = constants.tokens_per_param if ratio is None else ratio
    if r <= 0:
        raise InputError("--ratio must be a positive number of tokens per parameter")
    mode = mode or default_mode(cert)
    ctx = _context(cert, mode, budget_seconds, r, constants, memory_fraction)
    rows = [ladder_row(ctx, e) for e in entries]
    s = ctx.sizes
    law = s.law if s is not None and s.mode == mode else None
    return Ladder(device=cert.environment.device_name, mode=mode, budget_seconds=budget_seconds,
                  ratio=r, law=law.describe() if law else None,
                  law_range=(law.x_min, law.x_max) if law else None,
                  batch=s.batch if s else None, seq=s.seq if s else None,
                  memory_budget=ctx.memory_budget, premise=s.premise if s else "untested",
                  finding=s.finding if s else "", rows=rows, levers=lever_figures(cert),
                  references=reference_figures(constants, r, entries),
                  warnings=_warnings(ctx, law, rows))


def _context(cert: Certificate, mode: str, budget: float, ratio: float,
             constants: ScalingConstants, fraction: float) -> _Context:
    dtype = gemm_dtype(cert, mode)
    rate = figures.gemm_rate(cert, dtype)
    note = ""
    if rate is None:
        note = (f"no measured {dtype} GEMM rate in this certificate (the probes stage did "
                "not run); the floor is never taken from a datasheet")
    elif rate.tag is not Tag.MEASURED:
        note, rate = f"the {dtype} GEMM rate here is {rate.tag.value}, not measured", None
    mem = cert.environment.device_memory_bytes
    what = "host memory" if cert.environment.device_type == "cpu" else "device memory"
    budget_b = module(fraction * mem, "B", f"{fraction:.2f} x {what} "
                      f"({mem} B, measured on {cert.environment.device_name})") if mem else None
    return _Context(cert=cert, sizes=cert.sizes, mode=mode, budget_seconds=budget, ratio=ratio,
                    constants=constants, rate=rate, rate_note=note,
                    peak=figures.datasheet_peak(cert, dtype), memory_budget=budget_b,
                    link=figures.host_link(cert))


def ladder_row(ctx: _Context, e: Entry) -> LadderRow:
    n = e.params
    d_tokens = ctx.ratio * n
    tokens = module(d_tokens, "tokens", f"{ctx.ratio:g} tokens/param x N "
                    f"({ctx.constants.tokens_per_param_citation.split(',')[0]})")
    f6 = module(6.0 * n * d_tokens, "FLOP", "6 N D (Kaplan et al. 2020, section 2.1)")
    attn, attn_note = attention_flops(e, ctx.sizes, d_tokens)
    total = module(f6.value + (attn.value if attn else 0.0), "FLOP",  # type: ignore[operator]
                   "6 N D + 12 L d T D (PaLM appendix B)" if attn else "6 N D (attention "
                   f"term omitted: {attn_note})")
    wall_a, note_a = wall_clock_law(ctx, n, d_tokens)
    wall_b, note_b = wall_clock_floor(ctx, total)
    memory, mem_note = memory_bytes(ctx, e)
    resident = _resident(ctx, memory)
    ok, reason = affordable(ctx, wall_a, wall_b, memory, resident)
    off = offload_row(ctx, n, d_tokens, memory, wall_a, wall_b)
    return LadderRow(params=n, shape=_row_shape(e, ctx.sizes), tokens=tokens, flops_6nd=f6,
                     flops_attention=attn, flops=total, wall_a=wall_a, wall_a_note=note_a,
                     wall_b=wall_b, wall_b_note=note_b, memory=memory, memory_note=mem_note,
                     resident=resident, affordable=ok, reason=reason,
                     inconsistency=disagreement(ctx, wall_a, wall_b),
                     mfu_measured=_mfu(total, wall_a, ctx.rate, "measured GEMM rate"),
                     mfu_datasheet=_mfu(total, wall_a, ctx.peak, "datasheet peak"),
                     loss=predicted_loss(ctx.constants, n, d_tokens), offload=off)


def offload_row(ctx: _Context, n: float, d_tokens: float, memory: Tagged,
                wall_a: Tagged | None, wall_b: Tagged | None) -> OffloadRow | None:
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
        dev = module(memory.value - moved * n, "B",  # type: ignore[operator]
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
        per_step = n * link_bytes / 2 / down.value + n * link_bytes / 2 / up.value  # type: ignore[operator]
        link = module(per_step, "s", f"{link_bytes / 2:g} B/param down at {down.value:.3g} "
                      f"B/s + {link_bytes / 2:g} B/param up at {up.value:.3g} B/s, host link "
                      f"measured ({down.source})")
        s = ctx.sizes
        if wall_a is not None and s is not None:
            steps = d_tokens / s.tokens_per_step
            wall = module(wall_a.value + steps * per_step, "s",  # type: ignore[operator]
                          f"(a) + {format_count(steps)} steps x the link time per step, not "
                          "overlapped (an upper bound)").model_copy(
                              update={"extrapolated": wall_a.extrapolated})
    ok, reason = affordable(ctx, wall, wall_b, dev, resident)
    if wall is None and wall_a is not None and not (resident is not None and
                                                     resident.value is False):
        ok, reason = None, "the offload wall clock needs the host link measured by the probes"
    return OffloadRow(device_memory=dev, host_memory=host, link_seconds_per_step=link,
                      wall=wall, resident=resident, affordable=ok, reason=reason, note=note)


def reference_figures(constants: ScalingConstants, ratio: float, entries: list[Entry]
                      ) -> list[ReferenceFigure]:
    """The cited reference points within a factor 2 of a requested size, each with the wall
    clock its tokens/s implies at D = r x its own N (INHERITED: measured elsewhere)."""
    sizes = [e.params for e in entries]
    out = []
    for ref in constants.references:
        if not any(0.5 <= ref.params / n <= 2.0 for n in sizes):
            continue
        rate = inherited(ref.tokens_per_second, "tokens/s", f"{ref.device}: {ref.citation}")
        d = ratio * ref.params
        out.append(ReferenceFigure(device=ref.device, params=ref.params, mode=ref.mode,
                                   seq=ref.seq, tokens_per_second=rate,
                                   wall=inherited(d / ref.tokens_per_second, "s",
                                                  f"{format_count(d)} tokens ({ratio:g} x N) at "
                                                  f"the cited rate, on {ref.device}, not this "
                                                  "box")))
    return out


def attention_flops(e: Entry, sizes: SizesSection | None, d_tokens: float
                    ) -> tuple[Tagged | None, str]:
    """12 L H Q T per token x D (PaLM appendix B, with H Q = d); T is the measured seq."""
    if e.d is None or e.L is None:
        return None, "shape unknown: give N:d<width>L<layers>"
    if sizes is None:
        return None, "no sizes section: the sequence length T is unknown"
    per_token = 12.0 * e.L * e.d * sizes.seq
    return module(per_token * d_tokens, "FLOP",
                  f"12 L d T x D with L={e.L}, d={e.d}, T={sizes.seq} (PaLM appendix B)"), ""


def wall_clock_law(ctx: _Context, n: float, d_tokens: float) -> tuple[Tagged | None, str]:
    """(a): steps x step seconds from the size law (FITTED; extrapolated outside its range)."""
    s = ctx.sizes
    if s is None:
        return None, "no sizes section in this certificate (afford certify --sizes)"
    if s.mode != ctx.mode:
        return None, f"the sizes were measured in {s.mode}, not {ctx.mode}"
    if s.law is None:
        return None, "the sizes section has no law (" + "; ".join(s.warnings)[:200] + ")"
    step, extra = s.law.predict(n)
    steps = d_tokens / s.tokens_per_step
    return fitted(steps * step, "s", f"{format_count(steps)} steps of {s.batch}x{s.seq} tokens "
                  f"x {format_duration(step)} per step from {s.law.describe()}, {s.mode}, "
                  f"{ctx.cert.environment.device_name}", extrapolated=extra), \
        ("extrapolated beyond the sizes measured" if extra else "")


def wall_clock_floor(ctx: _Context, flops: Tagged) -> tuple[Tagged | None, str]:
    """(b): FLOPs / the measured GEMM rate of the dtype (MODULE); None without a rate."""
    if ctx.rate is None:
        return None, ctx.rate_note
    return module(flops.value / ctx.rate.value, "s",  # type: ignore[operator]
                  f"roofline floor: FLOPs / measured GEMM rate {ctx.rate.value:.4g} FLOP/s "
                  f"({ctx.rate.source})"), ""


def memory_bytes(ctx: _Context, e: Entry) -> tuple[Tagged, str]:
    """States + activations from the memory law where present; else states at 16 B/param."""
    s = ctx.sizes
    if e.d is not None and e.L is not None and s is not None:
        shape = {"batch": s.batch, "seq": s.seq, "d": e.d, "L": e.L,
                 "H": e.H or max(1, e.d // HEAD_DIM)}
        pm = figures.predicted_memory(ctx.cert, "tinylm", shape, ctx.mode)
        if pm is not None:
            allocated, reserved = pm
            if reserved is not None:
                return reserved, "reserved, from the memory law"
            return allocated, "allocated, from the memory law (reserved not predicted)"
    k = ctx.constants.state_bytes_per_param
    why = "shape unknown" if e.d is None else "no memory law in this certificate"
    return assumed(k * e.params, "B", f"model states only at {k:g} B/param "
                   f"({ctx.constants.state_bytes_citation.split(':')[0]}); activations not "
                   f"counted: {why}"), f"states only ({why})"


def _resident(ctx: _Context, memory: Tagged) -> Tagged | None:
    if ctx.memory_budget is None:
        return None
    fits = memory.value <= ctx.memory_budget.value  # type: ignore[operator]
    tag = Tag.ASSUMED if memory.tag is Tag.ASSUMED else Tag.MODULE
    return Tagged(value=fits, tag=tag, source=f"memory {memory.value:.4g} B vs budget "
                  f"{ctx.memory_budget.value:.4g} B ({memory.tag.value} memory)")


def _law_error(ctx: _Context) -> float:
    """The size law's own stated error: its largest leave-one-out relative error (0 when it
    reports none)."""
    law = ctx.sizes.law if ctx.sizes is not None else None
    return (law.best.loo_max or 0.0) if law is not None else 0.0


def disagreement(ctx: _Context, wall_a: Tagged | None, wall_b: Tagged | None) -> str:
    """'' when (a) and (b) agree within (a)'s stated error; else the inconsistency, named:
    (a) is below the roofline floor (b), a lower bound no step beats, by more than the law's
    leave-one-out error."""
    if wall_a is None or wall_b is None or not wall_b.value:
        return ""
    err = _law_error(ctx)
    if wall_a.value * (1.0 + err) >= wall_b.value:  # type: ignore[operator]
        return ""
    share = wall_b.value / wall_a.value  # type: ignore[operator]
    return (f"(a) {format_duration(wall_a.value)} is below the roofline floor (b) "
            f"{format_duration(wall_b.value)} by more than the law's leave-one-out error "
            f"({err:.0%}): it implies {share:.0%} of the measured GEMM rate, which no step "
            "reaches; this row believes (b)")


def affordable(ctx: _Context, wall_a: Tagged | None, wall_b: Tagged | None, memory: Tagged,
               resident: Tagged | None) -> tuple[Tagged | None, str]:
    """Within the time budget by (a) and resident; ruled out by (b) when even the floor is
    over the budget. Says which column decided. ``None``: not decidable from this box. Where
    (a) and (b) disagree past (a)'s error (:func:`disagreement`), (b) decides: never
    affordable by the optimistic column."""
    budget = format_duration(ctx.budget_seconds)
    if resident is not None and resident.value is False:
        return _verdict(False, "memory"), (f"not resident: needs {memory.value:.3g} B "
                                           f"({memory.tag.value}), budget "
                                           f"{ctx.memory_budget.value:.3g} B")  # type: ignore[union-attr]
    clash = disagreement(ctx, wall_a, wall_b)
    if clash and wall_b.value > ctx.budget_seconds:  # type: ignore[union-attr, operator]
        return _verdict(False, "(b)"), (f"{clash}: even the floor (b) needs "
                                        f"{format_duration(wall_b.value)} > budget {budget}")  # type: ignore[union-attr]
    if clash:
        return None, (f"{clash}: (b) fits within {budget}, but it is a lower bound, and (a) "
                      "cannot be believed here")
    if wall_a is not None:
        star = " (extrapolated)" if wall_a.extrapolated else ""
        if wall_a.value > ctx.budget_seconds:  # type: ignore[operator]
            return _verdict(False, "(a)"), (f"needs {format_duration(wall_a.value)} by the "
                                            f"measured law (a){star} > budget {budget}")
        caveat = "" if resident is not None and resident.tag is not Tag.ASSUMED else \
            "; residency from model states only (ASSUMED)"
        return _verdict(True, "(a)"), f"(a){star} within {budget}{caveat}"
    if wall_b is not None and wall_b.value > ctx.budget_seconds:  # type: ignore[operator]
        return _verdict(False, "(b)"), (f"even the roofline floor (b) needs "
                                        f"{format_duration(wall_b.value)} > budget {budget}")
    if wall_b is not None:
        return None, "no measured size law; the floor (b) fits, but it is a lower bound"
    return None, "no measured size law and no measured GEMM rate"


def _verdict(ok: bool, by: str) -> Tagged:
    return module(ok, "", f"ladder: affordable decided by {by}")


def _mfu(flops: Tagged, wall_a: Tagged | None, peak: Tagged | None, what: str
         ) -> Tagged | None:
    """The utilisation that wall clock (a) implies against ``peak`` (PaLM appendix B)."""
    if wall_a is None or peak is None or not peak.value:
        return None
    v = flops.value / wall_a.value / peak.value  # type: ignore[operator]
    return module(v, SHARE, f"FLOPs / wall clock (a) / {what} ({peak.tag.value}: {peak.source})")


def predicted_loss(c: ScalingConstants, n: float, d_tokens: float) -> Tagged:
    law = c.loss_law
    return module(law.loss(n, d_tokens), "nats/token",
                  f"E + A/N^alpha + B/D^beta, E={law.E}, A={law.A}, B={law.B}, "
                  f"alpha={law.alpha}, beta={law.beta} ({law.citation.split(':')[0]})")


def _row_shape(e: Entry, sizes: SizesSection | None) -> dict[str, int] | None:
    if e.d is None or e.L is None:
        return None
    shape = {"d": e.d, "L": e.L}
    if e.H:
        shape["H"] = e.H
    if sizes is not None:
        shape.update(batch=sizes.batch, seq=sizes.seq)
    return shape


def lever_figures(cert: Certificate) -> list[LeverFigure]:
    """The levers measured on this box, as measured figures (never applied to a column)."""
    sec = cert.levers
    if sec is None:
        return []
    out = []
    for run in sec.runs:
        for lv in run.levers:
            if lv.speedup is None:
                continue
            src = (f"{run.workload} {lv.description}: median over {len(lv.per_child)} children "
                   f"of paired ratios, {run_label(sec, 'levers')}")
            out.append(LeverFigure(workload=run.workload, lever=lv.name,
                                   description=lv.description,
                                   speedup=measured(lv.speedup, "×", src),
                                   speedup_min=measured(lv.speedup_min, "×", "min, " + src),
                                   speedup_max=measured(lv.speedup_max, "×", "max, " + src)))
    return out


def _warnings(ctx: _Context, law, rows: list[LadderRow]) -> list[str]:
    out = []
    if law is not None:
        shapes = ", ".join(f"d{z.d}L{z.L}" for z in ctx.sizes.sizes)  # type: ignore[union-attr]
        out.append(f"(a) is the law of tinylm's family as measured ({shapes}; a 256-byte "
                   "vocabulary): a model of N parameters with another shape, or with many of "
                   "its parameters in a large embedding table, steps at another rate")
    if law is not None and any(r.wall_a is not None and r.wall_a.extrapolated for r in rows):
        out.append(f"wall clock (a) marked * is extrapolated beyond the sizes measured "
                   f"({format_count(law.x_min)}..{format_count(law.x_max)} params)")
    if ctx.sizes is not None and ctx.sizes.premise == "fails":
        out.append("the per-step cost that does not depend on tokens grows with N here "
                   "(see the finding); the law's form carries it beyond the sizes measured")
    impossible = [r for r in rows if r.mfu_measured is not None
                  and isinstance(r.mfu_measured.value, (int, float)) and r.mfu_measured.value > 1.0]
    if impossible:
        names = ", ".join(format_count(r.params) for r in impossible)
        out.append(f"wall clock (a) implies more than 100 % of the measured GEMM rate at "
                   f"{names}: the law cannot hold that far out (a launch-bound floor at small "
                   "sizes flattens its exponent); there (b) is the honest lower bound")
    if ctx.sizes is not None:
        out.extend(f"sizes: {w}" for w in ctx.sizes.warnings)
    return out
