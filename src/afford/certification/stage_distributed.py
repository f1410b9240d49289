"""``afford certify --distributed`` under torchrun: the node's certificate, written by rank 0.

The distributed counterpart of :mod:`afford.certification` (which it calls for the sweep). Order:

1. every rank checks the request (bad input fails on every rank before anything starts),
   binds ``cuda:LOCAL_RANK`` (or the CPU) and joins the group torchrun prepared;
2. the distributed stages, all ranks together, in process (torchrun already made the
   processes): ``collectives`` (all-reduce, all-gather, reduce-scatter over sizes), ``ddp``
   and ``fsdp`` (tinylm at world sizes 1..N). After each stage every rank's raw readings go
   to rank 0 (``gather_object``); rank 0 keeps them per rank;
3. the group is closed and the ranks other than 0 exit;
4. rank 0 alone runs the usual single-device sweep (child processes on ``cuda:0`` or the
   CPU), unless ``--dist-only``, and writes ONE certificate: the sweep's workloads plus the
   ``distributed`` section.

Why the sweep comes last, on rank 0 only: its children need the device to themselves
(docs/DESIGN.md section 3, rule 2), and ranks parked in a collective for the minutes a sweep takes
would need a timeout longer than the sweep, which would blunt the dead-rank detection that
every collective's timeout gives. After step 3 no rank waits on anyone.

A failure in step 2 (a rank that dies, hangs past ``--dist-timeout``, or is stopped by
torchrun because another died) makes rank 0 write a partial certificate: status
``partial``, the error, which stages each rank reported finished (torchrun's store), and
the stages every rank finished. The command then exits 3.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import torch

from afford.certification import certify
from afford.certification.request import CertifyRequest, default_mode, resolve
from afford.certification.sweep import protocol_of
from afford.core.errors import InputError, MeasurementError
from afford.core.provenance import NotExecutable
from afford.core.units import UnitError, bounded
from afford.fit.nodes.collectives_fit import algbw, busbw, busbw_factor, fit_alpha_beta
from afford.fit.nodes.dp_scaling import efficiency, exposed_comm_share, fit_world_size_law
from afford.fit.stats import median
from afford.measure import env as envmod
from afford.measure.distributed import collectives as coll
from afford.measure.distributed import ddp
from afford.measure.distributed import runtime as rtm
from afford.measure.timing import rule_for
from afford.schema.cert import Certificate
from afford.schema.distributed_section import (
    STAGES,
    CollectivePoint,
    CollectivesSection,
    DistributedSection,
    DPRun,
    DPStrategy,
    RankInfo,
)

DEFAULT_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class DistOptions:
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    dist_only: bool = False


@dataclass(frozen=True)
class DistOutcome:
    """Rank 0: the certificate (whole or partial) and the error, if any. Other ranks:
    ``cert`` is ``None`` (they write nothing)."""

    rank: int
    cert: Certificate | None
    error: str | None = None


def _check_request(req: CertifyRequest, launch: rtm.Launch, opts: DistOptions):
    try:  # every collective's timeout: at least a second, at most a week
        bounded(opts.timeout_seconds, "--dist-timeout", low=1.0, high=7 * 86400.0,
                low_open=False)
    except UnitError as exc:
        raise InputError(f"{exc}: the seconds a collective may wait") from None
    device = rtm.choose_device(launch, req.device)
    memory = torch.cuda.get_device_properties(device).total_memory \
        if device.type == "cuda" else envmod.host_memory_bytes()
    device_class = envmod.device_class(device.type, memory)
    resolve(req, device.type, device_class, str(device))
    mode = req.modes[0] if req.modes else default_mode(device.type)
    return device_class, mode


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:600]


def _run_stage(rt: rtm.Runtime, stage: str, ccfg, dcfg) -> dict:
    if stage == "collectives":
        return coll.sweep(rt, ccfg)
    return ddp.scaling(rt, dcfg, stage)


def measure_node(rt: rtm.Runtime, ccfg, dcfg, on_stage=lambda s: None
                 ) -> tuple[list | None, dict[str, list], str | None]:
    """The stages on every rank: (rank infos, per-stage per-rank payloads, failure).
    Only rank 0 gets the gathered lists; the failure is this rank's error text."""
    infos, data, failure = None, {}, None
    stage = "start"
    rtm.mark(rt, "info", rtm.rank_info(rt))
    with rtm.launcher_signals() as guard:
        try:
            infos = rtm.gather(rt, rtm.rank_info(rt))
            for stage in STAGES:
                on_stage(stage)
                rtm.maybe_fail(rt, stage)
                local = _run_stage(rt, stage, ccfg, dcfg)
                rtm.mark(rt, f"done/{stage}")
                data[stage] = rtm.gather(rt, local)
        except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then re-raised as exit 3
            guard.protect = guard.failed = True
            failure = (f"{_describe(exc)} [in stage {stage!r}; every collective waits at "
                       f"most {rt.timeout.total_seconds():g} s (--dist-timeout)]")
            rtm.mark(rt, "error", failure)
        guard.protect = True
    return infos, data, failure


def certify_distributed(req: CertifyRequest, opts: DistOptions = DistOptions(),
                        on_stage=lambda s: None, sweep=certify) -> DistOutcome:
    """Run on every rank under torchrun. See the module docstring for the order."""
    launch = rtm.require_launch()
    device_class, mode = _check_request(req, launch, opts)
    started = datetime.now(timezone.utc)
    rt = rtm.start(launch, opts.timeout_seconds, req.device)
    ccfg = coll.config_for(rt.device.type, req.precision)
    dcfg = ddp.config_for(device_class, mode, req.precision, req.seed)
    infos, data, failure = measure_node(rt, ccfg, dcfg, on_stage)
    if not rt.is_root:
        if failure:
            raise MeasurementError(f"rank {rt.rank}: {failure}")
        rtm.stop(rt)
        return DistOutcome(rt.rank, None)
    section = assemble_section(rt, infos, data, failure, ccfg, req.precision)
    if failure:
        cert = _bare_certificate(req, rt.device, started, section,
                                 ["the distributed stages failed; the sweep was not run"])
        return DistOutcome(0, cert, _failure_message(section))
    rtm.stop(rt)
    return DistOutcome(0, _with_sweep(req, opts, rt.device, started, section, sweep))


def _failure_message(section: DistributedSection) -> str:
    lines = []
    for r in section.ranks:
        if r.rank in section.ranks_finished:
            continue
        last = r.stages_finished[-1] if r.stages_finished else "start"
        why = "the error above" if r.rank == 0 else (
            r.error or "reported no error of its own: it died or hung")
        lines.append(f"rank {r.rank} stopped after {last!r} ({why})")
    return (f"the distributed run failed on rank 0 with {section.error}; ranks finished: "
            f"{section.ranks_finished or 'none'}; " + "; ".join(lines))


def _with_sweep(req, opts, device, started, section, sweep) -> Certificate:
    if opts.dist_only:
        return _bare_certificate(req, device, started, section,
                                 ["--dist-only: the single-device sweep was not run; this "
                                  "certificate holds the distributed section only"])
    try:
        cert = sweep(replace(req, device=str(device)))
    except MeasurementError as exc:
        return _bare_certificate(req, device, started, section,
                                 [f"the single-device sweep failed: {exc}"])
    env = cert.environment.model_copy(update={
        "started_at": started,
        "elapsed_seconds": max(0.0, (cert.environment.ended_at - started).total_seconds())})
    return cert.model_copy(update={"environment": env, "distributed": section,
                                   "warnings": cert.warnings + _dist_warnings(section)})


def _bare_certificate(req, device, started, section, notes: list[str]) -> Certificate:
    """A certificate without sweep points (``workloads`` empty); its protocol block is the
    rule that was requested."""
    env = envmod.capture(device, req.command or " ".join(sys.argv), started)
    ended = datetime.now(timezone.utc)
    elapsed = max(0.0, (ended - started).total_seconds())  # the wall clock may step back
    env = env.model_copy(update={"ended_at": ended, "elapsed_seconds": elapsed})
    rule = rule_for(req.precision)
    return Certificate(environment=env, protocol=protocol_of(req, rule, device.type),
                       workloads=[], distributed=section,
                       warnings=notes + _dist_warnings(section))


def _dist_warnings(section: DistributedSection) -> list[str]:
    return [f"distributed: {w}" for w in section.warnings]


# -- assembly: raw per-rank payloads -> the section (no device work) ---------------------------

def assemble_section(rt: rtm.Runtime, infos, data: dict[str, list], failure: str | None,
                     ccfg, precision: str) -> DistributedSection:
    ranks = _ranks(rt, infos, data, failure)
    finished = [r.rank for r in ranks if len(r.stages_finished) == len(STAGES)]
    coll_section = assemble_collectives(data["collectives"], rt.world_size, rt.backend, ccfg) \
        if "collectives" in data else None
    dp = [assemble_dp(data[s]) for s in ("ddp", "fsdp") if s in data]
    warnings = list(coll_section.warnings) if coll_section else []
    for s in dp:
        warnings.extend(f"{s.strategy}: {w}" for w in s.warnings)
    if rt.world_size == 1:
        warnings.append("world size 1: the collectives move no data between ranks; bus "
                        "bandwidth and the ring model need at least 2 ranks")
    hosts = {r.hostname for r in ranks if r.hostname}
    return DistributedSection(
        status="partial" if failure else "complete", error=failure, backend=rt.backend,
        world_size=rt.world_size, local_world_size=rt.launch.local_world_size,
        nodes=max(1, len(hosts)), timeout_seconds=rt.timeout.total_seconds(),
        precision=precision, env_flags=rt.env_flags, torch_version=torch.__version__,
        ranks=ranks, ranks_finished=finished, collectives=coll_section, data_parallel=dp,
        warnings=warnings)


def _ranks(rt: rtm.Runtime, infos, data, failure) -> list[RankInfo]:
    out = []
    for r in range(rt.world_size):
        info = (infos[r] if infos else None) or rtm.read_mark(rt, r, "info") or {"rank": r}
        if rt.store is not None:
            done = [s for s in STAGES if rtm.read_mark(rt, r, f"done/{s}")]
        else:  # no store: only what was gathered from everyone is known
            done = [s for s in STAGES if s in data]
        err = failure if r == 0 else rtm.read_mark(rt, r, "error")
        out.append(RankInfo(**info, stages_finished=done, error=err))
    return out


def assemble_collectives(payloads: list[dict], n: int, backend: str, ccfg) -> CollectivesSection:
    """Per-rank samples -> points (slowest rank's median), bandwidths, alpha-beta fits."""
    points = []
    for k, p0 in enumerate(payloads[0]["points"]):
        rank_secs = [pl["points"][k]["seconds"] for pl in payloads]
        meds = [median(s) for s in rank_secs]
        t = max(meds)
        points.append(CollectivePoint(
            op=p0["op"], bytes=p0["bytes"], world_size=n, iters_per_sample=p0["iters"],
            rank_seconds=rank_secs, rank_medians=meds, seconds=t,
            algbw_bytes_per_second=algbw(p0["bytes"], t),
            busbw_factor=busbw_factor(p0["op"], n),
            busbw_bytes_per_second=busbw(p0["op"], n, p0["bytes"], t) if n > 1 else None))
    fits, notes = [], []
    for op in dict.fromkeys(p.op for p in points):
        mine = [p for p in points if p.op == op]
        if len(mine) >= 2:
            fit = fit_alpha_beta(op, n, [p.bytes for p in mine], [p.seconds for p in mine])
            fits.append(fit)
            notes.extend(fit.warnings)
    seen, not_exec = set(), []
    for pl in payloads:
        for ne in pl["not_executable"]:
            if ne["what"] not in seen:
                seen.add(ne["what"])
                not_exec.append(NotExecutable(**ne))
    return CollectivesSection(
        world_size=n, backend=backend, dtype="float32", clock=payloads[0]["clock"],
        warmup_calls=ccfg.warmup_calls, samples=ccfg.samples,
        sample_seconds=ccfg.sample_seconds, sizes_bytes=payloads[0]["sizes"], points=points,
        fits=fits, not_executable=not_exec, warnings=notes)


def _dp_run(recs: list[dict]) -> DPRun:
    r0 = recs[0]
    meds = [median(r["seconds"]) for r in recs]
    t = max(meds)
    nos = [r["nosync_seconds"] for r in recs] if "nosync_seconds" in r0 else None
    tn = max(median(s) for s in nos) if nos else None
    return DPRun(
        strategy=r0["strategy"], world_size=r0["world_size"], mode=r0["mode"],
        shape=r0["shape"], params=r0["params"], grad_bytes=r0["grad_bytes"],
        tokens_per_step_per_rank=r0["tokens_per_step"], step_indices=r0["indices"],
        rank_step0_seconds=[r["step0"] for r in recs],
        rank_first_loss=[r["first_loss"] for r in recs],
        rank_seconds=[r["seconds"] for r in recs], rank_medians=meds, step_seconds=t,
        nosync_step_indices=r0.get("nosync_indices", []), rank_nosync_seconds=nos,
        nosync_step_seconds=tn,
        exposed_comm_share=exposed_comm_share(t, tn) if tn is not None else None,
        rank_peak_allocated_bytes=[r.get("peak_allocated_bytes") for r in recs],
        rank_peak_reserved_bytes=[r.get("peak_reserved_bytes") for r in recs],
        rank_peak_rss_bytes=[r.get("peak_rss_bytes") for r in recs],
        memory_source=r0.get("memory_source"))


def assemble_dp(payloads: list[dict]) -> DPStrategy:
    """Per-rank records of one strategy -> runs by world size, efficiency, the law."""
    strategy = payloads[0]["strategy"]
    runs = []
    for i in range(max(len(pl["runs"]) for pl in payloads)):
        recs = [pl["runs"][i] for pl in payloads if i < len(pl["runs"]) and pl["runs"][i]]
        if recs and len(recs) == recs[0]["world_size"]:
            runs.append(_dp_run(sorted(recs, key=lambda r: r["rank"])))
    errors = [pl["error"] for pl in payloads if pl.get("error")]
    specific = [e for e in errors if not e.startswith("failed on another rank")] or errors
    ne = None
    if specific:
        done = [r.world_size for r in runs]
        ne = NotExecutable(what=f"{strategy} (measured at world sizes {done or 'none'})",
                           reason=specific[0])
    notes = []
    eff: list[float] = []
    law = None
    if runs and runs[0].world_size == 1:
        eff = [efficiency(runs[0].step_seconds, r.step_seconds) for r in runs]
    if len(runs) >= 2:
        law = fit_world_size_law([r.world_size for r in runs], [r.step_seconds for r in runs])
        notes.extend(law.warnings)
    return DPStrategy(strategy=strategy, runs=runs, efficiency=eff, law=law,
                      not_executable=ne, warnings=notes)
