"""A certificate's memory laws read for ``afford size`` and for plans: will a shape fit,
and what is the largest batch that does.

The answer at a shape is :mod:`afford.figures.memory_at`'s, from a law and the shapes
measured beside it; here it is read off a certificate (:func:`for_cert`: the law with its
sweep's and design's points; :func:`point_answer`: a workload with no law), with the
largest batch that fits (:func:`max_batch_for_cert`), the law's held-out accuracy and the
default formulas beside it. By workload name, as every command asks: :func:`memory_answer`
(the one answer), :func:`predicted_memory`, :func:`predicted_params` and :func:`max_batch`.
The peaks a sweep point measured are read off the point
(:func:`afford.figures.cert_lookup.peak_bytes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from afford.core.errors import InputError
from afford.core.provenance import Tagged, assumed, fitted, measured, module, run_label
from afford.core.published_constants import MEMORY_FRACTION, check_fraction
from afford.figures import memory_at
from afford.figures import replay_figures as memory_replay
from afford.figures.memory_at import MeasuredShape, MemoryAnswer
from afford.figures.replay_figures import ReplayAnswer
from afford.fit.memory import sizing
from afford.fit.memory.memory_fit import BATCH_CAP, largest_batch, largest_true
from afford.fit.memory.sizing import (
    Prediction,
    defaults_for,
    formula_tag,
    user_defaults,
    verdicts,
)
from afford.schema import memory_law
from afford.schema.cert import Certificate
from afford.schema.memory_law import budgeted_bytes, frozen_at
from afford.schema.memory_section import DefaultVerdict, MemoryLaw
from afford.schema.user_constants import UserConstants

OOM_NOTE = "out of memory on Linux; pages through system memory and slows down on Windows/WDDM"


def laws(cert) -> list[MemoryLaw]:
    mem = getattr(cert, "memory", None)
    return list(mem.laws) if mem is not None else []


def law_or_none(cert, name: str, mode: str | None = None) -> MemoryLaw | None:
    for law in laws(cert):
        if law.workload == name and (mode is None or law.mode == mode):
            return law
    return None


DEFAULT_WORKLOAD = "tinylm"  # of a certificate with several, where none is named


def find_law(cert, name: str | None, mode: str | None = None) -> MemoryLaw:
    """The law of ``name`` (and ``mode``); InputError that lists what the certificate has.
    ``name`` None: the certificate's one workload (``afford certify -w hf:...`` measures
    one); of several, :data:`DEFAULT_WORKLOAD` where it is among them, else the error asks
    for one. ``mode`` None: the mode the certificate timed the workload in (the run it
    plans), else the first the memory stage measured."""
    if getattr(cert, "memory", None) is None:
        raise InputError("the certificate has no memory section (it was made with "
                         "--no-memory or by an afford without the memory stage); run "
                         "`afford certify` again to measure the memory law")
    if name is None:
        names = list(dict.fromkeys(x.workload for x in laws(cert)))
        if len(names) == 1:
            name = names[0]
        elif len(names) > 1 and DEFAULT_WORKLOAD not in names:
            raise InputError(f"the certificate has memory laws for {', '.join(names)}; name "
                             "one with --workload")
        else:  # tinylm among several, or no law at all (the error below says what there is)
            name = DEFAULT_WORKLOAD
    law = None
    if mode is None:  # the mode the workload was timed in, where the memory stage has it
        timed = [r.mode for r in getattr(cert, "workloads", None) or [] if r.name == name]
        law = next((x for x in (law_or_none(cert, name, m) for m in timed) if x is not None),
                   None)
    if law is None:
        law = law_or_none(cert, name, mode)
    if law is not None:
        return law
    have = ", ".join(f"{x.workload} ({x.mode})" for x in laws(cert)) or "none"
    skipped = "; ".join(f"{n.what}: {n.reason}" for n in cert.memory.not_executable)
    raise InputError(f"the certificate has no memory law for {name!r}"
                     f"{f' in mode {mode}' if mode else ''}; it has: {have}"
                     + (f" (not measured: {skipped})" if skipped else ""))


def budget_of(cert, fraction: float) -> Tagged | None:
    """Device memory x fraction, MODULE; ``None`` when the device memory is unknown."""
    mem = cert.environment.device_memory_bytes
    if not mem:
        return None
    what = "host memory (MemTotal)" if cert.environment.device_type == "cpu" else \
        "device memory"
    return module(mem * fraction, "B", f"{what} {mem} B x budget fraction {fraction:g}")


def heldout_accuracy(law: MemoryLaw, run: str) -> tuple[Tagged | None, Tagged | None]:
    """Largest |held-out error| of allocated (or RSS) and of reserved, MEASURED."""
    if not law.heldout:
        return None, None
    a = max(abs(h.error) for h in law.heldout)
    r = [abs(h.reserved_error) for h in law.heldout if h.reserved_error is not None]
    what = "RSS increment" if law.device_type == "cpu" else "allocated"
    return (measured(a, "ratio", f"max |predicted/measured - 1| of peak {what} over "
                     f"{len(law.heldout)} held-out shapes; {run}"),
            measured(max(r), "ratio", f"max |predicted/measured - 1| of peak reserved over "
                     f"{len(r)} held-out shapes; {run}") if r else None)


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class Comparison(_Frozen):
    key: str
    name: str
    peak: Tagged
    max_batch: Tagged | None


class LawFigures(_Frozen):
    """The memory law's own figures at the shape (beside the answer, whatever answers)."""

    dims: dict[str, int]
    params: Tagged
    states: Tagged
    allocated: Tagged
    reserved: Tagged | None
    ratio: Tagged | None
    extrapolated: bool


class SizeReport(_Frozen):
    """What ``afford size`` answers, typed; the CLI renders it. ``memory`` is the one memory
    answer at the shape (:mod:`afford.figures.memory_at`): its figures, ``fits`` and the
    budget share are what every other command prints for this shape."""

    workload: str
    mode: str
    device: str
    memory: MemoryAnswer
    law: LawFigures
    batch_given: bool
    device_memory: Tagged | None
    over_device: bool
    note: str | None
    max_batch: Tagged | None
    comparisons: list[Comparison]
    heldout_allocated: Tagged | None
    heldout_reserved: Tagged | None
    verdicts: list[DefaultVerdict]
    warnings: list[str] = []
    replay: ReplayAnswer | None = None  # the allocator replay's answer, both settings

    @property
    def fits(self) -> bool | None:
        """Whether it fits (yes or likely); None without a budget."""
        return self.memory.fits_bool

    @property
    def budget(self) -> Tagged | None:
        return self.memory.budget

    @property
    def budget_share(self) -> Tagged | None:
        return self.memory.share


def size(cert, name: str | None, seq: int, batch: int | None, mode: str | None,
         budget_fraction: float = MEMORY_FRACTION, run: str = "",
         constants: UserConstants | None = None, alloc_conf: str = "") -> SizeReport:
    """The memory answer at (batch, seq) (:func:`memory_answer`: the same
    figure every command prints), whether it fits the budget, the largest batch that does
    (``batch`` None: the answer at that batch), the law's own figures, the default formulas
    and the verdicts on their constants; ``constants``: the user's own sizing constants,
    judged beside the built-in defaults; ``alloc_conf``: the ``PYTORCH_CUDA_ALLOC_CONF`` the
    run will have."""
    check_fraction(budget_fraction, "the budget fraction")
    law = memory_replay.current(find_law(cert, name, mode))
    extra, user_notes = (), []
    if constants is not None:
        mine, why = user_defaults(constants, law.mode)
        extra = (mine,) if mine is not None else ()
        user_notes = [why] if why else []
    budget = budget_of(cert, budget_fraction)
    sk = law.dim_keys.get("s", "s")
    mb = max_batch_for_cert(cert, law, {sk: seq}, budget.value, alloc_conf) \
        if budget else None
    b = batch if batch is not None else max(int(mb.value) if mb else 1, 1)
    shape = {sk: seq, law.dim_keys.get("B", "B"): b}
    mem = for_cert(cert, law, shape, alloc_conf, budget)
    pred = sizing.predict(law, shape, run)
    dev_mem = cert.environment.device_memory_bytes
    over = bool(dev_mem) and float(mem.figure.value) > dev_mem
    note = None
    if over:
        note = OOM_NOTE if law.device_type == "cuda" else \
            "exceeds host memory: pages to swap and slows down, or is killed"
    held_alloc, held_res = heldout_accuracy(law, run)
    return SizeReport(
        workload=law.workload, mode=law.mode, device=cert.environment.device_name,
        memory=mem, law=LawFigures(dims=pred.dims, params=pred.params, states=pred.states,
                                   allocated=pred.allocated, reserved=pred.reserved,
                                   ratio=pred.ratio, extrapolated=pred.extrapolated),
        batch_given=batch is not None,
        device_memory=measured(dev_mem, "B", f"{cert.environment.device_name}, {run}")
        if dev_mem else None, over_device=over, note=note, max_batch=mb,
        comparisons=comparisons(law, pred, budget, extra), verdicts=verdicts(
            law, pred.dims, budget.value if budget else None, extra=extra),
        heldout_allocated=held_alloc, heldout_reserved=held_res,
        warnings=list(mem.notes) + user_notes + ([] if budget else
                                                ["device memory unknown: residency not judged"]),
        replay=replay_answer(law, seq, b, budget.value if budget else None, alloc_conf, run,
                             int(mb.value) if mb else 1))


def law_breakdown(mem: MemoryAnswer) -> tuple[tuple[str, Tagged], ...]:
    """Where the memory goes at the shape by the answer's own figures: the states counted
    after the loop (weights, gradients and optimizer state together), the rest of the
    allocated peak (activations, temporaries, workspaces), and the allocator's slack
    (reserved - allocated). On a CPU the last is absent and the rest is of the peak RSS."""
    states, alloc = float(mem.states.value), float(mem.allocated.value)
    rest = fitted(max(alloc - states, 0.0), "B", f"peak allocated - states; "
                  f"{mem.allocated.source}", extrapolated=mem.allocated.extrapolated)
    what = "activations, temporaries and workspaces" if mem.reserved is not None else \
        "the rest of the peak RSS (activations, the interpreter and torch)"
    out = [("states (parameters, gradients, optimizer state)", mem.states), (what, rest)]
    if mem.reserved is not None:
        out.append(("allocator slack (reserved - allocated)", fitted(
            max(float(mem.reserved.value) - alloc, 0.0), "B", "peak reserved - peak "
            f"allocated; {mem.reserved.source}", extrapolated=mem.reserved.extrapolated)))
    return tuple(out)


def replay_answer(law: MemoryLaw, seq: int, batch: int | None, budget: float | None,
                  alloc_conf: str, run: str, guess: int = 1) -> ReplayAnswer | None:
    """The allocator replay's answer (:mod:`afford.figures.replay_figures`); ``None`` where
    the certificate has none (a CPU, an older certificate)."""
    if law.device_type != "cuda" or law.replay is None:
        return None
    return memory_replay.answer(law, seq, batch, budget, alloc_conf, run, guess)


def comparisons(law: MemoryLaw, pred: Prediction, budget: Tagged | None,
                extra: tuple = ()) -> list[Comparison]:
    """The default formulas at the same shape, and the largest batch each would admit
    (against the same budget, on the same reserved/allocated ratio as the fit)."""
    params = float(pred.params.value)
    frozen = frozen_at(law, pred.dims)[0]
    out = []
    defaults, _ = defaults_for(law)
    for dflt in [*defaults, *(d for d in extra if d.formula)]:
        tag = formula_tag(dflt, law, pred.dims, params)
        mb = None
        if budget is not None:
            n = largest_batch(lambda b, dflt=dflt: budgeted_bytes(
                law, {**pred.dims, "B": b}, params,
                dflt.bytes(params, {**pred.dims, "B": b}, frozen)),
                budget.value)
            src = f"largest B with {dflt.name} x the fit's reserved/allocated ratio <= budget"
            mb = module("any (no activations counted)", "", src) if n >= BATCH_CAP \
                else module(n, "sequences", src)
        out.append(Comparison(key=dflt.key, name=dflt.name, peak=tag, max_batch=mb))
    return out



@dataclass(frozen=True)
class LawPoint:
    """A shape the memory stage measured, with the law's figure there: the fitted shapes
    (the law's own residuals) and the held-out ones (the held-out table's figures), so a
    plot of them and the tables agree."""

    role: str                  # base, seq, batch, corner (fitted) or heldout-*
    B: int
    s: int
    quantity: str              # allocated, reserved or rss_increment
    measured: Tagged
    law: Tagged

    @property
    def tokens(self) -> int:
        return self.B * self.s

    @property
    def held_out(self) -> bool:
        return self.role.startswith("heldout")


def law_points(law: MemoryLaw, run: str) -> list[LawPoint]:
    """Every measured shape of ``law`` in each quantity it was fitted to."""
    from afford.schema.memory_section import SWEEP_ROLES

    out = []
    fits = [(law.allocated, "measured_bytes", "predicted_bytes")]
    if law.reserved is not None:
        fits.append((law.reserved, "measured_reserved_bytes", "predicted_reserved_bytes"))
    for f, meas_key, pred_key in fits:
        q = f.quantity
        for s in law.shapes:
            peak = s.peak(q)
            if s.role not in SWEEP_ROLES or peak is None or s.states_bytes is None:
                continue
            d = s.dims
            src = f"{law.workload} {law.mode} B {d['B']} x s {d['s']}, {run}"
            pred = f.predict(float(s.states_bytes), d["B"], d["s"], d["d"], d["L"], d["H"])
            out.append(LawPoint(s.role, d["B"], d["s"], q,
                                measured(peak, "B", f"peak {q}, fitted shape, {src}"),
                                fitted(pred, "B", f"memory law {f.describe()} at {src}")))
        for h in law.heldout:
            m, p = getattr(h, meas_key), getattr(h, pred_key)
            if m is None or p is None:
                continue
            src = f"{law.workload} {law.mode} B {h.dims['B']} x s {h.dims['s']}, {run}"
            out.append(LawPoint(h.role, h.dims["B"], h.dims["s"], q,
                                measured(m, "B", f"peak {q}, held out, {src}"),
                                fitted(p, "B", f"memory law {f.describe()} at {src}",
                                       extrapolated=h.extrapolated)))
    return out


# ------------------------------------------------- the one memory answer, from a certificate


def largest_fitting(at: Callable[[int], MemoryAnswer], guess: int = 1, cap: int = BATCH_CAP
                    ) -> tuple[int, MemoryAnswer | None]:
    """The largest B whose answer fits (``yes`` or ``likely``: monotone in B), and its
    answer; (0, None) when one sequence does not (a search from ``guess``:
    :func:`afford.fit.memory.memory_fit.largest_true`)."""
    seen: dict[int, MemoryAnswer] = {}

    def ok(b: int) -> bool:
        if b not in seen:
            seen[b] = at(b)
        return seen[b].fits in memory_at.FITTING

    n = largest_true(ok, guess, cap)
    return n, seen.get(n)


def guess_batch(law: MemoryLaw, shape: dict[str, int], budget: float, run: str) -> int:
    """A first guess of the largest batch: the law's (cheap, no replay)."""
    try:
        return max(1, int(sizing.max_batch(law, shape, budget, run).value))
    except (InputError, ValueError, ArithmeticError):  # a broken law: start the search at 1
        return 1



def sweep_measured(cert, law: MemoryLaw, run: str) -> list[MeasuredShape]:
    """The sweep's points (and the step-time design's) of ``law``'s workload and mode at the
    certified model, with their peaks (the largest over the point's children)."""
    r = next((w for w in getattr(cert, "workloads", None) or []
              if w.name == law.workload and w.mode == law.mode), None)
    if r is None:
        return []
    out = []
    for p in [*r.points, *(getattr(r, "design_points", None) or [])]:
        if not p.shape or not p.resident:
            continue
        try:
            dims = memory_law.shape_dims(law, dict(p.shape))
        except Exception:  # a shape the law cannot read
            continue
        if not memory_at.same_model(law, dims, {}):
            continue
        where = (f"{r.name} {r.mode} {r.sweep_param}={p.value}: the sweep's children, the "
                 f"largest peak of {len(p.children)}; {run}")
        if p.peak_allocated_bytes is not None and p.peak_reserved_bytes is not None:
            out.append(MeasuredShape(B=dims["B"], s=dims["s"],
                                     allocated=float(p.peak_allocated_bytes),
                                     reserved=float(p.peak_reserved_bytes), where=where))
        elif p.peak_rss_bytes is not None and law.device_type == "cpu":
            out.append(MeasuredShape(B=dims["B"], s=dims["s"], allocated=float(p.peak_rss_bytes),
                                     reserved=None, where=where))
    return out


def point_answer(cert, name: str, mode: str | None, shape: dict[str, int], run: str,
                 budget: Tagged | None) -> MemoryAnswer | None:
    """A workload with no memory law (not transformer-shaped): what its sweep measured at
    this very shape, or ``None``."""
    r = next((w for w in getattr(cert, "workloads", None) or []
              if w.name == name and (mode is None or w.mode == mode)), None)
    if r is None:
        return None
    p = next((q for q in [*r.points, *(getattr(r, "design_points", None) or [])]
              if q.shape and all(q.shape.get(k) == v for k, v in shape.items())), None)
    if p is None:
        return None
    where = (f"{r.name} {r.mode} {r.sweep_param}={p.value}: the sweep's children, the largest "
             f"peak of {len(p.children)}; {run}")
    cuda = cert.environment.device_type == "cuda"
    if p.peak_allocated_bytes is not None:
        alloc = measured(p.peak_allocated_bytes, "B", f"peak allocated; {where}")
        res = measured(p.peak_reserved_bytes, "B", f"peak reserved; {where}") \
            if p.peak_reserved_bytes is not None else _projected(r, alloc) if cuda else None
    elif p.peak_rss_bytes is not None:
        alloc, res = measured(p.peak_rss_bytes, "B", f"peak RSS; {where}"), None
    else:
        return None
    out = MemoryAnswer(workload=r.name, mode=r.mode, device_type="cuda" if cuda else "cpu",
                       shape={k: int(v) for k, v in p.shape.items()}, source="measured",
                       why="measured at this shape (no memory law: the workload is not "
                       "transformer-shaped)", allocated=alloc, reserved=res)
    return out if budget is None else memory_at.judged_plain(out, budget)


CUDA_RESERVED_RATIO = 1.12  # the worst reserved/allocated measured on an H200 for GPT-2
# small (docs/REFERENCES.md): the ratio where a CUDA workload recorded no reserved peak


def _projected(r, alloc: Tagged) -> Tagged:
    """Reserved where a point of a CUDA workload recorded only its allocated peak (an older
    certificate): allocated x this workload's own worst ratio (COSTS 3.2), else the cited
    H200 worst case."""
    ratios = [q.peak_reserved_bytes / q.peak_allocated_bytes for q in r.points
              if q.peak_reserved_bytes and q.peak_allocated_bytes and q.usable]
    if ratios:
        return module(memory_law.projected_reserved(float(alloc.value), max(ratios)), "B",
                      f"allocated x {r.name}'s worst reserved/allocated {max(ratios):.3f} over "
                      f"{len(ratios)} resident points (COSTS 3.2)")
    return assumed(memory_law.projected_reserved(float(alloc.value), CUDA_RESERVED_RATIO), "B",
                   f"reserved not recorded: allocated x {CUDA_RESERVED_RATIO}, the worst "
                   "measured on an H200 for GPT-2 small (docs/REFERENCES.md)")


def for_cert(cert, law: MemoryLaw, shape: dict[str, int], alloc_conf: str = "",
             budget: Tagged | None = None) -> MemoryAnswer:
    """The memory answer (:func:`afford.figures.memory_at.answer`) with what the certificate
    measured beside the law: its sweep's and design's points."""
    run = run_label(cert)
    return memory_at.answer(law, shape, run, measured_shapes=sweep_measured(cert, law, run),
                             alloc_conf=alloc_conf, budget=budget)


def max_batch_for_cert(cert, law: MemoryLaw, shape: dict[str, int], budget_bytes: float,
                       alloc_conf: str = "") -> Tagged:
    """The largest batch whose :func:`for_cert` answer fits ``budget_bytes`` at ``shape``
    (its batch ignored), FITTED."""
    run = run_label(cert)
    budget = module(budget_bytes, "B", "the budget given")
    key = law.dim_keys.get("B", "B")
    n, at = largest_fitting(
        lambda b: for_cert(cert, law, {**shape, key: b}, alloc_conf, budget),
        guess_batch(law, shape, budget_bytes, run))
    s = at.shape["s"] if at is not None else shape.get(law.dim_keys.get("s", "s"))
    src = at.source if at is not None else "law"
    return fitted(n, "sequences", f"largest batch whose memory answer ({src}) fits "
                  f"{budget_bytes:.0f} B at seq {s}; {law.workload} {law.mode}; {run}",
                  extrapolated=bool(at and at.extrapolated))


# --- the memory figures every command reads, by workload name ---------------------------


def memory_answer(cert: Certificate, name: str, shape: dict[str, int],
                  mode: str | None = None, alloc_conf: str = "",
                  budget: Tagged | None = None) -> MemoryAnswer | None:
    """Peak memory at ``shape`` as every command reads it (:mod:`afford.figures.memory_at`:
    measured there, else the allocator replay where the certificate trusts it, else the
    memory law; extrapolated with its reasons; ``fits`` judged against ``budget`` bytes
    where given); ``None`` where the certificate can say nothing (no memory law for
    ``name`` and the shape not measured). ``shape`` takes the workload's keys
    (``{"batch": 16, "seq": 2048}``) or the law's (B, s, d, L, H), plus ``params`` when d,
    L or H differ from the certified model; missing keys keep the certified base shape."""
    law = law_or_none(cert, name, mode)
    if law is None:
        return point_answer(cert, name, mode, shape, run_label(cert), budget)
    return for_cert(cert, law, shape, alloc_conf, budget)


def predicted_memory(cert: Certificate, name: str, shape: dict[str, int],
                     mode: str | None = None, alloc_conf: str = ""
                     ) -> tuple[Tagged, Tagged | None] | None:
    """(allocated, reserved) of :func:`memory_answer` at ``shape``; on a CPU (peak RSS,
    None); ``None`` where it has none."""
    got = memory_answer(cert, name, shape, mode, alloc_conf)
    return None if got is None else (got.allocated, got.reserved)


def predicted_params(cert: Certificate, name: str, shape: dict[str, int],
                     mode: str | None = None) -> Tagged | None:
    """Trainable parameters at ``shape`` as the memory law counts them (the fitted count at
    the certified d, L, H; scaled as L*d^2 otherwise, said in the source); ``None`` without
    a law for ``name``."""
    law = law_or_none(cert, name, mode)
    if law is None:
        return None
    return sizing.predict(law, shape, run_label(cert)).params


def max_batch(cert: Certificate, name: str, shape: dict[str, int], budget_bytes: int,
              mode: str | None = None, alloc_conf: str = "") -> Tagged | None:
    """The largest batch whose memory answer fits ``budget_bytes`` at ``shape`` (its batch
    is ignored; ``fits`` yes or likely, :mod:`afford.figures.memory_at`), FITTED;
    ``None`` without a memory law for ``name``."""
    law = law_or_none(cert, name, mode)
    if law is None:
        return None
    return max_batch_for_cert(cert, law, shape, budget_bytes, alloc_conf)
