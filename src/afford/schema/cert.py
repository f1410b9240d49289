"""``afford.cert/1``: the device certificate.

Raw samples are the source of truth (docs/DESIGN.md section 2): every timed step of every child,
with its step index; step 0 and the warm-up kept apart. Medians, spreads and laws are
derived from them and stored beside them for convenience; they are re-derivable.
"""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from afford.core import cache
from afford.core.io import read_text, write_or_rescue
from afford.schema.determinism_section import DeterminismSection, GatesSection
from afford.schema.distributed_section import DistributedSection
from afford.schema.envelope import (
    MIGRATIONS,
    Envelope,
    parse_envelope,
    register_migration,
    save_envelope,
)
from afford.schema.laws import ThroughputLaw
from afford.schema.levers_section import LeversSection
from afford.schema.memory_section import MemorySection
from afford.schema.point import Point
from afford.schema.probes_section import ProbesSection
from afford.schema.quantities import Count, DeviceMemory, Dim, Duration, Ratio, Timestamp
from afford.schema.sizes_section import SizesSection
from afford.schema.time_section import CertTimeVerdict, HostLoad, WorkloadTime

CERT_SCHEMA = "afford.cert/1"


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


class Environment(_Model):
    """What was measured, with what, when. ``None`` means unknown here, never zero."""

    device_type: Literal["cuda", "cpu"]
    device_name: str
    device_class: Literal["cpu", "small-gpu", "large-gpu"]
    device_index: Count | None = None
    compute_capability: str | None = None
    device_memory_bytes: DeviceMemory | None = Field(
        None, description="CUDA: total memory of the card; CPU: MemTotal of the host")
    multiprocessors: Dim | None = None
    driver_version: str | None = None
    cpu_model: str | None = None
    cpu_count: Dim | None = None
    hostname: str | None = None
    os: str
    python_version: str
    torch_version: str
    cuda_version: str | None = None
    cudnn_version: str | None = None
    torch_num_threads: Dim
    tf32_matmul: bool | None = Field(None, description="torch.backends.cuda.matmul.allow_tf32")
    tf32_cudnn: bool | None = Field(None, description="torch.backends.cudnn.allow_tf32")
    float32_matmul_precision: str
    cublas_workspace_config: str | None = None
    pytorch_cuda_alloc_conf: str | None = None
    git_head: str | None = Field(None, description="HEAD of the working directory's repository")
    git_dirty: bool | None = None
    afford_version: str
    command: str
    started_at: Timestamp
    ended_at: Timestamp | None = None
    elapsed_seconds: Duration | None = None
    stage_seconds: dict[str, Duration] = Field(
        {}, description="wall seconds (host clock) by stage: 'setup' (environment and "
        "plan), 'sweep', then each stage after it in order")


class Protocol(_Model):
    """How every point was timed (written into the result, as torch.utils.benchmark does).

    Step 0 of a child's first point includes the process's CUDA start-up (context, cuBLAS
    handle) unless the child is listed in ``prewarmed_children``."""

    precision: Literal["full", "adaptive", "quick"]
    children: Dim
    warmup_steps: Count
    warmup_seconds: Duration
    min_timed_steps: Count
    floor_seconds: Duration
    max_floor_seconds: Duration
    precise_seconds: Duration | None = Field(
        None, description="timing stopped before floor_seconds once at least min_timed_steps "
        "were timed, this many seconds of them, and the median was known to "
        "target_rel_precision (None: never before the floor; older certificates)")
    precise_min_steps: Count | None = Field(
        None, description="a median known to target_rel_precision after precise_seconds "
        "stopped from this many timed steps, fewer than min_timed_steps (None: never; older "
        "certificates)")
    block_seconds: Duration | None = Field(
        None, description="the timed run's blocks: about this many seconds of steps each, "
        "read once the next block is queued, with one host sync at the run's end (None: an "
        "older certificate, whose blocks each ended with a host sync)")
    target_rel_precision: Ratio
    confidence: float = 0.95
    clock: str
    order: str = "each child times every point in its own shuffled order (seed = child index)"
    point_value: str = "median over children of each child's median of timed warm steps"
    seed: int = 0
    prewarmed_children: list[Count] = Field(
        [], description="children spawned ahead on CUDA that created their CUDA context and "
        "cuBLAS handle before their first point: their step 0 excludes CUDA context creation "
        "(the probes' startup figures measure it); child 0 is never pre-warmed")
    step_semantics: str | None = Field(
        None, description="what a timed step includes: whether a host sync is in it, and "
        "which figure is which")
    synced_child: int | None = Field(None, description="the child that also timed steps "
                                     "with a host sync after each (None: not recorded)")
    flops_child: int | None = Field(None, description="the child that counted each shape's "
                                    "FLOPs after timing it")
    agreement: str | None = Field(
        None, description="which points the children after the second skip, and why (the "
        "first two settled them; a skipped child's record says so in its ``skipped``); None: "
        "every child timed every point")


class WorkloadResult(_Model):
    name: str
    source: str = Field(description="'builtin' or the user's pkg.module:factory")
    import_folder: str | None = Field(
        None, description="a user workload imported from the working folder: the folder "
        "afford and its children added to sys.path (at its end) for it, and only for it; "
        "None: built in, installed or on PYTHONPATH")
    description: str = ""
    mode: Literal["fp32", "bf16", "fp16"]
    sweep_param: str
    points: list[Point]
    law: ThroughputLaw | None = None
    refused: str | None = None
    warnings: list[str] = []
    design_points: list[Point] = Field(
        [], description="the step-time design's shapes beyond the sweep: across, held out, "
        "extension (each with its role)")
    time: WorkloadTime | None = Field(None, description="the step-time model, its design "
                                      "and its noise verdict (absent in older certificates)")


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
    time_verdict: CertTimeVerdict | None = None
    host_load: list[HostLoad] | None = Field(None, description="before and after measuring")
    status: Literal["complete", "partial"] = Field(
        "complete", description="partial: the measurement failed somewhere (a workload with "
        "no usable point, a stage that raised, a gate that could not be evaluated); what was "
        "measured is kept, ``failures`` says what is missing, and certify exited 3")
    failures: list[str] = Field([], description="why the certificate is partial")

    @model_validator(mode="after")
    def _status_follows_failures(self) -> "Certificate":
        if (self.status == "partial") != bool(self.failures):
            raise ValueError(f"status {self.status!r} with {len(self.failures)} failure(s): "
                             "a partial certificate names its failures, a complete one none")
        return self


def default_filename(cert: Certificate) -> str:
    env = cert.environment
    slug = "".join(ch if ch.isalnum() else "-" for ch in env.device_name.lower())
    slug = "-".join(part for part in slug.split("-") if part)[:40] or env.device_type
    return f"afford-cert-{slug}-{env.started_at.strftime('%Y%m%d-%H%M%S')}.json"


@register_migration(CERT_SCHEMA, "afford.cert/0")
def _from_cert_0(raw: dict) -> dict:
    """afford.cert/0: the foundation form (the first certificate afford wrote), before the
    environment's ``stage_seconds``, the protocol's ``prewarmed_children``, a child's
    ``stopped``, a point's ``vocab`` and ``frozen_params`` and the stage sections. Files of that
    form were labelled afford.cert/1 when written (every later field is optional); /0 is the
    label that names the form so an old file is upgraded explicitly and says so. The fields it
    lacks were not recorded: stage seconds stay empty, no child counts as pre-warmed."""
    out = dict(raw, schema=CERT_SCHEMA)
    out["environment"] = {"stage_seconds": {}, **raw["environment"]}
    out["protocol"] = {"prewarmed_children": [], **raw["protocol"]}
    out["warnings"] = [*raw.get("warnings", []), "upgraded from afford.cert/0 (the foundation "
                       "form): stage seconds and pre-warmed children were not recorded"]
    return out


CACHE_KIND = "certificate"


def load_certificate(path: str | Path) -> Certificate:
    """The certificate at ``path`` (``-``: standard input), upgraded from an older schema
    and validated once per machine: a certificate read before is the object the cache kept
    (:func:`afford.core.cache.read_object`), named by the file's text and the code that
    reads it (the upgrades registered included). Parsing and validating a certificate of
    several workloads (megabytes of JSON through a hundred models) is otherwise most of what
    a command that reads one spends."""
    p = Path(path)
    text = read_text(p, str(p))
    upgrades = MIGRATIONS.get(CERT_SCHEMA, {})
    name = cache.key(CACHE_KIND, _reader_key(), *(f"{old}:{fn.__qualname__}"
                                                  for old, fn in sorted(upgrades.items())),
                     text)
    got = cache.read_object(CACHE_KIND, name)
    if isinstance(got, Certificate):
        return got
    cert = parse_envelope(text, p, Certificate, CERT_SCHEMA)
    cache.write_object(CACHE_KIND, name, cert)
    return cert


def _reader_key() -> str:
    """The code a read certificate depends on: afford's schema (the models, their
    validators and upgrades), the base it builds on and its data files, and pydantic's
    version (its classes are pickled beside ours; it pins its pydantic-core's exactly)."""
    import pydantic

    return cache.code_key("schema", "core", "data") + pydantic.VERSION


def save_certificate(cert: Certificate, path: str | Path, *, overwrite: bool = False) -> Path:
    return save_envelope(cert, path, overwrite=overwrite)


def save_measured(cert: Certificate, path: str | Path, *, overwrite: bool = False) -> Path:
    """Save a certificate just measured: when the write fails the measurement is saved
    beside ``path`` (or here, or in the temp folder) and the error names where
    (:func:`afford.core.io.write_or_rescue`)."""
    return write_or_rescue(path, cert.to_json(), overwrite=overwrite,
                           name=default_filename(cert))
