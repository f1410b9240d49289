"""The ``probes`` section of a certificate: device ceilings, launch-boundness, FLOPs,
checkpoint I/O and startup costs (issue 4; docs/DESIGN.md sections 3 and 4).

As everywhere in a certificate, raw samples are kept (every timed call or step, in order,
with step indices where there are steps) and the derived figures (medians, the ladder's
fit, the verdict) are stored beside them and re-derivable. A probe that could not run here
is a :class:`~afford.provenance.NotExecutable` with the reason, never a blank or a zero.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.provenance import NotExecutable
from afford.schema.laws import LawFit

GEMM_DTYPES = ("fp32", "tf32", "bf16", "fp16")


class _Model(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")


LAUNCH_FIXED_SHARE = 0.5   # half the step or more does not grow with the batch
LAUNCH_UTILISATION = 0.5   # the device ran no kernel half the time or more
COMPUTE_SHARE = 0.5        # matmul arithmetic at the ceiling explains half the step or more

THRESHOLDS = {"launch_fixed_share": LAUNCH_FIXED_SHARE,
              "launch_utilisation": LAUNCH_UTILISATION,
              "compute_share": COMPUTE_SHARE}

Label = Literal["launch-bound", "compute-bound", "memory-bound", "undetermined"]


class BoundVerdict(BaseModel):
    """Launch-, compute- or memory-bound, and the figures that decided it (``None``: not
    measured here); judged by :func:`afford.fit.verdicts.bound_verdict`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: Label
    reasons: list[str] = Field(description="one line per figure, saying which way it points")
    fixed_share: float | None = Field(None, description="the ladder fit's F / t where it is a "
                                      "share (at most 1); None when not measured or failed")
    failed_fixed_share: float | None = Field(None, description="a fit's F / t above 1: a "
                                             "failed fit, never quoted as a fixed cost")
    ladder_tokens_ratio: float | None = Field(None, description="tokens of the largest timed "
                                              "rung / the first's")
    ladder_time_ratio: float | None = Field(None, description="their median steps' ratio")
    ladder_spread: float | None = Field(None, description="the larger of the two rungs' "
                                        "IQR / median of timed steps")
    utilisation_mean: float | None = None
    utilisation_low_share: float | None = None
    arithmetic_share: float | None = None
    thresholds: dict[str, float] = Field(default_factory=lambda: dict(THRESHOLDS))


class ProbeProtocol(_Model):
    """How the probes were run (written into the result, as the sweep's protocol is)."""

    precision: Literal["full", "adaptive", "quick"]
    gemm_n: int = Field(description="m = n = k of the square GEMM probes")
    gemm_warmup_calls: int
    gemm_timed_calls: int
    gemm_reference_rows: int = Field(description="rows of C recomputed in fp64 for the error")
    copy_buffer_bytes: int
    copy_timed_calls: int
    clock: str
    ladder_multipliers: list[int]
    ladder_floor_seconds: float
    ladder_warmup_seconds: float
    ladder_min_steps: int
    nvml_hz: float
    nvml_window_seconds: float
    nvml_settle_seconds: float = Field(description="samples this soon after the sampler "
                                       "started are dropped (NVML averages over a past period)")
    low_utilisation: float = Field(description="a sample at or under this counts as idle")
    checkpoint_writes: int
    startup_children: int = Field(description="fresh-process startup runs at least, counting "
                                  "the sweep children and the probe child; fresh startup "
                                  "children are spawned only to make up the number")


class GemmProbe(_Model):
    """C = A @ B, square n x n x n, fresh random A and B (never zeros)."""

    dtype: Literal["fp32", "tf32", "bf16", "fp16"]
    n: int
    flop_per_call: float = Field(description="2 n^3")
    warmup_calls: int
    seconds: list[float] = Field(description="every timed call, in order")
    median_seconds: float
    flops_per_second: float = Field(description="flop_per_call / median_seconds")
    max_rel_error: float = Field(description="max |C - C_ref| / max |C_ref| over the rows "
                                 "recomputed in fp64 from the same (rounded) inputs")
    reference: str
    settings: dict[str, str] = Field(description="backend flags in force during the probe")


class CopyProbe(_Model):
    """dst.copy_(src) of a fresh random buffer; bandwidth counts bytes read plus written."""

    buffer_bytes: int
    bytes_per_call: int = Field(description="2 x buffer_bytes (read + written)")
    warmup_calls: int
    seconds: list[float]
    median_seconds: float
    bytes_per_second: float


class HostCopyProbe(_Model):
    """Pinned host memory -> device and device -> pinned host, one buffer per call, each
    direction timed apart (the bytes cross the link once per call)."""

    buffer_bytes: int
    warmup_calls: int
    h2d_seconds: list[float]
    h2d_bytes_per_second: float = Field(description="buffer_bytes / median h2d call")
    d2h_seconds: list[float]
    d2h_bytes_per_second: float = Field(description="buffer_bytes / median d2h call")


class UtilisationTrace(_Model):
    """NVML device utilisation sampled in a thread over the warm steps of the x1 rung."""

    source: str
    hz: float
    settle_seconds: float
    t_seconds: list[float] = Field(description="since the sampler started")
    gpu: list[float] = Field(description="fraction of the sample period a kernel ran (0..1)")
    memory: list[float] = Field(description="fraction of the period memory was read/written")
    kept: int = Field(description="samples at or after settle_seconds")
    mean: float | None = Field(None, description="mean gpu over the kept samples")
    low_share: float | None = Field(None, description="share of kept samples at or under "
                                    "the low-utilisation threshold")
    error: str | None = None


class Rung(_Model):
    """One rung of the batch ladder: the workload's shape with its batch multiplied."""

    multiplier: int
    shape: dict[str, int]
    tokens_per_step: int | None = None
    step0_seconds: float | None = None
    warmup_seconds: list[float] = []
    timed_seconds: list[float] = []
    timed_step_indices: list[int] = []
    median_seconds: float | None = None
    oom: bool = False
    error: str | None = None
    build_seconds: float | None = Field(None, description="building the rung's model, "
                                        "optimizer and data (host clock)")
    wall_seconds: float | None = Field(None, description="the whole rung: build, step 0, "
                                       "warm-up, timed steps (host clock)")


class Ladder(_Model):
    batch_key: str = Field(description="the shape key that was multiplied")
    rungs: list[Rung]
    law: LawFit | None = Field(None, description="t = F + c * tokens over the timed rungs")
    fixed_seconds: float | None = Field(None, description="F")
    fixed_share: float | None = Field(None, description="F / measured t of the x1 rung")
    warnings: list[str] = []


class FlopCount(_Model):
    """FLOPs of one whole training step, counted by FlopCounterMode on the device."""

    value: int = Field(description="sweep value the step was built at")
    shape: dict[str, int]
    flops: float
    by_op: dict[str, float] = Field(description="per aten op, as FlopCounterMode reports")
    counter: str
    step_seconds: float | None = Field(None, description="the sweep's warm median at this "
                                       "value (resident points only)")


class CheckpointProbe(_Model):
    """Atomic writes (temp file in the same folder, fsync, rename, fsync folder) of the
    model and optimizer state after warm steps; loaded back with weights_only=True."""

    value: int
    shape: dict[str, int]
    directory: str
    bytes: int
    write_seconds: list[float]
    median_write_seconds: float
    load_seconds: float
    verified: bool = Field(description="every tensor and setting loaded back equal")
    mismatch: str | None = None
    method: str


class ShapeGemm(_Model):
    """One matmul shape of the workload's step, timed alone (batch 1: a plain mm)."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str
    calls: int = Field(description="calls of this shape in one training step")
    flops_per_call: float = Field(description="2 batch m n k")
    share_of_step_matmul_flops: float
    seconds: list[float]
    median_seconds: float
    flops_per_second: float
    fraction_of_square: float | None = Field(
        None, description="flops_per_second / the square GEMM probe's rate of the ceiling "
        "dtype (None: that probe did not run)")


class ShapeGemms(_Model):
    """GEMM probes at the workload's own shapes (issue 16): what its step's matmuls reach."""

    distinct_shapes: int
    matmul_flops_per_step: float
    timed: list[ShapeGemm] = Field(description="the shapes carrying the most arithmetic")


class WorkloadProbes(_Model):
    """The per-workload probes at the workload's smallest resident sweep point."""

    name: str
    mode: Literal["fp32", "bf16", "fp16"]
    sweep_param: str
    value: int | None = Field(None, description="the sweep value probed (smallest resident)")
    gemm_dtype: str | None = Field(None, description="the GEMM ceiling this mode's matmuls "
                                   "run at (fp32, tf32, bf16, fp16)")
    ladder: Ladder | NotExecutable
    utilisation: UtilisationTrace | NotExecutable
    flops: list[FlopCount | NotExecutable] = []
    checkpoint: CheckpointProbe | NotExecutable
    verdict: BoundVerdict
    gemm_shapes: ShapeGemms | NotExecutable | None = Field(
        None, description="the step's own matmul shapes timed alone (None: certificates "
        "before this probe)")


class StartupRun(_Model):
    """One fresh child: the parent's clock from spawn to the child's report, and the
    child's own clock around each import."""

    process_seconds: float = Field(
        description="spawn to ready (after the imports, and the CUDA context creation where "
        "cuda_init_seconds is given): the parent's clock, or for a sweep child the wall clock "
        "of both")
    import_torch_seconds: float
    import_transformers_seconds: float | None = None
    cuda_init_seconds: float | None = None
    torch_version: str
    transformers_version: str | None = None
    contended: bool = Field(False, description="its imports ran beside another process's "
                            "imports (the first sweep child, spawned as the command started): "
                            "both slow down, so the medians leave it out when other runs exist")
    prewarm_seconds: float | None = Field(
        None, description="after ready, before its job: cuBLAS handles and the fused "
        "optimizer's first construction (the probe child on CUDA); not in process_seconds")
    role: str = Field("startup", description="'startup', 'probe child' or 'sweep child N' "
                      "(each child measures its own imports before anything else; a child "
                      "spawned ahead says that its imports overlapped another's measurement)")


def counted_runs(runs: list[StartupRun]) -> list[StartupRun]:
    """The runs the startup medians are taken over: those not contended, or every run when
    all were."""
    return [r for r in runs if not r.contended] or list(runs)


class Startup(_Model):
    runs: list[StartupRun]
    process_seconds: float = Field(description="median over the runs not contended (all "
                                   "runs when every one was)")
    import_torch_seconds: float = Field(description="median over the same runs")
    import_transformers_seconds: float | NotExecutable
    cuda_init_seconds: float | NotExecutable


class DatasheetPeaks(_Model):
    """A row of ``afford/data/devices.toml``: dense peaks, carried with their citation."""

    device: str = Field(description="the row's product name")
    matched: str = Field(description="the name pattern that matched the device")
    flops_per_second: dict[str, float] = Field(description="dtype -> dense FLOP/s")
    bandwidth_bytes_per_second: float | None = None
    citation: str
    secondary: bool
    note: str = ""


class ProbesSection(_Model):
    protocol: ProbeProtocol
    device: str
    gemm: dict[str, GemmProbe | NotExecutable] = Field(description="by dtype")
    device_copy: CopyProbe | NotExecutable
    host_copy: HostCopyProbe | NotExecutable | None = Field(
        None, description="the host link (None: certificates before it was probed)")
    workloads: list[WorkloadProbes]
    startup: Startup | NotExecutable
    datasheet: DatasheetPeaks | None = Field(None, description="None: the device is not in "
                                             "the datasheet table (see warnings)")
    wall_seconds: float = Field(description="wall time of the whole probes stage")
    probe_seconds: dict[str, float] = Field(
        {}, description="wall seconds of each probe in the probe child, by event key (a "
        "ladder's include the FLOP count and checkpoint write of its x1 rung)")
    warnings: list[str] = []
