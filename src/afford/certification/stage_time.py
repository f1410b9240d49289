"""The step-time model of certify: the design measured beside the sweep, the model
fitted over it, an extension when the points stay on the floor, and the noise verdict with
its one re-measurement.

The design (:func:`plan_design`) is fixed before anything is measured, so the sweep's
children time it with the sweep's points, each child in its own shuffled order:

- a workload with ``dims()`` whose shape has keys for the batch and the swept sequence gets
  :func:`afford.fit.time.time_design.static_design`: the sweep at its base batch, three shapes
  across it (other batches), three held-out shapes (interpolated, 2x the largest sequence,
  2x the largest batch), all inside the sweep's memory envelope;
- any other workload keeps its one-axis sweep; with at least ``MIN_1D_HELD_OUT`` points its
  largest and one interior point are held out (never fitted), otherwise none can be and the
  certificate says so.

After the sweep, :func:`settle` fits the model (:func:`afford.fit.time.time_fit.fit_step_time`),
measures an extension in fresh children where the fitted points did not leave the launch
floor, judges the noise (:func:`afford.fit.time.time_noise.time_verdict`; tolerances below) and
re-measures the offending points once in one fresh child, with every point a child died at.
Measuring is injected (``run_round``), so the whole sequence is tested without
processes.

Tolerances (stated before any number is read): children of a work-regime point (a step at
least ``WORK_OVER_FLOOR`` x the smallest one measured) may disagree by 5 % on a GPU, 10 % on
a CPU; a held-out work-regime shape may miss by 5 % / 10 % (the accuracy the model is held
to); floor points' spread is the floor's uncertainty, recorded and shown, and NOISY only
beyond 50 % (their level differs from process to process, by up to 2x for one shape).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from afford.certification.sweep import assemble_point, died, fit_workload, point_key
from afford.core.published_constants import MEMORY_FRACTION
from afford.fit.stats import relative_spread
from afford.fit.time.contention import child_free_median, judged_medians
from afford.fit.time.step_features import FeatureScaling, fit_scaling
from afford.fit.time.step_sides import SidePoint, derive_busy, fit_sides
from afford.fit.time.time_design import DesignLimits, DesignShape, extension_shapes, static_design
from afford.fit.time.time_fit import WORK_OVER_FLOOR, StepPoint, fit_step_time
from afford.fit.time.time_noise import FLOOR_SPREAD_TOL, time_verdict
from afford.measure.children import Event
from afford.schema.cert import WorkloadResult
from afford.schema.point import Point
from afford.schema.time_section import CertTimeVerdict, Extension, Regime, WorkloadTime

MIN_1D_HELD_OUT = 5
TOLERANCES = {"cuda": (0.05, 0.05), "cpu": (0.10, 0.10)}  # (children, held-out)
EXTENSION_POINT_SECONDS = 5.0  # time budget of one extension shape, per child: its estimate
# (the top step scaled by tokens and sequence) is an upper bound, loose on the floor
EXTENSION_RUNGS = 2
DESIGN_CAP_SECONDS = 0.5  # a design shape's timed steps stop by then (the sweep's: 1.5 s)
RULE = ("children of a work-regime point (a warm step >= {w:g}x the smallest measured) may "
        "disagree by {c:.0%} plus ({f:.0%} - {c:.0%}) x (floor / step)^2 (near the floor a "
        "point inherits part of its spread), a work-regime held-out shape may miss by {h:.0%}; "
        "floor points "
        "only by {f:.0%} (their spread is the floor's uncertainty); offending points are "
        "measured once more in one fresh child; NOISY if still beyond")

RunRound = Callable[[list[dict], int, str], list[dict[str, Event]]]


@dataclass(frozen=True)
class Planned:
    """One shape of a design: the sweep value, the batch (None: the workload's own), its
    role, and whether it is held out."""

    value: int
    batch: int | None
    role: str
    held_out: bool = False


@dataclass(frozen=True)
class WorkloadDesign:
    spec: str
    mode: str
    axes: str  # batch_seq | n
    batch_key: str | None
    seq_key: str | None
    base_batch: int | None
    shapes: tuple[Planned, ...]
    notes: tuple[str, ...] = ()

    def key(self, p: Planned | Point) -> str:
        return point_key(self.spec, self.mode, p.value,
                         None if p.role == "sweep" or self.axes == "n" else p.batch)

    def item(self, p: Planned | Point) -> dict:
        """The children's job item of a shape. A shape beyond the sweep is timed for the
        model (its tolerance is 5 %, its children's spread the check): its timing stops by
        ``DESIGN_CAP_SECONDS`` and no synced steps are run at it; a held-out shape's FLOPs are
        not counted (the model predicts it from the scaling laws only)."""
        it = {"key": self.key(p), "workload": self.spec, "mode": self.mode, "value": p.value}
        if p.role != "sweep" and not (self.axes == "n" and p.role != "extension"):
            it.update(cap=DESIGN_CAP_SECONDS, synced=False)
            if p.held_out:
                it["count_flops"] = False
        if self.axes == "batch_seq" and p.role != "sweep":
            it.update(batch=p.batch, batch_key=self.batch_key)
        return it

    def in_sweep(self, p: Planned) -> bool:
        """A sweep value (one axis: its held-out points are the sweep's own)."""
        return p.role == "sweep" or (self.axes == "n" and p.role != "extension")

    def items(self) -> list[dict]:
        """The shapes beyond the sweep (the sweep's own are the plan's items already)."""
        return [self.item(p) for p in self.shapes if not self.in_sweep(p)]

    def fields(self, p: Planned) -> dict:
        """The time design's fields of a point (:class:`~afford.schema.point.Point`)."""
        out = {"role": p.role, "held_out": p.held_out}
        if self.axes == "batch_seq":
            out.update(batch=p.batch if p.batch is not None else self.base_batch, seq=p.value)
        return out


def batch_seq_keys(w, shape: dict[str, int]) -> tuple[str | None, str | None]:
    """The shape keys that set the batch and the sequence (the dims' B and s, found by
    nudging each key by one and watching ``dims``), or Nones."""
    try:
        base = w.dims(shape)
        if base is None:
            return None, None
        keys: dict[str, str] = {}
        for key, value in shape.items():
            moved = [dim for dim, v in (w.dims({**shape, key: value + 1}) or {}).items()
                     if base.get(dim) != v]
            if len(moved) == 1 and moved[0] not in keys:
                keys[moved[0]] = key
    except Exception:  # a user workload's dims may raise on any shape: one axis then
        return None, None
    return keys.get("B"), keys.get("s")


def plan_design(spec: str, w, mode: str, values: Sequence[int]) -> WorkloadDesign:
    """The time design of one workload and mode (module docstring)."""
    values = sorted(int(v) for v in values)
    shape = w.shape(values[0])
    kb, ks = batch_seq_keys(w, shape)
    if kb is None or ks != w.sweep_param:
        return _one_axis(spec, mode, values, kb, ks)
    b0 = int(shape[kb])
    design = static_design(b0, values, fused=getattr(w, "attention", None) == "fused")
    shapes = [Planned(v, None, "sweep") for v in values]
    notes = list(design.notes)
    for d in [*design.across, *design.held_out]:
        why = _refused(w, d, kb)
        if why:
            notes.append(f"{d.role} {d.batch} x {d.seq}: {why}; not planned")
            continue
        shapes.append(Planned(d.seq, d.batch, d.role, d.role.startswith("held_out")))
    return WorkloadDesign(spec, mode, "batch_seq", kb, ks, b0, tuple(shapes), tuple(notes))


def _refused(w, d: DesignShape, batch_key: str) -> str | None:
    from afford.workloads.base import validate_shape

    try:
        validate_shape(w, d.seq)
    except Exception as exc:  # the workload's own shape rules
        return f"the workload refuses seq {d.seq}: {exc}"
    return None if d.batch >= 1 else "batch below 1"


def _one_axis(spec: str, mode: str, values: list[int], kb, ks) -> WorkloadDesign:
    why = ("no dims()" if kb is None and ks is None else
           f"its dims' batch and sequence keys ({kb}, {ks}) do not include the swept one")
    held: dict[int, str] = {}
    if len(values) >= MIN_1D_HELD_OUT:
        held = {values[-1]: "held_out_largest", values[len(values) // 2]: "held_out_interpolated"}
        note = (f"one axis ({why}): {len(values)} sweep points, the largest ({values[-1]}) and "
                f"one interior ({values[len(values) // 2]}) held out, never fitted")
    else:
        note = (f"one axis ({why}): {len(values)} sweep points, fewer than "
                f"{MIN_1D_HELD_OUT}: none can be held out, so no held-out check")
    shapes = [Planned(v, None, held.get(v, "sweep"), v in held) for v in values]
    return WorkloadDesign(spec, mode, "n", kb, ks, None, tuple(shapes), (note,))


# ---- the model over a workload's points ------------------------------------------------------


def _usable(p: Point) -> bool:
    return bool(p.resident and p.excluded_reason is None and p.median_seconds)


def label(p: Point) -> str:
    return f"{p.batch} x {p.seq}" if p.batch is not None and p.seq is not None \
        else f"n={p.value}"


def step_seconds(p: Point) -> float | None:
    """The step the model is fitted to and judged on: on a CPU, the step on an idle box
    where the run saw enough free steps (:mod:`afford.fit.time.contention`), else the measured
    median (an upper bound of it on a loaded box)."""
    return p.idle_seconds or p.median_seconds


def judged_children(p: Point) -> list[float]:
    """The children's figures the noise verdict compares (:func:`judged_medians`): their
    free-step medians where every child has them, else their measured medians."""
    ok = [k for k in p.children if k.median_seconds is not None]
    return judged_medians(p.child_medians, [child_free_median(k.timed_seconds,
                                                              k.timed_wait_seconds)
                                            for k in ok])


def step_point(p: Point, axes: str, counts: bool) -> StepPoint:
    """The fit's view of a measured point: a :class:`SidePoint` where its device side was
    profiled (a GPU), else a plain :class:`StepPoint`."""
    f = p.flops if counts and p.flops is not None and p.flops.error is None else None
    meds = judged_children(p)
    spread = (relative_spread(meds) / 2.0 or None) if len(meds) > 1 else None
    common = dict(seconds=step_seconds(p), rel_sigma=spread, label=label(p),
                  gemm_flops=f.gemm if f else None, attn_flops=f.attn if f else None)
    if axes == "batch_seq":
        common.update(batch=p.batch, seq=p.seq, tokens=p.tokens_per_step or p.batch * p.seq)
    else:
        common.update(n=p.value, tokens=p.tokens_per_step or p.value)
    if p.device_busy_seconds and p.kernels_per_step:
        return SidePoint(busy_seconds=p.device_busy_seconds, kernels=p.kernels_per_step,
                         gap_seconds=p.device_gap_seconds,
                         child_seconds=tuple(p.child_medians), **common)
    return StepPoint(**common)


def all_points(r: WorkloadResult) -> list[Point]:
    return [*r.points, *r.design_points]


def work_flags(r: WorkloadResult) -> dict[str, bool] | None:
    """Whether each usable point's step lies in the work regime, by its label: at least
    ``WORK_OVER_FLOOR`` times the smallest fitted (not held-out) step; None with fewer than
    two fitted points (the regimes of :func:`fit_time_model` and of the early round)."""
    pts = [p for p in all_points(r) if _usable(p)]
    fitted = [step_seconds(p) for p in pts if not p.held_out]
    if len(fitted) < 2:
        return None
    return {label(p): step_seconds(p) >= WORK_OVER_FLOOR * min(fitted) for p in pts}


def _scaling(fitted: list[StepPoint]) -> tuple[FeatureScaling | None, str]:
    counted = [p for p in fitted if p.gemm_flops is not None]
    if not counted:
        return None, "none counted"
    try:
        return fit_scaling(fitted), ""
    except ValueError as exc:
        return None, str(exc)


def fit_time_model(r: WorkloadResult, design: WorkloadDesign, device_type: str,
                   remeasured: bool = False, first=None,
                   gemm_rate: float | None = None) -> WorkloadTime:
    """The workload's time section from its measured points: the model, the regimes and
    the verdict (module docstring). ``gemm_rate``: the measured matrix ceiling of the mode
    (FLOP/s), bounding the device side's coefficients, where known."""
    base = dict(axes=design.axes, batch_key=design.batch_key, seq_key=design.seq_key,
                base_batch=design.base_batch, design_notes=list(design.notes))
    pts = [p for p in all_points(r) if _usable(p)]
    fitted_p = [p for p in pts if not p.held_out]
    held_p = [p for p in pts if p.held_out]
    if len(fitted_p) < 2:
        return WorkloadTime(**base, features="-", not_fitted=(
            f"{len(fitted_p)} measured point(s) to fit: at least 2 are needed"))
    fitted = [step_point(p, design.axes, True) for p in fitted_p]
    scaling, why = _scaling(fitted)
    if scaling is None:
        fitted = [step_point(p, design.axes, False) for p in fitted_p]
        scaling = fit_scaling(fitted)
    held = [step_point(p, design.axes, False) for p in held_p]
    floor = min(step_seconds(p) for p in fitted_p)
    work = work_flags(r)
    both = derive_busy([*fitted, *held], [work[label(p)] for p in [*fitted_p, *held_p]])
    fitted, held = both[:len(fitted)], both[len(fitted):]
    features = _features_text(fitted_p, scaling, why, design.axes)
    try:
        sides = _sides(fitted, scaling, gemm_rate)
        model = fit_step_time(fitted, held_out=held, scaling=scaling, gemm_rate=gemm_rate,
                              sides=sides)
    except ValueError as exc:
        return WorkloadTime(**base, features=features, not_fitted=str(exc))
    regimes = [Regime(label=label(p), role=p.role, seconds=step_seconds(p),
                      work=work[label(p)], child_spread=p.child_spread)
               for p in [*fitted_p, *held_p]]
    floor_spreads = [g.child_spread for g in regimes if not g.work and g.child_spread is not None]
    child_tol, held_tol = TOLERANCES["cuda" if device_type == "cuda" else "cpu"]
    errors, judged, what = judged_errors(model, [g.work for g in regimes[len(fitted_p):]])
    verdict = time_verdict(
        [judged_children(p) for p in [*fitted_p, *held_p]], errors, child_tolerance=child_tol,
        held_out_tolerance=held_tol, remeasured=remeasured,
        work=[g.work for g in regimes], held_out_work=judged,
        labels=[f"{g.label} ({g.role})" for g in regimes],
        held_out_labels=[f"{g.label} ({g.role}, {w})" for g, w in
                         zip(regimes[len(fitted_p):], what)],
        floor_shares=[floor / g.seconds for g in regimes])
    return WorkloadTime(**base, features=features, model=model, floor_seconds=floor,
                        floor_spread=max(floor_spreads) if floor_spreads else None,
                        regimes=regimes, verdict=verdict, first_verdict=first)


def _sides(fitted: list[StepPoint], scaling: FeatureScaling, gemm_rate: float | None):
    """The two-sided model where every fitted point has its device side (a GPU), else None."""
    if len(fitted) < 3 or not all(isinstance(p, SidePoint) for p in fitted):
        return None
    return fit_sides(fitted, scaling, gemm_rate)


def judged_errors(model, work: list[bool]) -> tuple[list[float], list[bool], list[str]]:
    """Per held-out shape the error the verdict judges, whether it is judged, and what.
    One-sided: the wall error, judged in the work regime only. Two-sided: where the device
    bounds the step, the larger of the wall and device errors; where the host does, the
    device's busy error and how far the wall lies outside the predicted band (0 inside):
    every held-out shape with a profiled device side is judged, on the floor too."""
    errors, judged, what = [], [], []
    for h, w in zip(model.held_out, work):
        if model.sides is None or h.device_rel_error is None:
            errors.append(h.rel_error)
            judged.append(w)
            what.append("wall" if w else "on the floor, not judged")
            continue
        if h.regime == "host" and h.band is not None:
            lo, hi = h.band
            miss = (hi / h.measured_seconds - 1.0) if h.measured_seconds > hi else \
                (lo / h.measured_seconds - 1.0) if h.measured_seconds < lo else 0.0
            pair = [(h.device_rel_error, "device busy"), (miss, "wall in band")]
        else:
            pair = [(h.rel_error, "wall"), (h.device_rel_error, "device busy")]
        e, name = max(pair, key=lambda t: abs(t[0]))
        errors.append(e)
        judged.append(True)
        what.append(f"judged on {' and '.join(n for _, n in pair)}; worst {name}")
    return errors, judged, what


def _features_text(fitted: list[Point], scaling: FeatureScaling, why: str, axes: str) -> str:
    counted = sum(1 for p in fitted if p.flops is not None and p.flops.error is None)
    if "gemm_flops" in scaling.laws:
        return (f"FLOPs counted (FlopCounterMode, once per shape) at {counted} of "
                f"{len(fitted)} fitted shapes; {scaling.describe()}")
    errors = sorted({p.flops.error for p in fitted if p.flops is not None and p.flops.error})
    reason = "; ".join(errors)[:300] or why
    shape = "tokens = B*s and B*s^2" if axes == "batch_seq" else "tokens only"
    return f"shape only ({shape}): FLOPs not used ({reason})"


def offending(r: WorkloadResult, t: WorkloadTime) -> list[Point]:
    """The points to measure once more: noisy ones, failed held-out ones, any a child died
    at, and any with an outlier child (one child far from the others, whatever the verdict
    judged: its fresh child says whether the others outvote it)."""
    pts = [p for p in all_points(r) if _usable(p)]
    fitted, held = [p for p in pts if not p.held_out], [p for p in pts if p.held_out]
    out: list[Point] = []
    if t.verdict is not None and t.verdict.label != "OK":
        judged = [*fitted, *held]
        out += [judged[i] for i in t.verdict.noisy_points]
        out += [held[i] for i in t.verdict.failed_held_out]
    out += [p for p in all_points(r) if died(p) or (p.outlier_children and _usable(p))]
    unique: dict[int, Point] = {}
    for p in out:
        unique.setdefault(id(p), p)
    return list(unique.values())


# ---- the extension ------------------------------------------------------------------------


def _peak(p: Point) -> int | None:
    return p.peak_reserved_bytes or p.peak_allocated_bytes or p.peak_rss_bytes


def plan_extension(r: WorkloadResult, design: WorkloadDesign, device_memory: int | None
                   ) -> tuple[list[Planned], list[str]]:
    """The shapes continuing the doubling ladder from the largest fitted shape, within the
    memory budget (the top's measured peak scaled by tokens and, for attention, by the
    sequence: an upper bound) and a time budget per shape."""
    fitted = [p for p in all_points(r) if _usable(p) and not p.held_out]
    if not fitted:
        return [], ["no measured point to extend from"]
    top = max(fitted, key=lambda p: (p.tokens_per_step or 0, p.value))
    b, s = (top.batch, top.seq) if design.axes == "batch_seq" else (1, top.value)
    peak = _peak(top)

    def fits(bb: int, ss: int) -> bool:
        if not peak or not device_memory:
            return True
        grow = (bb * ss) / (b * s) * max(1.0, ss / s)
        return peak * grow <= MEMORY_FRACTION * device_memory

    limits = DesignLimits(vary="batch_seq" if design.axes == "batch_seq" else "seq",
                          max_tokens=b * s * 2 ** EXTENSION_RUNGS * 2,
                          point_seconds=EXTENSION_POINT_SECONDS, seq_multiple=1)
    shapes, notes = extension_shapes(DesignShape(batch=b, seq=s, role="ladder",
                                                 seconds=top.median_seconds),
                                     limits, fits, EXTENSION_RUNGS)
    planned = [Planned(d.seq, d.batch if design.axes == "batch_seq" else None, "extension")
               for d in shapes]
    return planned, notes


# ---- settling: extension, verdict, re-measure ------------------------------------------------


@dataclass
class Registry:
    """Every measured point's events by key, and where its point lives, so a later round
    can add a child's record and assemble the point again."""

    events: dict[str, list[Event]] = field(default_factory=dict)
    where: dict[str, tuple[int, Planned]] = field(default_factory=dict)

    def add(self, per_child: list[dict[str, Event]]) -> None:
        for child in per_child:
            for key, ev in child.items():
                self.events.setdefault(key, []).append(ev)


def assemble_design_points(r: WorkloadResult, design: WorkloadDesign, reg: Registry,
                           index: int, device_memory: int | None, need: int) -> WorkloadResult:
    """The result with its sweep points tagged with their design fields and the design's
    other shapes assembled into ``design_points``."""
    by_value = {p.value: p for p in design.shapes if design.in_sweep(p)}
    points = []
    for p in r.points:
        planned = by_value.get(p.value)
        if planned is not None:
            reg.where[design.key(planned)] = (index, planned)
            p = p.model_copy(update=design.fields(planned))
        points.append(p)
    extra = []
    for planned in design.shapes:
        if design.in_sweep(planned):
            continue
        key = design.key(planned)
        reg.where[key] = (index, planned)
        extra.append(assemble_point(planned.value, reg.events.get(key, []), device_memory,
                                    need=need, design=design.fields(planned)))
    return r.model_copy(update={"points": points, "design_points": extra})


def settle(results: list[WorkloadResult], designs: list[WorkloadDesign], reg: Registry,
           run_round: RunRound, *, device_type: str, device_memory: int | None,
           children: int, refit: Callable[[int, WorkloadResult], WorkloadResult]
           ) -> tuple[list[WorkloadResult], CertTimeVerdict]:
    """Fit each workload's model; extend where it stayed on the floor; judge; re-measure the
    offending points once; judge again. ``refit(i, result)``: workload i's throughput law
    again over a result whose sweep points changed."""
    results = list(results)
    times = [fit_time_model(r, d, device_type) if not r.refused else None
             for r, d in zip(results, designs)]
    results, times = _extend(results, designs, times, reg, run_round, device_type,
                             device_memory, children)
    todo = {designs[i].key(p): (i, p) for i, (r, t) in enumerate(zip(results, times))
            if t is not None for p in offending(r, t)}
    if todo:
        items = [designs[i].item(p) for i, p in todo.values()]
        reg.add(run_round(items, 1, "remeasure"))
        touched = sorted({i for i, _ in todo.values()})
        for i in touched:
            r = _reassemble(results[i], designs[i], reg, [k for k, (j, _) in todo.items()
                                                          if j == i], device_memory, children)
            results[i] = refit(i, r)
            before = times[i]
            times[i] = fit_time_model(results[i], designs[i], device_type, remeasured=True,
                                      first=before.verdict if before else None)
            if before is not None and before.extension is not None:
                times[i] = times[i].model_copy(update={"extension": before.extension})
    results = [r.model_copy(update={"time": t, "warnings": [
        *r.warnings, *(f"step-time model: {m}" for m in
                       (t.verdict.model_misses if t and t.verdict else []))]})
        for r, t in zip(results, times)]
    return results, cert_verdict(results, device_type, len(todo))


def assemble_results(plan, per_child: list[dict[str, Event]], reg: Registry,
                     device_memory: int | None, need: int, law_fit: bool = True
                     ) -> list[WorkloadResult]:
    """Each workload's result from the children's records: its sweep points, the throughput
    law over them (unless ``law_fit`` is False), and its design's other shapes (``need``:
    children each point needs)."""
    results = []
    for i, (spec, w, mode, values) in enumerate(plan.workloads):
        points = [assemble_point(v, [c[point_key(spec, mode, v)] for c in per_child],
                                 device_memory) for v in values]
        r = fit_workload(spec, w, mode, points, law_fit)
        if plan.designs:
            r = assemble_design_points(r, plan.designs[i], reg, i, device_memory, need)
        results.append(r)
    return results


def early_round(plan, first: dict[str, Event], items: list[dict], device_type: str,
                device_memory: int | None, floor_seconds: float) -> list[dict]:
    """The items the sweep's children after the first measure, as the first child's records
    already call for them (a fresh process each costs seconds of imports and set-up for a
    transformers workload, so what the first child shows is acted on at once):

    - a point the first child found on the launch floor (a warm step under
      ``WORK_OVER_FLOOR`` x its workload's floor) is timed to the rule's floor and not
      extended (``cap``: ``floor_seconds``): on the floor the point's figure is its spread
      across processes, which extending one child's timing towards 1 % does not narrow;
    - a point off the floor gets no synced steps (``synced``: the witness of a loop that
      syncs every step; off the floor the device bounds the step whether the host waits for
      it or not, and 5 such steps cost up to half a second a point);
    - the extension's shapes, where the model stayed on the floor, are added, so that the
      extension round (:func:`settle`) needs one child instead of all of them. Only a
      guess: :func:`settle` decides again over every child's records, measures what it
      chooses that is not here, and keeps none of these shapes it did not choose.

    ``items`` unchanged when the first child's records are incomplete. The models are
    fitted only for a workload whose first child's walls all lie on the floor (a fit is
    tenths of a second of the parent's, between two children on the device)."""
    reg = Registry()
    reg.add([first])
    try:
        results = assemble_results(plan, [first], reg, device_memory, 1, law_fit=False)
    except (KeyError, ValueError):
        return items
    floor: set[str] = set()
    off: set[str] = set()  # off the floor by the first child's walls; unknown ones neither
    extra: list[dict] = []
    for r, d in zip(results, plan.designs):
        work = None if r.refused else work_flags(r)
        if work is None:
            continue
        floor |= {d.key(p) for p in all_points(r) if work.get(label(p)) is False}
        off |= {d.key(p) for p in all_points(r) if work.get(label(p)) is True}
        if any(work.values()):  # the walls already leave the floor: no extension to guess
            continue
        t = fit_time_model(r, d, device_type)
        if t.model is not None and not t.model.floor_left:
            shapes, _ = plan_extension(r, d, device_memory)
            extra += [{**d.item(p), "round": "extension"} for p in shapes]

    def later(it: dict) -> dict:  # a floor point capped; one off it without its witness
        if it["key"] in floor:
            return {**it, "cap": min(floor_seconds, it.get("cap") or floor_seconds)}
        return {**it, "synced": False} if it["key"] in off else it

    return [later(it) for it in items] + extra


AGREEMENT = ("children after the second time a point only where the first two did not "
             "settle it: a point is settled when their medians agree within {tol:.0%} and it "
             "lies at least {w:g}x its workload's smallest step (on the floor a point's figure "
             "is its spread across processes, which every child adds to); a settled point's "
             "value is the median of the two, which a third child could move by at most half "
             "their difference (a median of three always lies between any two of them); a "
             "settled point is not profiled either: the device bounds its step, and its busy "
             "time is its wall less the gap per kernel the profiled points show")


def settled_by_two(first: dict[str, Event], second: dict[str, Event], items: list[dict],
                   tol: float) -> tuple[list[dict], list[dict]]:
    """(the items the children after the second time, the items they skip) from the first
    two children's records (:data:`AGREEMENT`): a skipped item carries ``skipped``, the
    reason its record gives. The floor is each workload's (and mode's) smallest median over
    both children; an item either child lacks a median for is timed."""

    def med(ev: Event | None) -> float | None:
        m = ((ev or {}).get("record") or {}).get("median_seconds")
        return m if m and m > 0 else None

    floor: dict[tuple, float] = {}
    for it in items:
        for m in (med(first.get(it["key"])), med(second.get(it["key"]))):
            group = (it.get("workload"), it.get("mode"))
            if m is not None:
                floor[group] = min(floor.get(group, m), m)
    keep, skip = [], []
    for it in items:
        a, b = med(first.get(it["key"])), med(second.get(it["key"]))
        low = floor.get((it.get("workload"), it.get("mode")))
        if a is None or b is None or low is None or abs(a - b) > tol * min(a, b) \
                or min(a, b) < WORK_OVER_FLOOR * low:
            keep.append(it)
            continue
        skip.append({**it, "skipped": (
            f"settled by children 0 and 1 (medians {abs(a - b) / min(a, b):.2%} apart, "
            f"{min(a, b) / low:.1f}x the workload's smallest step): not timed again")})
    return keep, skip


def _extend(results, designs, times, reg, run_round, device_type, device_memory, children):
    plans: dict[int, tuple[list[Planned], list[str]]] = {}
    for i, (r, t) in enumerate(zip(results, times)):
        if t is not None and t.model is not None and not t.model.floor_left:
            plans[i] = plan_extension(r, designs[i], device_memory)
    items = [designs[i].item(p) for i, (shapes, _) in plans.items() for p in shapes]
    # shapes the sweep's children measured already (early_round) need no more children;
    # the rest get as many as the least measured of them lacks
    need = [it for it in items if len(reg.events.get(it["key"], [])) < children]
    if need:
        have = min(len(reg.events.get(it["key"], [])) for it in need)
        reg.add(run_round(need, children - have, "extension"))
    for i, (shapes, notes) in plans.items():
        d = designs[i]
        if shapes:
            designs[i] = d = WorkloadDesign(d.spec, d.mode, d.axes, d.batch_key, d.seq_key,
                                            d.base_batch, d.shapes + tuple(shapes), d.notes)
            extra = []
            for p in shapes:
                reg.where[d.key(p)] = (i, p)
                extra.append(assemble_point(p.value, reg.events.get(d.key(p), []),
                                            device_memory, design=d.fields(p)))
            results[i] = results[i].model_copy(
                update={"design_points": [*results[i].design_points, *extra]})
        t = fit_time_model(results[i], d, device_type)
        left = bool(t.model and t.model.floor_left)
        if not left:
            notes = notes + ["the extension did not leave the floor either: extrapolation "
                             "beyond the largest measured shape is unsupported"]
        times[i] = t.model_copy(update={"extension": Extension(
            shapes=[(p.batch or 1, p.value) for p in shapes], notes=notes, left_floor=left)})
    return results, times


def _reassemble(r: WorkloadResult, design: WorkloadDesign, reg: Registry, keys: list[str],
                device_memory: int | None, need: int) -> WorkloadResult:
    def again(p: Point) -> Point:
        key = design.key(p)
        if key not in keys:
            return p
        fields = {"role": p.role, "held_out": p.held_out, "batch": p.batch, "seq": p.seq}
        return assemble_point(p.value, reg.events[key], device_memory, need=need,
                              design=fields)

    return r.model_copy(update={"points": [again(p) for p in r.points],
                                "design_points": [again(p) for p in r.design_points]})


def ceiling_rates(probes) -> dict[str, float]:
    """The measured matrix ceiling (FLOP/s) of each mode the probes' workloads ran in."""
    out = {}
    for w in getattr(probes, "workloads", []):
        rate = getattr(probes.gemm.get(w.gemm_dtype), "flops_per_second", None) \
            if w.gemm_dtype else None
        if rate:
            out[w.mode] = rate
    return out


def bound_by_ceilings(results: list[WorkloadResult], designs: list[WorkloadDesign],
                      rates: dict[str, float], device_type: str) -> list[WorkloadResult]:
    """Each two-sided time model fitted again with the certificate's measured matrix ceiling
    of its mode (``rates``: FLOP/s by mode; the probes stage runs after the sweep), so no
    device coefficient is cheaper than the card allows
    (:func:`afford.fit.time.step_sides.fit_device`). No measuring happens after this, so the
    verdict is judged as after a re-measurement."""
    out = []
    for r, d in zip(results, designs):
        t = r.time
        rate = rates.get(r.mode)
        if t is None or t.model is None or t.model.sides is None or not rate:
            out.append(r)
            continue
        again = fit_time_model(r, d, device_type, remeasured=True,
                               first=t.first_verdict or t.verdict, gemm_rate=rate)
        out.append(r.model_copy(update={"time": again.model_copy(
            update={"extension": t.extension})}))
    return out


def cert_verdict(results: list[WorkloadResult], device_type: str,
                 remeasured: int) -> CertTimeVerdict:
    child_tol, held_tol = TOLERANCES["cuda" if device_type == "cuda" else "cpu"]
    reasons = [f"{r.name} ({r.mode}): {why}" for r in results
               if r.time and r.time.verdict and r.time.verdict.label == "NOISY"
               for why in r.time.verdict.reasons]
    unjudged = [f"{r.name} ({r.mode}): no held-out shape could be judged, so its step-time "
                "predictions are unchecked" for r in results
                if r.time and r.time.verdict and r.time.verdict.label == "UNJUDGED"]
    missed = [f"{r.name} ({r.mode}): {why}" for r in results
              if r.time and r.time.verdict and r.time.verdict.label == "MISSED"
              for why in r.time.verdict.reasons]
    label = "NOISY" if reasons else "MISSED" if missed else "UNJUDGED" if unjudged else "OK"
    return CertTimeVerdict(
        label=label, reasons=reasons or missed or unjudged, child_tolerance=child_tol,
        held_out_tolerance=held_tol, floor_tolerance=FLOOR_SPREAD_TOL,
        rule=RULE.format(w=WORK_OVER_FLOOR, c=child_tol, h=held_tol, f=FLOOR_SPREAD_TOL),
        remeasured_points=remeasured)


def refit_law(spec: str, w, mode: str, r: WorkloadResult) -> WorkloadResult:
    """The throughput law fitted again over a result's sweep points (after a re-measure),
    keeping its time design's fields."""
    fresh = fit_workload(spec, w, mode, r.points)
    return fresh.model_copy(update={"design_points": r.design_points, "time": r.time})


SEMANTICS = ("the point's value (median_seconds) times steps as a training loop that syncs "
             "rarely runs them: each child issues its timed steps in blocks of about 0.05 s "
             "(4 to 16 steps) with a CUDA event between consecutive steps, reads a block "
             "only once the next one is queued behind it, and synchronises once, at the end "
             "of the run, so the device's queue never drains and each step is the interval "
             "between two events on the device's timeline (the host's issue time where the "
             "host bounds the step); run_mean_seconds: the run's host wall time over its "
             "steps, a loop that syncs once a run; synced_median_seconds (child {synced} "
             "only, at the points the first child found on the launch floor, 5-10 steps "
             "after the timed ones): host perf_counter around each step and a float(loss) "
             "after it, as a loop that logs loss.item() every step. FLOPs are "
             "counted once per shape by child {flops}, after timing it.")
SEMANTICS_CPU = ("a CPU is a synchronous device: each step is timed on the host clock "
                 "(perf_counter) and includes all its work, so a loop that syncs every step "
                 "sees the same time; FLOPs are counted once per shape by child {flops}, after "
                 "timing it.")


def child_options(child: int, first: int, children: int, cuda: bool) -> dict:
    """The job-wide flags of a child: the first counts FLOPs; on CUDA the second also times
    synced steps (a round of one child counts FLOPs only), and the last profiles the device
    side of each of its points once it has timed them all (a profile slows every later
    launch of its process: :func:`afford.measure.sweep_child.profile_point`); busy times agree
    within about 1 % from process to process, so one child's profile is the point's."""
    return {"count_flops": child == first,
            "synced": cuda and children > 1 and child == first + 1,
            "profile": cuda and child == first + children - 1}
