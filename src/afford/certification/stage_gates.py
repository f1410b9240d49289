"""measure -> evaluate for the determinism audit and the gates, for ``afford gate`` and for
the certify stage: the measuring is in :mod:`afford.measure.determinism` and
:mod:`afford.measure.gate_runs`, the evaluation (pure) in :mod:`afford.fit.gates`.

Shapes: the audit, the noise floor and the parameter counts use each workload's smallest
default sweep value for the device class (a modest shape: a few seconds per workload on a
large GPU, tiny on a CPU) unless the caller names values; the init-loss gate covers every
value (forward passes only, cheap); CPU/CUDA parity uses the CPU class's smallest shape on
both devices (it compares numerics, not scale).

In ``afford certify`` the gates stage runs, by default, only the init-loss gate over the
certified shapes with the run's seed, and measures nothing: the sweep's children already
ran step 0 of every point from that seed and kept its loss (the parent process, which
otherwise would create a CUDA context and build every shape again, stays off the device).
``--gates`` adds two more seeds, the audit (two child processes: about 20-30 s on
a large GPU, more on a CPU), parity, the noise floor and the user gates; ``--no-gates``
skips the stage. The default certify on a large GPU must stay near a minute, so the
expensive part is opt-in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from afford.certification.request import default_mode, workload_values
from afford.core.errors import InputError
from afford.core.units import UnitError, whole
from afford.fit.gates import GateContext, GateSettings, evaluate, verdict
from afford.fit.stats import median
from afford.measure import determinism as audit
from afford.measure import gate_runs
from afford.measure.env import choose_device, cpu_model
from afford.measure.env import device_class as class_of
from afford.schema.determinism_section import (
    DeterminismSection,
    GateReadings,
    GatesSection,
    InitLossReading,
)
from afford.workloads import resolve
from afford.workloads.base import Workload

MAX_REPEATS = 1000  # determinism audit repeats (the default is 8)
MAX_NOISE_STEPS = 100_000  # steps per noise-floor run (the default is 16)

Event = dict


@dataclass
class GateRequest:
    """What to check. Empty ``workloads``: the built-in default set. ``values``: sweep
    values per workload for the init-loss gate (default: ``sweeps`` by sweep parameter as in
    certify's ``--sweep``, else the default sweep); the smallest is the shape of the audit
    and the noise floor. ``pairs``: workloads compared as equals
    (the matched-parameters gate). ``full=False`` runs the init-loss gate only."""

    workloads: list[str] = field(default_factory=list)
    device: str | None = None
    values: dict[str, list[int]] = field(default_factory=dict)
    sweeps: dict[str, list[int]] = field(default_factory=dict)  # by sweep parameter, or n
    modes: dict[str, str] = field(default_factory=dict)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    settings: GateSettings = field(default_factory=GateSettings)
    audit: bool = True
    full: bool = True
    seed: int = 0


@dataclass(frozen=True)
class GateOutcome:
    determinism: DeterminismSection | None
    gates: GatesSection


@dataclass(frozen=True)
class _Resolved:
    device: torch.device
    device_class: str
    device_name: str
    workloads: list[tuple[str, Workload, str, list[int]]]  # (spec, workload, mode, values)


def resolve_request(req: GateRequest) -> _Resolved:
    """Check every name before any time is spent; InputError otherwise."""
    try:  # whole numbers in a range a run can finish: 10**20 repeats never would
        whole(req.settings.repeats, "--repeats (the audit needs at least 2)", low=2,
              high=MAX_REPEATS)
        whole(req.settings.noise_steps, "--steps (at least 1 step)", low=1,
              high=MAX_NOISE_STEPS)
        whole(req.seed, "--seed", low=0, high=2**32 - 1)
    except UnitError as exc:
        raise InputError(str(exc)) from None
    device = choose_device(req.device)  # InputError for anything but cpu / an available cuda
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        dclass, name = class_of("cuda", props.total_memory), props.name
    else:
        dclass, name = "cpu", cpu_model() or "cpu"
    mode = default_mode(device.type)
    out = [(spec, w, req.modes.get(spec) or mode, sorted(values))
           for spec, w, values in workload_values(req.workloads, req.sweeps, dclass, req.values)]
    for a, b in req.pairs:
        for spec in (a, b):
            resolve(spec, dclass)
    return _Resolved(device=device, device_class=dclass, device_name=name, workloads=out)


def run_gates(req: GateRequest, on_event: Callable[[Event], None] = lambda e: None
              ) -> GateOutcome:
    """Measure, evaluate, and return the sections (the audit's is ``None`` when not run)."""
    r = resolve_request(req)
    s = req.settings
    on_event({"event": "gate", "what": "init-loss"})
    readings = GateReadings(init_loss=gate_runs.init_losses(r.workloads, s.seeds, r.device))
    section, user = None, []
    if req.full:
        readings = _full_readings(req, r, readings, on_event)
        if req.audit:
            items = [{"workload": spec, "value": values[0], "mode": mode}
                     for spec, _, mode, values in r.workloads]
            section = audit.run_audit(items, device=str(r.device), device_class=r.device_class,
                                      repeats=s.repeats, seed=req.seed, on_event=on_event)
        on_event({"event": "gate", "what": "user gates"})
        user = gate_runs.user_gate_outcomes(GateContext(
            device=str(r.device), workloads=tuple(w[0] for w in r.workloads), seed=req.seed))
    gates = evaluate(readings, s, pairs=req.pairs, determinism=section, user=user)
    return GateOutcome(determinism=section, gates=GatesSection(
        device=str(r.device), device_name=r.device_name, torch_version=torch.__version__,
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        readings=readings, gates=gates, verdict=verdict(gates)))


def sweep_init_losses(results, seed: int) -> list[InitLossReading]:
    """The init-loss readings a certify sweep already made. Every child times step 0 of
    every point with the run's seed (the same weights, the same first batch) and keeps its
    loss; per point the reading is the median of the children's. A workload whose loss is
    not a cross-entropy (no vocab) gives one reading without a loss, as
    :func:`afford.measure.gate_runs.init_losses` does."""
    out: list[InitLossReading] = []
    for r in results:
        for p in r.points:
            if p.excluded_reason and p.excluded_reason.startswith("refused"):
                continue  # not a measurement: the workload refused the shape (exit 2)
            base = {"workload": r.name, "value": p.value, "seed": seed, "mode": r.mode}
            losses = [c.first_loss for c in p.children if c.first_loss is not None]
            if not losses:
                out.append(InitLossReading(**base, error=p.excluded_reason or "no child "
                                           "finished step 0"))
                continue
            if p.vocab is None:
                out.append(InitLossReading(**base))
                break
            out.append(InitLossReading(**base, vocab=p.vocab, loss=median(losses)))
    return out


def sweep_gates(ctx) -> GatesSection:
    """The default gate section of certify: the init-loss gate over the sweep's readings."""
    ctx.on_event({"event": "gate", "what": "init-loss"})
    settings = GateSettings(seeds=(ctx.req.seed,))
    readings = GateReadings(init_loss=sweep_init_losses(ctx.results, ctx.req.seed))
    gates = evaluate(readings, settings)
    return GatesSection(device=ctx.plan.device, device_name=ctx.env.device_name,
                        torch_version=torch.__version__,
                        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
                        readings=readings, gates=gates, verdict=verdict(gates))


def _full_readings(req: GateRequest, r: _Resolved, readings: GateReadings,
                   on_event: Callable[[Event], None]) -> GateReadings:
    s = req.settings
    on_event({"event": "gate", "what": "cpu-cuda-parity"})
    cpu_items = [(spec, resolve(spec, "cpu")) for spec, _, _, _ in r.workloads]
    parity, not_exec = gate_runs.parity(
        [(spec, w, min(w.default_sweep("cpu"))) for spec, w in cpu_items], req.seed,
        cuda=r.device if r.device.type == "cuda" else None)
    on_event({"event": "gate", "what": "noise-floor"})
    noise = gate_runs.noise_floor([(spec, w, mode, values[0])
                                   for spec, w, mode, values in r.workloads],
                                  r.device, s.noise_steps, req.seed, req.seed + 1)
    params = gate_runs.param_counts(_pair_items(req.pairs, r), req.seed)
    return readings.model_copy(update={"parity": parity, "parity_not_executable": not_exec,
                                       "noise_floor": noise, "params": params})


def _pair_items(pairs: list[tuple[str, str]], r: _Resolved) -> list[tuple[str, Workload, int]]:
    """Each workload named in a pair, at the shape of its audit (smallest value)."""
    selected = {spec: (w, values[0]) for spec, w, _, values in r.workloads}
    items = []
    for spec in dict.fromkeys(x for pair in pairs for x in pair):
        if spec in selected:
            items.append((spec, *selected[spec]))
        else:
            w = resolve(spec, r.device_class)
            items.append((spec, w, min(w.default_sweep(r.device_class))))
    return items


def gates_stage(ctx) -> dict:
    """The certify stage (``afford.certification.request.StageContext`` in, certificate fields out):
    by default the init-loss gate over the certified shapes with the run's seed, read from
    the sweep (:func:`sweep_init_losses`: nothing runs again); with ``--gates`` three seeds
    measured afresh, the audit and every other gate."""
    full = bool(getattr(ctx.req, "gates", None))
    if not full:
        return {"gates": sweep_gates(ctx)}
    first: dict[str, tuple[str, list[int]]] = {}
    for spec, _, mode, values in ctx.plan.workloads:
        first.setdefault(spec, (mode, values))
    settings = GateSettings() if full else GateSettings(seeds=(ctx.req.seed,))
    req = GateRequest(workloads=list(first), device=ctx.plan.device,
                      values={k: v for k, (_, v) in first.items()},
                      modes={k: m for k, (m, _) in first.items()}, full=full, audit=full,
                      settings=settings, seed=ctx.req.seed)
    outcome = run_gates(req, ctx.on_event)
    fields = {"gates": outcome.gates}
    if outcome.determinism is not None:
        fields["determinism"] = outcome.determinism
    return fields
