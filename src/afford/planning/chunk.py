"""The chunk: what one session-capped stretch of training holds (docs/DESIGN.md section 4).

- chunk = session cap - margin;
- startup = the sum of its components (measured where this box can measure them, assumed
  where it cannot); the margin must cover it: margin / startup is reported as "covers Nx";
- steps per chunk = floor(chunk seconds / step seconds), at a banded step's slow end (a
  host-bound step: the floor differs from process to process), the band beside it;
- memory: the one memory answer at the shape (:mod:`afford.figures.memory_at`: measured
  there, else the allocator replay, else the workload's own memory law; docs/DESIGN.md
  section 3, rule 4: residency is decided by reserved memory), judged against
- budget = device memory x budget fraction: fits yes, likely (extrapolated, with room for
  its plausible error), uncertain or no.
"""

from __future__ import annotations

from collections.abc import Sequence

from afford.core.provenance import Tag, Tagged
from afford.figures.memory_at import MemoryAnswer
from afford.planning.derive import derive, floor_div, num
from afford.planning.result import Chunk, ChunkRow, MemoryBudget, Startup, StartupComponent


def startup(components: Sequence[StartupComponent]) -> Startup:
    """Total and restart cost (the components paid before step 1) of a session's startup,
    and its measured floor (the MEASURED components alone, COSTS 3.1), so that what was
    assumed is seen apart from what this box measured."""
    total = sum(num(c.seconds) for c in components)
    restart = sum(num(c.seconds) for c in components if not c.final)
    names = " + ".join(c.name for c in components) or "nothing"
    before = " + ".join(c.name for c in components if not c.final) or "nothing"
    meas = [c for c in components if c.seconds.tag is Tag.MEASURED]
    floor = derive(sum(num(c.seconds) for c in meas), "s", "measured floor: " + " + ".join(
        c.name for c in meas), *(c.seconds for c in meas)) if meas else None
    return Startup(components=tuple(components),
                   total_seconds=derive(total, "s", f"startup: {names}",
                                        *(c.seconds for c in components)),
                   restart_seconds=derive(restart, "s", f"restart: {before}",
                                          *(c.seconds for c in components if not c.final)),
                   measured_seconds=floor)


def chunk(cap: Tagged, margin: Tagged, start: Startup) -> Chunk:
    """chunk = cap - margin, and how many times the margin covers the startup.

    Without a session cap (``cap.value is None``) there is no chunk: the run is one session.
    """
    if cap.value is None:
        return Chunk(cap_seconds=cap, margin_seconds=margin, chunk_seconds=None,
                     startup=start, margin_covers=None, covered=None)
    c = num(cap) - num(margin)
    if c <= 0:
        raise ValueError(f"margin {num(margin)} s leaves no chunk of a {num(cap)} s cap")
    total = num(start.total_seconds)
    covers = derive(num(margin) / total, "x", "margin / startup total", margin,
                    start.total_seconds) if total > 0 else None
    return Chunk(cap_seconds=cap, margin_seconds=margin,
                 chunk_seconds=derive(c, "s", "session cap - margin", cap, margin),
                 startup=start, margin_covers=covers, covered=total <= num(margin))


def slow_end(step: Tagged) -> float:
    """The step a plan counts on: a band's high end (a host-bound step: the floor differs
    from process to process, and the chunk must hold the steps of a slow one), else the
    figure."""
    return step.high if step.band is not None else num(step)


def steps_per_chunk(chunk_seconds: Tagged | None, step: Tagged | None) -> Tagged | None:
    """floor(chunk seconds / step seconds): whole steps only, a partial step counts nothing.
    A banded step plans with its slow end (:func:`slow_end`), the band's fast end giving the
    most steps a fast process would fit beside it."""
    if chunk_seconds is None or step is None:
        return None
    return _per(num(chunk_seconds), step, "steps", "chunk seconds", chunk_seconds)


def steps_per_hour(step: Tagged | None) -> Tagged | None:
    if step is None:
        return None
    return _per(3600.0, step, "steps/h", "3600 s")


def _per(span: float, step: Tagged, unit: str, what: str, *inputs: Tagged) -> Tagged:
    """floor(span / step) at the step's slow end, with the band floor(span / high) ..
    floor(span / low) where the step is a band."""
    at = " at the band's slow end" if step.band is not None else ""
    out = derive(floor_div(span, slow_end(step)), unit, f"floor({what} / step seconds{at})",
                 *inputs, step)
    if step.band is None:
        return out
    return out.with_band(floor_div(span, step.high), floor_div(span, step.low))


def memory_budget(device_memory: Tagged, fraction: Tagged) -> MemoryBudget:
    """budget = device memory x budget fraction (bytes, floored to a whole byte)."""
    budget = int(num(device_memory) * num(fraction))
    return MemoryBudget(device_memory_bytes=device_memory, fraction=fraction,
                        budget_bytes=derive(budget, "B", "device memory x budget fraction",
                                            device_memory, fraction))


def chunk_row(*, workload: str, mode: str, sweep_param: str, value: int,
              step: Tagged | None, mem: MemoryAnswer | None, memory: MemoryBudget | None,
              chunk_seconds: Tagged | None, is_run: bool = False,
              tokens_per_step: Tagged | None = None, params: Tagged | None = None,
              excluded: str | None = None, note: str = "") -> ChunkRow:
    """One row of the chunk table; the run's row adds tokens per chunk and parameters.
    ``mem``: the memory answer at the row's shape, judged against ``memory``'s budget
    (None: the certificate says nothing of it); without a budget whether it fits is not
    judged."""
    spc = steps_per_chunk(chunk_seconds, step)
    tpc = None
    if is_run and spc is not None and tokens_per_step is not None:
        tps = int(num(tokens_per_step))
        tpc = derive(int(num(spc)) * tps, "tokens", "steps per chunk x tokens per step", spc,
                     tokens_per_step)
        if spc.band is not None:
            tpc = tpc.with_band(int(spc.low) * tps, int(spc.high) * tps)
    judged = mem is not None and memory is not None and mem.fits is not None
    return ChunkRow(workload=workload, mode=mode, sweep_param=sweep_param, value=value,
                    is_run=is_run, step_seconds=step, steps_per_chunk=spc,
                    steps_per_hour=steps_per_hour(step),
                    allocated_bytes=mem.allocated if mem else None,
                    projected_reserved_bytes=mem.figure if mem else None,
                    budget_share=mem.share if judged else None,
                    fits=mem.fits_bool if judged else None,
                    fits_level=mem.fits if judged else None,
                    memory_source=mem.source if mem else None,
                    memory_extrapolated=bool(mem and mem.extrapolated),
                    memory_reasons=mem.reasons if mem else (),
                    memory_why=mem.fits_why if judged else "",
                    memory_settle=mem.settle if judged else None,
                    tokens_per_step=tokens_per_step if is_run else None,
                    tokens_per_chunk=tpc, params=params, excluded=excluded, note=note)
