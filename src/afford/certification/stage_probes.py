"""The ``probes`` stage of certify: measure (child processes) -> fit (pure) -> section.

After the sweep, on the same device: one device probe child (GEMM ceilings per dtype, copy
bandwidth, and per workload the batch ladder with NVML utilisation, FLOPs of a step, a
checkpoint write). The workload probes run at each workload's smallest resident sweep point
(cheap, and where launch overhead shows most); FLOPs are also counted at the largest resident
point, where MFU is the headline. The raw results are assembled here with the pure fits of
:mod:`afford.fit.time.verdicts` (:func:`assemble_section` takes the child's events, so it is
tested without a device).

The checkpoint writes come last in the probe child, from host copies of the states: on
CUDA certify runs the memory stage's child beside them (:func:`probes_stage`).

Startup costs: every sweep child timed its own imports first thing
(:mod:`afford.measure.sweep_child`), and so does the probe child; those are the fresh-process
runs. Extra startup children (:func:`~afford.measure.probes.startup.run_startup`) are
spawned only when the sweep provided fewer than ``startup_children - 1`` runs (a stage run
without the sweep's start events, or children that failed to start). The CUDA context
creation comes from the pre-warmed sweep children (all but child 0) and the probe child.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

from afford.core.provenance import NotExecutable
from afford.fit.stats import median
from afford.fit.time.verdicts import (
    arithmetic_share,
    bound_verdict,
    ladder_fit,
    ladder_growth,
    utilisation_stats,
)
from afford.measure.children import Event, startup_run
from afford.measure.probes.protocol import probe_protocol
from afford.measure.probes.runner import run_probe_child
from afford.measure.probes.startup import run_startup
from afford.schema.cert import Environment, WorkloadResult
from afford.schema.datasheet import lookup
from afford.schema.probes_section import (
    GEMM_DTYPES,
    BoundVerdict,
    CheckpointProbe,
    CopyProbe,
    DatasheetPeaks,
    FlopCount,
    GemmProbe,
    HostCopyProbe,
    Ladder,
    ProbeProtocol,
    ProbesSection,
    Rung,
    ShapeGemm,
    ShapeGemms,
    Startup,
    StartupRun,
    UtilisationTrace,
    WorkloadProbes,
    counted_runs,
)


def probes_stage(ctx) -> dict:
    """The stage hook (:data:`afford.certification.request.Stage`). The probe child says when it
    needs the device no more (its checkpoint writes, from host copies, follow): the
    context's ``device_free`` is set then, so certify may start the next stage's child
    beside those writes, and its ``on_ceilings`` is given the GEMM ceilings measured by
    then (:func:`ceilings_of`)."""
    free = getattr(ctx, "device_free", None)
    hook = getattr(ctx, "on_ceilings", None)
    gemm: dict[str, dict] = {}

    def on_event(e: Event) -> None:
        if e.get("event") == "device_free":
            if hook is not None:
                hook(ceilings_of(gemm, [w[2] for w in ctx.plan.workloads], ctx.env))
            if free is not None:
                free.set()
            return
        if e.get("event") == "probe" and str(e.get("key", "")).startswith("gemm."):
            gemm[e["key"].removeprefix("gemm.")] = e
        ctx.on_event(e)

    return {"probes": run_probes(ctx.req, ctx.env, ctx.plan, ctx.results, on_event,
                                 sweep_runs(getattr(ctx, "sweep_starts", [])),
                                 getattr(ctx, "ahead", {}).pop("probes", None))}


def ceilings_of(gemm: dict[str, Event], modes: list[str], env: Environment) -> dict[str, float]:
    """The GEMM ceiling (FLOP/s) of each mode, from the probe child's ``gemm.<dtype>``
    events (a mode whose dtype's probe failed or did not run has none)."""
    out = {}
    for mode in modes:
        ev = gemm.get(gemm_dtype_for(mode, env)) or {}
        raw = ev.get("result")
        if isinstance(raw, dict) and "not_executable" not in ev:
            out[mode] = GemmProbe(**raw).flops_per_second
    return out


def sweep_runs(starts: list[Event]) -> list[dict]:
    """The startup runs the sweep children made (their ``start`` events), in child order."""
    runs = [startup_run(e) for e in sorted(starts, key=lambda e: e.get("child", 0))]
    return [r for r in runs if r is not None]


def extra_startup_children(protocol: ProbeProtocol, sweep: int) -> int:
    """Fresh startup children still needed: ``startup_children`` runs in all, counting the
    sweep's and the probe child's."""
    return max(0, protocol.startup_children - 1 - sweep)


def run_probes(req, env: Environment, plan, results: list[WorkloadResult],
               on_event: Callable[[Event], None] = lambda e: None,
               sweep: list[dict] | None = None, spawned=None) -> ProbesSection:
    """The section; ``spawned``: the probe child certify started ahead, if any."""
    t0 = time.perf_counter()
    protocol = probe_protocol(req.precision, env.device_type, env.device_class)
    cuda = env.device_type == "cuda"
    items = workload_items(results)
    sweep = list(sweep or [])
    extra, startup_error = _startup_runs(extra_startup_children(protocol, len(sweep)),
                                         plan.device if cuda else None, on_event)
    runs = sweep + extra
    job = {"device": plan.device, "device_class": plan.device_class, "seed": req.seed,
           "protocol": protocol.model_dump(), "workloads": [i for i in items if i["value"]],
           "checkpoint_dir": str(getattr(req, "checkpoint_dir", None) or os.getcwd())}
    events, stopped = run_probe_child(job, on_event, spawned=spawned)
    datasheet, warning = lookup(env.device_name)
    return assemble_section(protocol, env, items, results, events, stopped, runs,
                            startup_error, datasheet, [warning] if warning else [],
                            time.perf_counter() - t0)


def workload_items(results: list[WorkloadResult]) -> list[dict]:
    """Per workload: the smallest resident sweep value (ladder, checkpoint, FLOPs) and the
    largest (FLOPs); ``value`` None when no point was resident. ``flop_values``: the values
    of :func:`flop_ends` the probe child counts FLOPs at, those the sweep's first child has
    not counted already (the same counter at the same shape: :func:`sweep_flops`)."""
    items = []
    for i, r in enumerate(results):
        ends, counted = flop_ends(r), sweep_flops(r)
        items.append({"index": i, "spec": r.name, "mode": r.mode,
                      "value": ends[0] if ends else None,
                      "flop_values": [v for v in ends if v not in counted]})
    return items


def flop_ends(r: WorkloadResult) -> list[int]:
    """The smallest and the largest resident sweep value: where a step's FLOPs are given."""
    ok = sorted(p.value for p in r.points if p.usable)
    return sorted({ok[0], ok[-1]}) if ok else []


def sweep_flops(r: WorkloadResult) -> dict[int, FlopCount]:
    """The FLOPs of a step the sweep counted at its own points (child 0 counts every shape
    after timing it), as the probes' FlopCount, by sweep value."""
    out = {}
    for p in r.points:
        f = p.flops
        if p.usable and f is not None and f.error is None and f.total and f.by_op:
            out[p.value] = FlopCount(value=p.value, shape=p.shape, flops=f.total,
                                     by_op=f.by_op, counter=f.counter or "FlopCounterMode",
                                     step_seconds=p.median_seconds)
    return out


def _startup_runs(n: int, cuda_device: str | None, on_event) -> tuple[list[dict], str | None]:
    def begin(i: int) -> None:
        on_event({"event": "begin", "child": "probes", "key": f"startup {i + 1}"})

    if n <= 0:
        return [], None
    try:
        return run_startup(n, cuda_device, begin), None
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
        return [], str(exc)


def _get(events: dict, key: str, what: str, stopped: str | None) -> dict | NotExecutable:
    ev = events.get(key)
    if ev is None:
        return NotExecutable(what=what, reason=stopped or "the probe child did not run it",
                             failed=stopped is not None)
    if "not_executable" in ev:
        return NotExecutable(**ev["not_executable"])
    return ev["result"]


def gemm_dtype_for(mode: str, env: Environment) -> str:
    """The GEMM ceiling a dtype mode's matmuls run at: fp32 mode runs TF32 where the sweep's
    settings allowed it."""
    if mode != "fp32":
        return mode
    tf32 = env.tf32_matmul or env.float32_matmul_precision in ("high", "medium")
    return "tf32" if env.device_type == "cuda" and tf32 else "fp32"


def assemble_section(protocol: ProbeProtocol, env: Environment, items: list[dict],
                     results: list[WorkloadResult], events: dict, stopped: str | None,
                     startup_runs: list[dict], startup_error: str | None,
                     datasheet: DatasheetPeaks | None, warnings: list[str],
                     wall_seconds: float) -> ProbesSection:
    """The section from the child's raw events, with the pure fits applied."""
    notes = list(warnings)
    gemm = {d: _model(GemmProbe, _get(events, f"gemm.{d}", f"GEMM {d}", stopped))
            for d in GEMM_DTYPES}
    notes += _gemm_notes(gemm)
    copy = _model(CopyProbe, _get(events, "copy", "device copy bandwidth", stopped))
    host_copy = _model(HostCopyProbe, _get(events, "host_copy", "host link bandwidth "
                                           "(pinned host <-> device)", stopped))
    workloads = [_workload(it, r, env, gemm, events, stopped, protocol, notes)
                 for it, r in zip(items, results)]
    startup = _startup(startup_runs, _get(events, "startup", "startup (probe child)", stopped),
                       startup_error, env.device_type == "cuda")
    if stopped:
        notes.append(stopped)
    return ProbesSection(protocol=protocol, device=env.device_name, gemm=gemm,
                         device_copy=copy, host_copy=host_copy, workloads=workloads,
                         startup=startup,
                         datasheet=datasheet, wall_seconds=wall_seconds, warnings=notes,
                         probe_seconds={k: ev["seconds"] for k, ev in events.items()
                                        if isinstance(ev.get("seconds"), (int, float))})


def _model(cls, raw):
    return raw if isinstance(raw, NotExecutable) else cls(**raw)


def _gemm_notes(gemm: dict) -> list[str]:
    fp32, tf32 = gemm.get("fp32"), gemm.get("tf32")
    if isinstance(fp32, GemmProbe) and isinstance(tf32, GemmProbe) and \
            tf32.max_rel_error <= 10 * fp32.max_rel_error:
        return [f"TF32 may not have engaged: its error {tf32.max_rel_error:.1e} is close to "
                f"fp32's {fp32.max_rel_error:.1e}"]
    return []


def _sweep_median(r: WorkloadResult, value: int) -> float | None:
    p = next((p for p in r.points if p.value == value), None)
    return p.median_seconds if p is not None and p.usable else None


def _workload(it: dict, r: WorkloadResult, env: Environment, gemm: dict, events: dict,
              stopped: str | None, protocol: ProbeProtocol, notes: list[str]) -> WorkloadProbes:
    dtype = gemm_dtype_for(r.mode, env)
    base = dict(name=r.name, mode=r.mode, sweep_param=r.sweep_param, value=it["value"],
                gemm_dtype=dtype)
    if it["value"] is None:
        why = NotExecutable(what=f"{r.name} probes", reason=r.refused or
                            "no resident sweep point to probe at")
        return WorkloadProbes(**base, ladder=why, utilisation=why, flops=[], checkpoint=why,
                              verdict=bound_verdict())
    i = it["index"]
    ladder = _ladder(_get(events, f"w{i}.ladder", "batch ladder", stopped))
    # the x1 rung of the ladder also counts FLOPs and writes the checkpoint
    after = stopped or (f"not run: the batch ladder could not run: {ladder.reason}"
                        if isinstance(ladder, NotExecutable) else None)
    util = _utilisation(_get(events, f"w{i}.utilisation", "GPU utilisation (NVML)", after),
                        protocol)
    counted = sweep_flops(r)
    flops = [counted[v] if v in counted else
             _flop(_get(events, f"w{i}.flops.{v}", "FLOPs of a step", after), r)
             for v in flop_ends(r)]
    ckpt = _model(CheckpointProbe, _get(events, f"w{i}.checkpoint", "checkpoint write", after))
    shapes = _shape_gemms(_get(events, f"w{i}.gemm_shapes", "GEMM at the workload's shapes",
                               after), gemm, env)
    verdict = _verdict(ladder, util, flops, it["value"], gemm.get(dtype))
    for w in (ladder.warnings if isinstance(ladder, Ladder) else []):
        notes.append(f"{r.name} ({r.mode}) ladder: {w}")
    if isinstance(ckpt, CheckpointProbe) and not ckpt.verified:
        notes.append(f"{r.name} ({r.mode}): the checkpoint did not load back equal: "
                     f"{ckpt.mismatch}")
    return WorkloadProbes(**base, ladder=ladder, utilisation=util, flops=flops,
                          checkpoint=ckpt, verdict=verdict, gemm_shapes=shapes)


def _shape_gemms(raw, gemm: dict, env: Environment) -> ShapeGemms | NotExecutable:
    """The shapes with their fraction of the square probe of the dtype's ceiling (fp32
    matmuls against TF32's where the sweep allowed it)."""
    if isinstance(raw, NotExecutable):
        return raw
    timed = []
    for row in raw["timed"]:
        ceiling = gemm.get(gemm_dtype_for(row["dtype"], env))
        frac = row["flops_per_second"] / ceiling.flops_per_second \
            if isinstance(ceiling, GemmProbe) else None
        timed.append(ShapeGemm(**row, fraction_of_square=frac))
    return ShapeGemms(distinct_shapes=raw["distinct_shapes"],
                      matmul_flops_per_step=raw["matmul_flops_per_step"], timed=timed)


def _ladder(raw) -> Ladder | NotExecutable:
    if isinstance(raw, NotExecutable):
        return raw
    rungs = [Rung(**r) for r in raw["rungs"]]
    ok = [r for r in rungs if r.median_seconds and r.tokens_per_step]
    notes = [f"x{r.multiplier}: {r.error}" for r in rungs if r.error]
    if len(ok) < 2:
        notes.append(f"only {len(ok)} rung(s) timed: no fit")
        return Ladder(batch_key=raw["batch_key"], rungs=rungs, warnings=notes)
    if ok[0].multiplier != rungs[0].multiplier:
        notes.append(f"the x{rungs[0].multiplier} rung failed: the fixed share is of the "
                     f"x{ok[0].multiplier} step")
    law, fixed, share = ladder_fit([r.tokens_per_step for r in ok],
                                   [r.median_seconds for r in ok])
    return Ladder(batch_key=raw["batch_key"], rungs=rungs, law=law, fixed_seconds=fixed,
                  fixed_share=share, warnings=notes)


def _utilisation(raw, protocol: ProbeProtocol) -> UtilisationTrace | NotExecutable:
    if isinstance(raw, NotExecutable):
        return raw
    stats = utilisation_stats(raw["t_seconds"], raw["gpu"], protocol.nvml_settle_seconds,
                              protocol.low_utilisation)
    return UtilisationTrace(source=raw["source"], hz=raw["hz"],
                            settle_seconds=protocol.nvml_settle_seconds,
                            t_seconds=raw["t_seconds"], gpu=raw["gpu"], memory=raw["memory"],
                            kept=stats.kept, mean=stats.mean, low_share=stats.low_share,
                            error=raw.get("error"))


def _flop(raw, r: WorkloadResult) -> FlopCount | NotExecutable:
    if isinstance(raw, NotExecutable):
        return raw
    return FlopCount(**raw, step_seconds=_sweep_median(r, raw["value"]))


def _verdict(ladder, util, flops: list, value: int, gemm) -> BoundVerdict:
    share = ladder.fixed_share if isinstance(ladder, Ladder) else None
    growth = None
    if isinstance(ladder, Ladder):
        ok = [r for r in ladder.rungs if r.median_seconds and r.tokens_per_step]
        growth = ladder_growth([r.tokens_per_step for r in ok], [r.median_seconds for r in ok],
                               [r.timed_seconds for r in ok])
    mean = util.mean if isinstance(util, UtilisationTrace) else None
    low = util.low_share if isinstance(util, UtilisationTrace) else None
    arith = None
    f = next((f for f in flops if isinstance(f, FlopCount) and f.value == value), None)
    if f is not None and f.step_seconds and f.flops > 0 and isinstance(gemm, GemmProbe):
        arith = arithmetic_share(f.flops, gemm.flops_per_second, f.step_seconds)
    return bound_verdict(share, mean, low, arith, growth)


def _startup(runs: list[dict], child, error: str | None, cuda: bool) -> Startup | NotExecutable:
    all_runs = [StartupRun(**r) for r in runs]
    if isinstance(child, dict):
        all_runs.append(StartupRun(**child))
    if not all_runs:
        return NotExecutable(what="startup costs", reason=error or "no startup run completed",
                             failed=error is not None)
    alone = counted_runs(all_runs)
    tf = [r.import_transformers_seconds for r in alone
          if r.import_transformers_seconds is not None or not r.contended]
    cu = [r.cuda_init_seconds for r in all_runs if r.cuda_init_seconds is not None]
    return Startup(
        runs=all_runs, process_seconds=median([r.process_seconds for r in alone]),
        import_torch_seconds=median([r.import_torch_seconds for r in alone]),
        import_transformers_seconds=median(tf) if tf and None not in tf else NotExecutable(
            what="import transformers", reason="transformers is not installed here "
            "(pip install 'afford[hf]')" if None in tf else "only the first sweep child "
            "ran, which imports transformers only for a workload that needs it"),
        cuda_init_seconds=median(cu) if cuda and cu else NotExecutable(
            what="CUDA context creation", reason="certify ran on the CPU" if not cuda
            else "no run measured it"))
