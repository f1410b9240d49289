"""Reserved bytes at a shape: the one answer ``size``, ``predict``, plans, preflight, the
ladder and the report read.

Why one answer: a certificate holds two models of a step's reserved memory, the memory law
(least squares over the traced peaks, :mod:`afford.fit.memory.sizing`) and the allocator
replay (the step's allocations written out at the shape and replayed through the caching
allocator's policy, :mod:`afford.figures.replay_figures`). The two can differ by far more
than either's error at one shape (the replay follows the allocator's segments, the law
smooths over them), and a command that printed one while another printed the other would
give the user two answers to one question. Here:

- the *answer* is the replay where the certificate trusts it and it predicted the held-out
  shapes no worse than the law (:func:`afford.figures.replay_figures.usable`), and the shape
  keeps the certified model (another width, depth or head count is a model nobody traced);
  else the law. It names its source and its measured held-out error;
- the *other* model's figure stands beside it when the two differ by more than their stated
  errors (their intervals ``x * (1 -/+ worst held-out |error|)`` do not overlap);
- the *budgeted* figure, which ``fits`` and the budget share rest on, is the answer's (the
  replay's with its safety margin: its worst measured under-prediction), or, where the
  two disagree, the larger of the two: a budget never rests on the optimistic model.

On a CPU there is no reserved memory: the answer is the law's peak RSS.
Pure: no torch, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from afford.core.provenance import Tagged, fitted, measured
from afford.core.units import format_bytes
from afford.figures import replay_figures as memory_replay
from afford.fit.memory import replay_fit as mr
from afford.fit.memory import sizing
from afford.fit.memory.allocator import parse_alloc_conf
from afford.fit.memory.memory_fit import largest_batch as search
from afford.schema import memory_law
from afford.schema.memory_section import MemoryLaw

Model = Literal["replay", "law"]


@dataclass(frozen=True)
class ModelFigure:
    """One model's reserved bytes at the shape, with what it is budgeted at and its stated
    error (the worst |predicted / measured - 1| of reserved over the held-out shapes)."""

    model: Model
    reserved: Tagged     # FITTED
    budgeted: float      # replay: reserved x (1 + safety margin); law: reserved
    error: Tagged | None  # MEASURED; None: no held-out shape measured it

    @property
    def stated_error(self) -> float:
        return float(self.error.value) if self.error is not None else 0.0


@dataclass(frozen=True)
class ReservedAt:
    """The memory answer at one shape. ``reserved`` is the answering model's figure (None
    on a CPU, where ``allocated`` is the peak RSS); ``other`` the other model's, only where
    they disagree beyond their errors; ``budgeted`` what residency is decided on."""

    workload: str
    mode: str
    dims: dict[str, int]
    source: Model
    why: str
    allocated: Tagged
    reserved: Tagged | None
    error: Tagged | None
    other: ModelFigure | None
    budgeted: Tagged
    basis: str
    prediction: sizing.Prediction
    expandable: bool = False
    notes: tuple[str, ...] = ()

    @property
    def disagree(self) -> bool:
        return self.other is not None


def same_model(law: MemoryLaw, dims: dict[str, int], shape: dict[str, int]) -> bool:
    """The shape keeps the certified model (the replay's histories describe only it)."""
    return "params" not in shape and all(dims[k] == law.base_dims[k] for k in ("d", "L", "H"))


def law_figure(law: MemoryLaw, pred: sizing.Prediction, run: str) -> ModelFigure | None:
    """The law's reserved figure (CUDA), its error the law's held-out worst."""
    if pred.reserved is None:
        return None
    err = [abs(h.reserved_error) for h in law.heldout if h.reserved_error is not None]
    tag = measured(max(err), "ratio", f"max |predicted/measured - 1| of the memory law's "
                   f"peak reserved over {len(err)} held-out shapes; {run}") if err else None
    return ModelFigure("law", pred.reserved, float(pred.reserved.value), tag)


def replay_figure(law: MemoryLaw, B: int, s: int, expandable: bool, run: str
                  ) -> tuple[ModelFigure, Tagged] | None:
    """The replay's reserved figure and its allocated peak at (B, s); ``None`` without a
    replay to learn from."""
    rp = law.replay
    learned = mr.learn_shapes(list(law.shapes)) if rp is not None else None
    if learned is None:
        return None
    res = mr.predict(learned.model, learned.traced[0].trace.seed, B, s, expandable)
    src = memory_replay.source(law, memory_replay.EXPANDABLE if expandable else "native", run)
    extra = B * s > 4 * max(x * y for x, y in rp.traced)
    err = rp.replay_worst_reserved_error
    tag = measured(abs(err), "ratio", f"max |predicted/measured - 1| of the allocator "
                   f"replay's peak reserved over {len(rp.heldout)} held-out shapes; {run}") \
        if err is not None else None
    reserved = fitted(res.peak_reserved_bytes, "B", src, extrapolated=extra)
    return (ModelFigure("replay", reserved, res.peak_reserved_bytes * (1 + rp.safety_margin),
                        tag),
            fitted(res.peak_allocated_bytes, "B", src, extrapolated=extra))


def disagree(a: ModelFigure, b: ModelFigure) -> bool:
    """The two figures' intervals ``x (1 -/+ stated error)`` do not overlap."""
    x, y = float(a.reserved.value), float(b.reserved.value)
    return abs(x - y) > a.stated_error * x + b.stated_error * y


def _err_text(f: ModelFigure) -> str:
    return f"held-out error {f.stated_error:.2%}" if f.error is not None else \
        "no held-out error measured"


def combine(answer: ModelFigure, other: ModelFigure | None) -> tuple[Tagged, str, bool]:
    """(budgeted figure, its basis in words, whether the two disagree)."""
    name = {"replay": "the allocator replay", "law": "the memory law"}
    a = answer.reserved
    if other is None or not disagree(answer, other):
        basis = name[answer.model] + (" x (1 + its safety margin)" if answer.model == "replay"
                                      and answer.budgeted != a.value else "")
        if other is not None:
            basis += f" ({name[other.model]} agrees within their held-out errors)"
        return fitted(answer.budgeted, "B", f"{basis}; {a.source}",
                      extrapolated=a.extrapolated), basis, False
    top = max((answer, other), key=lambda f: f.budgeted)
    basis = (f"the larger of {name[answer.model]} ({format_bytes(float(a.value))}, "
             f"{_err_text(answer)}) and {name[other.model]} "
             f"({format_bytes(float(other.reserved.value))}, {_err_text(other)}), which "
             f"disagree beyond their errors: {name[top.model]}'s")
    return fitted(top.budgeted, "B", f"{basis}; {top.reserved.source}",
                  extrapolated=answer.reserved.extrapolated or other.reserved.extrapolated), \
        basis, True


def reserved_at(law: MemoryLaw, shape: dict[str, int], run: str, alloc_conf: str = ""
                ) -> ReservedAt:
    """The memory answer of ``law`` at ``shape`` (workload keys or law dims, as
    :func:`afford.fit.memory.sizing.predict` takes them) under the ``PYTORCH_CUDA_ALLOC_CONF``
    ``alloc_conf`` of the run (the replay predicts either allocator setting; the law
    knows only the one it was measured under)."""
    pred = sizing.predict(law, shape, run)
    dims = pred.dims
    expandable, unmodelled = parse_alloc_conf(alloc_conf)
    notes = [f"PYTORCH_CUDA_ALLOC_CONF {alloc_conf!r}: {', '.join(unmodelled)} not modelled "
             "(predicted as if unset)"] if unmodelled else []
    lawf = law_figure(law, pred, run)
    used, why = memory_replay.usable(law)
    rep = None
    if lawf is not None and law.replay is not None:
        if same_model(law, dims, shape):
            rep = replay_figure(law, dims["B"], dims["s"], expandable, run)
        else:
            used, why = False, ("the allocator replay describes the certified model only "
                                "(this shape changes d, L, H or the parameters)")
    if rep is None:
        used = False
    answer, other = (rep[0], lawf) if used else (lawf, rep[0] if rep else None)
    alloc = rep[1] if used else pred.allocated
    if answer is None:  # a CPU: the law's peak RSS is the answer
        return ReservedAt(law.workload, law.mode, dims, "law", "a CPU: peak RSS, no "
                          "allocator", pred.allocated, None, None, None, pred.allocated,
                          "the memory law's peak RSS", pred, expandable, tuple(notes))
    budgeted, basis, split = combine(answer, other)
    return ReservedAt(law.workload, law.mode, dims, answer.model, why, alloc, answer.reserved,
                      answer.error, other if split else None, budgeted, basis, pred,
                      expandable, tuple(notes + list(pred.notes)))


def largest_batch(law: MemoryLaw, shape: dict[str, int], budget_bytes: float, run: str,
                  alloc_conf: str = "") -> Tagged:
    """The largest batch whose budgeted figure (:func:`reserved_at`) fits ``budget_bytes``
    at ``shape`` (its batch ignored), FITTED: the same figure ``fits`` is decided on, so
    the largest batch always fits and one more does not (up to the search's cap)."""
    if law.device_type == "cpu" or law.replay is None:
        return sizing.max_batch(law, shape, budget_bytes, run)
    seen: dict[int, ReservedAt] = {}

    def at(b: int) -> float:
        if b not in seen:
            seen[b] = reserved_at(law, {**shape, "B": b}, run, alloc_conf)
        return float(seen[b].budgeted.value)

    n = search(at, budget_bytes)
    basis = seen[n].basis if n in seen else seen[min(seen)].basis if seen else "the law"
    dims = memory_law.shape_dims(law, shape)
    extra = memory_law.extrapolated(law, {**dims, "B": max(n, 1)})
    return fitted(n, "sequences", f"largest B with the budgeted reserved ({basis}) <= "
                  f"{budget_bytes:.0f} B at s={dims['s']}; {law.workload} {law.mode}; {run}",
                  extrapolated=extra)
