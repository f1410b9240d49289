"""What a levers run measured, as tagged rows (pure): speedup with its spread, the step
seconds of both sides, step 0 of the lever side (where torch.compile's compile time and the
CUDA-graph capture land), and MFU before and after where a FLOP count and a peak exist.

A lever is resolved when its effect stands out of its children's spread: the children's
paired ratios spread from the median toward 1x by less than the effect |speedup - 1|, that
is, every child saw the lever move the step the same way (their range does not hold 1x).
On a loaded box the children can straddle 1x (bf16 0.66x at load 8 on a 2-core CPU, its
children anywhere from 0.4x to 1.2x); such a lever is "not resolved here", with the load,
not a slowdown (``unresolved`` says why).

MFU = FLOPs per step / step seconds / peak (PaLM, Chowdhery et al. 2022, appendix B),
against the certificate's measured GEMM rate of the dtype and against the datasheet, each
shown only when the certificate holds it. The FLOPs of a variant are the base variant's
counted FLOPs per token times the variant's tokens per step (exact for the built-in
workloads, whose every matmul is linear in the batch).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from afford.core.provenance import SHARE, NotExecutable, Tagged, measured, module, run_label
from afford.figures import probes_figures
from afford.fit.time.verdicts import mfu
from afford.planning.scale_ladder import gemm_dtype
from afford.schema.cert import Certificate
from afford.schema.levers_section import Lever, LeverRun, LeversSection, LeverVariant


class LeverRow(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    workload: str
    lever: str
    description: str
    a_label: str
    b_label: str
    a_seconds: Tagged | None = None
    b_seconds: Tagged | None = None
    speedup: Tagged | None = None
    speedup_min: Tagged | None = None
    speedup_max: Tagged | None = None
    b_step0: Tagged | None = None
    achieved_a: Tagged | None = None
    achieved_b: Tagged | None = None
    mfu_a: Tagged | None = None
    mfu_b: Tagged | None = None
    mfu_note: str = ""
    not_executable: NotExecutable | None = None
    unresolved: str = ""  # why the children cannot tell the lever's effect here (else "")


def lever_rows(cert: Certificate, section: LeversSection, load: str = "") -> list[LeverRow]:
    """Every lever of every run as a row; ``load``: the host's load while the levers were
    measured, in words (default: the load the certificate recorded when it was made)."""
    load = load or certified_load(cert)
    return [_row(cert, section, run, lv, load) for run in section.runs for lv in run.levers]


def resolved(lv: Lever) -> bool | None:
    """Whether the children resolve the lever's effect: their paired ratios lie all above
    or all below 1x (module docstring); None without a measured speedup."""
    if lv.speedup is None or lv.speedup_min is None or lv.speedup_max is None:
        return None
    return not lv.speedup_min <= 1.0 <= lv.speedup_max


def certified_load(cert: Certificate) -> str:
    """The highest 1-minute load average the certificate recorded, against its cores."""
    loads = [h for h in cert.host_load or [] if h.load_average is not None]
    if not loads:
        return ""
    top = max(loads, key=lambda h: h.load_average[0])
    cores = f" on {top.cpu_count} core(s)" if top.cpu_count else ""
    return f"load {top.load_average[0]:.1f}{cores} {top.at} certifying"


def _unresolved(lv: Lever, load: str) -> str:
    if resolved(lv) is not False:
        return ""
    where = f" ({load})" if load else ""
    return (f"not resolved here{where}: its children's paired ratios, {lv.speedup_min:.2f}x "
            f"to {lv.speedup_max:.2f}x, spread past 1x, more than its effect (median "
            f"{lv.speedup:.2f}x): neither a speedup nor a slowdown was measured; re-measure "
            "on a quiet host or with more children")


def _variant(run: LeverRun, key: str) -> LeverVariant:
    return next(v for v in run.variants if v.key == key)


def _row(cert: Certificate, sec: LeversSection, run: LeverRun, lv: Lever,
         load: str = "") -> LeverRow:
    a, b = _variant(run, lv.a), _variant(run, lv.b)
    where = run_label(sec, "levers")
    common = dict(workload=run.workload, lever=lv.name, description=lv.description,
                  a_label=a.label, b_label=b.label, a_seconds=_seconds(a, where),
                  b_seconds=_seconds(b, where))
    if lv.not_executable is not None or lv.speedup is None:
        return LeverRow(**common, not_executable=lv.not_executable)
    src = f"{lv.metric}: median over {len(lv.per_child)} children of paired ratios, {where}"
    mfu_a, note_a = _mfu(cert, run, a)
    mfu_b, note_b = _mfu(cert, run, b)
    step0 = b.point.step0_seconds if b.point else None
    return LeverRow(**common, speedup=measured(lv.speedup, "×", src),
                    speedup_min=measured(lv.speedup_min, "×", "min, " + src),
                    speedup_max=measured(lv.speedup_max, "×", "max, " + src),
                    b_step0=measured(step0, "s", f"{b.label} step 0, median over children, "
                                     f"{where}") if step0 is not None else None,
                    achieved_a=achieved_flops(run, a), achieved_b=achieved_flops(run, b),
                    mfu_a=mfu_a, mfu_b=mfu_b, mfu_note=note_a or note_b,
                    unresolved=_unresolved(lv, load))


def _seconds(v: LeverVariant, where: str) -> Tagged | None:
    p = v.point
    if p is None or p.median_seconds is None or p.excluded_reason:
        return None
    return measured(p.median_seconds, "s", f"{v.spec} {v.mode}: median of "
                    f"{len(p.child_medians)} child medians, {where}")


def variant_flops(run: LeverRun, v: LeverVariant) -> float | None:
    """Counted FLOPs per step of ``v``: the base variant's per token x ``v``'s tokens."""
    base = next((x.point for x in run.variants if x.spec == f"{run.workload}+flops"
                 and x.point and x.point.tokens_per_step), None)
    if run.flops_per_step is None or base is None or v.point is None \
            or not v.point.tokens_per_step:
        return None
    return run.flops_per_step / base.tokens_per_step * v.point.tokens_per_step


def _mfu(cert: Certificate, run: LeverRun, v: LeverVariant) -> tuple[Tagged | None, str]:
    p = v.point
    flops = variant_flops(run, v)
    if flops is None or p is None or not p.median_seconds:
        return None, "no FLOP count (" + "; ".join(run.warnings)[:200] + ")"
    dtype = gemm_dtype(cert, v.mode)
    peak = probes_figures.gemm_rate(cert, dtype)
    if peak is None or not peak.value:
        return None, f"no measured {dtype} GEMM rate in the certificate (probes stage)"
    return module(mfu(flops, p.median_seconds, peak.value), SHARE,
                  f"{flops:.4g} FLOP/step ({run.flops_source}) / step seconds / "
                  f"{dtype} GEMM rate ({peak.tag.value}: {peak.source})"), ""


def achieved_flops(run: LeverRun, v: LeverVariant) -> Tagged | None:
    """FLOP/s the variant achieved (counted FLOPs / measured step seconds)."""
    flops = variant_flops(run, v)
    if flops is None or v.point is None or not v.point.median_seconds:
        return None
    return module(flops / v.point.median_seconds, "FLOP/s",
                  f"counted FLOPs ({run.flops_source}) / measured step seconds")


# --- the batch A/B (the ladder note, item 4) ------------------------------------------

BATCH_SPECS = ("+flops", "+x2", "+x4")  # the levers' batch x1, x2, x4 variants


class BatchRung(BaseModel):
    """One rung of the batch A/B: its step, its tokens/s, the marginal gain over the previous
    rung, and the memory it costs, so that the ladder note's batch A/B reads off the rows:
    each doubling of the batch buys less throughput than the one before (a bigger batch buys
    gradient quality, not speed)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    workload: str
    multiplier: int
    batch: int | None
    step: Tagged
    tokens_per_second: Tagged
    gain: Tagged | None = None          # tokens/s over the previous rung's, - 1
    memory: Tagged | None = None        # the rung's peak (reserved, else allocated, else RSS)
    memory_ratio: Tagged | None = None  # over the previous rung's


def batch_rungs(run: LeverRun, where: str) -> list[BatchRung]:
    """The batch x1, x2, x4 rungs that were measured, in order, each against the one before."""
    out: list[BatchRung] = []
    for k, suffix in zip((1, 2, 4), BATCH_SPECS):
        v = next((x for x in run.variants if x.spec == f"{run.workload}{suffix}"
                  and x.mode == run.mode), None)
        p = v.point if v is not None else None
        if p is None or not p.median_seconds or not p.tokens_per_step or p.excluded_reason:
            continue
        src = f"{run.workload} {run.mode} batch x{k}, {where}"
        step = measured(p.median_seconds, "s", f"median of child medians, {src}")
        tps = module(p.tokens_per_step / p.median_seconds, "tokens/s",
                     f"{p.tokens_per_step} tokens per step / step, {src}")
        mem = _peak(p, src)
        prev = out[-1] if out else None
        gain = module(tps.value / prev.tokens_per_second.value - 1, "ratio",
                      f"tokens/s x{k} / x{prev.multiplier} - 1") if prev else None
        ratio = module(mem.value / prev.memory.value, "x",
                       f"peak x{k} / x{prev.multiplier}") \
            if prev and mem is not None and prev.memory is not None and prev.memory.value \
            else None
        out.append(BatchRung(workload=run.workload, multiplier=k,
                             batch=p.batch or (p.shape or {}).get("batch"), step=step,
                             tokens_per_second=tps, gain=gain, memory=mem, memory_ratio=ratio))
    return out


def _peak(p, src: str) -> Tagged | None:
    for field, what in (("peak_reserved_bytes", "peak reserved"),
                        ("peak_allocated_bytes", "peak allocated"),
                        ("peak_rss_bytes", "peak RSS")):
        v = getattr(p, field, None)
        if v is not None:
            return measured(v, "B", f"{what}, {src}")
    return None
