"""The certify stage ``memory``: measure, fit and validate the memory law.

For each workload of the certify plan that is transformer-shaped (has ``dims``; ``tinylm``
first) and each dtype mode (the modes asked for; by default fp32 and, where the card has
it, bf16 on CUDA, fp32 on a CPU), ONE child process (:mod:`afford.measure.memory_sweep`)
measures a short training loop at:

- a sequence sweep at the base batch: s0 x (1/4, 1/2, 1, 2);
- a batch sweep at the base length: B0 x (1/4, 1/2, 1, 2);
- held out, never fitted: one interpolated shape (3/4 B0, 3/2 s0), and shapes 2x beyond
  the sweep in seq (B0, 4 s0) and in batch (4 B0, s0);

preceded by one warm-up run of the base shape per workload and mode (its peak includes one-time
costs: lazy imports, a first cuBLAS workspace, heap growth) that is kept but not fitted. The law
is fitted over the sweep (:func:`afford.fit.memory.memory_fit.fit_memory`; with or without the
s^2 term as the workload's ``attention`` declares), the held-out shapes are predicted and their
errors recorded, and the default constants are judged at the base shape against the device
memory x the budget fraction (:data:`afford.core.published_constants.MEMORY_FRACTION`). The
parent never touches the device.

Raw readings are the source of truth: :func:`refit_section` rebuilds every law of a stored
section from its shapes with this afford's fit (e.g. a certificate made by an older one).
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

from afford.core.provenance import NotExecutable
from afford.core.published_constants import MEMORY_FRACTION
from afford.fit.memory import replay_model, sizing
from afford.fit.memory.memory_fit import (
    MemoryObservation,
    batch_linearity,
    fit_memory,
    fit_params_affine,
)
from afford.fit.memory.replay_model import with_replay
from afford.measure.memory_sweep import run_memory_child
from afford.schema import memory_law
from afford.schema.memory_section import (
    HELDOUT_ROLES,
    SWEEP_ROLES,
    CodePath,
    HeldOut,
    LoopEffect,
    MemoryLaw,
    MemorySection,
    MemoryShape,
)

if TYPE_CHECKING:
    from afford.certification.request import StageContext
    from afford.workloads.base import Workload

# step 0 creates the optimizer state, step 1 runs with it resident, step 2 shows what the
# allocator still grows after that (loop_effect); a fourth step only repeats step 2
STEPS = {"cuda": 3, "cpu": 3}
TARGETS = {"cuda": {"allocated": 0.02, "reserved": 0.03}, "cpu": {"rss_increment": 0.10}}
R2_WARN = 0.99
# base (B0, s0) of the built-ins per device class: activations well above the noise of the
# measurement (CPU RSS pages) and the whole stage within seconds on a large GPU. On a large
# GPU tinylm's sweep reaches 32k tokens a step (B0 s0 = 16k): some of the step's transient
# buffers grow with the tokens and then stop (a reduction's staging buffer in the backward
# grows a few KiB a token up to 1 MiB per SM), and a law fitted below that point learns a
# slope the larger shapes do not follow. So the large-GPU base sits above it: of the bases
# tried, 8 x 2048 gave the smallest held-out error at twice the sweep.
BASE = {
    "tinylm": {"cpu": (4, 256), "small-gpu": (8, 256), "large-gpu": (8, 2048)},
    "softmax": {"cpu": (4, 384), "small-gpu": (8, 512), "large-gpu": (16, 1024)},
    "scan": {"cpu": (4, 128), "small-gpu": (4, 256), "large-gpu": (8, 512)},
}


TRACED_ROLES = ("base", "seq", "batch", "corner")


@dataclass(frozen=True)
class MemoryJob:
    """One workload in one mode: the shapes to measure, with their roles."""

    spec: str
    mode: str
    dim_keys: dict[str, str]
    base_shape: dict[str, int]
    runs: tuple[tuple[str, dict[str, int]], ...]  # (role, the workload's shape)
    attention: str | None = None  # the workload's declaration (Workload.attention)
    traced: bool = False  # CUDA: the sweep shapes record the allocator's history
    paths: tuple[CodePath, ...] | None = None  # the workload's code paths (None: unknown)

    def key(self, role: str, shape: dict[str, int]) -> str:
        return f"memory|{self.spec}|{self.mode}|{role}|" + ",".join(
            f"{k}={v}" for k, v in sorted(shape.items()))


def memory_modes(requested: list[str], device_type: str, compute_capability: str | None
                 ) -> list[str]:
    """The modes asked for; else fp32 and bf16 on a CUDA card of compute capability >= 8.0
    (bf16 tensor cores; read from the environment, so the parent starts no CUDA), else fp32."""
    if requested:
        return list(dict.fromkeys(requested))
    if device_type == "cuda":
        major = int((compute_capability or "0").split(".")[0] or 0)
        return ["fp32", "bf16"] if major >= 8 else ["fp32"]
    return ["fp32"]


def dim_keys(w: "Workload", shape: dict[str, int]) -> dict[str, str]:
    """Which of the workload's shape keys moves which law dim (found by nudging each key
    by one and watching ``dims``): e.g. tinylm {B: batch, s: seq, d: d, L: L, H: H}."""
    base = w.dims(shape) or {}
    out: dict[str, str] = {}
    for key, value in shape.items():
        moved = [dim for dim, v in (w.dims({**shape, key: value + 1}) or {}).items()
                 if base.get(dim) != v]
        if len(moved) == 1 and moved[0] not in out:
            out[moved[0]] = key
    return out


def _base(w: "Workload", device_class: str) -> tuple[dict[str, int], int, int]:
    values = w.default_sweep(device_class)
    shape = w.shape(values[len(values) // 2])
    dims = w.dims(shape) or {}
    b0, s0 = BASE.get(w.name, {}).get(device_class, (dims.get("B", 4), dims.get("s", 64)))
    return shape, b0, s0


def plan_job(spec: str, w: "Workload", mode: str, device_class: str, traced: bool = False
             ) -> MemoryJob:
    """The shapes of one workload and mode; ValueError when it cannot be swept in B and s.

    ``traced`` (CUDA): the allocator replay's plan: four traced sweep shapes at and below
    the base (B0 s0, B0 s0/2, B0/2 s0, B0/2 s0/2), whose histories the replay learns and
    the law is fitted over, and the three held-out shapes (up to 4x the base's tokens).
    Otherwise (a CPU) the law's plan: a sweep up to 2x the base, held out to 4x."""
    shape, b0, s0 = _base(w, device_class)
    keys = dim_keys(w, shape)
    if "B" not in keys or "s" not in keys:
        raise ValueError(f"its shape has no key that sets the batch and the sequence length "
                         f"(found {keys})")
    kb, ks = keys["B"], keys["s"]

    def at(b: float, s: float) -> dict[str, int]:
        return {**shape, kb: max(1, int(b)), ks: max(1, int(s))}

    runs = [("warmup", at(b0, s0)), ("base", at(b0, s0))]
    if traced:
        runs += [("seq", at(b0, s0 / 2)), ("batch", at(b0 / 2, s0)),
                 ("corner", at(b0 / 2, s0 / 2))]
    else:
        runs += [("seq", at(b0, s0 * f)) for f in (0.25, 0.5, 2)]
        runs += [("batch", at(b0 * f, s0)) for f in (0.25, 0.5, 2)]
    runs += [("heldout-interpolated", at(b0 * 3 / 4, s0 * 3 / 2)),
             ("heldout-seq", at(b0, 4 * s0)), ("heldout-batch", at(4 * b0, s0))]
    paths = tuple(p for p in w.code_paths() if traced or p.kind != "size_switch")
    # a small base batch rounds two of the batch rungs to one shape (b0 = 2: 0.5 and 1 are
    # both batch 1): each shape of a role is measured once
    runs = list({(role, tuple(sorted(sh.items()))): (role, sh) for role, sh in runs}.values())
    return MemoryJob(spec=spec, mode=mode, dim_keys=keys, base_shape=at(b0, s0),
                     runs=tuple(runs), attention=getattr(w, "attention", None),
                     traced=traced, paths=paths)


def s2_term(attention: str | None) -> bool | None:
    """Whether the law has the s^2 term: not for attention that never stores the scores
    (Korthikanti's fused variant), yes for materialised scores, else chosen by the fit."""
    return {"fused": False, "materialised": True}.get(attention or "")


def plan_jobs(plan, modes: list[str], traced: bool = False
              ) -> tuple[list[MemoryJob], list[NotExecutable]]:
    """Jobs for the plan's transformer-shaped workloads, tinylm first."""
    seen: dict[str, "Workload"] = {}
    for spec, w, _, _ in plan.workloads:
        seen.setdefault(spec, w)
    specs = sorted(seen, key=lambda s: (not s.startswith("tinylm"), list(seen).index(s)))
    jobs, skipped = [], []
    for spec in specs:
        w = seen[spec]
        try:
            if w.dims(w.shape(w.default_sweep(plan.device_class)[0])) is None:
                raise ValueError("it is not transformer-shaped (no dims())")
            jobs.extend(plan_job(spec, w, m, plan.device_class, traced) for m in modes)
        except Exception as exc:  # a user workload's shape code may raise anything
            skipped.append(NotExecutable(what=f"memory law of {spec}", reason=str(exc)))
    return jobs, skipped


def items_for(job: MemoryJob, w: "Workload", steps: int) -> list[dict]:
    return [{"key": job.key(role, shape), "workload": job.spec, "mode": job.mode,
             "role": role, "shape": shape, "dims": w.dims(shape), "steps": steps,
             "trace": job.traced and role in TRACED_ROLES}
            for role, shape in job.runs]


def memory_stage(ctx: "StageContext") -> dict:
    """The stage: plan, one child, fit, validate. Never fails certify: what could not be
    measured is recorded as NOT EXECUTABLE."""
    t0 = time.perf_counter()
    env = ctx.env
    modes = memory_modes(ctx.req.modes, env.device_type, env.compute_capability)
    cuda = env.device_type == "cuda"
    jobs, skipped = plan_jobs(ctx.plan, modes, traced=cuda)
    workloads = {spec: w for spec, w, _, _ in ctx.plan.workloads}
    steps = STEPS[env.device_type]
    per_job = [(job, items_for(job, workloads[job.spec], steps)) for job in jobs]
    records: dict[str, dict] = {}
    learner = EarlyLearner(per_job)  # learns each job's traces while the child goes on
    try:
        if per_job:
            spawned = getattr(ctx, "ahead", {}).pop("memory", None)

            def tap(event: dict) -> None:
                if event.get("event") == "shape":
                    learner.take(event["key"], event["record"])
                ctx.on_event(event)

            ended: list[str] = []
            records = run_memory_child([it for _, items in per_job for it in items],
                                       device=ctx.plan.device, seed=ctx.req.seed,
                                       device_class=ctx.plan.device_class,
                                       on_event=tap, spawned=spawned, failures=ended)
            skipped += [NotExecutable(what="memory child", reason=why, failed=True)
                        for why in ended]  # died or stopped: a failure of this run
    except (OSError, ValueError) as exc:  # the child could not start, or spoke garbage
        skipped.append(NotExecutable(what="memory child", reason=f"{type(exc).__name__}: {exc}",
                                     failed=True))
    laws = []
    for job, items in per_job:
        shapes = [shape_record(it, records.get(it["key"], {"error": "not measured"}))
                  for it in items]
        try:
            law = build_law(job, shapes, env)
        except (ValueError, ArithmeticError) as exc:
            skipped.append(NotExecutable(what=f"memory law of {job.spec} ({job.mode})",
                                         reason=_why(exc, shapes)))
            continue
        laws.append(with_replay(law, learner.replay(job, law)))
    learner.close()
    section = MemorySection(steps_per_shape=steps, budget_fraction=MEMORY_FRACTION,
                            tolerance=sizing.VERDICT_TOLERANCE, targets=TARGETS[env.device_type],
                            device_memory_bytes=env.device_memory_bytes, laws=laws,
                            not_executable=skipped, wall_seconds=time.perf_counter() - t0,
                            alloc_conf=child_alloc_conf() if cuda else None,
                            warnings=section_notes(laws))
    return {"memory": section}


def child_alloc_conf() -> str:
    """The allocator configuration the memory child inherits from this process."""
    return os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") \
        or ""


class EarlyLearner:
    """The replay's size laws learned in a background thread as soon as a job's traced
    shapes are in, while the child measures the held-out shapes (learning takes a second or
    two of CPU per job; the child's time is the GPU's)."""

    def __init__(self, per_job: list[tuple[MemoryJob, list[dict]]]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._pending: dict[int, dict[str, dict | None]] = {}
        self._items: dict[str, tuple[int, dict]] = {}
        self._futures: dict[int, Future] = {}
        for i, (job, items) in enumerate(per_job):
            if not job.traced:
                continue
            traced = [it for it in items if it.get("trace")]
            self._pending[i] = {it["key"]: None for it in traced}
            for it in traced:
                self._items[it["key"]] = (i, it)
        self._jobs = {id(job): i for i, (job, _) in enumerate(per_job)}

    def take(self, key: str, record: dict) -> None:
        if key not in self._items:
            return
        i, item = self._items[key]
        self._pending[i][key] = record
        if all(r is not None for r in self._pending[i].values()) and i not in self._futures:
            shapes = [shape_record(self._items[k][1], r)
                      for k, r in self._pending[i].items()]
            self._futures[i] = self._pool.submit(replay_model.learn_shapes, shapes)

    def replay(self, job: MemoryJob, law: MemoryLaw):
        """The law's replay model (None when the job was not traced)."""
        if not job.traced:
            return None
        fut = self._futures.get(self._jobs.get(id(job), -1))
        learned = None
        if fut is not None:
            try:
                learned = fut.result()
            except Exception:  # relearned (and then reported) by build_replay
                learned = None
        try:
            return replay_model.build_replay(law, learned)
        except Exception as exc:  # the replay never fails the stage: the law stands alone
            law.warnings.append(f"allocator replay failed: {type(exc).__name__}: {exc}"[:500])
            return None

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def shape_record(item: dict, record: dict) -> MemoryShape:
    """The memory child's record of one item, as the law keeps it."""
    return MemoryShape(key=item["key"], role=item["role"], shape=item["shape"],
                       dims=item["dims"], **record)


def section_notes(laws: list[MemoryLaw]) -> list[str]:
    notes = [sizing.inherited_defaults(m)[1] + "; verdicts compare with the analytic "
             "defaults only" for m in dict.fromkeys(law.mode for law in laws)
             if sizing.inherited_defaults(m)[0] is None]
    return notes + [f"{law.workload} ({law.mode}): {w}" for law in laws for w in law.warnings]


def _why(exc: Exception, shapes: list[MemoryShape]) -> str:
    errors = sorted({s.error for s in shapes if s.error})
    return f"{exc}" + (f"; errors: {'; '.join(errors)}"[:1500] if errors else "")


def quantities(device_type: str) -> tuple[str, str | None]:
    return ("rss_increment", None) if device_type == "cpu" else ("allocated", "reserved")


def _observations(shapes: list[MemoryShape], quantity: str) -> list[MemoryObservation]:
    return [MemoryObservation(**{k: s.dims[k] for k in memory_law.DIMS},
                              states_bytes=float(s.states_bytes), peak_bytes=s.peak(quantity))
            for s in shapes]


def _ranges(shapes: list[MemoryShape]) -> dict[str, list[float]]:
    vals = {"B": [s.dims["B"] for s in shapes], "s": [s.dims["s"] for s in shapes],
            "tokens": [s.dims["B"] * s.dims["s"] for s in shapes],
            "bss": [s.dims["B"] * s.dims["s"] ** 2 for s in shapes]}
    return {k: [float(min(v)), float(max(v))] for k, v in vals.items()}


def build_law(job: MemoryJob, shapes: list[MemoryShape], env) -> MemoryLaw:
    """Fit over the sweep, predict the held-out shapes, judge the defaults. ``env``: the
    device's ``device_type`` and ``device_memory_bytes``."""
    qa, qr = quantities(env.device_type)
    sweep = [s for s in shapes if s.role in SWEEP_ROLES and usable(s, qa, env)]
    if len(sweep) < 4:
        raise ValueError(f"only {len(sweep)} sweep shapes were measured (4 needed)")
    p0, ps = fit_params_affine([s.dims["s"] for s in sweep], [s.params for s in sweep])
    base = next((s for s in shapes if s.role == "base"), sweep[0])
    law = MemoryLaw(
        workload=job.spec, mode=job.mode, device_type=env.device_type,
        attention=job.attention, dim_keys=job.dim_keys,
        base_shape=job.base_shape, base_dims=base.dims, ranges=_ranges(sweep),
        bytes_per_param=statistics.median((s.states_bytes - (s.frozen_bytes or 0)) / s.params
                                          for s in sweep),
        frozen_params=statistics.median(s.frozen_params or 0 for s in sweep),
        frozen_bytes=statistics.median(s.frozen_bytes or 0 for s in sweep),
        params_p0=p0, params_per_s=ps,
        baseline_rss_bytes=statistics.median(s.baseline_rss_bytes for s in sweep)
        if qa == "rss_increment" else None,
        allocated=fit_memory(_observations(sweep, qa), qa, s2_term(job.attention)),
        reserved=fit_memory(_observations(sweep, qr), qr, s2_term(job.attention))
        if qr else None,
        worst_reserved_ratio=max((s.peak("reserved") / s.peak("allocated") for s in sweep),
                                 default=None) if qr else None,
        loop=loop_effect(sweep, qa, qr), shapes=shapes,
        paths=list(job.paths) if job.paths is not None else None)
    law = law.model_copy(update=_linearity(law, sweep, qa))
    budget = env.device_memory_bytes * MEMORY_FRACTION if env.device_memory_bytes \
        else None
    law = law.model_copy(update={
        "heldout": [heldout(law, s) for s in shapes
                    if s.role in HELDOUT_ROLES and usable(s, qa, env)],
        "verdicts": sizing.verdicts(law, law.base_dims, budget)})
    return law.model_copy(update={"warnings": law_warnings(law, shapes, env.device_type,
                                                           env.device_memory_bytes)})


def refit_law(law: MemoryLaw, device_memory_bytes: int | None) -> MemoryLaw:
    """The law rebuilt from its stored raw shapes by this afford's fit, held-out errors and
    verdicts included; what the certificate stored beside them is not read."""
    job = MemoryJob(spec=law.workload, mode=law.mode, dim_keys=law.dim_keys,
                    base_shape=law.base_shape, runs=tuple((s.role, s.shape) for s in law.shapes),
                    attention=law.attention,
                    paths=tuple(law.paths) if law.paths is not None else None)
    env = SimpleNamespace(device_type=law.device_type, device_memory_bytes=device_memory_bytes)
    new = build_law(job, list(law.shapes), env)
    return with_replay(new, replay_model.build_replay(new))


def refit_section(section: MemorySection) -> MemorySection:
    """Every law of a stored memory section refitted (:func:`refit_law`)."""
    laws = [refit_law(law, section.device_memory_bytes) for law in section.laws]
    return section.model_copy(update={"laws": laws, "warnings": section_notes(laws)})


def exclusion(s: MemoryShape, quantity: str, device_memory: int | None) -> str | None:
    """Why a shape is left out of the fit and the validation (docs/DESIGN.md section 3, rule 3:
    only resident shapes), or ``None``."""
    if not s.ok:
        return ("out of memory: " if s.oom else "") + (s.error or "not measured")
    if (s.swap_bytes or 0) > 0:
        return f"not resident: {s.swap_bytes} B paged to swap"
    res = s.peak("reserved")
    if device_memory and res and res > device_memory:
        return f"not resident: reserved {res:.0f} B exceeds the device's {device_memory} B"
    peak = s.peak(quantity)
    if peak is None:
        return f"no peak {quantity} recorded"
    if peak <= 0:
        return f"peak {quantity} {peak:.0f} B is not above the baseline"
    return None


def usable(s: MemoryShape, quantity: str, env) -> bool:
    return exclusion(s, quantity, env.device_memory_bytes) is None


def _linearity(law: MemoryLaw, sweep: list[MemoryShape], quantity: str) -> dict:
    line = [s for s in sweep if s.dims["s"] == law.base_dims["s"]]
    if len({s.dims["B"] for s in line}) < 3:
        return {}
    r2, worst = batch_linearity([s.dims["B"] for s in line], [s.peak(quantity) for s in line])
    return {"batch_linearity_r2": r2, "batch_linearity_max_residual": worst}


def loop_effect(sweep: list[MemoryShape], qa: str, qr: str | None) -> LoopEffect | None:
    """Step 0 alone against the loop: the optimizer state created at the end of step 0 is
    resident in every later forward, so a one-step measurement understates the peak."""
    both = [s for s in sweep if s.steps >= 2]
    if not both:
        return None
    extra = [s.peak(qa) - s.peak(qa, 0) for s in both]
    budgeted = qr or qa
    growth = [s.peak(budgeted) - s.peak(budgeted, 1) for s in both]
    per_param = statistics.median(e / s.params for e, s in zip(extra, both))
    return LoopEffect(
        median_extra_bytes=statistics.median(extra), median_extra_bytes_per_param=per_param,
        median_extra_fraction=statistics.median(s.peak(qa) / s.peak(qa, 0) - 1 for s in both),
        max_growth_after_step1_bytes=max(growth),
        note=(f"a single step's peak {qa} understates the training loop's by "
              f"{per_param:.1f} B/param (median over {len(both)} shapes): the optimizer "
              "state, created at the end of step 0, is resident from step 1 on"))


def heldout(law: MemoryLaw, s: MemoryShape) -> HeldOut:
    qa, qr = quantities(law.device_type)
    params = float(s.params)
    pred = memory_law.law_bytes(law, s.dims, params)
    meas = s.peak(qa)
    res_pred = res_meas = None
    if qr and law.reserved is not None:
        res_pred = memory_law.budgeted_bytes(law, s.dims, params)
        res_meas = s.peak(qr)
    defaults, _ = sizing.defaults_for(law)
    return HeldOut(role=s.role, dims=s.dims, params=s.params,
                   extrapolated=memory_law.extrapolated(law, s.dims), measured_bytes=meas,
                   predicted_bytes=pred, error=pred / meas - 1,
                   measured_reserved_bytes=res_meas, predicted_reserved_bytes=res_pred,
                   reserved_error=(res_pred / res_meas - 1) if res_meas else None,
                   formulas={d.key: d.bytes(params, s.dims, float(s.frozen_params or 0))
                             for d in defaults})


def law_warnings(law: MemoryLaw, shapes: list[MemoryShape], device_type: str,
                 device_memory: int | None) -> list[str]:
    out = []
    targets = TARGETS[device_type]
    for f in (law.allocated, law.reserved):
        if f is not None and f.r2 < R2_WARN:
            out.append(f"the {f.quantity} law has R^2 {f.r2:.4f} < {R2_WARN}")
    for h in law.heldout:
        t = targets.get(law.allocated.quantity)
        if t is not None and abs(h.error) > t:
            out.append(f"held-out {h.role} {h.dims['B']}x{h.dims['s']}: {law.allocated.quantity} "
                       f"predicted {h.error:+.1%} off (target {t:.0%})")
        t = targets.get("reserved")
        if t is not None and h.reserved_error is not None and abs(h.reserved_error) > t:
            out.append(f"held-out {h.role} {h.dims['B']}x{h.dims['s']}: reserved predicted "
                       f"{h.reserved_error:+.1%} off (target {t:.0%})")
    for s in shapes:
        why = exclusion(s, law.allocated.quantity, device_memory)
        if why and s.role != "warmup":
            out.append(f"{s.role} {s.dims.get('B')}x{s.dims.get('s')} left out: {why}")
    missing = {r for r in HELDOUT_ROLES} - {h.role for h in law.heldout}
    if missing:
        out.append(f"held-out shapes not validated: {', '.join(sorted(missing))}")
    return out
