"""A sweep point: each child's raw timing of it, and what is derived from them.

Raw samples are the source of truth (docs/DESIGN.md section 2): every timed step of every
child, with its step index; step 0 and the warm-up kept apart. A point of the sweep, a
model size (:mod:`afford.schema.sizes`) and a lever variant (:mod:`afford.schema.levers`)
are each one :class:`Point`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")


class ChildPoint(_Model):
    """One child's timing of one sweep point: raw samples with their step indices."""

    child: int
    order_position: int
    step0_seconds: float | None = None
    warmup_seconds: list[float] = []
    timed_seconds: list[float] = []
    timed_step_indices: list[int] = []
    median_seconds: float | None = None
    precision: float | None = Field(None, description="95% CI half-width of the median / median")
    reached_target: bool | None = None
    stopped: str | None = Field(None, description="why timing stopped: floor, target (median "
                                "known to the target), cap (max floor spent), unreachable "
                                "(the target was out of reach within the cap)")
    first_loss: float | None = Field(None, description="loss of step 0")
    grads_checked: int | None = Field(None, description="parameters with a finite gradient")
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    peak_rss_bytes: int | None = None
    baseline_rss_bytes: int | None = None
    swap_bytes: int | None = None
    memory_source: str | None = None
    wall_seconds: float | None = None
    oom: bool = False
    refused: str | None = None
    error: str | None = None


class Point(_Model):
    value: int
    shape: dict[str, int]
    params: int | None = Field(None, description="trainable parameters")
    frozen_params: int | None = Field(None, description="parameters not trained (LoRA base, "
                                      "frozen layers): weights only, no gradient or optimizer "
                                      "state; None: not counted (older certificates)")
    tokens_per_step: int | None = None
    vocab: int | None = Field(None, description="classes of the workload's cross-entropy "
                              "(None: its loss is not one)")
    children: list[ChildPoint]
    median_seconds: float | None = None
    child_medians: list[float] = []
    child_spread: float | None = Field(None, description="(max - min) / median of child medians")
    worst_precision: float | None = None
    step0_seconds: float | None = Field(None, description="median over children")
    step0_over_warm: float | None = None
    peak_allocated_bytes: int | None = Field(None, description="max over children")
    peak_reserved_bytes: int | None = Field(None, description="max over children")
    peak_rss_bytes: int | None = Field(None, description="max over children (CPU)")
    memory_source: str | None = None
    resident: bool | None = Field(description="None when the point failed and residency is unknown")
    excluded_reason: str | None = None

    @property
    def usable(self) -> bool:
        """Resident, not excluded and timed: a point laws are fitted over and figures are
        read from (docs/DESIGN.md section 3, rule 3). The one residency check; every reader
        asks the point."""
        return self.resident is True and self.excluded_reason is None \
            and self.median_seconds is not None
