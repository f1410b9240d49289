"""What a certificate records of its step-time model: per workload the design it measured,
the model fitted over it, and the noise verdict; per certificate the verdict over all
workloads and the host's load before and after measuring.

The model itself and a workload's verdict are :mod:`afford.schema.time_law`'s, as the fit
modules return them. Every field is optional in the certificate: one written before the model
existed loads with ``time`` absent, and readers fall back to the throughput law.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.schema.quantities import Count, Dim, Ratio, Seconds
from afford.schema.time_law import StepTimeModel, TimeVerdict


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")


class Extension(_Model):
    """The shapes measured past the design because its fitted points stayed on the floor."""

    shapes: list[tuple[Dim, Dim]] = Field(description="(batch, seq), or (1, n) on one axis")
    notes: list[str] = []
    left_floor: bool = Field(description="the model fitted with them reaches the work regime")


class Regime(_Model):
    """Where a measured shape lies: its warm step against the workload's floor."""

    label: str = Field(description="the point, e.g. '8 x 2048'")
    role: str
    seconds: Seconds
    work: bool = Field(description="in the work regime: at least WORK_OVER_FLOOR x the floor")
    child_spread: Ratio | None = None


class WorkloadTime(_Model):
    """One workload's step-time section."""

    axes: Literal["batch_seq", "n"]
    batch_key: str | None = Field(None, description="the shape key that holds the batch")
    seq_key: str | None = Field(None, description="the shape key that holds the sequence")
    base_batch: Dim | None = None
    design_notes: list[str] = Field([], description="how the design was chosen, what was "
                                    "not planned and why")
    features: str = Field(description="what the model's work terms are made of: counted FLOPs, "
                          "or the shape only, and why")
    model: StepTimeModel | None = None
    not_fitted: str | None = Field(None, description="why no model was fitted")
    extension: Extension | None = None
    floor_seconds: Seconds | None = Field(None, description="the smallest warm step measured "
                                        "(the launch floor's estimate)")
    floor_spread: Ratio | None = Field(None, description="worst children spread among the "
                                       "floor points: the floor's uncertainty (its level "
                                       "differs from process to process)")
    regimes: list[Regime] = []
    verdict: TimeVerdict | None = None
    first_verdict: TimeVerdict | None = Field(None, description="the verdict before the "
                                              "re-measurement, when there was one")


class HostLoad(_Model):
    """The host's load at one moment: ``None`` where it could not be read, with the reason."""

    at: str = Field(description="before or after")
    load_average: tuple[Ratio, Ratio, Ratio] | None = Field(
        None, description="os.getloadavg(): runnable processes over 1, 5, 15 minutes")
    cpu_count: Dim | None = None
    gpu_processes: list[dict] | None = Field(
        None, description="other processes on the device (NVML compute processes: pid and "
        "used memory), this certify's own excluded; None where NVML could not say")
    gpu_processes_error: str | None = None


class CertTimeVerdict(_Model):
    """The certificate's time verdict: NOISY when any workload's stayed NOISY after its one
    re-measurement (``afford certify`` then exits 1, the certificate written); MISSED when a
    workload's model missed a judged held-out shape beyond tolerance and the re-measurement
    reproduced it (the reasons name each shape and its error: the model's accuracy, not
    noise); UNJUDGED when some workload's model could not be judged at any held-out shape
    (the reasons name them: its predictions are unchecked); OK otherwise. A certificate
    stored OK by an older afford over a workload now MISSED reads MISSED
    (:func:`afford.figures.time_figures.verdict_label` takes the worst)."""

    label: Literal["OK", "NOISY", "MISSED", "UNJUDGED"]
    reasons: list[str] = []
    child_tolerance: Ratio
    held_out_tolerance: Ratio
    floor_tolerance: Ratio
    rule: str = Field(description="the rule, in words")
    remeasured_points: Count = 0
