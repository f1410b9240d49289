"""A certificate's memory laws read for ``afford size`` and for plans: will a shape fit,
and what is the largest batch that does.

The predictions themselves are pure functions of a law (:mod:`afford.fit.memory.sizing`); here
they are read off a certificate, against its device memory times the budget fraction, with
the law's held-out accuracy and the default formulas beside them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from afford.core.errors import InputError
from afford.core.provenance import Tagged, fitted, measured, module
from afford.core.published_constants import MEMORY_FRACTION, check_fraction
from afford.figures import memory_at
from afford.figures import replay_figures as memory_replay
from afford.figures.memory_at import MemoryAnswer
from afford.figures.replay_figures import ReplayAnswer
from afford.fit.memory import sizing
from afford.fit.memory.memory_fit import BATCH_CAP, largest_batch
from afford.fit.memory.sizing import (
    Prediction,
    defaults_for,
    formula_tag,
    user_defaults,
    verdicts,
)
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
    model_config = ConfigDict(frozen=True, extra="forbid")


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
    """The memory answer at (batch, seq) (:func:`afford.figures.memory_answer`: the same
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
    mb = memory_at.max_batch_for_cert(cert, law, {sk: seq}, budget.value, alloc_conf) \
        if budget else None
    b = batch if batch is not None else max(int(mb.value) if mb else 1, 1)
    shape = {sk: seq, law.dim_keys.get("B", "B"): b}
    mem = memory_at.for_cert(cert, law, shape, alloc_conf, budget)
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
