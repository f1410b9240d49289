"""``afford.cert/1``: the device certificate.

Raw samples are the source of truth (DESIGN section 2): every timed step of every child,
with its step index; step 0 and the warm-up kept apart. Medians, spreads and laws are
derived from them and stored beside them for convenience; they are re-derivable.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.fit.throughput import ThroughputLaw
from afford.schema.determinism import DeterminismSection, GatesSection
from afford.schema.distributed import DistributedSection
from afford.schema.memory import MemorySection
from afford.schema.probes import ProbesSection
from afford.schema.envelope import Envelope, load_envelope, save_envelope

CERT_SCHEMA = "afford.cert/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Environment(_Model):
    """What was measured, with what, when. ``None`` means unknown here, never zero."""

    device_type: Literal["cuda", "cpu"]
    device_name: str
    device_class: Literal["cpu", "small-gpu", "large-gpu"]
    device_index: int | None = None
    compute_capability: str | None = None
    device_memory_bytes: int | None = Field(
        None, description="CUDA: total memory of the card; CPU: MemTotal of the host")
    multiprocessors: int | None = None
    driver_version: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    hostname: str | None = None
    os: str
    python_version: str
    torch_version: str
    cuda_version: str | None = None
    cudnn_version: str | None = None
    torch_num_threads: int
    tf32_matmul: bool | None = Field(None, description="torch.backends.cuda.matmul.allow_tf32")
    tf32_cudnn: bool | None = Field(None, description="torch.backends.cudnn.allow_tf32")
    float32_matmul_precision: str
    cublas_workspace_config: str | None = None
    pytorch_cuda_alloc_conf: str | None = None
    git_head: str | None = Field(None, description="HEAD of the working directory's repository")
    git_dirty: bool | None = None
    afford_version: str
    command: str
    started_at: datetime
    ended_at: datetime | None = None
    elapsed_seconds: float | None = None
    stage_seconds: dict[str, float] = Field(
        {}, description="wall seconds (host clock) by stage: 'setup' (environment and "
        "plan), 'sweep', then each stage after it in order")


class Protocol(_Model):
    """How every point was timed (written into the result, as torch.utils.benchmark does).

    Step 0 of a child's first point includes the process's CUDA start-up (context, cuBLAS
    handle) unless the child is listed in ``prewarmed_children``."""

    precision: Literal["full", "adaptive", "quick"]
    children: int
    warmup_steps: int
    warmup_seconds: float
    min_timed_steps: int
    floor_seconds: float
    max_floor_seconds: float
    target_rel_precision: float
    confidence: float = 0.95
    clock: str
    order: str = "each child times every point in its own shuffled order (seed = child index)"
    point_value: str = "median over children of each child's median of timed warm steps"
    seed: int = 0
    prewarmed_children: list[int] = Field(
        [], description="children spawned ahead on CUDA that created their CUDA context and "
        "cuBLAS handle before their first point: their step 0 excludes CUDA context creation "
        "(the probes' startup figures measure it); child 0 is never pre-warmed")


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


# The sizes and levers sections hold Points: imported here, below Point (afford.schema.ladder).
from afford.schema.ladder import LeversSection, SizesSection  # noqa: E402


class WorkloadResult(_Model):
    name: str
    source: str = Field(description="'builtin' or the user's pkg.module:factory")
    description: str = ""
    mode: Literal["fp32", "bf16", "fp16"]
    sweep_param: str
    points: list[Point]
    law: ThroughputLaw | None = None
    refused: str | None = None
    warnings: list[str] = []


class Certificate(Envelope):
    schema_id: Literal["afford.cert/1"] = Field(CERT_SCHEMA, alias="schema")
    environment: Environment
    protocol: Protocol
    workloads: list[WorkloadResult]
    warnings: list[str] = []
    # Sections written by the stages after the sweep; each optional (absent: not run).
    determinism: DeterminismSection | None = None
    gates: GatesSection | None = None
    distributed: DistributedSection | None = None
    sizes: SizesSection | None = None
    levers: LeversSection | None = None
    memory: MemorySection | None = None
    probes: ProbesSection | None = None


def load_certificate(path: str | Path) -> Certificate:
    return load_envelope(path, Certificate, CERT_SCHEMA)


def save_certificate(cert: Certificate, path: str | Path, *, overwrite: bool = False) -> Path:
    return save_envelope(cert, path, overwrite=overwrite)
