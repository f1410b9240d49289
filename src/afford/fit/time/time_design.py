"""Which shapes the step-time model is measured at: pure, no device.

Rules for a transformer-shaped workload (batch B and sequence s):

1. **The ladder leaves the floor.** From a base shape (B0, s0), double the tokens per rung
   (:func:`ladder_shape`: the sequence first, then the batch, alternately; one axis: the
   sequence only) until the step grows clearly per doubling (``GROWTH_WORK`` x, the work
   regime) or a budget stops it: the memory budget (``fits``), the tokens and sequence
   limits, or the time budget of one point (the top measured step, scaled by tokens and,
   for attention, by the sequence, times ``steps_per_point``, within ``point_seconds``).
   When a budget stops it first, the design says so: extrapolation beyond is unsupported.
2. **Across the ladder**, shapes of other batches, so batch and sequence are told apart:
   (B0/4, s_{k-2}), (4 B0, s_0) and (2 B0, s_1): pairs of equal tokens whose attention work
   (B s^2) differs 4x and 2x.
3. **Three held-out shapes**, measured and never fitted: interpolated (B0, the midpoint of
   the two largest ladder sequences), 2x beyond in sequence (B0/4, 2 s_top) and 2x beyond
   in batch (twice the largest batch fitted, at the largest tokens).

Every across and held-out shape stays inside the ladder's own memory envelope: at most its
largest shape's tokens (B*s) and B*s^2, the two terms the memory law grows with
(:mod:`afford.fit.memory.memory_fit`), so the design is resident wherever the ladder is. A base
batch below 4 has no B0/4: the held-out sequence shape is then (1, 2 s_top), up to 2x the
envelope's B*s^2, and the notes say so.

**The static design certify uses** (:func:`static_design`): the ladder above needs each rung
measured before the next is chosen, which a certificate's independent children (each timing
every point in its own shuffled order) cannot do. So certify fixes the design before it
measures: the workload's sequence sweep at its base batch (the ladder), rules 2 and 3 around
it. When the fitted points do not reach the work regime, certify measures an **extension**
(:func:`extension_shapes`): the ladder continued from the top shape, doubling tokens while
the memory and time budgets (estimated from the measured top shape) allow, in fresh children.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.fit.time.time_fit import GROWTH_WORK

Fits = Callable[[int, int], bool]
Measure = Callable[[int, int], "float | None"]
Role = Literal["ladder", "across", "held_out_interpolated", "held_out_seq", "held_out_batch",
               "extension"]


class DesignLimits(BaseModel):
    """The budgets of a design: what may vary, tokens and sequence caps, the sequence's
    multiple, and the time one point may take."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    vary: Literal["batch_seq", "seq"] = "batch_seq"
    max_tokens: int | None = None
    max_seq: int | None = None
    seq_multiple: int = 8
    point_seconds: float = Field(3.0, description="time budget of one shape's steps")
    steps_per_point: int = Field(15, description="steps a point takes (warm-up and timed)")
    max_rungs: int = 8


class DesignShape(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    batch: int
    seq: int
    role: Role
    seconds: float | None = Field(None, description="measured warm step, where known")

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


class TimeDesign(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    ladder: list[DesignShape]
    across: list[DesignShape]
    held_out: list[DesignShape]
    work_reached: bool
    stop_reason: str
    notes: list[str] = []

    @property
    def fit_shapes(self) -> list[DesignShape]:
        return [*self.ladder, *self.across]


def ladder_shape(base: tuple[int, int], rung: int, vary: str) -> tuple[int, int]:
    """The shape ``rung`` doublings of tokens above ``base``: the sequence first, then the
    batch, alternately (``vary="seq"``: the sequence only)."""
    b, s = base
    if vary == "seq":
        return b, s * 2 ** rung
    return b * 2 ** (rung // 2), s * 2 ** ((rung + 1) // 2)


def _round_seq(s: float, multiple: int) -> int:
    return max(multiple, int(s // multiple) * multiple)


def _within(b: int, s: int, limits: DesignLimits, fits: Fits | None,
            top: DesignShape | None = None) -> str | None:
    """Why (b, s) is outside the budgets, or None."""
    if b < 1 or s < 1:
        return f"{b} x {s} is not a shape"
    if limits.max_tokens is not None and b * s > limits.max_tokens:
        return f"{b} x {s}: {b * s} tokens > {limits.max_tokens}"
    if limits.max_seq is not None and s > limits.max_seq:
        return f"seq {s} > the model's {limits.max_seq}"
    if fits is not None and not fits(b, s):
        return f"{b} x {s} does not fit the memory budget"
    if top is not None and top.seconds is not None:
        estimate = top.seconds * (b * s / top.tokens) * max(1.0, s / top.seq)
        if estimate * limits.steps_per_point > limits.point_seconds:
            return (f"{b} x {s}: up to {estimate:.3g} s a step x {limits.steps_per_point} "
                    f"steps > the point budget of {limits.point_seconds:g} s")
    return None


def growth(lower: DesignShape, upper: DesignShape) -> float | None:
    """The step's growth per doubling of tokens from ``lower`` to ``upper``."""
    if lower.seconds is None or upper.seconds is None or upper.tokens <= lower.tokens:
        return None
    return (upper.seconds / lower.seconds) ** (1.0 / math.log2(upper.tokens / lower.tokens))


def run_ladder(base: tuple[int, int], limits: DesignLimits, measure: Measure,
               fits: Fits | None = None) -> tuple[list[DesignShape], str]:
    """Rule 1: measure rungs from ``base`` (``measure(b, s)``: warm seconds, or None when the
    shape could not be measured) until the step grows ``GROWTH_WORK`` x per doubling, or a
    budget stops it. Returns the measured rungs and the decision in words."""
    rungs: list[DesignShape] = []
    for r in range(limits.max_rungs + 1):
        b, s = ladder_shape(base, r, limits.vary)
        why = _within(b, s, limits, fits, rungs[-1] if rungs else None)
        if why:
            return rungs, (f"stopped before {b} x {s}: {why}; the ladder did not reach the "
                           "work regime, extrapolation beyond it is unsupported")
        seconds = measure(b, s)
        if seconds is None:
            return rungs, f"{b} x {s} could not be measured; the ladder stops below it"
        rungs.append(DesignShape(batch=b, seq=s, role="ladder", seconds=seconds))
        g = growth(rungs[-2], rungs[-1]) if len(rungs) >= 2 else None
        if g is not None and g >= GROWTH_WORK:
            return rungs, (f"work regime reached at {b} x {s}: the step grew {g:.2f}x per "
                           f"doubling of tokens (>= {GROWTH_WORK:g}x)")
    return rungs, (f"{limits.max_rungs} doublings without reaching the work regime; "
                   "extrapolation beyond is unsupported")


def _across(b0: int, seqs: list[int], limits: DesignLimits, fits: Fits | None,
            taken: set[tuple[int, int]]) -> tuple[list[DesignShape], list[str]]:
    asks = []
    if len(seqs) >= 2 and b0 >= 2:
        asks.append((max(1, b0 // 4), seqs[-2]))
    asks.append((4 * b0, seqs[0]))
    if len(seqs) >= 2:
        asks.append((2 * b0, seqs[1]))
    across, notes = [], []
    for b, v in asks:
        why = _within(b, v, limits, fits)
        if why or (b, v) in taken:
            notes.append(f"across {b} x {v}: " + (f"beyond the sweep's memory envelope "
                                                   f"({why}); not planned" if why else
                                                   "already a ladder shape"))
            continue
        across.append(DesignShape(batch=b, seq=v, role="across"))
        taken.add((b, v))
    return across, notes


def _held_out(fit_shapes: Sequence[DesignShape], top: DesignShape, limits: DesignLimits,
              fits: Fits | None) -> tuple[list[DesignShape], list[str]]:
    """Rule 3 around the fitted shapes; ``top``: the ladder's largest shape."""
    b0 = top.batch
    ladder_seqs = sorted({p.seq for p in fit_shapes if p.batch == b0})
    taken = {(p.batch, p.seq) for p in fit_shapes}
    asks: list[tuple[int, int, str]] = []
    held: list[DesignShape] = []
    notes: list[str] = []
    if len(ladder_seqs) >= 2:
        mid = _round_seq((ladder_seqs[-1] + ladder_seqs[-2]) / 2, limits.seq_multiple)
        asks.append((b0, mid, "held_out_interpolated"))
    if limits.vary == "seq":
        asks.append((b0, 2 * top.seq, "held_out_seq"))
    else:
        if b0 >= 4:  # a quarter batch exists
            asks.append((b0 // 4, 2 * top.seq, "held_out_seq"))
        else:
            notes.append(f"held_out_seq: a base batch of {b0} has no quarter batch for 2x the "
                         "sequence; not planned")
        max_b = max(p.batch for p in fit_shapes)
        tokens = limits.max_tokens or top.tokens
        hb = 2 * max_b
        asks.append((hb, _round_seq(tokens / hb, limits.seq_multiple), "held_out_batch"))
    for b, s, role in asks:
        if limits.vary == "seq" and role == "held_out_seq":
            why = None  # one axis: 2x beyond is the point of holding it out
        else:
            why = _within(b, s, limits, fits)
        if why is None and (b, s) in taken:
            why = "already a fitted shape"
        if why:
            notes.append(f"{role} {b} x {s}: {why}; not planned")
            continue
        held.append(DesignShape(batch=b, seq=s, role=role))
    return held, notes


def design_from_ladder(ladder: Sequence[DesignShape], decision: str, limits: DesignLimits,
                       fits: Fits | None = None) -> TimeDesign:
    """Rules 2 and 3 around a measured ladder (rule 1)."""
    if not ladder:
        return TimeDesign(ladder=[], across=[], held_out=[], work_reached=False,
                          stop_reason=decision, notes=[decision])
    ladder = list(ladder)
    top = max(ladder, key=lambda p: p.tokens)
    env_tokens, env_fits = envelope(top.batch, top.seq)
    both = _and(fits, env_fits)
    lim = limits.model_copy(update={"max_tokens": min(limits.max_tokens or env_tokens,
                                                       env_tokens)})
    seqs = sorted({p.seq for p in ladder if p.batch == ladder[0].batch})
    across, notes = ([], []) if limits.vary == "seq" else \
        _across(ladder[0].batch, seqs, lim, both, {(p.batch, p.seq) for p in ladder})
    held, held_notes = _held_out([*ladder, *across], top, lim, both)
    return TimeDesign(ladder=ladder, across=across, held_out=held,
                      work_reached=decision.startswith("work regime"), stop_reason=decision,
                      notes=notes + held_notes)


def _and(a: Fits | None, b: Fits) -> Fits:
    return b if a is None else (lambda bb, ss: a(bb, ss) and b(bb, ss))


def plan_time_design(base: tuple[int, int], limits: DesignLimits, measure: Measure,
                     fits: Fits | None = None) -> TimeDesign:
    """The whole design: the ladder driven by ``measure``, then rules 2 and 3."""
    ladder, decision = run_ladder(base, limits, measure, fits)
    return design_from_ladder(ladder, decision, limits, fits)


# ---- the static design (certify) and its extension ------------------------------------------


def envelope(base_batch: int, top_seq: int) -> tuple[int, Fits]:
    """The default sweep's memory envelope: (its largest tokens, a predicate: B*s^2 within
    its largest)."""
    top_sq = base_batch * top_seq * top_seq
    return base_batch * top_seq, lambda b, s: b * s * s <= top_sq


def static_design(base_batch: int, seqs: Sequence[int], *, seq_multiple: int = 8,
                  max_seq: int | None = None, fused: bool = False) -> TimeDesign:
    """The design of a transformer-shaped workload from its sequence sweep ``seqs`` at batch
    ``base_batch``, fixed before anything is measured (module docstring). Shapes beyond the
    envelope are not planned, and the notes say which and why.

    ``fused``: the workload's attention never stores the s x s scores (SDPA), so its memory
    grows with the tokens alone and the envelope is its tokens only. The design then also
    fits a long sequence at batch 1 and holds out twice that (:func:`long_factors`: up to 4x
    and 8x the sweep's longest, within the tokens): attention's cost per FLOP falls with the
    sequence (short ones do not fill the card), and a law read at short sequences alone
    over-predicts long ones by 10-45 %."""
    seqs = sorted(set(int(v) for v in seqs))
    if not seqs or base_batch < 1:
        raise ValueError("a static design needs a base batch and at least one sequence")
    b0, top_seq = int(base_batch), seqs[-1]
    max_tokens, fits = envelope(b0, top_seq)
    if fused:
        fits = None  # tokens only: within max_tokens
    limits = DesignLimits(max_tokens=max_tokens, max_seq=max_seq, seq_multiple=seq_multiple)
    ladder = [DesignShape(batch=b0, seq=v, role="ladder") for v in seqs]
    across, notes = _across(b0, seqs, limits, fits, {(b0, v) for v in seqs})
    fit_long, held_long = long_factors(top_seq, max_tokens)
    if fused:
        long, long_notes = _long_seq(fit_long * top_seq, "across", limits, ladder + across)
        across += long
        notes += long_notes
    held, held_notes = _held_out([*ladder, *across], ladder[-1], limits, fits)
    if fused:
        held = [h for h in held if h.role != "held_out_seq"]
        held_notes = [n for n in held_notes if not n.startswith("held_out_seq")]
        long, long_notes = _long_seq(held_long * top_seq, "held_out_seq", limits,
                                     ladder + across)
        held[1:1] = long
        held_notes += long_notes
    if not fused and not any(h.role == "held_out_seq" for h in held):  # B0/4 < 1
        b, v = 1, 2 * top_seq
        if b * v * v <= 2 * b0 * top_seq * top_seq and b * v <= max_tokens and \
                (max_seq is None or v <= max_seq):
            held.insert(1 if held and held[0].role == "held_out_interpolated" else 0,
                        DesignShape(batch=b, seq=v, role="held_out_seq"))
            held_notes = [n for n in held_notes if not n.startswith("held_out_seq")] + [
                f"held_out_seq {b} x {v}: its B*s^2 is {v * v / (b0 * top_seq ** 2):.2g}x the "
                "sweep's largest (a base batch below 4 leaves no smaller batch)"]
    return TimeDesign(ladder=ladder, across=across, held_out=held, work_reached=False,
                      stop_reason="static design: planned before measuring",
                      notes=notes + held_notes)


LONG_FACTORS = (8, 4)  # the held-out long sequence, x the sweep's longest, largest first
LONG_SEQ_CAP = 32768  # the cost of one shape: no longer held-out sequence than this


def long_factors(top_seq: int, max_tokens: int) -> tuple[int, int]:
    """(fitted, held-out) factors on the sweep's longest sequence for a fused design's long
    sequences at batch 1: the held-out one the largest of ``LONG_FACTORS`` within
    ``max_tokens`` and ``LONG_SEQ_CAP``, the fitted one half of it (2x and 4x where 8x is
    over). The fitted one carries attention's cost per FLOP past the sweep: the further the
    fitted sequences reach, the less a law over-predicts the longest held-out one (fitted to
    2x the sweep's longest, it over-predicts 16x several times as much as fitted to 4x)."""
    cap = min(max_tokens, LONG_SEQ_CAP)
    held = next((f for f in LONG_FACTORS if f * top_seq <= cap), LONG_FACTORS[-1])
    return held // 2, held


def _long_seq(seq: int, role: str, limits: DesignLimits,
              taken: Sequence[DesignShape]) -> tuple[list[DesignShape], list[str]]:
    """One shape at batch 1 and sequence ``seq`` (a fused-attention design's long sequence),
    or why it is not planned."""
    why = _within(1, seq, limits, None)
    if why is None and any((p.batch, p.seq) == (1, seq) for p in taken):
        why = "already a fitted shape"
    if why:
        return [], [f"{role} 1 x {seq}: {why}; not planned"]
    return [DesignShape(batch=1, seq=seq, role=role)], []


def extension_shapes(top: DesignShape, limits: DesignLimits, fits: Fits | None = None,
                     rungs: int = 2) -> tuple[list[DesignShape], list[str]]:
    """Up to ``rungs`` shapes that continue the doubling ladder from ``top`` (a measured
    shape: its ``seconds`` bound the time estimate), each within ``limits`` and ``fits``;
    and why the ladder stopped short, if it did."""
    out: list[DesignShape] = []
    for r in range(1, rungs + 1):
        b, s = ladder_shape((top.batch, top.seq), r, limits.vary)
        why = _within(b, s, limits, fits, top)
        if why:
            return out, [f"extension stopped before {b} x {s}: {why}"]
        out.append(DesignShape(batch=b, seq=s, role="extension"))
    return out, []
