"""What makes a certificate partial, and how certify keeps what it measured when a part fails:
certify exits 3 when a workload ends with no usable point or a gate cannot be evaluated, and
writes the partial certificate (status partial) in every failure case.

- :func:`sweep_failures`: a workload (not refused: a refusal is bad input, exit 2) that
  ends with no usable point: every point failed, ran out of memory or was excluded;
- :func:`run_stage`: a stage after the sweep that raises is recorded as a failure and
  certify goes on to the next one; the measurement so far is kept;
- :func:`gate_failures`: a gate that could not be evaluated because its readings failed
  (not one that cannot run on this box by design, e.g. CPU/CUDA parity without CUDA);
- :func:`failed_measurements`: a probe, child or audit run of a stage that was attempted
  and failed (e.g. a full disk under the checkpoint probe, a stopped memory child).

Certify writes each into ``Certificate.failures`` with ``status="partial"``; the command
line writes the certificate and exits 3.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from afford.core.provenance import NotExecutable
from afford.schema.cert import WorkloadResult
from afford.schema.determinism_section import GatesSection


def sweep_failures(results: list[WorkloadResult]) -> list[str]:
    """One line per workload that ended with no usable point, with its points' reasons,
    and one per child that died or was stopped by the watchdog (a SIGSTOP, a hang) even
    where a fresh child measured its points again: the measurement went wrong there."""
    out = []
    for r in results:
        ended = dict.fromkeys(c.replaced for p in r.points + r.design_points
                              for c in p.children if c.replaced)
        out += [f"workload {r.name} ({r.mode}): {why}; its unfinished points were measured "
                "again in a fresh child"[:1500] for why in ended]
        if r.refused or any(p.usable for p in r.points):
            continue
        reasons = sorted({p.excluded_reason or "not timed" for p in r.points})
        out.append(f"workload {r.name} ({r.mode}): no usable point of {len(r.points)}: "
                   + "; ".join(reasons)[:1500])
    return out


def failed_measurements(sections: dict) -> list[str]:
    """One line per measurement of the stages' sections that was attempted and failed
    (a :class:`~afford.core.provenance.NotExecutable` with ``failed``: a child that died or was
    stopped, a probe that raised, a full disk under the checkpoint probe), as against one
    that cannot run on this device by design. The gates are judged by
    :func:`gate_failures`."""
    out: dict[str, None] = {}
    for name, section in sections.items():
        if name != "gates":
            for ne in _not_executables(section):
                if ne.failed:
                    out[f"{name}: {ne.what}: {ne.reason}"[:1500]] = None
    return list(out)


def _not_executables(obj: object) -> Iterator[NotExecutable]:
    if isinstance(obj, NotExecutable):
        yield obj
    elif isinstance(obj, BaseModel):
        for field in type(obj).model_fields:
            yield from _not_executables(getattr(obj, field))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _not_executables(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _not_executables(x)


def run_stage(stage, ctx, failures: list[str]) -> dict:
    """The stage's certificate fields; ``{}`` and a line in ``failures`` when it raised (an
    interrupt still ends the run)."""
    name = stage.__name__.removesuffix("_stage")
    try:
        return stage(ctx)
    except Exception as exc:  # noqa: BLE001 - any failure of a stage: the sweep is kept
        failures.append(f"stage {name} failed: {type(exc).__name__}: {exc}"[:2000])
        return {}


def gate_failures(gates: GatesSection | None) -> list[str]:
    """One line per gate that could not be evaluated: no row passed or failed, and a row
    is NOT EXECUTABLE because its measurement failed."""
    if gates is None:
        return []
    out = []
    for g in gates.gates:
        failed = [r for r in g.rows if r.not_executable is not None and r.not_executable.failed]
        if g.status == "NOT EXECUTABLE" and failed:
            out.append(f"gate {g.name} could not be evaluated: {failed[0].label}: "
                       f"{failed[0].not_executable.reason}"[:1000])
    return out
