"""Certificate sections of the scale ladder: throughput across model sizes, and levers.

``sizes`` (written by ``afford certify --sizes``): ``tinylm`` timed at several widths and
depths at one batch x seq, each size a full :class:`~afford.schema.cert.Point` (raw samples
of every child), the law step seconds vs parameter count, and the warm step split into
forward, backward and optimizer at the smallest and the largest size.

``levers`` (written by ``afford levers`` or ``afford certify --levers``): measured A/B pairs
on one workload in one run; each variant a full Point; a lever that cannot run here is
NOT EXECUTABLE with the reason.

This module imports :mod:`afford.schema.cert` for ``Point``; ``cert`` imports this one
after ``Point`` is defined (the package ``__init__`` imports ``cert`` first).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.fit.throughput import LawFit, ThroughputLaw
from afford.provenance import NotExecutable
from afford.schema.cert import Point


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    """Throughput across model sizes at a fixed batch x seq (DESIGN section 4)."""

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


class LeverVariant(_Model):
    """One side of one or more A/B pairs: a workload spec in a dtype mode, timed."""

    key: str
    spec: str
    mode: Literal["fp32", "bf16", "fp16"]
    label: str
    point: Point | None = None
    not_executable: NotExecutable | None = None


LeverName = Literal["bf16", "fused", "compile", "cudagraphs", "batch2", "batch4"]


class Lever(_Model):
    """A measured A/B pair: B is A with the lever applied. Speedup > 1: B is faster."""

    name: LeverName
    description: str
    a: str = Field(description="variant key without the lever")
    b: str = Field(description="variant key with the lever")
    metric: Literal["step_seconds", "tokens_per_second"] = Field(
        description="step_seconds: speedup = t_A / t_B; tokens_per_second: (tok_B / t_B) / "
        "(tok_A / t_A)")
    per_child: list[float] = Field([], description="speedup within each child (A and B "
                                   "timed in the same process)")
    speedup: float | None = Field(None, description="median over children")
    speedup_min: float | None = None
    speedup_max: float | None = None
    not_executable: NotExecutable | None = None


class LeverRun(_Model):
    workload: str
    value: int = Field(description="the sweep value the workload was built at")
    shape: dict[str, int] = {}
    mode: Literal["fp32", "bf16", "fp16"] = Field(description="the base variant's mode")
    flops_per_step: float | None = Field(None, description="base variant, counted")
    flops_source: str | None = None
    variants: list[LeverVariant]
    levers: list[Lever]
    batch_law: LawFit | None = Field(None, description="t = F + c * tokens over batch x1, "
                                     "x2, x4 (DESIGN section 4: the batch ladder)")
    fixed_share: float | None = Field(None, description="F / t at batch x1: large means "
                                      "launch-bound")
    warnings: list[str] = []


class LeversSection(_Model):
    device_name: str
    torch_version: str
    started_at: datetime
    command: str
    precision: Literal["full", "adaptive", "quick"]
    children: int
    clock: str
    runs: list[LeverRun]
