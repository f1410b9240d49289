"""The memory answer at a shape: the one figure ``afford size``, ``predict``, ``plan``,
``preflight``, ``ladder``, the report, ``afford.track`` and the Python API print.

Why one answer: a certificate holds up to three readings of a step's memory at a shape --
what was measured there, the allocator replay (the step's allocations written out at the
shape and replayed through the caching allocator's policy,
:mod:`afford.figures.replay_figures`) and the memory law (least squares over the traced
peaks, :mod:`afford.fit.memory.sizing`) -- and commands that each printed one gave a user
three answers to one question (a shape the certificate measured at 3.0 GiB reserved was
planned at 20.9 GiB: allocated times the worst reserved/allocated ratio of another
workload's smallest shape). Here, in this order:

1. **measured**: the memory stage's child, or the sweep's children, ran this very shape
   (the same model): their peak, MEASURED;
2. **replay**: where the certificate trusts it and it predicted the held-out shapes no worse
   than the law, and the shape keeps the certified model; budgeted with its safety margin
   (its worst measured under-prediction);
3. **law**: else the memory law, with its held-out error; the reserved figure is this
   workload's own reserved law (no ratio from one workload is applied to another).

The other model's figure stands beside the answer where the two differ by more than their
stated errors.

**Where the certificate stops.** Every answer knows the range of shapes its workload's memory
was measured over (batch, sequence, tokens: the memory stage's shapes, where the models
were fitted and held out; a sweep point answers at its own shape)
and the code paths the certificate knows of (:class:`~afford.schema.memory_section.CodePath`:
a sliding window, chunked attention, a learned position table, routing to experts). A
shape past the range, or past a threshold no measured shape crossed, is *extrapolated*,
with the reasons. ``fits`` then allows for the plausible error: the answering model's
worst held-out error grown with the extrapolation factor (an assumption, said so), plus,
past an attention path, what materialised scores would add (Korthikanti et al. 2022, eq. 1,
the ``5as/h`` term: an upper bound for an attention that falls back from its fused kernel;
nothing for an attention declared ``materialised``, whose law has the scores' s^2 term).

``fits`` is one of four (decided by :func:`decide`, monotone in batch and sequence):

- ``yes``: within the measured range and the figure fits the budget; or a measured shape at
  least as large fits;
- ``likely``: the figure is extrapolated, and it fits even with the plausible error added
  (or, below the range, a shape of the range at least as large fits);
- ``uncertain``: extrapolated, and the margin is inside the plausible error; or, inside the
  range, the figure fits but the other model's does not, the two disagreeing beyond their
  stated errors (the decision then rests on which is right: OLMo2 d1024 at 16 x 384
  reserved 6.6 % more in a fresh process than its trusted replay said, the law 1.4 % less,
  lab/device-runs/2026-12-06-h100-families-2): measure it
  (``afford size CERT --batch B --seq S --measure``);
- ``no``: the figure does not fit (or a measured shape no larger does not).

Below the measured range (a smaller batch or sequence than any measured), the figure is
marked but ``fits`` is decided at the smallest shape of the range at least as large: memory
grows with batch and sequence, so what fits there fits here.

**A certificate measured in pre-warmed children** (older than the memory stage's
``fresh_state``, :class:`~afford.schema.memory_section.MemoryShape`), of a model with frozen
parameters: its children kept the cuBLAS workspaces from earlier shapes, where a fresh
process makes them at its first GEMM; when that GEMM falls inside the model's build (peft's
LoRA initialisation) the weights fill the segment around it and the step reserves more:
Llama d1024 L16 + LoRA r16 reserved 3.3-6.6 % more in fresh processes than such a
certificate said (lab/device-runs/2026-12-06-h100-final,
``lora-trace-compare.md``; re-certified with fresh points, 0.00 % median and +0.32 % worst
over 14 fresh truths: docs/RESULTS.md). Its answers say so, and a figure within
:data:`PREWARMED_ERROR` of the budget is ``uncertain`` rather than a plain yes.

On a CPU there is no reserved memory: the answer is the peak RSS. Pure: no torch, no I/O
(the replay's cache aside, :func:`afford.figures.replay_figures.current`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from afford.core.provenance import Tagged, assumed, fitted, measured, module
from afford.core.units import format_bytes
from afford.figures import replay_figures as memory_replay
from afford.fit.memory import sizing
from afford.fit.memory.allocator import parse_alloc_conf
from afford.schema.memory_section import CodePath, MemoryLaw
from afford.workloads import paths as workload_paths

Source = Literal["measured", "replay", "law"]
Fits = Literal["yes", "likely", "uncertain", "no"]
FITTING: tuple[Fits, ...] = ("yes", "likely")
MIN_ERROR = 0.01  # the plausible error of an extrapolated figure is at least this x factor
MOE_ERROR = 0.05  # ASSUMED: routing to experts moves a step's memory with its data
PREWARMED_ERROR = 0.07  # MEASURED: a pre-warmed certificate's worst reserved miss, 6.6 %
PREWARMED_NOTE = ("measured in children that kept their cuBLAS workspaces from earlier shapes "
                  f"(a certificate of an older afford): a fresh process may reserve up to "
                  f"{PREWARMED_ERROR:.0%} more where the model's build runs a GEMM (LoRA); "
                  "certify again to measure as a fresh process does")
ATTENTION_PATHS = ("sliding_window", "chunked_attention")
NAMES = {"measured": "measured", "replay": "the allocator replay", "law": "the memory law"}


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class MeasuredShape(_Frozen):
    """A shape the certificate ran its workload at, with the peaks read there."""

    B: int
    s: int
    allocated: float
    reserved: float | None  # None on a CPU (allocated is then the peak RSS)
    where: str


class MeasuredRange(_Frozen):
    """The shapes a workload's memory was measured over (both ends inclusive)."""

    batch: tuple[int, int]
    seq: tuple[int, int]
    tokens: tuple[int, int]
    shapes: int

    def factor(self, B: int, s: int) -> float:
        """How far beyond the range (B, s) lies, upward: 1 inside."""
        return max(1.0, B / self.batch[1], s / self.seq[1], B * s / self.tokens[1])

    def below(self, B: int, s: int) -> bool:
        return B < self.batch[0] or s < self.seq[0]

    def clamp(self, B: int, s: int) -> tuple[int, int]:
        """The smallest shape at least (B, s) whose batch and sequence reach the range."""
        return max(B, self.batch[0]), max(s, self.seq[0])

    def label(self) -> str:
        return (f"batch {self.batch[0]}-{self.batch[1]}, seq {self.seq[0]}-{self.seq[1]}, "
                f"{self.tokens[0]}-{self.tokens[1]} tokens over {self.shapes} shapes")


class MemoryAnswer(_Frozen):
    """Peak memory of one training step at one shape, and whether it fits."""

    workload: str
    mode: str
    device_type: str
    shape: dict[str, int]                 # B, s (and d, L, H where the law knows them)
    source: Source
    why: str                              # why this source answers, one line
    allocated: Tagged                     # peak allocated (CUDA) or peak RSS (CPU)
    reserved: Tagged | None               # the figure residency is judged on (CUDA)
    error: Tagged | None = None           # the source's worst held-out |error|, MEASURED
    other: Tagged | None = None           # the other model's reserved, where they disagree
    other_source: Source | None = None
    params: Tagged | None = None
    states: Tagged | None = None
    range: MeasuredRange | None = None
    extrapolated: bool = False
    reasons: tuple[str, ...] = ()         # why it is extrapolated
    plausible_error: Tagged | None = None  # ratio: what an extrapolation may move it by
    path_bound: Tagged | None = None      # bytes an unmeasured attention path may add
    budget: Tagged | None = None
    share: Tagged | None = None
    fits: Fits | None = None              # None: no budget to judge against
    fits_why: str = ""
    settle: str | None = None             # the command that would measure it
    expandable: bool = False
    prewarmed: bool = False               # measured in pre-warmed children (older afford)
    notes: tuple[str, ...] = ()

    @property
    def figure(self) -> Tagged:
        """What residency is judged on: reserved, or the peak RSS on a CPU."""
        return self.reserved if self.reserved is not None else self.allocated

    @property
    def fits_bool(self) -> bool | None:
        return None if self.fits is None else self.fits in FITTING


# ---------------------------------------------------------------- what was measured


def law_measured(law: MemoryLaw, run: str) -> list[MeasuredShape]:
    """The memory stage's shapes of ``law`` (every role but the warm-up), peaks over the
    loop."""
    out = []
    for s in law.shapes:
        if s.role == "warmup" or not _resident(s, law):
            continue
        where = (f"{law.workload} {law.mode} B {s.dims['B']} x s {s.dims['s']}: the memory "
                 f"stage's child ({s.role}), peak over {s.steps} steps; {run}")
        if law.device_type == "cpu":
            if s.rss_by_step:
                out.append(MeasuredShape(B=s.dims["B"], s=s.dims["s"],
                                         allocated=float(s.rss_by_step[-1]), reserved=None,
                                         where=where))
        elif s.peak("allocated") is not None and s.peak("reserved") is not None:
            out.append(MeasuredShape(B=s.dims["B"], s=s.dims["s"],
                                     allocated=s.peak("allocated"),
                                     reserved=s.peak("reserved"), where=where))
    return out


def _resident(s, law: MemoryLaw) -> bool:
    """A shape the memory stage's fit would take (its exclusion rule, docs/DESIGN.md section
    3 rule 3): measured whole, nothing paged, and on a CPU a peak above the baseline."""
    if not s.ok or (s.swap_bytes or 0) > 0:
        return False
    if law.device_type == "cpu":
        inc = s.peak("rss_increment")
        return inc is not None and inc > 0
    return True


def measured_range(shapes: Sequence[MeasuredShape]) -> MeasuredRange | None:
    if not shapes:
        return None
    bs = [m.B for m in shapes]
    ss = [m.s for m in shapes]
    ts = [m.B * m.s for m in shapes]
    return MeasuredRange(batch=(min(bs), max(bs)), seq=(min(ss), max(ss)),
                         tokens=(min(ts), max(ts)), shapes=len(shapes))


def _one_per_shape(shapes: Sequence[MeasuredShape]) -> list[MeasuredShape]:
    """One reading per (B, s): the first given (the memory stage's dedicated child before
    the sweep's timing children), so the answer and the dominance rule read the same."""
    seen: dict[tuple[int, int], MeasuredShape] = {}
    for m in shapes:
        seen.setdefault((m.B, m.s), m)
    return list(seen.values())


def _measured_at(shapes: Sequence[MeasuredShape], B: int, s: int) -> MeasuredShape | None:
    return next((m for m in shapes if (m.B, m.s) == (B, s)), None)


def _fig(m: MeasuredShape) -> float:
    return m.reserved if m.reserved is not None else m.allocated


def dominance(shapes: Sequence[MeasuredShape], B: int, s: int, budget: float
              ) -> tuple[Fits | None, str]:
    """``yes`` where a measured shape at least (B, s) fits; ``no`` where one no larger does
    not (memory grows with batch and sequence); else None."""
    big = [m for m in shapes if m.B >= B and m.s >= s and _fig(m) <= budget]
    if big:
        m = min(big, key=lambda x: x.B * x.s)
        return "yes", (f"a measured shape at least this large fits: {m.B} x {m.s} "
                       f"({format_bytes(_fig(m))})")
    small = [m for m in shapes if m.B <= B and m.s <= s and _fig(m) > budget]
    if small:
        m = max(small, key=lambda x: x.B * x.s)
        return "no", (f"a measured shape no larger does not fit: {m.B} x {m.s} "
                      f"({format_bytes(_fig(m))})")
    return None, ""


# ---------------------------------------------------------------- code paths


def crossed(paths: Sequence[CodePath], B: int, s: int, rng: MeasuredRange | None
            ) -> list[CodePath]:
    """The code paths (B, s) lies past that no measured shape crossed; routing (no
    threshold) is crossed everywhere."""
    out = []
    for p in paths:
        if p.kind in ("size_switch", "position_limit"):  # the replay writes both sides of
            continue  # a traced switch; a position table grows with s in the size laws
        if p.threshold is None:
            out.append(p)
            continue
        value = s if p.axis == "seq" else B * s
        seen = None if rng is None else (rng.seq[1] if p.axis == "seq" else rng.tokens[1])
        if value > p.threshold and (seen is None or seen <= p.threshold):
            out.append(p)
    return out


def path_reason(p: CodePath, B: int, s: int) -> str:
    if p.threshold is None:
        return f"{p.effect} ({p.source})"
    value = s if p.axis == "seq" else B * s
    what = "seq" if p.axis == "seq" else "tokens"
    return (f"{what} {value} is past {p.threshold} ({p.source}): {p.effect}; no measured "
            "shape crossed it")


def scores_bound(law: MemoryLaw, dims: dict[str, int]) -> float:
    """Bytes the attention's scores would take if kept for the backward in every layer:
    Korthikanti et al. 2022, eq. 1, the ``5as/h`` part of ``sbh(34 + 5as/h)`` per layer in
    16-bit (softmax input and output, dropout mask), x2 in fp32."""
    width = 2.0 if law.mode == "fp32" else 1.0
    return 5.0 * dims["L"] * dims["B"] * dims["H"] * dims["s"] ** 2 * width


# ---------------------------------------------------------------- the decision


def decide(budget: float, figure: float, hi: float, *, extrapolated: bool,
           dominated: Fits | None = None, below: Fits | None = None) -> Fits:
    """The fits level (module docstring). ``hi``: the most the decision allows for (the
    figure with its plausible error past the range; the other model's figure, where the two
    disagree beyond their errors);
    ``dominated``: a measured shape's verdict (:func:`dominance`); ``below``: the verdict at
    the clamped shape where (B, s) lies below the measured range."""
    if dominated is not None:
        return dominated
    if below is not None:
        return "uncertain" if below == "no" and figure <= budget else below
    if figure > budget:
        return "no"
    if hi > budget:
        return "uncertain"
    return "likely" if extrapolated else "yes"


# ---------------------------------------------------------------- the models


def prewarmed(law: MemoryLaw) -> bool:
    """A CUDA law of a model with frozen parameters (an adapter such as LoRA, whose
    initialisation runs a GEMM inside the build) whose shapes were measured with the
    workspaces of earlier shapes kept (no ``fresh_state``: a certificate of an older afford).
    Other models' pre-warmed readings agreed with fresh processes within 0.7 % (GPT-NeoX,
    Phi, OPT, Qwen2: docs/RESULTS.md), so they keep their figure and their verdict."""
    ok = [sh for sh in law.shapes if sh.ok]
    return law.device_type == "cuda" and any(sh.fresh_state is None for sh in ok) \
        and any(sh.frozen_params for sh in ok)


def same_model(law: MemoryLaw, dims: dict[str, int], shape: dict[str, int]) -> bool:
    """The shape keeps the certified model (the replay and the measurements describe only
    it)."""
    return "params" not in shape and all(dims[k] == law.base_dims[k] for k in ("d", "L", "H"))


def _law_error(law: MemoryLaw, run: str) -> Tagged | None:
    key = "reserved_error" if law.device_type == "cuda" else "error"
    err = [abs(getattr(h, key)) for h in law.heldout if getattr(h, key) is not None]
    what = "peak reserved" if law.device_type == "cuda" else "peak RSS increment"
    return measured(max(err), "ratio", f"max |predicted/measured - 1| of the memory law's "
                    f"{what} over {len(err)} held-out shapes; {run}") if err else None


def _replay(law: MemoryLaw, B: int, s: int, expandable: bool, run: str
            ) -> tuple[Tagged, Tagged, float, Tagged | None] | None:
    """(allocated, reserved, budgeted, error) by the replay at (B, s)."""
    got = memory_replay.peaks(law, B, s, expandable)
    if got is None:
        return None
    alloc_b, res_b = got
    rp = law.replay
    src = memory_replay.source(law, memory_replay.EXPANDABLE if expandable else "native", run)
    err = rp.replay_worst_reserved_error
    tag = measured(abs(err), "ratio", f"max |predicted/measured - 1| of the allocator "
                   f"replay's peak reserved over {len(rp.heldout)} held-out shapes; {run}") \
        if err is not None else None
    budgeted = res_b * (1 + rp.safety_margin)
    margin = f" x (1 + its safety margin {rp.safety_margin:.2%})" if rp.safety_margin else ""
    return (fitted(alloc_b, "B", src),
            fitted(budgeted, "B", f"replayed peak reserved{margin}; {src}"), budgeted, tag)


def _disagree(a: float, ea: Tagged | None, b: float, eb: Tagged | None) -> bool:
    x = float(ea.value) if ea is not None else 0.0
    y = float(eb.value) if eb is not None else 0.0
    return abs(a - b) > x * a + y * b


class _Model(_Frozen):
    source: Source
    why: str
    allocated: Tagged
    reserved: Tagged | None
    error: Tagged | None
    other: Tagged | None = None
    other_source: Source | None = None


def model_figures(law: MemoryLaw, pred: sizing.Prediction, shape: dict[str, int],
                  expandable: bool, run: str) -> _Model:
    """The answering model's figures at the shape, and the other's where they disagree."""
    dims = pred.dims
    law_err = _law_error(law, run)
    if law.device_type == "cpu" or pred.reserved is None:
        return _Model(source="law", why="a CPU: the memory law's peak RSS (no allocator)",
                      allocated=pred.allocated, reserved=None, error=law_err)
    used, why = memory_replay.usable(law)
    rep = None
    if law.replay is not None and not same_model(law, dims, shape):
        used, why = False, ("the allocator replay describes the certified model only (this "
                            "shape changes d, L, H or the parameters)")
    elif law.replay is not None:
        rep = _replay(law, dims["B"], dims["s"], expandable, run)
        used = used and rep is not None
    law_res = float(pred.reserved.value)
    if used:
        alloc, res, budgeted, err = rep
        other = None
        if _disagree(budgeted, err, law_res, law_err):
            other = pred.reserved
        return _Model(source="replay", why="the allocator replay: " + why, allocated=alloc,
                      reserved=res, error=err, other=other,
                      other_source="law" if other is not None else None)
    other = None
    if rep is not None and _disagree(law_res, law_err, rep[2], rep[3]):
        other = rep[1]
    return _Model(source="law", why="the memory law: " + why, allocated=pred.allocated,
                  reserved=pred.reserved, error=law_err, other=other,
                  other_source="replay" if other is not None else None)


# ---------------------------------------------------------------- the answer


def answer(law: MemoryLaw, shape: dict[str, int], run: str, *,
           measured_shapes: Sequence[MeasuredShape] = (), alloc_conf: str = "",
           budget: Tagged | None = None) -> MemoryAnswer:
    """The memory answer of ``law`` at ``shape`` (workload keys or law dims, as
    :func:`afford.fit.memory.sizing.predict` takes them); ``measured_shapes``: the sweep's
    points of the same model beside the law's own (:func:`law_measured` is added here);
    ``budget``: bytes to judge ``fits`` against."""
    law = memory_replay.current(law)
    pred = sizing.predict(law, shape, run)
    dims = pred.dims
    B, s = dims["B"], dims["s"]
    expandable, unmodelled = parse_alloc_conf(alloc_conf)
    notes = [f"PYTORCH_CUDA_ALLOC_CONF {alloc_conf!r}: {', '.join(unmodelled)} not modelled "
             "(predicted as if unset)"] if unmodelled else []
    paths, paths_note = known_paths(law)
    notes += list(pred.notes) + path_notes(paths, s)
    warm = prewarmed(law)
    if warm:
        notes.append(PREWARMED_NOTE)
    same = same_model(law, dims, shape)
    own = law_measured(law, run) if same else []
    shapes = _one_per_shape([*own, *measured_shapes]) if same else []
    rng = measured_range(own)  # where the models were fitted and held out: the memory
    # stage's shapes (a timing child's peak at a small shape reads a few per cent under a
    # fresh process's: it answers at its own shape, but does not widen the range)
    mod = model_figures(law, pred, shape, expandable, run)
    hit = _measured_at(shapes, B, s)
    if hit is not None:
        src: Source = "measured"
        alloc = measured(hit.allocated, "B", f"peak allocated; {hit.where}") \
            if hit.reserved is not None else measured(hit.allocated, "B", f"peak RSS; "
                                                      f"{hit.where}")
        res = measured(hit.reserved, "B", f"peak reserved; {hit.where}") \
            if hit.reserved is not None else None
        why, err = f"measured at this shape ({hit.where.split(': ')[-1]})", None
        other, other_src = None, None
        if mod.reserved is not None and res is not None and _disagree(
                float(res.value), None, float(mod.reserved.value), mod.error):
            other, other_src = mod.reserved, mod.source
    else:
        src, alloc, res, why, err = mod.source, mod.allocated, mod.reserved, mod.why, mod.error
        other, other_src = mod.other, mod.other_source
    reasons, factor, routes = _extrapolation(paths, dims, same, rng)
    extrapolated = bool(reasons) and hit is None
    if extrapolated and same and paths_note:
        notes.append(paths_note)
    alloc, res = _mark(alloc, extrapolated), _mark(res, extrapolated)
    figure = float((res or alloc).value)
    bound = _bound(law, dims, routes) if extrapolated else None
    perr = _plausible(err, factor, routes, extrapolated)
    hi = figure * (1 + (float(perr.value) if perr else 0.0)) + (
        float(bound.value) if bound else 0.0)
    if other is not None and hit is None:  # the other model disagrees beyond both errors:
        hi = max(hi, float(other.value))  # a decision between the two rests on which is right
    out = MemoryAnswer(
        workload=law.workload, mode=law.mode, device_type=law.device_type, shape=dims,
        source=src, why=why, allocated=alloc, reserved=res, error=err, other=other,
        other_source=other_src, params=pred.params, states=pred.states, range=rng,
        extrapolated=extrapolated, reasons=tuple(reasons), plausible_error=perr,
        path_bound=bound, expandable=expandable, prewarmed=warm,
        notes=tuple(dict.fromkeys(notes)))
    if budget is None:
        return out
    return _judged(out, law, shape, run, shapes, measured_shapes, alloc_conf, budget, hi)


def _mark(t: Tagged | None, extrapolated: bool) -> Tagged | None:
    if t is None or not extrapolated or t.extrapolated or t.tag.value == "MEASURED":
        return t
    return t.model_copy(update={"extrapolated": True})


def _extrapolation(paths: Sequence[CodePath], dims: dict[str, int], same: bool,
                   rng: MeasuredRange | None) -> tuple[list[str], float, list[CodePath]]:
    """(reasons, the upward factor, the code paths crossed)."""
    if not same:
        return (["another model than the one certified (d, L, H or the parameters "
                 "differ): the law's scaling, not a measurement"], 1.0, [])
    reasons = []
    B, s = dims["B"], dims["s"]
    factor = rng.factor(B, s) if rng else 1.0
    if rng is not None:
        reasons += _range_reasons(rng, B, s)
    routes = crossed(paths, B, s, rng)
    reasons += [path_reason(p, B, s) for p in routes]
    return reasons, factor, routes


def _range_reasons(rng: MeasuredRange, B: int, s: int) -> list[str]:
    out = []
    for what, v, (lo, hi) in (("batch", B, rng.batch), ("seq", s, rng.seq),
                              ("tokens", B * s, rng.tokens)):
        if v > hi:
            out.append(f"{what} {v} is {v / hi:.3g}x the largest measured ({hi})")
        elif v < lo and what != "tokens":
            out.append(f"{what} {v} is below the smallest measured ({lo})")
    return out


def known_paths(law: MemoryLaw) -> tuple[list[CodePath], str | None]:
    """The law's code paths; for a certificate that predates them, read from the config file
    its workload names (and the embedding's sorting path on CUDA), with a note saying so."""
    if law.paths is not None:
        return list(law.paths), None
    got = workload_paths.from_spec(law.workload)
    extra = [workload_paths.embedding_sort()] if law.device_type == "cuda" else []
    if got is None:
        return extra, ("this certificate records no code paths of its workload (an older "
                       "afford): a sliding window or the like past the measured shapes is "
                       "not known")
    return got + extra, "code paths read from the workload's config file (an older certificate)"


def path_notes(paths: Sequence[CodePath], s: int) -> list[str]:
    """Notes that are no extrapolation: a learned position table the sequence runs past
    (the workload grows it; the user's model as configured may not)."""
    return [f"seq {s} is past {p.source}: {p.effect}" for p in paths
            if p.kind == "position_limit" and p.threshold is not None and s > p.threshold]


def _bound(law: MemoryLaw, dims: dict[str, int], routes: list[CodePath]) -> Tagged | None:
    att = [p for p in routes if p.kind in ATTENTION_PATHS]
    if not att or law.device_type != "cuda" or law.attention == "materialised":
        return None  # a materialised attention's scores are in the law already
    v = scores_bound(law, dims)
    return module(v, "B", "what an attention past " + ", ".join(p.source for p in att) +
                  " would add if it kept its scores: 5 L B H s^2 bytes"
                  f"{' x 2 (fp32)' if law.mode == 'fp32' else ''} (Korthikanti et al. 2022, "
                  "eq. 1, its 5as/h term)")


def _plausible(err: Tagged | None, factor: float, routes: list[CodePath],
               extrapolated: bool) -> Tagged | None:
    if not extrapolated:
        return None
    base = max(float(err.value) if err is not None else 0.0, MIN_ERROR)
    e = base * factor
    why = (f"the held-out error {base:.2%} (at least {MIN_ERROR:.0%}) x the extrapolation "
           f"factor {factor:.2g} (an error growing in proportion is an assumption)")
    if any(p.kind == "moe_routing" for p in routes):
        e = max(e, MOE_ERROR)
        why += f"; at least {MOE_ERROR:.0%} where routing to experts moves the step with its data"
    return assumed(e, "ratio", why)


def _judged(out: MemoryAnswer, law: MemoryLaw, shape: dict[str, int], run: str,
            shapes: Sequence[MeasuredShape], sweep: Sequence[MeasuredShape], alloc_conf: str,
            budget: Tagged, hi: float) -> MemoryAnswer:
    """``out`` judged against ``budget``; a pre-warmed certificate's answer that fits only
    with less than :data:`PREWARMED_ERROR` to spare is ``uncertain`` (judged again against
    the budget less that share: monotone in batch and sequence as each judgement is)."""
    res = _judged_at(out, law, shape, run, shapes, sweep, alloc_conf, budget, hi)
    if not out.prewarmed or res.fits not in FITTING:
        return res
    cap = float(budget.value)
    tight = module(cap / (1 + PREWARMED_ERROR), "B", f"the budget less the {PREWARMED_ERROR:.0%} "
                   "a fresh process may reserve beyond a pre-warmed child's reading")
    if _judged_at(out, law, shape, run, shapes, sweep, alloc_conf, tight, hi).fits in FITTING:
        return res
    B, s = out.shape["B"], out.shape["s"]
    return res.model_copy(update={
        "fits": "uncertain", "settle": settle_command(law.workload, law.mode, B, s),
        "fits_why": f"{format_bytes(float(out.figure.value))} of {format_bytes(cap)}, inside "
                    f"the {PREWARMED_ERROR:.0%} a fresh process may reserve beyond what a "
                    "pre-warmed child measured"})


def _judged_at(out: MemoryAnswer, law: MemoryLaw, shape: dict[str, int], run: str,
               shapes: Sequence[MeasuredShape], sweep: Sequence[MeasuredShape],
               alloc_conf: str, budget: Tagged, hi: float) -> MemoryAnswer:
    cap = float(budget.value)
    B, s = out.shape["B"], out.shape["s"]
    figure = float(out.figure.value)
    dom, dom_why = dominance(shapes, B, s, cap)
    below = None
    rng = out.range
    if dom is None and rng is not None and rng.below(B, s):
        cb, cs = rng.clamp(B, s)
        at = answer(law, {**shape, law.dim_keys.get("B", "B"): cb,
                          law.dim_keys.get("s", "s"): cs}, run,
                    measured_shapes=sweep, alloc_conf=alloc_conf, budget=budget)
        below = at.fits
        below_why = f"decided at {cb} x {cs}, the smallest shape of the measured range at " \
                    f"least this large (memory grows with batch and sequence): {at.fits_why}"
    level = decide(cap, figure, hi, extrapolated=out.extrapolated, dominated=dom, below=below)
    if level == "yes" and out.extrapolated:  # it fits, but the figure is not a measured one's
        level = "likely"

    share = module(figure / cap, "ratio", f"peak {'reserved' if out.reserved else 'RSS'} "
                   f"({NAMES[out.source]}) / budget")
    if dom is not None:
        why = dom_why
    elif below is not None:
        why = below_why
    else:
        why = _why(level, figure, hi, cap, out)
    need = level in ("likely", "uncertain") and (
        out.extrapolated or (dom is None and below is None))
    return out.model_copy(update={
        "budget": budget, "share": share, "fits": level, "fits_why": why,
        "settle": settle_command(law.workload, law.mode, B, s) if need else None})


def settle_command(workload: str, mode: str, B: int, s: int) -> str:
    """The command that measures the shape on the certificate's device (certify/asked)."""
    return f"afford size CERT -w {workload} --mode {mode} --batch {B} --seq {s} --measure"


def _why(level: Fits, figure: float, hi: float, cap: float, out: MemoryAnswer) -> str:
    if level == "uncertain" and not out.extrapolated:  # hi is the other model's figure
        return (f"{format_bytes(figure)} by {NAMES[out.source]} fits {format_bytes(cap)}, "
                f"but {NAMES[out.other_source or 'law']} says {format_bytes(hi)}, and the "
                "two disagree beyond their held-out errors")
    if level == "yes":
        return f"{format_bytes(figure)} of {format_bytes(cap)}"
    if level == "no":
        return f"{format_bytes(figure)} is over the budget {format_bytes(cap)}"
    if level == "likely":
        return (f"{format_bytes(figure)}, and {format_bytes(hi)} with the plausible error of "
                f"the extrapolation, both within {format_bytes(cap)}")
    return (f"{format_bytes(figure)} fits {format_bytes(cap)}, but with the plausible error "
            f"of the extrapolation it could reach {format_bytes(hi)}")


def judged_plain(out: MemoryAnswer, budget: Tagged) -> MemoryAnswer:
    """``fits`` of a figure with no range to leave (a measurement, or a figure the caller
    computed): yes or no against ``budget``."""
    fig, cap = float(out.figure.value), float(budget.value)
    level: Fits = "yes" if fig <= cap else "no"
    return out.model_copy(update={
        "budget": budget, "share": module(fig / cap, "ratio", "peak / budget"),
        "fits": level, "fits_why": _why(level, fig, fig, cap, out)})
