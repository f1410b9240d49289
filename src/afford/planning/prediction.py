"""``afford predict``: a workload's warm step, tokens per second, steps per chunk and memory
at any (batch, seq), from a certificate.

Every figure is the plan's own at that shape: the step is measured where the certificate
timed that very shape, else the step-time model's prediction (FITTED, extrapolated beyond
the shapes it measured), else, for a certificate without a step-time model, the throughput
law where only the sweep parameter differs (:func:`afford.figures.time_figures.step_at`),
with its band where the host can bound the step (steps per chunk then at the band's slow
end, tokens per second with the band's two ends);
memory the measured peaks there or the memory law; steps per chunk and residency as in a
plan's chunk table (:func:`afford.planning.chunk.chunk_row`), against a platform's chunk and
budget when one is given.
Pure: the command line loads the files.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from afford.core.errors import InputError
from afford.core.provenance import Tagged, module, run_label
from afford.core.published_constants import MEMORY_FRACTION
from afford.figures import cert_lookup
from afford.figures import memory_figures as fm
from afford.figures import time_figures as ft
from afford.figures.memory_at import MemoryAnswer
from afford.planning import chunk as chunkmod
from afford.planning import planner
from afford.planning.derive import derive, num
from afford.planning.result import ChunkRow, MemoryBudget
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.memory_section import MemoryLaw
from afford.schema.platform import Platform

PREDICT_SCHEMA = "afford.predict/1"


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", populate_by_name=True)


class PredictRow(_Frozen):
    """One workload at the asked shape."""

    workload: str
    mode: str
    shape: dict[str, int]
    row: ChunkRow | None = Field(description="the chunk-table row at the shape (None: the "
                                 "workload has no batch and sequence dimensions)")
    tokens_per_second: Tagged | None = None
    step_why: str = ""
    memory_why: str = ""
    time_verdict: str | None = None
    memory: MemoryAnswer | None = Field(None, description="the one memory answer at the shape "
                                        "(afford.figures.memory_at), as afford size "
                                        "prints it")


class PredictResult(_Frozen):
    schema_id: Literal["afford.predict/1"] = Field(PREDICT_SCHEMA, alias="schema")
    certificate_device: str
    platform: str | None
    batch: int
    seq: int
    memory: MemoryBudget | None
    chunk_seconds: Tagged | None
    rows: tuple[PredictRow, ...]
    time_verdict: Literal["OK", "NOISY", "MISSED", "UNJUDGED"] | None = None
    noisy: tuple[str, ...] = ()
    noisy_rule: str = ""
    certificate_warnings: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def predict(cert: Certificate, *, batch: int, seq: int, workloads: list[str] | None = None,
            mode: str | None = None, platform: Platform | None = None,
            memory_fraction: float | None = None, alloc_conf: str = "") -> PredictResult:
    """The figures of each workload (default: every one in the certificate, in ``mode``
    where given) at (``batch``, ``seq``). A workload whose memory the certificate measured
    in ``mode`` but whose step time it did not gets a row of memory only, saying so.
    ``alloc_conf``: the run's ``PYTORCH_CUDA_ALLOC_CONF``, as ``afford size`` takes it (the
    two read one memory answer)."""
    if batch < 1 or seq < 1:
        raise InputError("--batch and --seq must be positive whole numbers")
    g = planner._Gather()
    results = _results(cert, workloads, mode)
    memory = _budget(cert, platform, memory_fraction, g)
    chunk = _chunk(platform)
    rows = tuple(_row(cert, r, batch, seq, memory, chunk, alloc_conf)
                 if isinstance(r, WorkloadResult) else
                 _memory_row(cert, r, batch, seq, memory, chunk, alloc_conf)
                 for r in results)
    notes = []
    if platform is None:
        notes.append("no platform given (--platform): steps per chunk need its session cap")
    elif chunk is None:
        notes.append(f"platform {platform.name} has no session cap: no chunk")
    if platform is not None and platform.device is not None and \
            platform.device.matches(cert_lookup.device_name(cert)) is False:
        notes.append("the certificate's device is not the platform's: every time here is the "
                     "certificate's device's")
    if memory is None:
        notes.append("device memory unknown: residency not judged")
    return PredictResult(certificate_device=cert_lookup.device_name(cert),
                         platform=platform.name if platform else None, batch=batch, seq=seq,
                         memory=memory, chunk_seconds=chunk, rows=rows,
                         time_verdict=ft.verdict_label(cert), noisy=tuple(ft.noisy_reasons(cert)),
                         noisy_rule=ft.noisy_rule(cert),
                         certificate_warnings=tuple(ft.time_warnings(cert)),
                         assumptions=tuple(dict.fromkeys(g.assumptions)), notes=tuple(notes))


def _results(cert: Certificate, workloads: list[str] | None, mode: str | None
             ) -> list[WorkloadResult | MemoryLaw]:
    """The timed results asked for; where ``mode`` names a mode the memory stage measured
    and the time sweep did not, the memory law in its place."""
    if workloads:
        return [_timed_or_law(cert, w, mode) for w in workloads]
    got = [r for r in cert.workloads if mode is None or r.mode == mode]
    if not got and mode is not None:
        got = [x for x in fm.laws(cert) if x.mode == mode]
    if not got:
        have = ", ".join(sorted({r.mode for r in cert.workloads})) or "none"
        raise InputError(f"the certificate has no workload in mode {mode}; its modes: {have}")
    return got


def _timed_or_law(cert: Certificate, name: str, mode: str | None
                  ) -> WorkloadResult | MemoryLaw:
    try:
        return ft.find_workload(cert, name, mode)
    except InputError:
        law = fm.law_or_none(cert, name, mode) if mode is not None else None
        if law is None:
            raise
        return law


def _memory_row(cert: Certificate, law: MemoryLaw, batch: int, seq: int,
                memory: MemoryBudget | None, chunk: Tagged | None, alloc_conf: str
                ) -> PredictRow:
    """A workload the memory stage measured in this mode and the time sweep did not: its
    memory answer, and the time side saying plainly that this mode's time was not
    measured."""
    timed = sorted({r.mode for r in cert.workloads if r.name == law.workload})
    why = (f"{law.mode} time was not measured: the certificate timed {law.workload} in "
           f"{', '.join(timed)} only (its memory stage measured {law.mode})" if timed else
           f"{law.mode} time was not measured: the certificate's time sweep has no "
           f"{law.workload} (its memory stage measured it)")
    shape = {**law.base_shape, law.dim_keys["B"]: batch, law.dim_keys["s"]: seq}
    ans = fm.memory_answer(cert, law.workload, shape, law.mode, alloc_conf,
                           memory.budget_bytes if memory else None)
    row = chunkmod.chunk_row(workload=law.workload, mode=law.mode, sweep_param=law.dim_keys["s"],
                             value=seq, step=None, mem=ans, memory=memory, chunk_seconds=chunk,
                             is_run=True,
                             tokens_per_step=module(batch * seq, "tokens", "batch x seq"),
                             note=why)
    return PredictRow(workload=law.workload, mode=law.mode, shape=shape, row=row,
                      step_why=why, memory=ans)


def _budget(cert, platform: Platform | None, fraction: float | None, g) -> MemoryBudget | None:
    if platform is not None:
        matches = platform.device.matches(cert_lookup.device_name(cert)) if platform.device \
            else None
        device = planner._device_memory(cert, platform, matches)
        frac = platform.budget_fraction.tagged()
    else:
        device = cert_lookup.device_memory(cert)
        if device is None:
            return None
        frac = module(MEMORY_FRACTION, "ratio", "afford's default memory fraction")
    if fraction is not None:
        frac = module(fraction, "ratio", "--memory-fraction")
    return chunkmod.memory_budget(device, frac)


def _chunk(platform: Platform | None) -> Tagged | None:
    if platform is None:
        return None
    cap, margin = platform.session_cap.tagged(), platform.margin.tagged()
    if cap.value is None:
        return None
    return derive(num(cap) - num(margin), "s", "session cap - margin", cap, margin)


def _row(cert: Certificate, r: WorkloadResult, batch: int, seq: int,
         memory: MemoryBudget | None, chunk: Tagged | None, alloc_conf: str = ""
         ) -> PredictRow:
    bk, sk = ft.shape_keys(r)
    verdict = r.time.verdict.label if r.time is not None and r.time.verdict else None
    if bk is None or sk is None:
        return PredictRow(workload=r.name, mode=r.mode, shape={}, row=None,
                          step_why=f"{r.name} has no batch and sequence dimensions (its sweep "
                          f"parameter is {r.sweep_param})", time_verdict=verdict)
    fam = ft.family_shape(r) or {}
    shape = {**fam, bk: batch, sk: seq}
    at = ft.step_at(cert, r.name, shape, r.mode)
    where = f"{r.name} {r.mode} at {ft.shape_label(shape)}, {run_label(cert)}"
    ans = fm.memory_answer(cert, r.name, shape, r.mode, alloc_conf,
                           memory.budget_bytes if memory else None)
    tokens = None
    if at.point is not None and at.point.tokens_per_step is not None:
        tokens = module(at.point.tokens_per_step, "tokens", f"the workload's tokens per step, "
                        f"{where}")
    tokens = tokens or ft.tokens_at(r, shape)
    mem_why = "" if ans is not None else \
        f"no memory law for {r.name} ({r.mode}) in the certificate and the shape not measured"
    row = chunkmod.chunk_row(workload=r.name, mode=r.mode, sweep_param=r.sweep_param,
                             value=shape.get(r.sweep_param, seq), step=at.step, mem=ans,
                             memory=memory, chunk_seconds=chunk, is_run=True,
                             tokens_per_step=tokens, note=at.why)
    tps = tokens_per_second(tokens, at.step)
    return PredictRow(workload=r.name, mode=r.mode, shape=shape, row=row,
                      tokens_per_second=tps, step_why=at.why, memory_why=mem_why,
                      time_verdict=verdict, memory=ans)


def tokens_per_second(tokens: Tagged | None, step: Tagged | None) -> Tagged | None:
    """tokens per step / step seconds; a banded step gives the band tokens / high ..
    tokens / low beside it."""
    if step is None or tokens is None:
        return None
    tps = derive(num(tokens) / num(step), "tokens/s", "tokens per step / step seconds",
                 tokens, step)
    if step.band is None:
        return tps
    return tps.with_band(num(tokens) / step.high, num(tokens) / step.low)
