"""What the scale ladder shows beside its rows, never inside them (pure): the levers measured
on this box, and reference points measured elsewhere.

- levers: measured A/B speedups (docs/DESIGN.md section 4, levers): figures only, they never
  change a column (a lever is measured or absent, never promised);
- reference points (LLMQ, quoted by the ladder note): their tokens/s and the wall clock it
  implies at the row's D, INHERITED and never pooled with a column measured here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from afford.core.provenance import Tagged, inherited, measured, run_label
from afford.core.published_constants import ScalingConstants
from afford.core.units import format_count
from afford.schema.cert import Certificate


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


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


def reference_figures(constants: ScalingConstants, ratio: float, sizes: list[float]
                      ) -> list[ReferenceFigure]:
    """The cited reference points within a factor 2 of a requested size, each with the wall
    clock its tokens/s implies at D = r x its own N (INHERITED: measured elsewhere)."""
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
