"""The certificate's ``memory`` section: raw peaks per shape, the memory law, its held-out
validation and the verdicts on default constants (docs/DESIGN.md section 4, "Memory law").

Raw records are the source of truth: every shape keeps its cumulative peak after each
training step (step 0 alone, then the loop), the states counted tensor by tensor, and any
error. Fits, held-out errors and verdicts are derived from them and re-derivable.

On CUDA the law is fitted to peak allocated and, separately, to peak reserved bytes. On a
CPU it is fitted to the peak RSS *increment* of the shape over the process's RSS before the
shape was built (the interpreter and torch are not the workload's memory; relative errors of
the increment are the honest figure); predictions add the measured baseline back.
"""

import base64
import zlib
from array import array
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat

from afford.core.provenance import NotExecutable
from afford.core.units import format_bytes
from afford.schema.quantities import (
    ByteFigure,
    Bytes,
    Count,
    DeviceMemory,
    Dim,
    Duration,
    Fraction,
    Ratio,
)

Form = Literal["states_measured", "states_plus_fixed"]
Role = Literal["warmup", "base", "seq", "batch", "corner", "heldout-interpolated",
               "heldout-seq", "heldout-batch", "asked"]  # asked: afford size --measure
SWEEP_ROLES = ("base", "seq", "batch", "corner")
HELDOUT_ROLES = ("heldout-interpolated", "heldout-seq", "heldout-batch")


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


def activation_features(B: float, s: float, d: float, L: float, H: float
                        ) -> tuple[float, float]:
    """(L*B*s*d, L*B*H*s^2): the two regressors of the law."""
    return float(L * B * s * d), float(L * B * H * s * s)


class MemoryFit(BaseModel):
    """One fitted form of the law over one measured quantity."""

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    quantity: Literal["allocated", "reserved", "rss_increment"]
    form: Form
    c_res: NonNegativeFloat = Field(description="bytes per (B*s*d) per layer (>= 0: the fit "
                                    "bounds it below by 0)")
    c_op: NonNegativeFloat = Field(description="bytes per (B*H*s^2) per layer (>= 0)")
    fixed_bytes: float = Field(0.0, description="constant bytes (0 in states_measured)")
    s2_term: bool = Field(True, description="the law has the C_op*B*H*s^2 term (False: "
                          "attention that never stores the s x s scores; c_op is 0)")
    r2: float = Field(description="coefficient of determination of the peaks, linear space")
    residuals: list[float] = Field(description="relative: predicted / measured - 1")
    loo_rel_errors: list[float] | None = Field(
        None, description="leave-one-out: predicted without the point / measured - 1")
    other_form_loo_max: float | None = Field(
        None, description="the smallest leave-one-out max of the forms not chosen")
    candidates: dict[str, float] = Field(
        {}, description="leave-one-out max of every form tried, by form name")
    n_points: Count

    @property
    def name(self) -> str:
        return form_name(self.form, self.s2_term)

    @property
    def loo_max(self) -> float | None:
        if not self.loo_rel_errors:
            return None
        return max(abs(e) for e in self.loo_rel_errors)

    def predict(self, states_bytes: float, B: float, s: float, d: float, L: float, H: float,
                **override: float) -> float:
        """Peak bytes at a shape; ``override`` replaces c_res, c_op or fixed_bytes."""
        c = {"c_res": self.c_res, "c_op": self.c_op, "fixed_bytes": self.fixed_bytes, **override}
        x_res, x_op = activation_features(B, s, d, L, H)
        return float(states_bytes + c["fixed_bytes"] + c["c_res"] * x_res + c["c_op"] * x_op)

    def describe(self) -> str:
        fixed = f" {signed_bytes(self.fixed_bytes)}" if self.form == "states_plus_fixed" else ""
        op = f" + {self.c_op:.3f} B*H*s^2" if self.s2_term else ""
        return (f"states{fixed} + L*({self.c_res:.2f} B*s*d{op}) "
                f"({self.quantity}, {self.name}, R^2 {self.r2:.5f}, {self.n_points} shapes)")


def signed_bytes(n: float) -> str:
    """A law's constant term as a term: ``+ 190.80 MiB``, ``- 41.20 KiB`` (a fitted
    intercept may be negative; it is a coefficient of the law, never a size shown alone)."""
    shown = format_bytes(abs(n))
    return f"{'-' if n < 0 and shown != format_bytes(0) else '+'} {shown}"  # never "- 0 B"


def form_name(form: Form, s2_term: bool) -> str:
    return form if s2_term else f"{form}, no s^2"


class DefaultVerdict(BaseModel):
    """A default constant (or a whole default formula) judged against this box's fit.

    ``effect`` = default prediction / fitted prediction - 1 at the target shape, the default
    replacing the fitted value and everything else left as fitted. CONFIRMED when
    ``|effect| <= tolerance``; otherwise WRONG, ``optimistic`` when the default under-predicts
    memory (a run it admits may not fit), ``pessimistic`` when it over-predicts. The
    consequence compares the largest resident batch at the target's sequence length.
    """

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    constant: str = Field(description="bytes_per_param, c_res, c_op, fixed_bytes or formula")
    default_name: str
    citation: str
    default_value: float | None = None
    fitted_value: float | None = None
    target: dict[str, Dim]
    fitted_bytes: float
    default_bytes: float
    effect: float
    tolerance: float
    status: Literal["CONFIRMED", "WRONG"]
    direction: Literal["optimistic", "pessimistic"] | None = None
    budget_bytes: ByteFigure | None = None
    max_batch_fitted: Count | None = None
    max_batch_default: Count | None = None
    consequence: str


def pack_ints(values, typecode: str = "q") -> str:
    """Integers as base64 of zlib'd little-endian machine words (``q``: 64-bit)."""
    a = array(typecode, values)
    if a.itemsize > 1 and array("h", [1]).tobytes()[0] != 1:  # big-endian host
        a.byteswap()
    return base64.b64encode(zlib.compress(a.tobytes(), 6)).decode("ascii")


def unpack_ints(text: str, typecode: str = "q") -> list[int]:
    a = array(typecode)
    a.frombytes(zlib.decompress(base64.b64decode(text)))
    if a.itemsize > 1 and array("h", [1]).tobytes()[0] != 1:
        a.byteswap()
    return a.tolist()


class SeedSegment(_Model):
    """A segment the caching allocator held when a traced history began (after
    ``empty_cache``: the process's workspaces and anything else still alive)."""

    addr: int
    size: int
    small: bool
    stream: int = 0
    blocks: list[tuple[int, bool]] = Field(description="(bytes, allocated?) in address order")


class AllocTrace(_Model):
    """One shape's allocator history (``torch.cuda.memory._record_memory_history``, build
    and every step) in the canonical form of :func:`afford.fit.memory.trace_scaling.from_history`:
    allocation sizes and streams by slot, and the ops (slot >= 0 allocates it, ``~slot``
    frees it), packed (:func:`pack_ints`). Raw readings: the replay is derived from them."""

    n_allocs: int
    n_ops: int
    sizes: str = Field(description="packed int64: bytes requested by each slot")
    streams: str = Field(description="packed int64: the stream of each slot")
    ops: str = Field(description="packed int64: slot, or ~slot for its free")
    external_frees: int = Field(0, description="frees of blocks allocated before the history")
    seed: list[SeedSegment] = Field([], description="segments held when the history began")
    alloc_conf: str = Field("", description="PYTORCH_CUDA_ALLOC_CONF of the process")
    truncated: bool = Field(False, description="the history filled its buffer: events lost")

    def unpacked(self) -> tuple[list[int], list[int], list[int]]:
        """(sizes, streams, ops)."""
        return unpack_ints(self.sizes), unpack_ints(self.streams), unpack_ints(self.ops)


class MemoryShape(_Model):
    """One shape, measured in the memory child: a short training loop."""

    key: str
    role: Role
    shape: dict[str, Dim] = Field(description="the workload's own shape keys")
    dims: dict[str, Dim] = Field(description="B, s, d, L, H of the memory law")
    params: Count | None = Field(None, description="trainable parameters")
    frozen_params: Count | None = Field(None, description="parameters not trained; "
                                                 "None: not counted (older certificates)")
    frozen_bytes: Bytes | None = Field(
        None, description="the frozen parameters' weights, counted storage by storage (part "
        "of states_bytes)")
    states_bytes: Bytes | None = Field(
        None, description="weights + gradients + optimizer state after the loop, counted "
        "tensor by tensor (each storage once)")
    steps: Count = 0
    allocated_by_step: list[Bytes] = Field(
        [], description="CUDA: max_memory_allocated after each step (cumulative)")
    reserved_by_step: list[Bytes] = Field(
        [], description="CUDA: max_memory_reserved after each step (cumulative)")
    rss_by_step: list[Bytes] = Field([], description="CPU: peak RSS after each step "
                                              "(cumulative)")
    baseline_rss_bytes: Bytes | None = Field(None, description="CPU: RSS before the "
                                                      "build")
    swap_bytes: Bytes | None = None
    resting_allocated_bytes: Bytes | None = Field(
        None, description="CUDA: memory_allocated after the loop (states, data, workspaces)")
    memory_source: str | None = None
    fresh_state: bool | None = Field(
        None, description="CUDA: the shape began with the process's cuBLAS workspaces freed, "
        "as in a fresh process (afford.measure.memory_peaks.fresh_state); None: kept from "
        "earlier shapes (older certificates)")
    trace: AllocTrace | None = Field(None, description="CUDA: the allocator's history, "
                                     "recorded at the traced shapes")
    wall_seconds: Duration | None = None
    oom: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.oom and self.steps > 0 and \
            self.states_bytes is not None and self.params is not None

    def peak(self, quantity: str, step: int = -1) -> float | None:
        """The cumulative peak after ``step`` (default: the whole loop) of ``quantity``:
        allocated, reserved, or rss_increment (peak RSS minus the baseline)."""
        if quantity == "allocated" and self.allocated_by_step:
            return float(self.allocated_by_step[step])
        if quantity == "reserved" and self.reserved_by_step:
            return float(self.reserved_by_step[step])
        if quantity == "rss_increment" and self.rss_by_step and \
                self.baseline_rss_bytes is not None:
            return float(self.rss_by_step[step] - self.baseline_rss_bytes)
        return None


class HeldOut(_Model):
    """A shape measured but not fitted: how good the law's prediction was there."""

    role: Role
    dims: dict[str, Dim]
    params: Count
    extrapolated: bool
    measured_bytes: ByteFigure = Field(description="allocated (CUDA) or RSS increment (CPU)")
    predicted_bytes: float
    error: float = Field(description="predicted / measured - 1")
    measured_reserved_bytes: ByteFigure | None = None
    predicted_reserved_bytes: float | None = None
    reserved_error: float | None = None
    formulas: dict[str, float] = Field(
        {}, description="default formulas' predictions of the same quantity (no fitted "
        "constant): four_x_model_size, korthikanti_zero, inherited ...")


class LoopEffect(_Model):
    """One step versus a training loop: what a single-step measurement misses."""

    median_extra_bytes: float = Field(description="loop peak - step-0 peak, median over shapes")
    median_extra_bytes_per_param: float
    median_extra_fraction: float = Field(description="loop peak / step-0 peak - 1")
    max_growth_after_step1_bytes: float = Field(
        description="largest rise of the budgeted peak after step 1 (allocator growth)")
    note: str


class ReplayCheck(_Model):
    """A shape predicted by the allocator replay beside what was measured there: at a
    traced shape its own recorded history replayed (validation); at a held-out shape the
    history synthesised from the traced ones (prediction), with the law beside it."""

    role: Role
    B: Dim
    s: Dim
    tokens_over_traced: float = Field(description="B*s over the largest traced shape's")
    measured_allocated_bytes: ByteFigure
    measured_reserved_bytes: ByteFigure
    replay_allocated_bytes: float
    replay_reserved_bytes: float
    allocated_error: float = Field(description="replay / measured - 1")
    reserved_error: float
    law_allocated_bytes: float | None = None
    law_reserved_bytes: float | None = None
    law_allocated_error: float | None = None
    law_reserved_error: float | None = None
    expandable_allocated_bytes: float | None = Field(
        None, description="the same history replayed with expandable_segments:True")
    expandable_reserved_bytes: float | None = None


BREAKDOWN_CLASSES = ("parameters", "workspaces", "optimizer_state", "gradients", "activations",
                     "temporaries", "slack")


class MemoryBreakdownRecord(_Model):
    """Where the memory goes at the allocated peak of the last training step, every live
    block classed by its lifetime (:mod:`afford.fit.memory.breakdown`), plus the allocator's slack
    (reserved - allocated then). Bytes as the allocator counts them (whole blocks)."""

    B: Dim
    s: Dim
    expandable: bool
    source: str = Field(description="'recorded' (the traced history) or 'synthesised'")
    allocated_bytes: Bytes
    reserved_bytes: Bytes = Field(description="reserved at the allocated peak")
    peak_reserved_bytes: Bytes
    parameters_bytes: Bytes
    workspaces_bytes: Bytes
    optimizer_state_bytes: Bytes
    gradients_bytes: Bytes
    activations_bytes: Bytes
    temporaries_bytes: Bytes
    slack_bytes: int

    def classes(self) -> dict[str, int]:
        return {c: getattr(self, f"{c}_bytes") for c in BREAKDOWN_CLASSES}


REPLAY_VERSION = 2  # 2: the learned sizes stored (LearnedSizes); the free order below a
# path switch taken from a traced shape without it (below_ops). Older replays are rebuilt
# from their raw traces when read (afford.figures.replay_figures.current).


class LearnedSizes(_Model):
    """The allocator replay's learned model, stored so that no command re-learns it: the
    reference history's canonical ops and streams, and each slot's size law
    (:class:`afford.fit.memory.trace_scaling.SizeLaw`, kept once in ``laws`` and named per
    slot by ``law_of_slot``: a step's thousands of allocations take a few dozen laws).
    Derived from the traced shapes' :class:`AllocTrace` records, as the replay is."""

    shapes: list[tuple[Dim, Dim]] = Field(description="traced (B, s), reference first")
    ops: str = Field(description="packed int64: the reference's canonical ops")
    streams: str = Field(description="packed int64: each slot's stream")
    laws: list[dict] = Field(description="the distinct size laws (SizeLaw fields)")
    law_of_slot: str = Field(description="packed int64: each slot's index into laws")
    unmatched: list[int]
    extras: list[int]
    reference_only: str = Field(description="packed int64: slots only the reference makes")
    reference_only_above: int | None = None
    below_ops: str | None = Field(None, description="packed int64: the ops written out "
                                  "below reference_only_above (None: the reference's)")
    warnings: list[str] = []


PathKind = Literal["sliding_window", "chunked_attention", "position_limit", "moe_routing",
                   "size_switch"]


class CodePath(_Model):
    """A size at which the workload's step takes another code path, as far as a certificate
    can know it: from the model's config (a sliding window or chunked attention, a learned
    position table, routing to experts) or from the traced histories (allocations only a
    larger traced shape makes). A memory figure past a threshold no measured shape crossed
    describes a step nobody ran."""

    kind: PathKind
    axis: Literal["seq", "tokens"] = Field(description="what the threshold is of")
    threshold: int | None = Field(description="the path changes above this; None: it depends "
                                  "on the data at every size (routing)")
    source: str = Field(description="where it was read: the config key, or the traces")
    effect: str = Field(description="what changes past it, in a phrase")


class ReplayModel(_Model):
    """Reserved memory by replaying the step's allocations through a model of PyTorch's
    caching allocator: validated at the traced shapes, compared with the law at the held-out
    ones. Derived from the traced shapes' :class:`AllocTrace` records."""

    traced: list[tuple[Dim, Dim]] = Field(description="(B, s) traced, reference first")
    alloc_conf: str = Field("", description="PYTORCH_CUDA_ALLOC_CONF the traces ran under")
    expandable: bool = Field(False, description="the traces ran with expandable segments")
    validation: list[ReplayCheck] = Field(description="each traced history replayed")
    synthesised: list[ReplayCheck] = Field(
        [], description="each traced shape's history written out by the learned size laws "
        "and replayed from the reference's state: the learning's own check (a history it "
        "cannot write back at a shape it saw is not trusted at one it did not)")
    tolerance: Ratio = Field(description="validation passes within this relative error")
    trusted: bool = Field(description="validated: every traced shape within tolerance")
    heldout: list[ReplayCheck] = []
    better: Literal["replay", "law"] | None = Field(
        None, description="which predicts reserved better at the held-out shapes (worst "
        "|error|); None: no held-out shape measured")
    replay_worst_reserved_error: float | None = None
    law_worst_reserved_error: float | None = None
    safety_margin: float = Field(0.0, description="the replay's worst under-prediction of "
                                 "reserved over the traced and held-out shapes (0 when it "
                                 "never under-predicted): budgets add it to a prediction")
    breakdown: MemoryBreakdownRecord | None = Field(
        None, description="at the base shape's recorded peak, native allocator")
    size_laws: dict[str, int] = Field({}, description="slots per size basis (and inexact, "
                                      "capped, interpolated, ambiguous)")
    fit_seconds: Duration = 0.0
    warnings: list[str] = []
    version: int = Field(1, description="how the replay was derived (REPLAY_VERSION); older "
                         "ones are rebuilt from the traces when read")
    learned: LearnedSizes | None = Field(None, description="the learned size laws (version "
                                         ">= 2): read, not re-learned, by every command")

    @property
    def answers(self) -> bool:
        """Whether predictions come from the replay: validated (trusted), and at the
        held-out shapes no worse than the law (or nothing held out to judge by)."""
        return self.trusted and self.better in ("replay", None)


class MemoryLaw(_Model):
    """The memory law of one workload in one dtype mode, with its validation."""

    workload: str
    mode: Literal["fp32", "bf16", "fp16"]
    device_type: Literal["cuda", "cpu"]
    attention: Literal["fused", "materialised"] | None = Field(
        None, description="how the workload's attention keeps its scores, as it declares "
        "(Workload.attention): decides whether the law has an s^2 term and which variant "
        "of Korthikanti's formula applies; None: not declared, or not attention")
    dim_keys: dict[str, str] = Field(description="law dim -> the workload's shape key")
    base_shape: dict[str, Dim]
    base_dims: dict[str, Dim]
    ranges: dict[str, list[float]] = Field(
        description="[min, max] over the fitted shapes of B, s, B*s and B*s^2")
    bytes_per_param: NonNegativeFloat = Field(
        description="(states - frozen weights) / trainable params, median over fitted shapes")
    frozen_params: NonNegativeFloat = Field(
        0.0, description="frozen parameters (median over fitted shapes): they carry weights "
        "only")
    frozen_bytes: NonNegativeFloat = Field(
        0.0, description="the frozen weights' bytes (median over fitted shapes), added to "
        "bytes_per_param x params")
    params_p0: float = Field(description="params = params_p0 + params_per_s * s")
    params_per_s: float
    baseline_rss_bytes: NonNegativeFloat | None = Field(None, description="CPU: median RSS "
                                                        "baseline")
    allocated: MemoryFit = Field(description="CUDA: peak allocated; CPU: peak RSS increment")
    reserved: MemoryFit | None = None
    worst_reserved_ratio: PositiveFloat | None = Field(
        None, description="largest measured reserved / allocated over the fitted shapes")
    batch_linearity_r2: float | None = None
    batch_linearity_max_residual: float | None = None
    loop: LoopEffect | None = None
    heldout: list[HeldOut] = []
    verdicts: list[DefaultVerdict] = []
    shapes: list[MemoryShape]
    replay: ReplayModel | None = Field(None, description="CUDA: the allocator replay beside "
                                       "the law (None: not traced, or a CPU)")
    paths: list[CodePath] | None = Field(
        None, description="the code paths the workload switches between that the "
        "certificate knows of (its config, its traces); None: not recorded (an older "
        "certificate)")
    warnings: list[str] = []


class MemorySection(_Model):
    """What the memory stage measured and fitted."""

    steps_per_shape: Count
    budget_fraction: Fraction = Field(gt=0.0, le=1.0,
                                   description="share of device memory plans may use")
    tolerance: Ratio = Field(description="verdict tolerance on the predicted peak")
    targets: dict[str, float] = Field(description="held-out accuracy aimed for, by quantity")
    device_memory_bytes: DeviceMemory | None = None
    laws: list[MemoryLaw] = []
    not_executable: list[NotExecutable] = []
    wall_seconds: Duration
    alloc_conf: str | None = Field(None, description="PYTORCH_CUDA_ALLOC_CONF of the child "
                                   "(CUDA; '' when unset)")
    warnings: list[str] = []
