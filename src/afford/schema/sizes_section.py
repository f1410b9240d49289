"""The certificate's ``sizes`` section: the training step across model sizes (the scale
ladder).

Written by certify: ``tinylm`` timed at a few widths and depths at one batch x seq (three
inside the default GPU certify's sweep, five with ``--sizes``), each size a full
:class:`~afford.schema.point.Point` (raw samples of every child, its counted FLOPs and
profiled device side where measured); the size law (:class:`SizeLaw`, fitted by
:mod:`afford.fit.time.size_law`); how the family's work grows with width and depth
(:class:`FamilyScaling`); and, with ``--sizes``, the warm step split into forward, backward
and optimizer at the smallest and the largest size. The size law and the family scaling
are evaluated here, below the fit layer, so reading a certificate needs no scipy.
"""

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat

from afford.core.errors import InputError
from afford.core.units import MAX_COUNT, MAX_FLOPS
from afford.schema.laws import ThroughputLaw
from afford.schema.point import Point
from afford.schema.quantities import Count, Dim, Duration, Flops, Rate, Ratio, Seconds


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


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


# ---- the size law (fitted by afford.fit.time.size_law) -------------------------------------

WorkColumn = Literal["kernels", "gemm_flops", "attn_flops", "state_bytes"]
WORK_COLUMNS: tuple[WorkColumn, ...] = ("kernels", "gemm_flops", "attn_flops", "state_bytes")
COLUMN_WORDS = {"kernels": "kernel", "gemm_flops": "GEMM FLOP",
                "attn_flops": "counted attention FLOP", "state_bytes": "state byte"}


class SizeWork(_Model):
    """One model size's work per training step at the law's batch x seq."""

    d: Dim
    L: Dim
    params: float = Field(ge=0, description="trainable parameters")
    gemm_flops: Flops = Field(description="per step: matmuls (counted, or the family's law)")
    attn_flops: Flops = Field(description="per step: attention's products, the full square "
                              "as counted (a causal kernel does half)")
    state_bytes: float = Field(ge=0, description="bytes of weights, gradients and optimizer "
                               "moments: the optimizer step reads each at least once")
    kernels: float | None = Field(None, ge=0, description="kernels per step where profiled; "
                                  "else the law's count at depth L")

    def column(self, name: str) -> float:
        return float(getattr(self, name) or 0.0)


class SizeFit(_Model):
    """A fitted size as the law sees it."""

    label: str
    params: float
    measured_seconds: Seconds
    predicted_seconds: float
    loo_rel_error: float | None = Field(None, description="predicted by the law refitted "
                                        "without this size, / measured - 1")
    regime: Literal["device", "host"]
    busy_seconds: float | None = Field(None, description="profiled device busy time")
    predicted_busy_seconds: float | None = None


class HeldOut(_Model):
    """The largest size predicted by the law fitted on the others: the extrapolation
    check."""

    label: str
    params: float
    factor: Ratio = Field(description="its params over the largest of the others'")
    measured_seconds: Seconds
    predicted_seconds: float
    rel_error: float


class SizeStep(_Model):
    """The law at one size: the step and its two sides."""

    seconds: float
    device: float = Field(description="busy + kernels x gap")
    busy: float
    host: float | None
    kernels: float | None
    regime: Literal["device", "host"]
    band: tuple[float, float] | None = Field(None, description="host-bound: the step's range "
                                             "across processes")


class SizeLaw(_Model):
    """A training step across model sizes at one batch x seq: ``max(host, device + gap)``.

    device busy = sum of ``coefficients[c] x work[c]`` over :data:`WORK_COLUMNS`, each
    coefficient at least its ``bounds[c]`` (from the certificate's measured GEMM rate and
    bandwidth). ``profiled``: busy, kernels and the host were read apart (profiled sizes):
    host = kernels x ``issue_seconds``, kernels = ``kernels_fixed + kernels_per_layer x L``.
    ``wall``: only wall times (an older certificate, or a CPU): host = ``host_fixed +
    host_per_layer x L`` (the launches of a step grow with depth, not width)."""

    sides: Literal["profiled", "wall"]
    coefficients: dict[str, NonNegativeFloat] = Field(description="seconds per unit of each "
                                                      "column")
    bounds: dict[str, NonNegativeFloat] = Field(description="each coefficient's lower bound "
                                                "(0: none)")
    at_bound: list[str] = Field([], description="columns whose coefficient sits at its bound")
    carried: list[str] = Field([], description="coefficients carried from another law, not "
                               "fitted here")
    state_bytes_per_param: float = Field(gt=0)
    kernels_fixed: NonNegativeFloat | None = None
    kernels_per_layer: NonNegativeFloat | None = None
    issue_seconds: NonNegativeFloat | None = Field(None, description="host seconds per kernel "
                                                   "issued")
    issue_range: tuple[NonNegativeFloat, NonNegativeFloat] | None = None
    host_fixed: NonNegativeFloat | None = None
    host_per_layer: NonNegativeFloat | None = None
    gap_seconds: float = Field(0.0, ge=0, description="device seconds per kernel boundary")
    gemm_rate: Rate | None = None
    bandwidth: Rate | None = None
    batch: Dim
    seq: Dim
    points: list[SizeFit]
    held_out: HeldOut | None = None
    params_range: tuple[PositiveFloat, PositiveFloat]
    notes: list[str] = []

    def kernels_at(self, L: float) -> float | None:
        if self.kernels_fixed is None or self.kernels_per_layer is None:
            return None
        return max(1.0, self.kernels_fixed + self.kernels_per_layer * L)

    def busy(self, work: SizeWork, kernels: float | None) -> float:
        return sum(v * ((kernels or 0.0) if c == "kernels" else work.column(c))
                   for c, v in self.coefficients.items())

    def predict(self, work: SizeWork) -> SizeStep:
        """The step at ``work`` (its kernels where given, else the law's at its depth)."""
        k = work.kernels if work.kernels is not None else self.kernels_at(work.L)
        busy = self.busy(work, k)
        device = busy + (k or 0.0) * self.gap_seconds
        host = self._host(work.L, k)
        if host is None or device >= host:
            return SizeStep(seconds=device, device=device, busy=busy, host=host, kernels=k,
                            regime="device")
        band = None
        if self.issue_range is not None and k:
            lo, hi = (k * v for v in self.issue_range)
            band = (max(device, lo), max(hi, host))
        return SizeStep(seconds=host, device=device, busy=busy, host=host, kernels=k,
                        regime="host", band=band)

    def _host(self, L: float, kernels: float | None) -> float | None:
        if self.sides == "profiled":
            return None if self.issue_seconds is None or not kernels else \
                kernels * self.issue_seconds
        if self.host_fixed is None:
            return None
        return self.host_fixed + (self.host_per_layer or 0.0) * L

    def extrapolated(self, params: float) -> bool:
        lo, hi = self.params_range
        return not lo * (1 - 1e-9) <= params <= hi * (1 + 1e-9)

    @property
    def loo_worst(self) -> float | None:
        errs = [abs(p.loo_rel_error) for p in self.points if p.loo_rel_error is not None]
        return max(errs) if errs else None

    def describe(self) -> str:
        dev = " + ".join(f"{v:.3g} s/{COLUMN_WORDS[c]}" for c, v in self.coefficients.items()
                         if v > 0) or "0"
        if self.sides == "profiled":
            host = (f"{self.issue_seconds * 1e6:.3g} us x kernels" if self.issue_seconds
                    else "not seen above the device")
            kern = (f"kernels = {self.kernels_fixed:.0f} + {self.kernels_per_layer:.1f} L"
                    if self.kernels_fixed is not None else "")
            return (f"t = max(host, busy + {self.gap_seconds * 1e6:.3g} us x kernels); busy = "
                    f"{dev}; host = {host}; {kern}")
        host = ("none seen" if self.host_fixed is None else
                f"{self.host_fixed * 1e3:.3g} ms + {(self.host_per_layer or 0) * 1e3:.3g} ms x L")
        return f"t = max(host, busy); busy = {dev}; host = {host} (wall times only)"


class FamilyScaling(_Model):
    """A transformer family's work per step at one batch x seq as its width d and depth L
    scale: each layer's matmul FLOPs and weights grow as d^2 (its projections and MLP keep
    their ratios to d; Kaplan et al. 2020, section 2.1), what lies outside the layers
    (embeddings, the head) as d, and counted attention as L d (PaLM, Chowdhery et al. 2022,
    appendix B: 12 L d s FLOPs per token)."""

    workload: str
    batch: Dim
    seq: Dim
    layer_gemm: float = Field(ge=0, description="GEMM FLOPs per step per layer per d^2")
    outer_gemm: float = Field(ge=0, description="GEMM FLOPs per step outside the layers per d")
    layer_attn: float = Field(ge=0, description="counted attention FLOPs per step per L d")
    layer_params: float = Field(gt=0, description="parameters per layer per d^2")
    outer_params: float = Field(ge=0, description="parameters outside the layers per d")
    head_dim: Dim
    aspect: PositiveFloat = Field(description="d / L of the largest size read")
    read_at: str = Field(description="the sizes it was read off")
    source: str = Field(description="counted FLOPs, or 6 N per token where not counted")
    max_rel_error: float = Field(ge=0, description="worst |law / read - 1| at those sizes")

    def params_at(self, d: float, L: float) -> float:
        return self.layer_params * L * d * d + self.outer_params * d

    def work(self, d: int, L: int, bytes_per_param: float, params: float | None = None
             ) -> SizeWork:
        """The work of one step at width ``d`` and depth ``L``; InputError where the
        family's coefficients put it past what any step holds (a certificate whose sizes
        section is no measurement), never a validation error from inside a plan."""
        n = self.params_at(d, L) if params is None else params
        gemm, attn = self.layer_gemm * L * d * d + self.outer_gemm * d, self.layer_attn * L * d
        for what, value, cap in (("GEMM FLOPs", gemm, MAX_FLOPS), ("attention FLOPs", attn,
                                 MAX_FLOPS), ("parameters", n, MAX_COUNT)):
            if not value <= cap:
                raise InputError(f"{self.workload}'s size law gives {value:.3g} {what} a step "
                                 f"at d{d} L{L}, beyond any step ({cap:.0e}): the "
                                 "certificate's sizes section is not a measurement")
        return SizeWork(d=d, L=L, params=n, gemm_flops=gemm, attn_flops=attn,
                        state_bytes=bytes_per_param * n)

    def shape_for(self, params: float) -> tuple[int, int, int]:
        """(d, L, H) of about ``params`` at the family's aspect d / L, d a multiple of its
        head dimension."""
        def n_at(L: float) -> float:
            return self.params_at(self.aspect * L, L)

        lo, hi = 1e-3, 1e7
        for _ in range(200):  # n_at grows with L: bisection in log space
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if n_at(mid) < params else (lo, mid)
        L = max(1, round(lo))
        heads = max(1, round(self.aspect * L / self.head_dim))
        return heads * self.head_dim, L, heads


class SizesSection(_Model):
    """Throughput across model sizes at a fixed batch x seq (docs/DESIGN.md section 4)."""

    workload: str = "tinylm"
    mode: Literal["fp32", "bf16", "fp16"]
    batch: Dim
    seq: Dim
    tokens_per_step: Dim
    sizes: list[SizePoint]
    law: ThroughputLaw | None = Field(None, description="certificates before the size law: "
                                      "step seconds vs params as one power law (kept as "
                                      "read; the ladder refits the size law from the sizes)")
    size_law: SizeLaw | None = Field(None, description="the step across sizes: max(host, "
                                     "device + gap), each side from counted work")
    scaling: FamilyScaling | None = Field(None, description="the family's work at any width "
                                          "and depth, read off the sizes")
    phases: list[PhaseSplit] = []
    growth: list[PhaseGrowth] = []
    premise: Literal["holds", "fails", "untested"] = Field(
        "untested", description="the per-step cost that does not depend on tokens (the "
        "optimizer step) stays flat in N (holds) or grows with N (fails)")
    finding: str = ""
    phase_note: str = ""
    warnings: list[str] = []
