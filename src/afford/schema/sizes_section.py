"""The certificate's ``sizes`` section: throughput across model sizes (the scale ladder).

Written by ``afford certify --sizes``: ``tinylm`` timed at several widths and depths at one
batch x seq, each size a full :class:`~afford.schema.point.Point` (raw samples of every
child), the law step seconds vs parameter count, and the warm step split into forward,
backward and optimizer at the smallest and the largest size.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.schema.laws import ThroughputLaw
from afford.schema.point import Point
from afford.schema.quantities import Count, Dim, Duration, Ratio, Seconds


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")


PhaseName = Literal["forward", "backward", "optimizer"]
PHASES: tuple[PhaseName, ...] = ("forward", "backward", "optimizer")


class SizePoint(_Model):
    """One model size: its spec, its dimensions, and its point (all children, raw)."""

    spec: str = Field(description="workload spec, e.g. tinylm@d512L8H8b8s1024")
    d: Dim
    L: Dim
    H: Dim
    params: Count | None = Field(None, description="trainable parameters, counted in the child")
    point: Point


class PhaseChild(_Model):
    """One child's per-phase seconds of its timed warm steps (same step indices)."""

    child: Count
    step_indices: list[Count]
    forward_seconds: list[Duration]
    backward_seconds: list[Duration]
    optimizer_seconds: list[Duration]


class PhaseSplit(_Model):
    """The warm step of one size split into forward, backward and optimizer."""

    spec: str
    params: Count | None = None
    children: list[PhaseChild] = []
    step_seconds: Seconds | None = Field(None, description="whole step, median of child medians")
    forward_seconds: Duration | None = Field(None, description="median of child medians")
    backward_seconds: Duration | None = None
    optimizer_seconds: Duration | None = None
    error: str | None = Field(None, description="why the split could not be measured")


class PhaseGrowth(_Model):
    """How one phase grew from the smallest to the largest split size."""

    phase: Literal["forward", "backward", "optimizer", "step"]
    small_seconds: Duration
    large_seconds: Duration
    ratio: Ratio = Field(description="large / small")
    exponent: float = Field(description="b in t ~ N^b between the two sizes")
    share_small: Ratio = Field(description="share of the whole step at the small size")
    share_large: Ratio


class SizesSection(_Model):
    """Throughput across model sizes at a fixed batch x seq (docs/DESIGN.md section 4)."""

    workload: str = "tinylm"
    mode: Literal["fp32", "bf16", "fp16"]
    batch: Dim
    seq: Dim
    tokens_per_step: Dim
    sizes: list[SizePoint]
    law: ThroughputLaw | None = Field(None, description="step seconds vs params, over "
                                      "resident sizes")
    phases: list[PhaseSplit] = []
    growth: list[PhaseGrowth] = []
    premise: Literal["holds", "fails", "untested"] = Field(
        "untested", description="the per-step cost that does not depend on tokens (the "
        "optimizer step) stays flat in N (holds) or grows with N (fails)")
    finding: str = ""
    phase_note: str = ""
    warnings: list[str] = []
