"""The ``distributed`` section of a certificate: one node measured through torch.distributed.

Written by ``torchrun --nproc-per-node=N -m afford certify --distributed``. Rank 0 writes it;
every rank's own readings are kept (``rank_*`` lists are indexed by rank): a collective's
node time is the slowest rank's median, and no rank's numbers are averaged away.

A run that lost a rank is written as ``status="partial"`` with the error, which stages each
rank reported finished, and only the stages every rank finished.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.core.provenance import NotExecutable

STAGES = ("collectives", "ddp", "fsdp")


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


class AlphaBetaFit(BaseModel):
    """``t = alpha + S / beta`` over one collective's measured sizes."""

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    op: str
    world_size: int
    alpha_seconds: float = Field(description="fixed cost per call (latency), seconds")
    beta_bytes_per_second: float | None = Field(
        description="asymptotic algorithm bandwidth; None when the fitted slope is not positive")
    r2: float
    sizes_bytes: list[int]
    seconds: list[float]
    residuals: list[float] = Field(description="relative: predicted / measured - 1")
    warnings: list[str] = []

    def predict(self, size_bytes: float) -> float:
        slope = 0.0 if self.beta_bytes_per_second is None else 1.0 / self.beta_bytes_per_second
        return self.alpha_seconds + size_bytes * slope

    @property
    def extrapolates(self) -> tuple[int, int]:
        return min(self.sizes_bytes), max(self.sizes_bytes)


def ring_term(w: int | float) -> float:
    """``2 (w - 1) / w``: the ring all-reduce's bandwidth term (0 at w = 1)."""
    if w < 1:
        raise ValueError(f"world size {w} < 1")
    return 2.0 * (w - 1) / w


class WorldSizeLaw(BaseModel):
    """``t(w) = A + B * 2(w-1)/w`` over the measured world sizes."""

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    A_seconds: float
    B_seconds: float
    r2: float
    world_sizes: list[int]
    seconds: list[float]
    residuals: list[float] = Field(description="relative: predicted / measured - 1")
    exact: bool = Field(description="two world sizes: an interpolation, not a checked fit")
    warnings: list[str] = []

    def predict(self, w: float) -> float:
        return self.A_seconds + self.B_seconds * ring_term(w)

    def describe(self) -> str:
        return (f"t(w) = {self.A_seconds:.4g} + {self.B_seconds:.4g} * 2(w-1)/w s "
                f"(R^2 {self.r2:.4f}, w in [{min(self.world_sizes)}, {max(self.world_sizes)}])")


class RankInfo(_Model):
    rank: int
    local_rank: int | None = Field(None, description="None: the rank never reported")
    hostname: str | None = None
    pid: int | None = None
    device: str | None = Field(None, description="the device this rank bound to: "
                               "cuda:LOCAL_RANK or cpu")
    device_name: str | None = None
    stages_finished: list[str] = Field(
        [], description="stages this rank reported finished (from the rendezvous store)")
    error: str | None = Field(None, description="the error this rank reported, if any")


class CollectivePoint(_Model):
    op: Literal["all_reduce", "all_gather", "reduce_scatter"]
    bytes: int = Field(description="nccl-tests' S: all-reduce buffer, all-gather output, "
                       "reduce-scatter input")
    world_size: int
    iters_per_sample: int = Field(description="back-to-back calls timed as one sample")
    rank_seconds: list[list[float]] = Field(
        description="[rank][sample] seconds per call (sample time / iters_per_sample)")
    rank_medians: list[float]
    seconds: float = Field(description="max over ranks of the rank medians: a collective is "
                           "done when its slowest rank is")
    algbw_bytes_per_second: float
    busbw_factor: float
    busbw_bytes_per_second: float | None = Field(
        description="algbw x busbw_factor; None at world size 1 (factor 0: no traffic)")


class CollectivesSection(_Model):
    world_size: int
    backend: str
    dtype: str
    clock: str
    warmup_calls: int
    samples: int
    sample_seconds: float = Field(description="target seconds per sample; calls per sample "
                                  "from the slowest rank's warm-up estimate")
    sizes_bytes: list[int]
    points: list[CollectivePoint] = []
    fits: list[AlphaBetaFit] = []
    not_executable: list[NotExecutable] = []
    warnings: list[str] = []


class DPRun(_Model):
    """One strategy at one world size: every member rank's raw step times."""

    strategy: Literal["ddp", "fsdp"]
    world_size: int
    mode: Literal["fp32", "bf16", "fp16"]
    shape: dict[str, int]
    params: int
    grad_bytes: int = Field(description="bytes of all gradients of one replica")
    tokens_per_step_per_rank: int
    step_indices: list[int] = Field(description="indices of the timed steps (same on every rank)")
    rank_step0_seconds: list[float]
    rank_first_loss: list[float]
    rank_seconds: list[list[float]] = Field(description="[rank][timed step] seconds, synced")
    rank_medians: list[float]
    step_seconds: float = Field(description="max over ranks of the rank medians")
    nosync_step_indices: list[int] = []
    rank_nosync_seconds: list[list[float]] | None = Field(
        None, description="DDP under no_sync(): the same step without the gradient all-reduce")
    nosync_step_seconds: float | None = None
    exposed_comm_share: float | None = Field(
        None, description="(step - no_sync step) / step: the all-reduce share not hidden")
    rank_peak_allocated_bytes: list[int | None] = []
    rank_peak_reserved_bytes: list[int | None] = []
    rank_peak_rss_bytes: list[int | None] = []
    memory_source: str | None = None


class DPStrategy(_Model):
    strategy: Literal["ddp", "fsdp"]
    runs: list[DPRun] = []
    efficiency: list[float] = Field([], description="t(1) / t(w), one per run (weak scaling)")
    law: WorldSizeLaw | None = None
    not_executable: NotExecutable | None = None
    warnings: list[str] = []


class DistributedSection(_Model):
    status: Literal["complete", "partial"]
    error: str | None = None
    launcher: str = "torchrun (RANK, WORLD_SIZE, LOCAL_RANK read from the environment)"
    backend: Literal["nccl", "gloo"]
    world_size: int
    local_world_size: int
    nodes: int
    timeout_seconds: float = Field(description="timeout of every collective and group")
    precision: Literal["full", "adaptive", "quick"]
    env_flags: dict[str, str] = Field(
        {}, description="NCCL / symmetric-memory settings in force (NVLink multicast off)")
    torch_version: str
    ranks: list[RankInfo]
    ranks_finished: list[int] = Field([], description="ranks that finished every stage")
    stages: list[str] = Field(list(STAGES), description="the stages, in order")
    collectives: CollectivesSection | None = None
    data_parallel: list[DPStrategy] = []
    warnings: list[str] = []
