"""What a plan is: frozen, typed sections in which every figure is :class:`Tagged`.

``afford.plan/1`` (a plan) and ``afford.preflight/1`` (a verdict with its plan) are the
documents ``afford plan --json`` and ``afford preflight --json`` print. Renderers read these
and compute nothing (docs/DESIGN.md section 2). A section that could not be computed is ``None``
and the plan's ``notes`` say why.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.core.errors import InputError
from afford.core.provenance import Tagged
from afford.core.units import MIN_FRACTION, UnitError, bounded
from afford.schema.envelope import validate

PLAN_SCHEMA = "afford.plan/1"
VERDICT_SCHEMA = "afford.preflight/1"


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", populate_by_name=True)


class StartupComponent(_Frozen):
    """One part of a session's fixed cost: measured where this box can measure it."""

    name: str
    what: str
    seconds: Tagged
    final: bool = Field(False, description="paid at the end of the session (the final save), "
                        "not again when a killed session restarts")


class Startup(_Frozen):
    components: tuple[StartupComponent, ...]
    total_seconds: Tagged
    restart_seconds: Tagged = Field(description="the components paid before step 1: what a "
                                    "restart after a kill costs (Daly's R)")
    measured_seconds: Tagged | None = Field(None, description="the MEASURED components alone: "
                                            "the floor this box measured (COSTS 3.1); None "
                                            "when none was measured")


class Chunk(_Frozen):
    """chunk = session cap - margin; the margin must cover the startup."""

    cap_seconds: Tagged = Field(description="value None: the platform has no session cap")
    margin_seconds: Tagged
    chunk_seconds: Tagged | None = Field(description="None without a session cap")
    startup: Startup
    margin_covers: Tagged | None = Field(description="margin / startup total (x)")
    covered: bool | None


class MemoryBudget(_Frozen):
    """budget = device memory x budget fraction (docs/DESIGN.md section 3, rule 4: against
    reserved)."""

    device_memory_bytes: Tagged
    fraction: Tagged
    budget_bytes: Tagged
    reserved_ratio: Tagged | None = Field(
        None, description="unused: plans of afford before the one memory answer budgeted "
        "allocated x the certificate's worst reserved/allocated ratio (kept so that their "
        "plan files still load)")


class ChunkRow(_Frozen):
    """One workload at one sweep value (or the run's own shape) against the platform."""

    workload: str
    mode: str
    sweep_param: str
    value: int
    is_run: bool = False
    step_seconds: Tagged | None
    steps_per_chunk: Tagged | None
    steps_per_hour: Tagged | None
    allocated_bytes: Tagged | None
    projected_reserved_bytes: Tagged | None = Field(
        description="the memory answer's figure: peak reserved (CUDA) or peak RSS (CPU)")
    budget_share: Tagged | None = Field(description="projected reserved / budget")
    fits: bool | None = Field(description="fits_level yes or likely; None: no memory figure "
                              "at this shape, or no budget")
    fits_level: Literal["yes", "likely", "uncertain", "no"] | None = Field(
        None, description="the memory answer's verdict (afford.figures.memory_at): likely "
        "and uncertain where the figure is extrapolated")
    memory_source: Literal["measured", "replay", "law"] | None = None
    memory_extrapolated: bool = False
    memory_reasons: tuple[str, ...] = Field((), description="why the memory figure is "
                                            "extrapolated")
    memory_why: str = Field("", description="why it fits, or not, in a line")
    memory_settle: str | None = Field(None, description="the command that would measure "
                                      "the shape, where the figure is extrapolated")
    tokens_per_step: Tagged | None = None
    tokens_per_chunk: Tagged | None = None
    params: Tagged | None = None
    excluded: str | None = Field(None, description="why the certificate's sweep did not use "
                                 "this measured point (not resident, refused, failed)")
    note: str = ""


class Quota(_Frozen):
    """The weekly quota with startup charged (docs/DESIGN.md section 4), beside the naive
    figure."""

    quota_seconds: Tagged
    naive_chunks: Tagged = Field(description="quota / chunk: WRONG, charges nothing for startup")
    naive_steps: Tagged | None = Field(None, description="naive chunks x steps per chunk: WRONG")
    billed_seconds_per_chunk: Tagged
    whole_chunks: Tagged
    remainder_seconds: Tagged
    trainable_remainder_seconds: Tagged
    steps_per_week: Tagged | None = None
    tokens_per_week: Tagged | None = None


class Target(_Frozen):
    """How far the run's target is: sessions, GPU time, weeks."""

    target_steps: Tagged
    target_tokens: Tagged
    sessions: Tagged
    gpu_seconds: Tagged = Field(description="billed GPU time to the target, startups included")
    weeks: Tagged | None = Field(description="quota-bound where there is a weekly quota, "
                                 "else wall clock running without pause")
    limited_by: Literal["weekly quota", "wall clock"]


class Cadence(_Frozen):
    """save_every = the smallest step count whose writes stay within the overhead budget, the
    share being write seconds over the training seconds (COSTS 3.4): over the chunk where
    there is one, else over one interval."""

    write_seconds: Tagged
    overhead_budget: Tagged
    save_every: Tagged
    interval_seconds: Tagged = Field(description="save_every x step + write")
    overhead_share: Tagged = Field(description="the share the budget bounds: write seconds / "
                                   "chunk, or write / (save_every x step) without a chunk")
    writes_per_chunk: Tagged | None = None
    write_seconds_per_chunk: Tagged | None = None
    share_of_chunk: Tagged | None = None
    reaches_checkpoint: bool | None = Field(None, description="a chunk holds save_every steps")
    min_budget_to_reach: Tagged | None = Field(
        None, description="the smallest overhead budget that holds one periodic write in a "
        "chunk: write / chunk")


class KillRow(_Frozen):
    """Seconds of work one kill at one point loses, with and without periodic checkpoints.

    ``worst_*``: the training work lost since the last durable save, worst case (COSTS 3.4's
    definition); ``expected_*``: the mean over a kill at a uniform moment. Both exclude the
    restart, which is ``restart`` (None for a warm-up kill, whose loss is the startup itself).
    A kill costs loss + restart in all."""

    point: Literal["warm-up", "mid-chunk", "checkpoint write", "final save"]
    how: str
    worst_without: Tagged | None
    worst_with: Tagged | None
    worst_ratio: Tagged | None = Field(description="worst case: without / with")
    expected_without: Tagged | None
    expected_with: Tagged | None
    expected_ratio: Tagged | None = Field(description="expected: without / with")
    restart: Tagged | None = Field(description="the startup paid again before training "
                                   "resumes; None at warm-up, where it is the loss")


class Worth(_Frozen):
    """What periodic checkpoints are worth on a worst-case mid-chunk kill (COSTS 3.4)."""

    ratio: Tagged = Field(description="worst mid-chunk loss: without / with")
    saved_seconds: Tagged = Field(description="worst mid-chunk loss: without - with")
    saved_share_of_quota: Tagged | None = Field(description="saved / weekly quota")


class Daly(_Frozen):
    """Young 1974 / Daly 2006 beside the overhead-budget cadence, for a platform with an MTBF."""

    mtbf_seconds: Tagged
    write_seconds: Tagged
    restart_seconds: Tagged
    young_interval_seconds: Tagged
    daly_interval_seconds: Tagged
    daly_waste: Tagged = Field(description="expected wall-clock overhead at Daly's interval, "
                               "T_w / T_s - 1 (Daly 2006, full model)")
    daly_loss_per_failure_seconds: Tagged
    budget_interval_seconds: Tagged
    budget_waste: Tagged
    budget_loss_per_failure_seconds: Tagged


class Failures(_Frozen):
    rows: tuple[KillRow, ...]
    worth: Worth | None = None
    daly: Daly | None = None


class Disk(_Frozen):
    disk_bytes: Tagged
    checkpoint_bytes: Tagged | None
    copies_fit: Tagged | None
    live_copies: Tagged
    steady_share: Tagged | None = Field(description="live copies x bytes / disk")
    peak_share: Tagged | None = Field(description="(live copies + 1) x bytes / disk: an atomic "
                                      "write holds one more copy until its rename")
    fits: bool | None


class RunInfo(_Frozen):
    name: str
    workload: str
    mode: str
    sweep_param: str
    value: int
    shape: dict[str, int]
    tokens_per_step: Tagged
    data_sources: tuple[str, ...] = ()
    unpinned: tuple[str, ...] = ()
    in_family: bool = Field(True, description="the certified family's shape at the sweep "
                            "value; False: another batch (or shape), read off the models")
    step_why: str = Field("", description="why no step time is known, when none is")
    memory_why: str = Field("", description="why no memory figure is known, when none is")


class PlanResult(_Frozen):
    schema_id: Literal["afford.plan/1"] = Field(PLAN_SCHEMA, alias="schema")
    certificate_device: str
    platform: str
    platform_device: str | None
    device_matches: bool | None = Field(description="None: the platform names no device")
    memory: MemoryBudget
    chunk: Chunk
    rows: tuple[ChunkRow, ...]
    run: RunInfo | None = None
    quota: Quota | None = None
    target: Target | None = None
    cadence: Cadence | None = None
    failures: Failures | None = None
    disk: Disk | None = None
    assumptions: tuple[str, ...] = Field((), description="each figure that fell back to an "
                                         "ASSUMED value, with the reason")
    notes: tuple[str, ...] = ()
    time_verdict: Literal["OK", "NOISY", "MISSED", "UNJUDGED"] | None = Field(
        None, description="the certificate's step-time verdict (NOISY when any workload's "
        "is; MISSED when a model missed a held-out shape beyond tolerance, reproduced; "
        "UNJUDGED when a model was judged at no held-out shape); None: the certificate "
        "has no step-time model")
    noisy: tuple[str, ...] = Field((), description="why the step times are NOISY (or "
                                   "MISSED: each shape missed and its error; or UNJUDGED: "
                                   "which models were never judged)")
    noisy_rule: str = Field("", description="the certificate's noise rule, in words")
    certificate_warnings: tuple[str, ...] = Field(
        (), description="the warnings the certificate carries (and its step-time models')")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=1) + "\n"


class Verdict(_Frozen):
    schema_id: Literal["afford.preflight/1"] = Field(VERDICT_SCHEMA, alias="schema")
    go: bool
    reasons: tuple[str, ...] = Field(description="every reason for NO-GO; empty when GO")
    warnings: tuple[str, ...] = ()
    plan: PlanResult

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=1) + "\n"


def read_plan(doc: object, label: str) -> PlanResult:
    """An ``afford.plan/1`` document read from a file (``afford report --plan``, ``afford
    milestones --plan``): its schema, then every figure one a plan can hold: a number not
    negative (a plan computes no negative time, size, count or share), the memory budget's
    fraction in [1e-6, 1], one row of the chunk table the run's exactly when there is a run.
    InputError naming ``label`` and the figure otherwise: a hand-edited fraction of 1e40 is
    refused here, not rendered."""
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        raise InputError(f"{label}: not a plan (expected schema {PLAN_SCHEMA!r}; write one "
                         "with afford plan --json)")
    plan = validate(doc, PlanResult, label)
    runs = sum(r.is_run for r in plan.rows)
    if runs != (plan.run is not None):
        raise InputError(f"{label}: {runs} rows are the run's, with "
                         f"{'a' if plan.run else 'no'} run section; not a plan afford plan "
                         "writes (one run row exactly when there is a run)")
    try:
        for where, t in _figures(plan, ""):
            if isinstance(t.value, (int, float)) and not isinstance(t.value, bool):
                low = MIN_FRACTION if where == "memory.fraction" else 0.0
                high = 1.0 if where == "memory.fraction" else float("inf")
                bounded(t.value, where, low=low, high=high, low_open=False)
    except UnitError as exc:
        raise InputError(f"{label}: {exc}; not a figure afford plan computes") from None
    return plan


def _figures(obj: object, where: str):
    """(dotted path, figure) of every :class:`Tagged` in ``obj``, a model of this module."""
    if isinstance(obj, Tagged):
        yield where, obj
    elif isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            yield from _figures(getattr(obj, name), f"{where}.{name}" if where else name)
    elif isinstance(obj, tuple):
        for i, x in enumerate(obj):
            yield from _figures(x, f"{where}[{i}]")
