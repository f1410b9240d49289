"""The certificate's ``levers`` section: measured A/B pairs on one workload in one run.

Written by ``afford levers`` or ``afford certify --levers``; each variant a full
:class:`~afford.schema.point.Point`; a lever that cannot run here is NOT EXECUTABLE with the
reason.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.core.provenance import NotExecutable
from afford.schema.laws import LawFit
from afford.schema.point import Point
from afford.schema.quantities import Dim, Flops, Ratio, Timestamp


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


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

    name: str = Field(description="a built-in lever (LeverName) or a user arm's name")
    arm: str | None = Field(None, description="a user arm (afford levers --arm NAME=SPEC): "
                            "the workload spec of B, the arm (an ablation: A with a part "
                            "removed or replaced); None for a built-in lever")
    description: str
    a: str = Field(description="variant key without the lever")
    b: str = Field(description="variant key with the lever")
    metric: Literal["step_seconds", "tokens_per_second"] = Field(
        description="step_seconds: speedup = t_A / t_B; tokens_per_second: (tok_B / t_B) / "
        "(tok_A / t_A)")
    per_child: list[Ratio] = Field([], description="speedup within each child (A and B "
                                   "timed in the same process)")
    speedup: Ratio | None = Field(None, description="median over children")
    speedup_min: Ratio | None = None
    speedup_max: Ratio | None = None
    not_executable: NotExecutable | None = None


class LeverRun(_Model):
    workload: str
    value: Dim = Field(description="the sweep value the workload was built at")
    shape: dict[str, Dim] = {}
    mode: Literal["fp32", "bf16", "fp16"] = Field(description="the base variant's mode")
    flops_per_step: Flops | None = Field(None, description="base variant, counted")
    flops_source: str | None = None
    variants: list[LeverVariant]
    levers: list[Lever]
    batch_law: LawFit | None = Field(None, description="t = F + c * tokens over batch x1, "
                                     "x2, x4 (docs/DESIGN.md section 4: the batch ladder)")
    fixed_share: Ratio | None = Field(None, description="F / t at batch x1: large means "
                                      "launch-bound")
    warnings: list[str] = []


class LeversSection(_Model):
    device_name: str
    torch_version: str
    started_at: Timestamp
    command: str
    precision: Literal["full", "adaptive", "quick"]
    children: Dim
    clock: str
    runs: list[LeverRun]
