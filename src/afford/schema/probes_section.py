"""The ``probes`` section of a certificate: device ceilings, launch-boundness, FLOPs,
checkpoint I/O and startup costs (docs/DESIGN.md sections 3 and 4).

As everywhere in a certificate, raw samples are kept (every timed call or step, in order,
with step indices where there are steps) and the derived figures (medians, the ladder's
fit, the verdict) are stored beside them and re-derivable. A probe that could not run here
is a :class:`~afford.core.provenance.NotExecutable` with the reason, never a blank or a zero.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.core.provenance import NotExecutable
from afford.schema.laws import LawFit
from afford.schema.quantities import (
    Bytes,
    Capacity,
    Count,
    Dim,
    Duration,
    Flops,
    Rate,
    Ratio,
    Seconds,
)

GEMM_DTYPES = ("fp32", "tf32", "bf16", "fp16")


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


LAUNCH_FIXED_SHARE = 0.5   # half the step or more does not grow with the batch
LAUNCH_UTILISATION = 0.5   # the device ran no kernel half the time or more
COMPUTE_SHARE = 0.5        # matmul arithmetic at the ceiling explains half the step or more

THRESHOLDS = {"launch_fixed_share": LAUNCH_FIXED_SHARE,
              "launch_utilisation": LAUNCH_UTILISATION,
              "compute_share": COMPUTE_SHARE}

Label = Literal["launch-bound", "compute-bound", "memory-bound", "undetermined"]


class BoundVerdict(BaseModel):
    """Launch-, compute- or memory-bound, and the figures that decided it (``None``: not
    measured here); judged by :func:`afford.fit.time.verdicts.bound_verdict`."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    label: Label
    reasons: list[str] = Field(description="one line per figure, saying which way it points")
    fixed_share: Ratio | None = Field(None, description="the ladder fit's F / t where it is a "
                                      "share (at most 1); None when not measured or failed")
    failed_fixed_share: Ratio | None = Field(None, description="a fit's F / t above 1: a "
                                             "failed fit, never quoted as a fixed cost")
    ladder_tokens_ratio: Ratio | None = Field(None, description="tokens of the largest timed "
                                              "rung / the first's")
    ladder_time_ratio: Ratio | None = Field(None, description="their median steps' ratio")
    ladder_spread: Ratio | None = Field(None, description="the larger of the two rungs' "
                                        "IQR / median of timed steps")
    utilisation_mean: Ratio | None = None
    utilisation_low_share: Ratio | None = None
    arithmetic_share: Ratio | None = None
    thresholds: dict[str, Ratio] = Field(default_factory=lambda: dict(THRESHOLDS))


class ProbeProtocol(_Model):
    """How the probes were run (written into the result, as the sweep's protocol is)."""

    precision: Literal["full", "adaptive", "quick"]
    gemm_n: Dim = Field(description="m = n = k of the square GEMM probes")
    gemm_warmup_calls: Count
    gemm_timed_calls: Count
    gemm_reference_rows: Count = Field(description="rows of C recomputed in fp64 for the error")
    copy_buffer_bytes: Capacity
    copy_timed_calls: Count
    clock: str
    ladder_multipliers: list[Dim]
    ladder_floor_seconds: Duration
    ladder_warmup_seconds: Duration
    ladder_min_steps: Count
    nvml_hz: Ratio
    nvml_window_seconds: Duration
    nvml_settle_seconds: Duration = Field(description="samples this soon after the sampler "
                                       "started are dropped (NVML averages over a past period)")
    low_utilisation: Ratio = Field(description="a sample at or under this counts as idle")
    checkpoint_writes: Count
    startup_children: Count = Field(description="fresh-process startup runs at least, counting "
                                  "the sweep children and the probe child; fresh startup "
                                  "children are spawned only to make up the number")


class GemmProbe(_Model):
    """C = A @ B, square n x n x n, fresh random A and B (never zeros)."""

    dtype: Literal["fp32", "tf32", "bf16", "fp16"]
    n: Dim
    flop_per_call: Flops = Field(description="2 n^3")
    warmup_calls: Count
    seconds: list[Seconds] = Field(description="every timed call, in order")
    median_seconds: Seconds
    flops_per_second: Rate = Field(description="flop_per_call / median_seconds")
    max_rel_error: Ratio = Field(description="max |C - C_ref| / max |C_ref| over the rows "
                                 "recomputed in fp64 from the same (rounded) inputs")
    reference: str
    settings: dict[str, str] = Field(description="backend flags in force during the probe")


class CopyProbe(_Model):
    """dst.copy_(src) of a fresh random buffer; bandwidth counts bytes read plus written."""

    buffer_bytes: Capacity
    bytes_per_call: Capacity = Field(description="2 x buffer_bytes (read + written)")
    warmup_calls: Count
    seconds: list[Seconds]
    median_seconds: Seconds
    bytes_per_second: Rate


class HostCopyProbe(_Model):
    """Pinned host memory -> device and device -> pinned host, one buffer per call, each
    direction timed apart (the bytes cross the link once per call)."""

    buffer_bytes: Capacity
    warmup_calls: Count
    h2d_seconds: list[Seconds]
    h2d_bytes_per_second: Rate = Field(description="buffer_bytes / median h2d call")
    d2h_seconds: list[Seconds]
    d2h_bytes_per_second: Rate = Field(description="buffer_bytes / median d2h call")


class UtilisationTrace(_Model):
    """NVML device utilisation sampled in a thread over the warm steps of the x1 rung."""

    source: str
    hz: Ratio
    settle_seconds: Duration
    t_seconds: list[Duration] = Field(description="since the sampler started")
    gpu: list[Ratio] = Field(description="fraction of the sample period a kernel ran (0..1)")
    memory: list[Ratio] = Field(description="fraction of the period memory was read/written")
    kept: Count = Field(description="samples at or after settle_seconds")
    mean: Ratio | None = Field(None, description="mean gpu over the kept samples")
    low_share: Ratio | None = Field(None, description="share of kept samples at or under "
                                    "the low-utilisation threshold")
    error: str | None = None


class Rung(_Model):
    """One rung of the batch ladder: the workload's shape with its batch multiplied."""

    multiplier: Dim
    shape: dict[str, Dim]
    tokens_per_step: Dim | None = None
    step0_seconds: Duration | None = None
    warmup_seconds: list[Duration] = []
    timed_seconds: list[Duration] = []
    timed_step_indices: list[Count] = []
    median_seconds: Seconds | None = None
    oom: bool = False
    error: str | None = None
    build_seconds: Duration | None = Field(None, description="building the rung's model, "
                                        "optimizer and data (host clock)")
    wall_seconds: Duration | None = Field(None, description="the whole rung: build, step 0, "
                                       "warm-up, timed steps (host clock)")


class Ladder(_Model):
    batch_key: str = Field(description="the shape key that was multiplied")
    rungs: list[Rung]
    law: LawFit | None = Field(None, description="t = F + c * tokens over the timed rungs")
    fixed_seconds: Duration | None = Field(None, description="F")
    fixed_share: Ratio | None = Field(None, description="F / measured t of the x1 rung")
    warnings: list[str] = []


class FlopCount(_Model):
    """FLOPs of one whole training step, counted by FlopCounterMode on the device."""

    value: Dim = Field(description="sweep value the step was built at")
    shape: dict[str, Dim]
    flops: Flops
    by_op: dict[str, Flops] = Field(description="per aten op, as FlopCounterMode reports")
    counter: str
    step_seconds: Seconds | None = Field(None, description="the sweep's warm median at this "
                                       "value (resident points only)")


class CheckpointProbe(_Model):
    """Atomic writes (temp file in the same folder, fsync, rename, fsync folder) of the
    model and optimizer state after warm steps; loaded back with weights_only=True."""

    value: Dim
    shape: dict[str, Dim]
    directory: str
    bytes: Bytes
    write_seconds: list[Seconds]
    median_write_seconds: Seconds
    device_to_host_seconds: Duration | None = Field(
        None, description="the state's copy to host memory, timed once and included in "
        "each write's seconds (None: an older certificate, whose torch.save copied device "
        "tensors inside each write)")
    load_seconds: Duration
    verified: bool = Field(description="every tensor and setting loaded back equal")
    mismatch: str | None = None
    method: str


class ShapeGemm(_Model):
    """One matmul shape of the workload's step, timed alone (batch 1: a plain mm)."""

    batch: Dim
    m: Dim
    n: Dim
    k: Dim
    dtype: str
    calls: Count = Field(description="calls of this shape in one training step")
    flops_per_call: Flops = Field(description="2 batch m n k")
    share_of_step_matmul_flops: Ratio
    seconds: list[Seconds]
    median_seconds: Seconds
    flops_per_second: Rate
    fraction_of_square: Ratio | None = Field(
        None, description="flops_per_second / the square GEMM probe's rate of the ceiling "
        "dtype (None: that probe did not run)")


class ShapeGemms(_Model):
    """GEMM probes at the workload's own shapes: what its step's matmuls reach."""

    distinct_shapes: Count
    matmul_flops_per_step: Flops
    timed: list[ShapeGemm] = Field(description="the shapes carrying the most arithmetic")


class WorkloadProbes(_Model):
    """The per-workload probes at the workload's smallest resident sweep point."""

    name: str
    mode: Literal["fp32", "bf16", "fp16"]
    sweep_param: str
    value: Dim | None = Field(None, description="the sweep value probed (smallest resident)")
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

    process_seconds: Duration = Field(
        description="spawn to ready (after the imports, and the CUDA context creation where "
        "cuda_init_seconds is given): the parent's clock, or for a sweep child the wall clock "
        "of both")
    import_torch_seconds: Duration
    import_transformers_seconds: Duration | None = None
    cuda_init_seconds: Duration | None = None
    torch_version: str
    transformers_version: str | None = None
    contended: bool = Field(False, description="its imports ran beside another process's "
                            "imports (the first sweep child, spawned as the command started): "
                            "both slow down, so the medians leave it out when other runs exist")
    prewarm_seconds: Duration | None = Field(
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
    process_seconds: Duration = Field(description="median over the runs not contended (all "
                                   "runs when every one was)")
    import_torch_seconds: Duration = Field(description="median over the same runs")
    import_transformers_seconds: Duration | NotExecutable
    cuda_init_seconds: Duration | NotExecutable


class DatasheetPeaks(_Model):
    """A row of ``afford/data/devices.toml``: dense peaks, carried with their citation."""

    device: str = Field(description="the row's product name")
    matched: str = Field(description="the name pattern that matched the device")
    flops_per_second: dict[str, Rate] = Field(description="dtype -> dense FLOP/s")
    bandwidth_bytes_per_second: Rate | None = None
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
    wall_seconds: Duration = Field(description="wall time of the whole probes stage")
    probe_seconds: dict[str, Duration] = Field(
        {}, description="wall seconds of each probe in the probe child, by event key (a "
        "ladder's include the FLOP count and checkpoint write of its x1 rung)")
    warnings: list[str] = []
