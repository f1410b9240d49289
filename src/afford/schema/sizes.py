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


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")


PhaseName = Literal["forward", "backward", "optimizer"]
PHASES: tuple[PhaseName, ...] = ("forward", "backward", "optimizer")


class SizePoint(_Model):
    """One model size: its spec, its dimensions, and its point (all children, raw)."""

    spec: str = Field(description="workload spec, e.g. tinylm@d512L8H8b8s1024")
    d: int
    L: int
    H: int
    params: int | None = Field(None, description="trainable parameters, counted in the child")
    point: Point


class PhaseChild(_Model):
    """One child's per-phase seconds of its timed warm steps (same step indices)."""

    child: int
    step_indices: list[int]
    forward_seconds: list[float]
    backward_seconds: list[float]
    optimizer_seconds: list[float]


class PhaseSplit(_Model):
    """The warm step of one size split into forward, backward and optimizer."""

    spec: str
    params: int | None = None
    children: list[PhaseChild] = []
    step_seconds: float | None = Field(None, description="whole step, median of child medians")
    forward_seconds: float | None = Field(None, description="median of child medians")
    backward_seconds: float | None = None
    optimizer_seconds: float | None = None
    error: str | None = Field(None, description="why the split could not be measured")


class PhaseGrowth(_Model):
    """How one phase grew from the smallest to the largest split size."""

    phase: Literal["forward", "backward", "optimizer", "step"]
    small_seconds: float
    large_seconds: float
    ratio: float = Field(description="large / small")
    exponent: float = Field(description="b in t ~ N^b between the two sizes")
    share_small: float = Field(description="share of the whole step at the small size")
    share_large: float


class SizesSection(_Model):
    """Throughput across model sizes at a fixed batch x seq (docs/DESIGN.md section 4)."""

    workload: str = "tinylm"
    mode: Literal["fp32", "bf16", "fp16"]
    batch: int
    seq: int
    tokens_per_step: int
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
