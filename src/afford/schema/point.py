"""A sweep point: each child's raw timing of it, and what is derived from them.

Raw samples are the source of truth (docs/DESIGN.md section 2): every timed step of every child,
with its step index; step 0 and the warm-up kept apart. A point of the sweep, a model size
(:mod:`afford.schema.sizes_section`) and a lever variant (:mod:`afford.schema.levers_section`)
are each one :class:`Point`.
"""

import statistics

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt

from afford.schema.quantities import Bytes, Count, Dim, Duration, Flops, Ratio, Seconds

# A step time afford accepts: from a nanosecond to a century (afford.core.units); beyond it the
# plan's arithmetic (failure model exponentials) leaves the floats.


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")


class StepFlops(_Model):
    """FLOPs of one whole training step, counted once per shape by one child with
    ``torch.utils.flop_counter.FlopCounterMode`` after it timed the shape (the counter runs
    the step under Python dispatch: slow, and never timed). ``gemm``: mm/addmm/matmul/conv;
    ``attn``: bmm and the attention kernels (:func:`afford.fit.time.step_features.split_flops`).
    When counting failed, every count is ``None`` and ``error`` says why: the time model then
    uses the shape only (tokens = B*s and B*s^2), never a guess."""

    total: Flops | None = None
    gemm: Flops | None = None
    attn: Flops | None = None
    other: Flops | None = None
    by_op: dict[str, Flops] = {}
    counter: str | None = None
    error: str | None = Field(None, description="why the FLOPs could not be counted")


class DeviceStep(_Model):
    """One profiled warm step on a GPU (:mod:`afford.measure.device_time`): the device's
    busy time (the union of its kernels', copies' and sets' intervals), its kernels, the span
    from its first device start to its last end, the median gap between kernels that were
    queued before the device freed (the device's own per-boundary cost), and the host's
    time from this step's launch to the next's under the profiler."""

    index: Count
    busy_seconds: Duration
    kernels: Count
    span_seconds: Duration
    queued_gap_seconds: Duration | None = None
    queued_gaps: Count = 0
    host_seconds: Duration | None = None


class ChildPoint(_Model):
    """One child's timing of one sweep point: raw samples with their step indices."""

    child: Count
    order_position: Count
    step0_seconds: Duration | None = None
    warmup_seconds: list[Duration] = []
    timed_seconds: list[Duration] = []
    timed_step_indices: list[Count] = []
    timed_block_steps: PositiveInt | None = Field(
        None, description="steps the child issued per block of its timed run: the host read "
        "a block once the next was queued behind it and synchronised once, at the run's "
        "end, so each timed step is the interval between two consecutive marks on the "
        "device's timeline (CUDA events; the host clock on a CPU) with the queue never "
        "drained, as a training loop runs; None: an older certificate, whose blocks each "
        "ended with a host sync (the protocol's clock says how)")
    timed_run_seconds: Duration | None = Field(
        None, description="host perf_counter from before the first timed step to after the "
        "run's one sync: the synced witness of sum(timed_seconds), which it exceeds only by "
        "the device's start and end latencies (and, on a CPU, the clock's own readings)")
    median_seconds: Seconds | None = None
    precision: Ratio | None = Field(None, description="95% CI half-width of the median / median")
    reached_target: bool | None = None
    stopped: str | None = Field(None, description="why timing stopped: floor, target (median "
                                "known to the target), cap (max floor spent), unreachable "
                                "(the target was out of reach within the cap)")
    first_loss: float | None = Field(None, description="loss of step 0")
    grads_checked: Count | None = Field(None, description="parameters with a finite gradient")
    peak_allocated_bytes: Bytes | None = None
    peak_reserved_bytes: Bytes | None = None
    peak_rss_bytes: Bytes | None = None
    baseline_rss_bytes: Bytes | None = None
    swap_bytes: Bytes | None = None
    memory_source: str | None = None
    wall_seconds: Duration | None = None
    synced_seconds: list[Duration] = Field(
        [], description="host seconds of each step run with a host sync after it (float of "
        "the loss, as a loop that logs loss.item() every step): perf_counter around the step "
        "and the sync; after the timed steps, in the child that records them")
    synced_step_indices: list[Count] = []
    flops: StepFlops | None = Field(None, description="counted by this child after timing")
    cpu_seconds: Duration | None = Field(None, description="CPU seconds (user + system, all "
                                      "threads) of this process over the point's steps")
    involuntary_switches: Count | None = Field(
        None, description="times the OS took the CPU from this process over the point's "
        "steps (getrusage ru_nivcsw): CPU contention shows here")
    timed_cpu_seconds: list[NonNegativeFloat] = Field(
        [], description="CPU seconds (user + system, all threads) of this process in each "
        "timed step, beside timed_seconds (a CPU device)")
    timed_wait_seconds: list[NonNegativeFloat] = Field(
        [], description="seconds this process's threads waited, runnable, for a CPU in each "
        "timed step, summed over threads (Linux schedstat run-queue delay): what other "
        "processes cost the step (a CPU device; empty where the kernel does not say)")
    threads: PositiveInt | None = Field(None, description="torch's intra-op threads "
                                        "(torch.get_num_threads) of the child (a CPU device)")
    device_steps: list[DeviceStep] = Field(
        [], description="warm steps profiled after the timed ones (CUDA): the device's busy "
        "time and kernels per step, read apart from the host")
    device_error: str | None = Field(None, description="why the device side could not be "
                                     "profiled here")
    round: str = Field("sweep", description="sweep, extension (fresh children measuring "
                       "the shapes that continue the ladder) or remeasure (a fresh child "
                       "measuring a point once more)")
    replaced: str | None = Field(None, description="remeasure: how the child whose record "
                                 "this replaces ended (it died, or the watchdog stopped it)")
    oom: bool = False
    refused: str | None = None
    error: str | None = None
    skipped: str | None = Field(None, description="why this child did not time the point "
                                "(the first two children settled it: the protocol's "
                                "agreement rule); its record may still carry the profiled "
                                "device side")


#: children whose medians differ by more than this are warned about, point by point
SPREAD_WARN = 0.05


class Point(_Model):
    value: Dim
    shape: dict[str, Dim]
    batch: Dim | None = Field(None, description="the shape's batch (transformer-shaped "
                              "workloads: the dims' B), where known")
    seq: Dim | None = Field(None, description="the shape's sequence length (dims' s)")
    role: str = Field("sweep", description="sweep (the workload's sweep at its base batch), "
                      "across (the time design's batch variation), held_out_interpolated / "
                      "held_out_seq / held_out_batch / held_out_largest (measured, never "
                      "fitted), extension (continues the ladder past the floor)")
    held_out: bool = Field(False, description="measured and predicted, never fitted")
    flops: StepFlops | None = None
    device_busy_seconds: Seconds | None = Field(
        None, description="median over children of each child's median device busy time "
        "per profiled step (CUDA)")
    device_busy_spread: Ratio | None = Field(None, description="(max - min) / median of the "
                                             "children's busy medians")
    kernels_per_step: NonNegativeFloat | None = Field(None, description="median over children")
    device_gap_seconds: Duration | None = Field(
        None, description="median over children of the median gap between queued kernels: "
        "the device's own cost per kernel boundary")
    synced_median_seconds: Seconds | None = Field(
        None, description="median of the synced steps (host sync after each step)")
    run_mean_seconds: Seconds | None = Field(
        None, description="median over children of each child's timed run on the host clock "
        "over its steps (timed_run_seconds / steps): the mean step of a loop that syncs once "
        "per run, its rare slow steps included (None: older certificates)")
    idle_seconds: Seconds | None = Field(
        None, description="the step on an idle box: the median of the timed steps in which "
        "no other process delayed the child's threads (they waited for a CPU less than 2 % of "
        "the step), pooled over children (afford.fit.time.contention); None where fewer than 5 "
        "steps ran free (a CPU device)")
    load_seconds: NonNegativeFloat | None = Field(
        None, description="what the load cost the step: median_seconds - idle_seconds")
    wait_share: NonNegativeFloat | None = Field(
        None, description="median over children of the share of their thread time spent "
        "waiting for a CPU in the timed steps (0 on an idle box)")
    cpu_step_seconds: NonNegativeFloat | None = Field(
        None, description="median over children of each child's median process CPU seconds "
        "per timed step (all threads; it grows with the load too: torch's threads spin "
        "while a sibling waits)")
    threads: PositiveInt | None = Field(None, description="torch's intra-op threads of the "
                                        "children")
    params: Count | None = Field(None, description="trainable parameters")
    frozen_params: Count | None = Field(None, description="parameters not trained (LoRA base, "
                                      "frozen layers): weights only, no gradient or optimizer "
                                      "state; None: not counted (older certificates)")
    tokens_per_step: Dim | None = None
    vocab: Dim | None = Field(None, description="classes of the workload's cross-entropy "
                              "(None: its loss is not one)")
    children: list[ChildPoint]
    median_seconds: Seconds | None = None
    child_medians: list[Seconds] = []
    child_spread: Ratio | None = Field(None, description="(max - min) / median of child medians")
    worst_precision: Ratio | None = None
    step0_seconds: Duration | None = Field(None, description="median over children")
    step0_over_warm: Ratio | None = None
    peak_allocated_bytes: Bytes | None = Field(None, description="max over children")
    peak_reserved_bytes: Bytes | None = Field(None, description="max over children")
    peak_rss_bytes: Bytes | None = Field(None, description="max over children (CPU)")
    memory_source: str | None = None
    resident: bool | None = Field(description="None when the point failed and residency is unknown")
    excluded_reason: str | None = None
    remeasured: bool = Field(False, description="measured once more by a fresh child")
    outlier_children: list[Count] = Field(
        [], description="the children (by number) whose median is an outlier by far: at "
        "least 3x above or below the median of the children's medians while the others, a "
        "majority, agree within 3x (afford.fit.time.time_noise.outlier_children); the "
        "point's median, over all children, stays within the others' range")
    outlier_note: str | None = Field(
        None, description="what the outlier children measured, what their own accounting "
        "says of the cause (a CPU: the share of their time their threads waited for a CPU), "
        "and whether a fresh child re-measured the point or the others outvoted them")

    @property
    def usable(self) -> bool:
        """Resident, not excluded and timed: a point laws are fitted over and figures are
        read from (docs/DESIGN.md section 3, rule 3). The one residency check; every reader
        asks the point."""
        return self.resident is True and self.excluded_reason is None \
            and self.median_seconds is not None

    def quality_notes(self, sweep_param: str) -> list[str]:
        """The point's own precision warnings: an outlier child (:attr:`outlier_note`),
        children that disagree by more than :data:`SPREAD_WARN` (the others, where an outlier
        is named: its distance is in its note), a child median known to worse than 1 %."""
        out = []
        where = f"{sweep_param}={self.value}"
        if self.outlier_note:
            out.append(f"{where}: {self.outlier_note}")
        spread = self.child_spread
        if self.outlier_children:
            rest = [k.median_seconds for k in self.children if k.median_seconds is not None
                    and k.child not in self.outlier_children]
            spread = (max(rest) - min(rest)) / statistics.median(rest) \
                if len(rest) > 1 else None
        if spread is not None and spread > SPREAD_WARN:
            who = "the other children" if self.outlier_children else "children"
            out.append(f"{where}: {who} disagree by {spread:.1%} (> {SPREAD_WARN:.0%})")
        if self.worst_precision is not None and self.worst_precision > 0.01:
            out.append(f"{where}: a child's median is known to "
                       f"+/-{self.worst_precision:.1%} only (target 1%)")
        return out
