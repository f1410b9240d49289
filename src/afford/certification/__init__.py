"""measure -> fit -> Certificate: the only place that sequences them (docs/DESIGN.md section 2).

:func:`certify` resolves the request (bad input fails there, before anything is timed:
:mod:`afford.certification.request`), runs the sweep's children over the sweep and the
step-time design beside it, derives each point from its raw samples and fits the throughput
law over the resident points (:mod:`afford.certification.sweep`), fits the step-time model,
extends it past the floor and re-measures noisy points once in fresh children where needed
(:mod:`afford.certification.stage_time`), then runs the stages after the sweep, one module
each, in this order:

- :mod:`afford.certification.stage_probes`: device ceilings, launch-boundness, FLOPs,
  checkpoint I/O, startup costs;
- :mod:`afford.certification.stage_memory`: the memory law, validated at held-out shapes;
- :mod:`afford.certification.stage_gates`: the gates (the init-loss gate by default) and the
  audit;
- :mod:`afford.certification.stage_sizes`: the step across model sizes (on a GPU, the
  ladder's few sizes timed inside the sweep; five of their own with ``--sizes``);
- :mod:`afford.certification.stage_levers` (opt-in): measured A/B levers;

and returns a :class:`Certificate`. Under torchrun,
:mod:`afford.certification.stage_distributed` adds the node's collectives and data-parallel
scaling before the sweep.

:func:`run` is the API's ``afford.certify(...)`` (the package root binds it under that
name): the command's flags as keyword arguments.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from afford.certification.partial import (
    failed_measurements,
    gate_failures,
    run_stage,
    sweep_failures,
)
from afford.certification.request import (
    MIN_CHILDREN,
    CertifyRequest,
    Plan,
    Stage,
    StageContext,
    build_request,
    device_defaults,
    resolve,
)
from afford.certification.stage_gates import gates_stage
from afford.certification.stage_levers import levers_stage
from afford.certification.stage_memory import memory_stage
from afford.certification.stage_probes import probes_stage
from afford.certification.stage_sizes import sizes_stage
from afford.certification.stage_time import (
    AGREEMENT,
    SEMANTICS,
    SEMANTICS_CPU,
    Registry,
    assemble_results,
    bound_by_ceilings,
    ceiling_rates,
    cert_verdict,
    child_options,
    early_round,
    refit_law,
    settle,
    settled_by_two,
)
from afford.certification.sweep import protocol_of
from afford.core.io import check_writable
from afford.fit.time.time_fit import WORK_OVER_FLOOR
from afford.measure import env as envmod
from afford.measure.children import Event, early_described, run_children, spare_child
from afford.measure.host_load import host_load, others
from afford.measure.memory_sweep import STAGGER_SECONDS, spawn_memory_child
from afford.measure.probes.runner import spawn_probe_child
from afford.measure.timeline import mark
from afford.measure.timing import rule_for
from afford.schema.cert import Certificate, save_measured
from afford.schema.time_section import HostLoad


def stages_for(req: CertifyRequest) -> list[Stage]:
    """The stages that run after the sweep, in order: device probes, the memory law, the
    gates (init loss by default), then the opt-in model sizes and levers."""
    chosen: list[tuple[bool, Stage]] = [
        (req.probes, probes_stage), (req.memory, memory_stage),
        (req.gates is not False, gates_stage), (req.sizes, sizes_stage),
        (req.levers, levers_stage)]
    return [stage for wanted, stage in chosen if wanted]


def spawners_for(req: CertifyRequest, device: str) -> dict[str, Callable[[], object]]:
    """On CUDA, the stages whose child certify starts while the sweep's last child measures
    (imports, CUDA context, cuBLAS and fused-optimizer warm-up off the critical path, as for
    the sweep's own children); none on a CPU, where a spawn would compete for the cores the
    timed steps use. Each spawner returns a :class:`~afford.measure.children.Spawned`."""
    if not device.startswith("cuda"):
        return {}
    out: dict[str, Callable[[], object]] = {}
    warm = tuple(req.workloads)
    if req.probes:
        out["probes"] = lambda: spawn_probe_child(device, overlapped=True, warm=warm)
    if req.memory:
        out["memory"] = lambda: spawn_memory_child(
            device, overlapped=True, stagger=STAGGER_SECONDS if req.probes else 0.0,
            warm=warm)
    return out


def certify(req: CertifyRequest,
            on_event: Callable[[Event], None] = lambda e: None,
            on_plan: Callable[[Plan], None] = lambda p: None) -> Certificate:
    """Measure, fit, and return the certificate (not yet written)."""
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    device = envmod.choose_device(req.device)
    req = device_defaults(req, device.type)
    env = envmod.capture(device, req.command or " ".join(sys.argv), started)
    plan = resolve(req, device.type, env.device_class, str(device),
                   described=early_described(req.workloads))
    on_plan(plan)
    rule = rule_for(req.precision)
    starts: list[Event] = []

    def tap(event: Event) -> None:
        if event["event"] == "start":
            starts.append(event)
        on_event(event)

    warm = tuple(req.workloads)  # resolved by each child spawned ahead, while it waits
    spawners = spawners_for(req, plan.device)
    if plan.designs and plan.device.startswith("cuda"):
        # a child for the step-time stage's rounds (extension, re-measure), spawned while the
        # sweep's last child measures: its start-up is then off the critical path
        spawners = {**spawners, "time": lambda: spare_child(plan.device, warm)}
    ahead: dict = {}

    def spawn_ahead() -> None:
        for name, spawn in spawners.items():
            try:
                ahead[name] = spawn()
            except OSError:  # the stage starts its own child later, and reports a failure
                pass

    cuda = device.type == "cuda"
    agree = agreement_applies(plan, req.children, cuda)
    loads = [host_load("before", (device.index or 0) if cuda else None)]
    seconds = {"setup": time.perf_counter() - t0}
    _stage(on_event, "sweep", setup_seconds=seconds["setup"])
    try:
        t0 = time.perf_counter()
        per_child = run_children(
            plan.items, children=req.children, device=plan.device,
            device_class=plan.device_class, rule=rule, seed=req.seed, on_event=tap,
            on_last=spawn_ahead if spawners else None,
            options_for=(lambda c: child_options(c, 0, req.children, cuda))
            if plan.designs else None,
            after_first=(lambda first, items: early_round(
                plan, first, items, device.type, env.device_memory_bytes, rule.floor_seconds))
            if plan.designs else None,
            after_second=(lambda done, items: settled_by_two(
                done[0], done[1], items, rule.target_rel_precision)) if agree else None,
            warm=warm)
        seconds["sweep"] = time.perf_counter() - t0
        reg = Registry()
        reg.add(per_child)
        results = assemble_results(plan, per_child, reg, env.device_memory_bytes,
                                   req.children)
        usable = any(p.usable for r in results for p in r.points)
        time_verdict = None
        if plan.designs and usable:
            t0 = time.perf_counter()
            _stage(on_event, "time")
            results, time_verdict = settle(
                results, list(plan.designs), reg,
                _rounds(req, plan, rule, cuda, on_event, ahead, warm),
                device_type=device.type,
                device_memory=env.device_memory_bytes, children=req.children,
                refit=lambda i, r: refit_law(*plan.workloads[i][:3], r))
            seconds["time"] = time.perf_counter() - t0
        spare = ahead.pop("time", None)
        if spare is not None:
            spare.kill()
        failures = sweep_failures(results)  # partial certificate, exit 3
        sections: dict = {}
        ceilings = _Ceilings(results, list(plan.designs), device.type) \
            if time_verdict is not None else None
        ctx = StageContext(req=req, env=env, plan=plan, results=results, on_event=on_event,
                           sweep_starts=starts, ahead=ahead, per_child=per_child,
                           sections=sections,
                           on_ceilings=ceilings.start if ceilings and cuda else None)
        sections.update(run_stages(stages_for(req) if usable else [], ctx, failures,
                                   seconds, on_event))
        if usable and plan.sizes and not req.sizes:  # the ladder's sizes, timed by the sweep:
            sections.update(run_stages([sizes_stage], ctx, failures, seconds, on_event))
        failures += gate_failures(sections.get("gates")) + failed_measurements(sections)
        if ceilings is not None and sections.get("probes") is not None:
            results = ceilings.join(sections["probes"])
            time_verdict = cert_verdict(results, device.type, time_verdict.remeasured_points)
    finally:
        for kid in ahead.values():  # those no stage took (one failed, or none ran)
            kid.kill()
    _stage(on_event, "done")
    loads.append(host_load("after", (device.index or 0) if cuda else None))
    ended = datetime.now(timezone.utc)
    env = env.model_copy(update={"ended_at": ended,
                                 "elapsed_seconds": max(0.0, (ended - started).total_seconds()),
                                 "stage_seconds": seconds})
    protocol = protocol_of(req, rule, device.type,
                           prewarmed=sorted(e["child"] for e in starts if e.get("prewarmed")))
    protocol = protocol.model_copy(update=_semantics(plan, req.children, cuda))
    if agree:
        protocol = protocol.model_copy(update={"agreement": AGREEMENT.format(
            tol=rule.target_rel_precision, w=WORK_OVER_FLOOR)})
    warnings = [f"{r.name} ({r.mode}): {n}" for r in results for n in r.warnings]
    warnings += _load_warnings(loads)
    return Certificate(environment=env, protocol=protocol, workloads=results,
                       warnings=warnings, time_verdict=time_verdict,
                       host_load=[HostLoad(**x) for x in loads], **sections,
                       status="partial" if failures else "complete", failures=failures)


def agreement_applies(plan: Plan, children: int, cuda: bool) -> bool:
    """Whether the children after the second skip the points the first two settled
    (:func:`afford.certification.stage_time.settled_by_two`; such a point is not profiled:
    :func:`afford.fit.time.step_sides.derive_busy`): on CUDA, with a time design and three
    children or more, and never under ``--full`` (the COSTS file's protocol: every
    point a median over three processes). On a CPU the third child is the witness that
    outvotes a child the host's load delayed."""
    return cuda and bool(plan.designs) and children > 2 and plan.precision != "full"


def run_stages(stages: list[Stage], ctx: StageContext, failures: list[str],
               seconds: dict[str, float], on_event: Callable[[Event], None]) -> dict:
    """Each stage in turn, its wall seconds in ``seconds``; the certificate fields they
    return. On CUDA the probes stage's tail, the checkpoint writes from host copies (disk
    and CPU, no device), runs beside the memory stage, whose child measures peak bytes
    (which the time of another process's disk writes does not move); the stage after the
    memory stage starts once both ended, so nothing timed on the device runs beside the
    writes. The probes' stage seconds then overlap the memory stage's."""
    sections: dict = {}
    beside: _Beside | None = None
    for k, stage in enumerate(stages):
        name = stage.__name__.removesuffix("_stage")
        t0 = time.perf_counter()
        _stage(on_event, stage.__name__)
        nxt = stages[k + 1] if k + 1 < len(stages) else None
        if stage is probes_stage and nxt is memory_stage and ctx.plan.device.startswith("cuda"):
            seconds[name] = 0.0  # its place among the stages; the thread sets its seconds
            beside = _Beside(stage, ctx, failures, seconds)
            continue
        out = run_stage(stage, ctx, failures)
        sections.update(out)
        seconds[name] = time.perf_counter() - t0
        if beside is not None:
            sections.update(beside.join())
            beside = None
    return sections


class _Beside:
    """A stage run in a thread until it sets the context's ``device_free`` (or ends): the
    caller goes on with the next stage, and joins it after that one."""

    def __init__(self, stage: Stage, ctx: StageContext, failures: list[str],
                 seconds: dict[str, float]) -> None:
        name = stage.__name__.removesuffix("_stage")
        self.free = threading.Event()
        self.out: dict = {}
        t0 = time.perf_counter()

        def run() -> None:
            try:
                self.out = run_stage(stage, ctx, failures)
            finally:
                seconds[name] = time.perf_counter() - t0
                self.free.set()

        ctx.device_free = self.free
        self.thread = threading.Thread(target=run, name=f"afford-{name}", daemon=True)
        self.thread.start()
        self.free.wait()

    def join(self) -> dict:
        self.thread.join()
        return self.out


class _Ceilings:
    """The step-time models bounded by the probes' matrix ceilings
    (:func:`afford.certification.stage_time.bound_by_ceilings`: every model fitted again, seconds
    of the parent's CPU). On CUDA the fitting starts in a thread as soon as the probe child
    has measured them and freed the device (:meth:`start`, the stage context's
    ``on_ceilings``), beside its checkpoint writes and the memory stage, whose child
    measures bytes, not time, so nothing either reads moves; :meth:`join` takes its result,
    or fits now where it did not start."""

    def __init__(self, results: list, designs: list, device_type: str) -> None:
        self.results, self.designs, self.device_type = results, designs, device_type
        self.future: Future | None = None
        self.rates: dict[str, float] | None = None

    def start(self, rates: dict[str, float]) -> None:
        if self.future is None:
            self.rates = dict(rates)
            pool = ThreadPoolExecutor(1, thread_name_prefix="afford-ceilings")
            self.future = pool.submit(self._bound, self.rates)
            pool.shutdown(wait=False)  # the one task runs on; join takes its result

    def _bound(self, rates: dict[str, float]) -> list:
        return bound_by_ceilings(self.results, self.designs, rates, self.device_type)

    def join(self, probes) -> list:
        """The bounded results: the thread's (its exception raised here) where it started
        from the ceilings the probes' section holds, else fitted now from those."""
        rates = ceiling_rates(probes)
        if self.future is not None and self.rates == rates:
            return self.future.result()
        return self._bound(rates)


def _stage(on_event: Callable[[Event], None], name: str, **fields) -> None:
    """A stage begins (``done``: the last ended): on the timeline, and to the progress as
    ``{"event": "stage", "key": "probes"}`` (the stage's short name)."""
    mark("stage", name=name, **fields)
    on_event({"event": "stage", "key": name.removesuffix("_stage")})


def _rounds(req: CertifyRequest, plan: Plan, rule, cuda: bool,
            on_event: Callable[[Event], None], ahead: dict, warm: tuple[str, ...] = ()):
    """The step-time stage's measuring (:data:`afford.certification.stage_time.RunRound`): fresh
    children numbered after the sweep's (whose children may have measured a round's shape
    already: a point's records stay one per round and child); the first takes the spare
    child spawned ahead."""

    def run_round(items: list[dict], n: int, name: str) -> list[dict]:
        first = req.children
        return run_children(
            items, children=n, device=plan.device, device_class=plan.device_class,
            rule=rule, seed=req.seed, first=first, early=False, spare=ahead.pop("time", None),
            on_event=lambda e: None if e["event"] == "start" else on_event(e), warm=warm,
            options_for=lambda c: {**child_options(c, first, n, cuda), "round": name})

    return run_round


def _semantics(plan: Plan, children: int, cuda: bool) -> dict:
    """The protocol's words on what a timed step includes, and which child did what."""
    if not plan.designs:
        return {}
    synced = 1 if cuda and children > 1 else None
    text = (SEMANTICS if cuda else SEMANTICS_CPU).format(synced=synced, flops=0)
    return {"step_semantics": text, "synced_child": synced, "flops_child": 0}


def _load_warnings(loads: list[dict]) -> list[str]:
    out = []
    for load in loads:
        procs = others(load)
        if procs:
            out.append(f"{len(procs)} other process(es) on the device {load['at']} measuring "
                       f"(pids {', '.join(str(p['pid']) for p in procs)[:200]}): their work "
                       "shares the device with the timed steps")
    return out


# ---------------------------------------------------------------- the API: afford.certify(...)


class Progress(NamedTuple):
    """One event of a certify run, for :func:`run`'s ``progress`` callback: ``event`` is
    ``"plan"`` (the sweep is resolved: ``total`` child-points to time), a child's
    ``"begin"`` (it starts ``key``), ``"point"`` (``key`` timed: ``done`` of ``total``) or
    ``"done"``, a ``"stage"`` beginning (``key``: sweep, time, probes, memory, gates, ...;
    ``done`` after the last), or a later stage's event (``"probe"``, ``"shape"``, ``"gate"``,
    ...)."""

    event: str
    key: str
    child: str
    done: int
    total: int
    elapsed_seconds: float


def run(workloads: list[str] | str | None = None, *,
        sweeps: dict[str, list[int]] | list[str] | None = None,
        modes: list[str] | str | None = None, precision: str = "adaptive",
        children: int = MIN_CHILDREN, device: str | None = None, gates: bool | None = None,
        memory: bool = True, probes: bool = True, sizes: bool = False, levers: bool = False,
        checkpoint_dir: str | Path | None = None, out: str | Path | None = None,
        overwrite: bool = False, progress: Callable[[Progress], Any] | None = None
        ) -> Certificate:
    """``afford certify`` as a function (``afford.certify(...)``): measure this box and
    return the :class:`Certificate`, written to ``out`` when given (atomically; an existing
    file only with ``overwrite``). Arguments as the command's flags (``precision``: quick,
    adaptive or full). Bad input is an InputError before anything is measured. A partial
    measurement is returned, not raised: see ``cert.status`` and ``cert.failures``; NOISY
    step times are ``cert.time_verdict``; a refused workload is its result's ``refused``.
    ``progress``: called with a :class:`Progress` for each event (e.g.
    :class:`afford.report.progress.RichProgress` draws a bar)."""
    given = {k: v for k, v in dict(workloads=workloads, sweeps=sweeps, modes=modes,
                                   precision=precision).items() if v not in (None, "adaptive")}
    req = build_request(workloads, sweeps=sweeps, modes=modes, precision=precision,
                        children=children, device=device, gates=gates, memory=memory,
                        probes=probes, sizes=sizes, levers=levers,
                        checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
                        command="afford.certify(" + ", ".join(f"{k}={v!r}" for k, v in
                                                             given.items()) + ")")
    if out is not None:
        check_writable(out, overwrite=overwrite)
    on_event, on_plan = _progress_of(progress, req.children)
    cert = certify(req, on_event=on_event, on_plan=on_plan)
    if out is not None:
        save_measured(cert, out, overwrite=overwrite)
    return cert


def _progress_of(progress: Callable[[Progress], Any] | None, children: int):
    """certify's (on_event, on_plan) that feed ``progress`` typed events."""
    if progress is None:
        return (lambda e: None), (lambda p: None)
    t0 = time.perf_counter()
    count = {"done": 0, "total": 0}

    def emit(event: str, key: str = "", child: Any = "") -> None:
        progress(Progress(event, str(key), str(child), count["done"], count["total"],
                          time.perf_counter() - t0))

    def on_plan(plan: Plan) -> None:
        count["total"] = len(plan.items) * children
        emit("plan")

    def on_event(e: Event) -> None:
        if e.get("event") == "point":
            count["done"] += 1
        emit(str(e.get("event", "")), e.get("key", e.get("what", "")), e.get("child", ""))

    return on_event, on_plan

