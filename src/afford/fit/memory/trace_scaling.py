"""A training step's allocations learned at small shapes and synthesised at a larger one.

Why: reserved memory is what the caching allocator makes of the step's sequence of
requests (:mod:`afford.fit.memory.allocator`), so predicting it at a shape nobody ran means
predicting that sequence. For a fixed model and mode the sequence of operations is the
same at every shape (the same kernels in the same order); only the sizes change, each a
small polynomial in the batch B and the sequence length s: weights and optimizer state are
constant, activations grow with the tokens B*s, materialised attention scores with B*s^2,
position tables with s. So the allocator's history recorded at two or three small shapes
(``torch.cuda.memory._record_memory_history``) is aligned allocation by allocation, each
allocation's size is fitted exactly on integers, and the sequence is written out at the
target shape, ready to replay.

Alignment. A recorded history is first put in canonical form (:func:`from_history`):
allocations numbered in order (their *slots*), frees naming the slot they free, and each run
of consecutive frees sorted by slot: a run of frees with no allocation between them leaves
the allocator in the same state whatever its order, and its order is not reproducible
(autocast's cast cache and autograd's graph are torn down in hash order). Two histories
are aligned by :func:`difflib.SequenceMatcher` over tokens that do not depend on the shape:
a free is anonymous, an allocation freed within the history is ``(alloc, True)``, and one
never freed is ``(alloc, False, size)`` (weights, optimizer state and workspaces keep their
size at every shape, so they anchor the alignment). Matching runs pair their allocations;
a mismatched stretch pairs them in order when both sides hold as many, and leaves them
unpaired otherwise. This finds what a first-in-process history has that later ones lack
(cuBLAS and cuBLASLt workspaces, made at the first GEMM and kept for the process) and what
a larger shape adds.

What the model cannot see: a kernel chosen by size. PyTorch's embedding backward switches
to a sort-based kernel past 3072 indices, which adds a few small allocations a step; a
history traced below that and synthesised above it lacks them (too small to move reserved
or the allocated peak noticeably). A size that grows and then stops between the traced and
the target shapes is another (the reduce kernels' staging buffers in the backward, a few
KiB a token each, capped at 1 MiB per SM of the device). A size seen capped at the traced
shapes gets a capped law (:func:`_capped`), and a cap seen on one reduction's staging
buffer bounds the others of the history (:func:`_propagate_caps`): buffers that reach the
cap only between the traced and the held-out shapes then replay to the byte, where uncapped
laws over-predict reserved by a few per cent.

Size laws (:func:`fit_size`). Each slot's sizes at the traced shapes are fitted as a
non-negative combination of the terms {1, B*s, B*s^2, B, s, s^2}: the basis with the
fewest terms that reproduces every traced size to the byte wins; at equal length the order
of :data:`BASES` decides (constant, then tokens, then scores). Identifiability: with n
traced shapes at most n terms can be determined, and a basis of n terms always
interpolates n points, so only a fit with fewer terms than shapes is evidence of the law;
a fit that needs all n is marked ``interpolated``, and several bases of the winning length
that fit (they disagree off the traced shapes) mark it ``ambiguous``. Three shapes that
vary both B and s separate {1, B*s} from {1, B*s^2}; two shapes of equal B*s cannot
separate 1 from B*s. A size that is the same at every traced shape is constant: an
allocation that saturates (a workspace capped by the library) stays put, and one that
grows then stops between the traced and the target shapes cannot be seen at all.

Learned at three traced shapes, a synthesised history is meant to replay at held-out shapes (up
to 4x the tokens) to the reserved bytes a run there measures; what it cannot see (above) is
where it misses. Predictions come from it only where the replay was validated and, at the
held-out shapes, no worse than the law (:func:`afford.fit.memory.replay_fit.use_replay`).

Pure: no torch, no I/O.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from afford.fit.memory.allocator import AllocEvent
from afford.schema.memory_section import LearnedSizes, pack_ints, unpack_ints

if TYPE_CHECKING:
    import numpy as np  # imported by the size fits themselves: a replay needs none

TERMS: dict[str, tuple[int, int]] = {  # name -> (power of B, power of s)
    "1": (0, 0), "B*s": (1, 1), "B*s^2": (1, 2), "B": (1, 0), "s": (0, 1), "s^2": (0, 2)}
BASES: tuple[tuple[str, ...], ...] = (
    ("1",), ("B*s",), ("B*s^2",), ("s",), ("B",), ("s^2",),
    ("1", "B*s"), ("1", "B*s^2"), ("B*s", "B*s^2"), ("1", "s"), ("1", "B"), ("1", "s^2"),
    ("B*s", "s"), ("B", "B*s"), ("B*s", "s^2"),
    ("1", "B*s", "B*s^2"), ("1", "B*s", "s"), ("1", "B", "B*s"), ("1", "B*s", "s^2"),
    ("B*s", "B*s^2", "s"), ("1", "B*s^2", "s"))
EXACT_BYTES = 0.5  # a fit is exact when every traced size is reproduced within this
CONTEXTS = (6, 1, 0)  # alignment passes: tokens of 6 ops with lifetimes, 1 op, plain kinds
MIN_ANCHOR = 64  # ops: a shorter run of equal fine tokens is not trusted as an anchor
MAX_STRETCH = 4000  # ops: a longer stretch the first pass leaves unmatched stays unmatched
# (another kernel path throughout, e.g. a smaller shape's attention; difflib over common
# tokens of thousands of ops takes seconds and pairs little)


@dataclass(frozen=True)
class OpTrace:
    """One recorded history in canonical form. ``ops``: slot >= 0 allocates that slot
    (``sizes[slot]`` bytes on ``streams[slot]``), ``~slot`` (< 0) frees it."""

    B: int
    s: int
    sizes: tuple[int, ...]
    streams: tuple[int, ...]
    ops: tuple[int, ...]
    external_frees: int = 0  # frees of blocks allocated before the history began (dropped)

    @property
    def n_allocs(self) -> int:
        return len(self.sizes)

    def freed(self) -> set[int]:
        return {~o for o in self.ops if o < 0}

    def events(self, key_base: int = 0) -> list[AllocEvent]:
        """The history as allocator events, keyed ``key_base + slot``."""
        out = []
        for o in self.ops:
            if o >= 0:
                out.append(AllocEvent("alloc", key_base + o, self.sizes[o], self.streams[o]))
            else:
                out.append(AllocEvent("free", key_base + ~o, 0, self.streams[~o]))
        return out


def from_history(B: int, s: int, history: Sequence[Sequence]) -> OpTrace:
    """A recorded allocator history (``[action, addr, size, stream]`` rows as in
    ``torch.cuda.memory._snapshot()["device_traces"]``) in canonical form. ``alloc`` opens
    a slot, ``free_completed`` closes it (``free_requested`` is ignored: on one stream the
    two are adjacent); segment events are the allocator's own and are ignored."""
    live: dict[int, int] = {}
    sizes: list[int] = []
    streams: list[int] = []
    ops: list[int] = []
    run: list[int] = []
    external = 0
    for action, addr, size, stream in history:
        if action == "alloc":
            ops.extend(sorted(run, reverse=True))  # ~slot descending = slot ascending
            run = []
            live[addr] = len(sizes)
            ops.append(len(sizes))
            sizes.append(int(size))
            streams.append(int(stream))
        elif action == "free_completed":
            slot = live.pop(addr, None)
            if slot is None:
                external += 1
            else:
                run.append(~slot)
    ops.extend(sorted(run, reverse=True))
    return OpTrace(B=int(B), s=int(s), sizes=tuple(sizes), streams=tuple(streams),
                   ops=tuple(ops), external_frees=external)


def _tokens(t: OpTrace, context: int = 0) -> tuple[list, list[int | None]]:
    """Alignment tokens: a free is anonymous; an allocation freed within the trace is
    ``(alloc, True)``; one never freed (weights, optimizer state, workspaces: sizes that
    rarely change with the shape) is ``(alloc, False, size)``. ``context`` > 0: each token
    also carries its slot's lifetime in ops (alloc to free; the same at every shape where
    the op sequence is) and stands for itself and the next ``context - 1`` tokens, which
    makes tokens rare enough for difflib to be fast."""
    freed = t.freed()
    life: dict[int, int] = {}
    if context:
        born: dict[int, int] = {}
        for i, o in enumerate(t.ops):
            if o >= 0:
                born[o] = i
            else:
                life[~o] = i - born.get(~o, i)
    toks: list = []
    slots: list[int | None] = []
    for o in t.ops:
        if o >= 0:
            tok = ("a", True) if o in freed else ("a", False, t.sizes[o])
            toks.append(tok + (life.get(o, -1),) if context else tok)
            slots.append(o)
        else:
            toks.append(("f", life[~o]) if context else ("f",))  # a freed slot has one
            slots.append(None)
    if context > 1:  # with the next ops' tokens: short-lived temporaries are everywhere alike
        n = len(toks)
        toks = [hash(tuple(toks[i:min(n, i + context)])) for i in range(n)]
    return toks, slots


def _common_ends(ta: list, tb: list) -> tuple[int, int]:
    """(head, tail): how many tokens the two lists share at their start and, after that,
    at their end."""
    n = min(len(ta), len(tb))
    head = next((i for i in range(n) if ta[i] != tb[i]), n)
    tail = 0
    while tail < n - head and ta[-1 - tail] == tb[-1 - tail]:
        tail += 1
    return head, tail


def _middle(ta: list, tb: list) -> int:
    """The longer side of what difflib would have to search between the common ends."""
    head, tail = _common_ends(ta, tb)
    return max(len(ta), len(tb)) - head - tail


def _opcodes(ta: list, tb: list) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes, with the common head and tail matched outright (difflib is
    quadratic in the stretch it has to search)."""
    head, tail = _common_ends(ta, tb)
    out = [("equal", 0, head, 0, head)] if head else []
    sm = difflib.SequenceMatcher(None, ta[head:len(ta) - tail], tb[head:len(tb) - tail],
                                 autojunk=False)  # two empty middles: no opcodes
    out += [(tag, i1 + head, i2 + head, j1 + head, j2 + head)
            for tag, i1, i2, j1, j2 in sm.get_opcodes()]
    if tail:
        out.append(("equal", len(ta) - tail, len(ta), len(tb) - tail, len(tb)))
    return out


def _stretches(codes: list[tuple[str, int, int, int, int]], min_equal: int
               ) -> list[tuple[bool, int, int, int, int]]:
    """The opcodes with every run of non-equal ones merged: (equal?, i1, i2, j1, j2);
    equal runs shorter than ``min_equal`` count as non-equal."""
    out: list[tuple[bool, int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 < min_equal:
            tag = "replace"
        if tag != "equal" and out and not out[-1][0]:
            out[-1] = (False, out[-1][1], i2, out[-1][3], j2)
        else:
            out.append((tag == "equal", i1, i2, j1, j2))
    return out


def align(ref: OpTrace, other: OpTrace) -> list[int | None]:
    """For each slot of ``ref``, the slot of ``other`` it matches, or ``None``.

    Passes from rare tokens to common ones (:data:`CONTEXTS`): the equal runs (of at least
    :data:`MIN_ANCHOR` ops) of a pass over tokens with lifetimes pair their allocations; each
    stretch between them goes to the next pass alone (an extra kernel's allocations change
    the lifetimes of the blocks around them, not their kinds) when it is at most
    :data:`MAX_STRETCH` ops long; a longer one goes to the first finer pass that leaves at
    most that many ops to search between the stretch's common ends (two shapes' histories
    can differ in every few ops' lifetimes and only in a handful of ops as plain kinds: a
    24-layer model's backward, 5,200 ops, and one kernel's 28 extra ops at its end), and
    stays unmatched when none does; the last pass, over the plain kinds, pairs a mismatched
    stretch in order when both sides allocate as many. difflib's quadratic search over
    common tokens is kept to short stretches."""
    match: list[int | None] = [None] * ref.n_allocs
    _, sa = _tokens(ref)
    _, sb = _tokens(other)
    levels = [(_tokens(ref, c)[0], _tokens(other, c)[0]) for c in CONTEXTS]

    def pair(i1: int, i2: int, j1: int, j2: int) -> None:
        for x, y in zip((x for x in sa[i1:i2] if x is not None),
                        (y for y in sb[j1:j2] if y is not None)):
            match[x] = y

    def walk(level: int, i1: int, i2: int, j1: int, j2: int) -> None:
        ta, tb = levels[level]
        last = level == len(levels) - 1
        for equal, a1, a2, b1, b2 in _stretches(_opcodes(ta[i1:i2], tb[j1:j2]),
                                                0 if last else MIN_ANCHOR):
            a1, a2, b1, b2 = a1 + i1, a2 + i1, b1 + j1, b2 + j1
            if equal:
                pair(a1, a2, b1, b2)
            elif not last:
                finer = next((k for k in range(level + 1, len(levels))
                              if max(a2 - a1, b2 - b1) <= MAX_STRETCH
                              or _middle(levels[k][0][a1:a2], levels[k][1][b1:b2])
                              <= MAX_STRETCH), None)
                if finer is not None:
                    walk(finer, a1, a2, b1, b2)
            elif last and sum(x is not None for x in sa[a1:a2]) == \
                    sum(y is not None for y in sb[b1:b2]):
                pair(a1, a2, b1, b2)

    walk(0, 0, len(sa), 0, len(sb))
    return match


def extra_slots(ref: OpTrace, other: OpTrace) -> list[int]:
    """Slots of ``other`` that no slot of ``ref`` matches (e.g. what a first-in-process
    history allocates once: library workspaces, lazily built tables)."""
    matched = {m for m in align(ref, other) if m is not None}
    return [k for k in range(other.n_allocs) if k not in matched]


Hypothesis = tuple[tuple[str, ...], tuple[float, ...], "float | None"]  # terms, coefs, cap


class SizeLaw(BaseModel):
    """One slot's size: ``sum(coef * B^i s^j)`` over ``terms``, rounded to a byte; where the
    traced sizes do not single out one law (:func:`fit_size`), the largest of the laws that
    reproduce them (``alternatives``), so that a prediction never rests on the optimistic
    one of two readings of the same evidence."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    terms: tuple[str, ...]
    coefs: tuple[float, ...]
    exact: bool = Field(description="reproduces every traced size within half a byte")
    interpolated: bool = Field(description="as many terms as traced shapes: no evidence")
    ambiguous: bool = Field(description="another basis as short also fits exactly")
    n_points: int
    cap: float | None = Field(None, description="the size stops growing here: the largest "
                              "traced size, reached by the larger traced shapes")
    alternatives: tuple[Hypothesis, ...] = Field(
        (), description="(terms, coefs, cap) of the other laws that reproduce the traced "
        "sizes as well as this one: the prediction is the largest of all")
    offset: float = Field(0.0, description="bytes added to an inexact (least-squares) law: "
                          "its largest under-prediction of a traced size")

    def predict(self, B: int, s: int) -> int:
        v = _value(self.terms, self.coefs, self.cap, B, s) + self.offset
        for terms, coefs, cap in self.alternatives:
            v = max(v, _value(terms, coefs, cap, B, s))
        return max(0, int(round(v)))


def _value(terms: Sequence[str], coefs: Sequence[float], cap: float | None, B: int, s: int
           ) -> float:
    v = sum(c * B ** TERMS[t][0] * s ** TERMS[t][1] for t, c in zip(terms, coefs))
    return v if cap is None else min(v, cap)


def _design(shapes: Sequence[tuple[int, int]], terms: Sequence[str]) -> np.ndarray:
    import numpy as np

    return np.array([[float(B) ** TERMS[t][0] * float(s) ** TERMS[t][1] for t in terms]
                     for B, s in shapes])  # (n, k)


def _solve(shapes: Sequence[tuple[int, int]], y: np.ndarray, terms: Sequence[str]
           ) -> tuple[np.ndarray, float] | None:
    """Least squares in the basis; ``None`` when the shapes cannot determine it."""
    import numpy as np

    a = _design(shapes, terms)
    if np.linalg.matrix_rank(a) < len(terms):
        return None
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    return coef, float(np.max(np.abs(a @ coef - y)))


def fit_size(shapes: Sequence[tuple[int, int]], sizes: Sequence[int]) -> SizeLaw:
    """The shortest basis of :data:`BASES` that reproduces ``sizes`` exactly with
    non-negative coefficients; else such a basis over the shapes below the largest size,
    capped there (:func:`_capped`); else, when the sizes only admit readings without
    evidence (an interpolating basis, capped laws whose rise is seen at too few shapes:
    :func:`_cap_readings`), the first of them predicting the largest of all; when none
    does, non-negative least squares over the longest basis the shapes determine (``exact``
    False), raised by its worst under-prediction of a traced size. Never the optimistic one
    of two readings: where bases agree at the traced shapes and not off them, the largest
    predicts. Memoised: the layers of a model repeat the same sizes, so most slots share
    their fit."""
    return _fit_size(tuple((int(B), int(s)) for B, s in shapes), tuple(int(v) for v in sizes))


@functools.lru_cache(maxsize=65536)
def _fit_size(shapes: tuple[tuple[int, int], ...], sizes: tuple[int, ...]) -> SizeLaw:
    import numpy as np

    y = np.asarray(sizes, dtype=float)
    n = len(shapes)
    if n == 0:
        raise ValueError("a size law needs at least one traced shape")
    if np.all(y == y[0]):
        return SizeLaw(terms=("1",), coefs=(float(y[0]),), exact=True,
                       interpolated=n == 1, ambiguous=False, n_points=n)
    got = _exact(shapes, y)
    if got is not None and not (got.interpolated and len(got.terms) > 1):
        return got
    capped = _capped(shapes, y)
    if capped is not None:
        return capped
    readings = ([got] if got is not None else []) + _cap_readings(shapes, y)
    if readings:
        return _hedged(readings)
    return _nnls_fallback(shapes, y)


def _exact(shapes: Sequence[tuple[int, int]], y: np.ndarray) -> SizeLaw | None:
    """The shortest basis that fits exactly (non-negative); the other bases as short that
    fit too are its ``alternatives`` (they agree at the traced shapes, not off them)."""
    import numpy as np

    n = len(shapes)
    for k in range(1, n + 1):
        fits = []
        for terms in (b for b in BASES if len(b) == k):
            got = _solve(shapes, y, terms)
            if got is not None and got[1] <= EXACT_BYTES and np.all(got[0] >= -1e-9):
                fits.append((terms, tuple(float(max(c, 0.0)) for c in got[0])))
        if fits:
            terms, coef = fits[0]
            distinct = len({tuple(r) for r in _design(shapes, terms)})
            return SizeLaw(terms=terms, coefs=coef, exact=True, interpolated=k >= distinct,
                           ambiguous=len(fits) > 1, n_points=n,
                           alternatives=tuple((t, c, None) for t, c in fits[1:]))
    return None


def _capped(shapes: Sequence[tuple[int, int]], y: np.ndarray) -> SizeLaw | None:
    """A size that grows and then stops (a reduction's staging buffer bounded by the grid,
    tinylm's two backward buffers per layer at 132 MiB): the shapes below the largest size
    follow a basis exactly (with fewer terms than they are, so it is evidence), and that
    basis reaches the largest size at every shape that has it. The law is the basis capped
    at the largest size. ``None`` when the sizes do not look like that."""
    top = float(y.max())
    below = [i for i in range(len(y)) if y[i] < top]
    if len(below) < 2:
        return None
    law = _exact([shapes[i] for i in below], y[below])
    if law is None or law.interpolated:
        return None
    if not _reaches(law.terms, law.coefs, shapes, y, top):
        return None
    alts = tuple((t, c, top) for t, c, _ in law.alternatives if _reaches(t, c, shapes, y, top))
    return law.model_copy(update={"cap": top, "n_points": len(y), "alternatives": alts})


def _reaches(terms: Sequence[str], coefs: Sequence[float], shapes: Sequence[tuple[int, int]],
             y: np.ndarray, top: float) -> bool:
    """The uncapped law is at least ``top`` at every shape whose size is ``top``."""
    return all(_value(terms, coefs, None, *shapes[i]) >= top - EXACT_BYTES
               for i in range(len(y)) if y[i] == top)


def _cap_readings(shapes: Sequence[tuple[int, int]], y: np.ndarray) -> list[SizeLaw]:
    """Every reading of the sizes as a capped law that the traced shapes cannot confirm:
    the shapes below the largest size passed through exactly by a basis (with as many terms
    as those shapes determine; one shape below: any one-term basis through it) that,
    uncapped, reaches the largest size at every shape that has it and passes it at one (so
    the cap is what makes it fit). A staging buffer whose cap lies between two traced shapes
    looks like this: its sizes below the cap are too few to say how it grows, and a
    least-squares law (or an interpolating one) through all of them falls below the cap
    between the shapes. Each reading is marked interpolated (no evidence)."""
    import numpy as np

    top = float(y.max())
    below = [i for i in range(len(y)) if y[i] < top]
    if not below:
        return []
    pts = [shapes[i] for i in below]
    out = []
    for terms in (b for b in BASES if len(b) <= len(below)):
        got = _solve(pts, y[below], terms)
        if got is None or got[1] > EXACT_BYTES or not np.all(got[0] >= -1e-9):
            continue
        coefs = tuple(float(max(c, 0.0)) for c in got[0])
        if _reaches(terms, coefs, shapes, y, top) and _passes(terms, coefs, shapes, y, top):
            out.append(SizeLaw(terms=terms, coefs=coefs, exact=True, interpolated=True,
                               ambiguous=False, n_points=len(y), cap=top))
    return out


def _passes(terms: Sequence[str], coefs: Sequence[float], shapes: Sequence[tuple[int, int]],
            y: np.ndarray, top: float) -> bool:
    """The uncapped law passes ``top`` at some shape whose size is ``top``: capping it is
    what makes it fit (else it is an exact law, no capped reading)."""
    return any(_value(terms, coefs, None, *shapes[i]) > top + EXACT_BYTES
               for i in range(len(y)) if y[i] == top)


def _hedged(readings: list[SizeLaw]) -> SizeLaw:
    """The first reading, predicting the largest of all of them at any shape."""
    first, rest = readings[0], readings[1:]
    alts = list(first.alternatives) + [(r.terms, r.coefs, r.cap) for r in rest]
    return first.model_copy(update={"alternatives": tuple(alts),
                                    "ambiguous": first.ambiguous or bool(rest)})


def _nnls_fallback(shapes: Sequence[tuple[int, int]], y: np.ndarray) -> SizeLaw:
    import numpy as np
    from scipy.optimize import nnls

    n = len(shapes)
    for terms in (("1", "B*s", "B*s^2"), ("1", "B*s"), ("1",)):
        if len(terms) > n:
            continue
        a = _design(shapes, terms)
        if np.linalg.matrix_rank(a) < len(terms):
            continue
        scale = np.linalg.norm(a, axis=0)
        coef = nnls(a / scale, y)[0] / scale
        under = float(np.max(y - a @ coef))  # the worst under-prediction of a traced size
        return SizeLaw(terms=terms, coefs=tuple(float(c) for c in coef), exact=False,
                       interpolated=len(terms) >= n, ambiguous=False, n_points=n,
                       offset=max(0.0, under))
    raise AssertionError("the constant basis is always determined")


class TraceModel(BaseModel):
    """The reference history's structure with a size law per slot: :meth:`synthesise`
    writes the history out at any (B, s)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    shapes: list[tuple[int, int]] = Field(description="traced (B, s), reference first")
    ops: list[int] = Field(description="the reference's canonical ops (slot / ~slot)")
    streams: list[int]
    laws: list[SizeLaw]
    unmatched: list[int] = Field(description="per traced shape after the reference: "
                                 "reference slots it has no match for")
    extras: list[int] = Field(description="per traced shape after the reference: its slots "
                              "the reference has no match for (left out of the model)")
    reference_only: list[int] = Field(
        [], description="slots only the reference allocates, where every other traced shape "
        "has fewer tokens: a kernel that takes another path above some size")
    reference_only_above: int | None = Field(
        None, description="B*s above which the reference_only slots are written out: the "
        "most tokens of a traced shape without them (where between that and the reference's "
        "the path switches is not seen: they are kept there, the larger history)")
    below_ops: list[int] | None = Field(
        None, description="the canonical ops of the traced shape with the most tokens of "
        "those without the reference_only slots, in the reference's slot numbers: below "
        "reference_only_above the step takes that shape's path, whose lifetimes differ too "
        "(the embedding backward's fp32 accumulator and its index buffer are freed in another "
        "order); None where no such shape pairs slot for slot with the reference")
    warnings: list[str] = []

    def sizes(self, B: int, s: int) -> list[int]:
        return [law.predict(B, s) for law in self.laws]

    def trace(self, B: int, s: int) -> OpTrace:
        """The reference history written out at (B, s); below the reference-only slots'
        threshold without them (the rest renumbered in order, a history of its own)."""
        sizes, streams, ops = self.sizes(B, s), self.streams, self.ops
        if self.reference_only and self.reference_only_above is not None and \
                B * s <= self.reference_only_above:
            gone = set(self.reference_only)
            keep = [k for k in range(len(sizes)) if k not in gone]
            new = {k: i for i, k in enumerate(keep)}
            sizes, streams = [sizes[k] for k in keep], [streams[k] for k in keep]
            ops = [new[o] if o >= 0 else ~new[~o] for o in (self.below_ops or ops)
                   if (o if o >= 0 else ~o) not in gone]
        return OpTrace(B=int(B), s=int(s), sizes=tuple(sizes), streams=tuple(streams),
                       ops=tuple(ops))

    def synthesise(self, B: int, s: int, key_base: int = 0) -> list[AllocEvent]:
        """The reference history at (B, s) as allocator events, keyed ``key_base + slot``."""
        return self.trace(B, s).events(key_base)

    def summary(self) -> dict[str, int]:
        """How many slots took each basis, and how many were inexact, capped, interpolated,
        ambiguous, or hedged (predicting the largest of several readings, or a least-squares
        law raised to its worst under-prediction)."""
        out: dict[str, int] = {}
        for law in self.laws:
            key = "+".join(law.terms)
            out[key] = out.get(key, 0) + 1
        out["inexact"] = sum(not law.exact for law in self.laws)
        out["capped"] = sum(law.cap is not None for law in self.laws)
        out["interpolated"] = sum(law.interpolated and law.terms != ("1",) for law in self.laws)
        out["ambiguous"] = sum(law.ambiguous for law in self.laws)
        out["hedged"] = sum(bool(law.alternatives) or law.offset > 0 for law in self.laws)
        return out


def learn(traces: Sequence[OpTrace], reference: int = 0) -> TraceModel:
    """A :class:`TraceModel` on ``traces[reference]``'s structure; every other trace is
    aligned to it (:func:`align`) and gives each matched slot one more point of its law. A
    slot matched nowhere else keeps its reference size; where every other traced shape has
    fewer tokens than the reference, such slots are a path the step takes above some size
    (PyTorch's embedding backward sorts its indices above 3,072 of them: 14 more
    allocations a step, one of them vocabulary x width in fp32), and are written out only
    above the most tokens of a traced shape without them."""
    if not traces:
        raise ValueError("no traces to learn from")
    ref = traces[reference]
    others = [t for i, t in enumerate(traces) if i != reference]
    if len({(t.B, t.s) for t in traces}) < len(traces):
        raise ValueError("two traces at the same shape: give each shape once")
    matches = [align(ref, t) for t in others]
    laws = []
    for slot in range(ref.n_allocs):
        pts = [((ref.B, ref.s), ref.sizes[slot])]
        pts += [((t.B, t.s), t.sizes[m[slot]]) for t, m in zip(others, matches)
                if m[slot] is not None]
        laws.append(fit_size([p for p, _ in pts], [v for _, v in pts]))
    unmatched = [sum(x is None for x in m) for m in matches]
    extras = [t.n_allocs - (ref.n_allocs - u) for t, u in zip(others, unmatched)]
    laws, n_siblings = _propagate_caps(ref.ops, laws)
    warnings = _warnings(ref, laws, unmatched, traces)
    if n_siblings:
        warnings.append(f"{n_siblings} reduction staging buffers capped like the ones seen "
                        "capped (the traced shapes do not reach their cap)")
    only = [k for k in range(ref.n_allocs) if others and all(m[k] is None for m in matches)]
    above = max((t.B * t.s for t in others), default=None)
    if not only or above is None or above >= ref.B * ref.s:
        above = None
    else:
        warnings.append(f"{len(only)} allocations only the reference ({ref.B}x{ref.s}) makes: "
                        f"written out above {above} tokens, the most of a traced shape "
                        "without them")
    below = _below_ops(others, matches, only) if above is not None else None
    return TraceModel(shapes=[(t.B, t.s) for t in [ref, *others]], ops=list(ref.ops),
                      streams=list(ref.streams), laws=laws, unmatched=unmatched,
                      extras=extras, reference_only=only if above is not None else [],
                      reference_only_above=above, below_ops=below, warnings=warnings)


def _below_ops(others: Sequence[OpTrace], matches: Sequence[list[int | None]],
               only: Sequence[int]) -> list[int] | None:
    """The ops of the traced shape with the most tokens below the reference's path switch,
    renamed into the reference's slots; ``None`` unless that shape pairs slot for slot with
    the reference outside ``only`` (every one of its allocations matched)."""
    k = max(range(len(others)), key=lambda i: others[i].B * others[i].s)
    t, m = others[k], matches[k]
    gone = set(only)
    inv = {j: slot for slot, j in enumerate(m) if j is not None}
    if len(inv) != t.n_allocs or any(m[slot] is None for slot in range(len(m))
                                     if slot not in gone):
        return None
    return [inv[o] if o >= 0 else ~inv[~o] for o in t.ops]


STAGING_WINDOW = 8     # ops: a staging buffer and its semaphores are freed this soon
SEMAPHORE_BYTES = 4096  # the largest constant allocation taken for a reduction's semaphores


def _staging(ops: Sequence[int], laws: Sequence[SizeLaw], pos: dict[int, int],
             freed_at: dict[int, int], k: int) -> bool:
    """Slot ``k`` looks like a reduction's global staging buffer: it grows with the tokens,
    the next op allocates a small constant block (the semaphores), and both are freed
    within a few ops."""
    i = pos[k]
    if laws[k].terms != ("B*s",) or i + 1 >= len(ops) or ops[i + 1] < 0:
        return False
    j = ops[i + 1]
    return (laws[j].terms == ("1",) and laws[j].coefs[0] <= SEMAPHORE_BYTES
            and freed_at.get(k, len(ops)) - i <= STAGING_WINDOW
            and freed_at.get(j, len(ops)) - i <= STAGING_WINDOW)


def _propagate_caps(ops: Sequence[int], laws: list[SizeLaw]) -> tuple[list[SizeLaw], int]:
    """A capped size seen on a reduction's staging buffer (PyTorch's reduce kernels bound their
    global staging buffer by the grid: 1 MiB per SM of the device) bounds the other staging
    buffers of the history too: those the traced shapes did not grow to the cap (e.g. a d-wide
    bias gradient's, a few KiB a token) get the same cap. Only when every capped staging buffer
    has one cap; returns the laws and how many were capped so."""
    pos = {o: i for i, o in enumerate(ops) if o >= 0}
    freed_at = {~o: i for i, o in enumerate(ops) if o < 0}
    staging = [k for k in range(len(laws)) if k in pos and
               _staging(ops, laws, pos, freed_at, k)]
    caps = {laws[k].cap for k in staging if laws[k].cap is not None}
    if len(caps) != 1:
        return laws, 0
    cap = caps.pop()
    out, n = list(laws), 0
    for k in staging:
        if out[k].cap is None:
            out[k] = out[k].model_copy(update={"cap": cap})
            n += 1
    return out, n


def _warnings(ref: OpTrace, laws: list[SizeLaw], unmatched: list[int],
              traces: Sequence[OpTrace]) -> list[str]:
    out = []
    if ref.external_frees:
        out.append(f"the reference frees {ref.external_frees} blocks it did not allocate; "
                   "they are left out")
    inexact = [law for law in laws if not law.exact]
    if inexact:
        out.append(f"{len(inexact)} of {len(laws)} allocation sizes fit no basis exactly "
                   "(non-negative least squares used)")
    amb = sum(law.ambiguous for law in laws)
    if amb:
        out.append(f"{amb} allocation sizes are fitted equally well by two bases that "
                   "disagree off the traced shapes")
    if any(unmatched):
        out.append(f"reference allocations without a match per traced shape: {unmatched}")
    bs = {(t.B * t.s) for t in traces}
    if len(bs) < 2:
        out.append("every traced shape has the same B*s: constant and per-token sizes "
                   "cannot be told apart")
    return out


def pack(model: TraceModel) -> LearnedSizes:
    """The model in the certificate's stored form (each distinct size law once)."""
    table: dict[str, int] = {}
    laws: list[dict] = []
    index = []
    for law in model.laws:
        key = law.model_dump_json()
        if key not in table:
            table[key] = len(laws)
            laws.append(law.model_dump(mode="json"))
        index.append(table[key])
    return LearnedSizes(
        shapes=[tuple(x) for x in model.shapes], ops=pack_ints(model.ops),
        streams=pack_ints(model.streams), laws=laws, law_of_slot=pack_ints(index),
        unmatched=list(model.unmatched), extras=list(model.extras),
        reference_only=pack_ints(model.reference_only),
        reference_only_above=model.reference_only_above,
        below_ops=pack_ints(model.below_ops) if model.below_ops is not None else None,
        warnings=list(model.warnings))


def unpack(stored: LearnedSizes) -> TraceModel:
    """The stored form read back (:func:`pack`'s inverse)."""
    table = [SizeLaw.model_validate(x) for x in stored.laws]
    return TraceModel.model_construct(
        shapes=[tuple(x) for x in stored.shapes], ops=unpack_ints(stored.ops),
        streams=unpack_ints(stored.streams),
        laws=[table[i] for i in unpack_ints(stored.law_of_slot)],
        unmatched=list(stored.unmatched), extras=list(stored.extras),
        reference_only=unpack_ints(stored.reference_only),
        reference_only_above=stored.reference_only_above,
        below_ops=unpack_ints(stored.below_ops) if stored.below_ops is not None else None,
        warnings=list(stored.warnings))
