"""What a levers run measured, as tagged rows (pure): speedup with its spread, the step
seconds of both sides, step 0 of the lever side (where torch.compile's compile time and the
CUDA-graph capture land), and MFU before and after where a FLOP count and a peak exist.

MFU = FLOPs per step / step seconds / peak (PaLM, Chowdhery et al. 2022, appendix B),
against the certificate's measured GEMM rate of the dtype and against the datasheet, each
shown only when the certificate holds it. The FLOPs of a variant are the base variant's
counted FLOPs per token times the variant's tokens per step (exact for the built-in
workloads, whose every matmul is linear in the batch).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from afford import figures
from afford.fit.verdicts import mfu
from afford.plan.ladder import gemm_dtype
from afford.provenance import NotExecutable, Tagged, measured, module, run_label
from afford.schema.cert import Certificate
from afford.schema.levers import Lever, LeverRun, LeversSection, LeverVariant


class LeverRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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


def lever_rows(cert: Certificate, section: LeversSection) -> list[LeverRow]:
    return [_row(cert, section, run, lv) for run in section.runs for lv in run.levers]


def _variant(run: LeverRun, key: str) -> LeverVariant:
    return next(v for v in run.variants if v.key == key)


def _row(cert: Certificate, sec: LeversSection, run: LeverRun, lv: Lever) -> LeverRow:
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
                    mfu_a=mfu_a, mfu_b=mfu_b, mfu_note=note_a or note_b)


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
    return run.flops_per_step / base.tokens_per_step * v.point.tokens_per_step  # type: ignore[operator]


def _mfu(cert: Certificate, run: LeverRun, v: LeverVariant) -> tuple[Tagged | None, str]:
    p = v.point
    flops = variant_flops(run, v)
    if flops is None or p is None or not p.median_seconds:
        return None, "no FLOP count (" + "; ".join(run.warnings)[:200] + ")"
    dtype = gemm_dtype(cert, v.mode)
    peak = figures.gemm_rate(cert, dtype)
    if peak is None or not peak.value:
        return None, f"no measured {dtype} GEMM rate in the certificate (probes stage)"
    return module(mfu(flops, p.median_seconds, peak.value), "ratio",  # type: ignore[arg-type]
                  f"{flops:.4g} FLOP/step ({run.flops_source}) / step seconds / "
                  f"{dtype} GEMM rate ({peak.tag.value}: {peak.source})"), ""


def achieved_flops(run: LeverRun, v: LeverVariant) -> Tagged | None:
    """FLOP/s the variant achieved (counted FLOPs / measured step seconds)."""
    flops = variant_flops(run, v)
    if flops is None or v.point is None or not v.point.median_seconds:
        return None
    return module(flops / v.point.median_seconds, "FLOP/s",
                  f"counted FLOPs ({run.flops_source}) / measured step seconds")
