"""Where a training step's memory goes at its peak, from its allocator history.

Why: a prediction of reserved memory says whether a run fits; the breakdown says what to
change when it does not. At the moment allocated memory peaks in a warm step, every live
block is put in one class by *when* it was allocated and freed (its lifetime), not by a
name (the history has none):

- parameters: allocated while building, before the first step, never freed (the weights,
  and whatever else the build keeps: a pool of input batches);
- workspaces: allocated in the first step before its backward and never freed (cuBLAS and
  cuBLASLt workspaces, made at the first GEMM), or alive before the history began;
- optimizer state: allocated in the first step after its last gradient and never freed
  (AdamW's two moments and step counts, created lazily by the first ``optimizer.step``);
- gradients: allocated in the step and alive at its end (``zero_grad(set_to_none=True)``
  frees them at the start of the next step);
- activations saved for backward: allocated before the step's first gradient and freed
  after it (what autograd keeps between forward and backward);
- temporaries: every other live block (freed on the same side of the first gradient, or
  carried over from the step before);
- allocator slack: reserved minus allocated at that moment (rounding, blocks handed out
  whole, cached free blocks, split remainders).

The steps are found, not assumed: a history of ``build + k`` training steps repeats its
allocation sizes from step 1 on, so the period is the longest ``p`` with the last ``2p``
sizes equal to themselves shifted by ``p``; the first step starts where the build ends,
found by aligning the sizes before the second step with the second step's (difflib: the
first matching run, moved back by its offset in the second step). The classes are summed in
bytes as the allocator counts them (whole blocks), so they add up to the allocated peak of
the replay exactly, and with the slack to the reserved bytes at that moment.

Pure: no torch, no I/O.
"""

from __future__ import annotations

import difflib

from pydantic import BaseModel, ConfigDict, Field

from afford.fit.memory.allocator import Allocator
from afford.fit.memory.trace_scaling import OpTrace

CLASSES = ("parameters", "workspaces", "optimizer_state", "gradients", "activations",
           "temporaries")


class Steps(BaseModel):
    """Where the steps of a history begin, in allocation slots."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    period: int = Field(description="allocations per warm step")
    first_step: int = Field(description="slot where the first step begins (build before)")
    second_step: int
    last_step: int


class MemoryBreakdown(BaseModel):
    """The live bytes of each class at the allocated peak of the last step, and the slack."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    B: int
    s: int
    expandable: bool
    peak_event: int = Field(description="index of the first op at which the last step "
                            "reached its peak")
    allocated_bytes: int = Field(description="allocated at that moment (whole blocks)")
    reserved_bytes: int = Field(description="reserved at that moment")
    peak_reserved_bytes: int = Field(description="reserved at the end of the history")
    parameters_bytes: int
    workspaces_bytes: int
    optimizer_state_bytes: int
    gradients_bytes: int
    activations_bytes: int
    temporaries_bytes: int
    slack_bytes: int = Field(description="reserved - allocated at that moment")
    steps: Steps

    def shares(self) -> dict[str, float]:
        """Each class and the slack as a share of the reserved bytes at the peak."""
        return {c: getattr(self, f"{c}_bytes") / self.reserved_bytes
                for c in (*CLASSES, "slack")}


MISMATCH_PER_SLOT = 1e-3  # the last two steps' sizes may differ at one slot in a thousand


def find_steps(trace: OpTrace) -> Steps:
    """The step structure of ``trace`` (see the module docstring); ``ValueError`` when the
    sizes do not repeat: the last two steps must allocate alike, after at least one
    allocation of an earlier step (record three steps or more). Alike: equal sizes but at
    one slot in a thousand (:data:`MISMATCH_PER_SLOT`; none in a step of fewer than 1,000
    allocations), whose size follows the data (PyTorch's embedding backward above 3,072
    indices sizes a buffer by the distinct tokens of the batch; a least-squares size law
    learned from such a slot does not repeat either)."""
    import numpy as np  # here: a replay that is not broken down needs none

    sizes = trace.sizes
    n = len(sizes)
    a = np.asarray(sizes)
    period = next((p for p in range(n // 2, 0, -1)
                   if np.count_nonzero(a[n - 2 * p:n - p] != a[n - p:])
                   <= int(p * MISMATCH_PER_SLOT)), None)
    if period is None or period < 2 or n - 2 * period < 1:
        raise ValueError("the allocation sizes do not repeat: a breakdown needs a history "
                         "whose last two training steps allocate alike, after at least one "
                         "allocation of an earlier step (record three steps or more)")
    second = n - 2 * period
    blocks = difflib.SequenceMatcher(None, sizes[:second], sizes[second:second + period],
                                     autojunk=False).get_matching_blocks()
    first = next((max(0, b.a - b.b) for b in blocks if b.size), 0)
    return Steps(period=period, first_step=first, second_step=second, last_step=n - period)


def _lifetimes(trace: OpTrace) -> tuple[list[int], list[int | None]]:
    born = [0] * trace.n_allocs
    dies: list[int | None] = [None] * trace.n_allocs
    for i, o in enumerate(trace.ops):
        if o >= 0:
            born[o] = i
        else:
            dies[~o] = i
    return born, dies


def classify(trace: OpTrace, steps: Steps) -> list[str]:
    """The class of every slot (what it would be if live at the last step's peak)."""
    born, dies = _lifetimes(trace)
    n = trace.n_allocs
    end_first = born[steps.second_step - 1]
    late = [k for k in range(steps.first_step, steps.second_step)
            if dies[k] is not None and dies[k] > end_first]
    last_grad0 = max(late, default=steps.first_step - 1)
    grads = [k for k in range(steps.last_step, n) if dies[k] is None]
    bwd = born[grads[0]] if grads else len(trace.ops)
    out = []
    for k in range(n):
        if k < steps.first_step:
            out.append("parameters" if dies[k] is None else "temporaries")
        elif k < steps.second_step:
            if dies[k] is not None:
                out.append("temporaries")
            else:
                out.append("optimizer_state" if k > last_grad0 else "workspaces")
        elif k < steps.last_step:
            out.append("temporaries")
        elif dies[k] is None:
            out.append("gradients")
        else:
            out.append("activations" if born[k] < bwd < dies[k] else "temporaries")
    return out


def breakdown(trace: OpTrace, expandable: bool = False,
              allocator: Allocator | None = None) -> MemoryBreakdown:
    """Replay ``trace`` (through ``allocator``, whose live blocks count as workspaces, or a
    fresh one) and break its last step's allocated peak down by class."""
    steps = find_steps(trace)
    kinds = classify(trace, steps)
    alloc = allocator or Allocator(expandable=expandable)
    base = 1 << 48  # keys clear of the allocator's own
    before = alloc.allocated
    start = next(i for i, o in enumerate(trace.ops) if o == steps.last_step)
    block = [0] * trace.n_allocs  # bytes the allocator counted for each slot
    best = (-1, -1, 0)  # (allocated, op index, reserved)
    for i, ev in enumerate(trace.events(base)):
        alloc.apply(ev)
        if ev.op == "alloc":
            block[ev.key - base] = alloc.block_of(ev.key).size
        if i >= start and alloc.allocated > best[0]:
            best = (alloc.allocated, i, alloc.reserved)
    peak_alloc, peak_event, reserved = best
    bytes_by = dict.fromkeys(CLASSES, 0)
    for k in _live_at(trace, peak_event):
        bytes_by[kinds[k]] += block[k]
    bytes_by["workspaces"] += before
    return MemoryBreakdown(B=trace.B, s=trace.s, expandable=alloc.expandable,
                           peak_event=peak_event, allocated_bytes=peak_alloc,
                           reserved_bytes=reserved, peak_reserved_bytes=alloc.reserved,
                           **{f"{c}_bytes": v for c, v in bytes_by.items()},
                           slack_bytes=reserved - peak_alloc, steps=steps)


def _live_at(trace: OpTrace, event: int) -> set[int]:
    live: set[int] = set()
    for o in trace.ops[:event + 1]:
        if o >= 0:
            live.add(o)
        else:
            live.discard(~o)
    return live
