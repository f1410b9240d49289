"""What the loop guard reads off a plan: the chunk, the save cadence, the final save's time and
the predicted warm step of the run (all seconds, SI).

The plan is ``afford plan --json`` (``afford.plan/1``) or ``afford preflight --json``
(``afford.preflight/1``, whose ``plan`` is used), read as plain JSON so that the guard does not
need torch, pydantic or the planner; or it is made here from a certificate, a platform and a
run through :func:`afford.planning.planner.plan` (the same function ``afford plan`` calls).

Keys read (:mod:`afford.planning.result`): ``chunk.chunk_seconds`` (``null``: no session cap),
``cadence.save_every`` and ``cadence.write_seconds`` (``null`` cadence: no run, or no step
time), the startup component ``final_save`` when the cadence is missing, and the
``step_seconds`` of the row with ``is_run`` (the run's own shape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afford.core.errors import InputError
from afford.core.io import read_json
from afford.core.units import MAX_SECONDS, UnitError, bounded, whole

PLAN_SCHEMAS = ("afford.plan/1", "afford.preflight/1")


@dataclass(frozen=True)
class Budget:
    """The guard's inputs. ``None``: the plan has no such figure (and ``notes`` say so)."""

    chunk_seconds: float | None  # session cap - margin; None: no cap, never stop for it
    save_every: int | None  # steps between periodic saves; None: no periodic saves
    write_seconds: float  # one checkpoint write (the final save)
    step_seconds: float | None  # the certificate's warm step at the run's shape
    step_source: str = ""  # where step_seconds comes from
    step_tag: str = ""  # its provenance tag in the plan (MEASURED where certify timed it)
    tokens_per_step: int | None = None  # the run's tokens per optimizer step
    run: str = "run"  # the run's name (the plan's run.name), for the ledger and the marker
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("chunk_seconds", "write_seconds", "step_seconds"):
            v = getattr(self, name)
            if v is not None and (not math.isfinite(v) or v < 0):
                raise InputError(f"budget {name} = {v!r}: give a finite number of seconds >= 0")
        for name in ("save_every", "tokens_per_step"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InputError(f"budget {name} = {v!r}: give a count >= 1")


def load_plan(path: str | Path) -> Budget:
    """The budget of a plan (or preflight) JSON file; InputError naming the file and fault."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such plan (write one with `afford plan CERT --platform P "
                         "--run RUN --json > plan.json`)")
    return budget_from_plan(read_json(p), str(p))


def plan_from_files(cert: str | Path, platform: str | Path, run: str | Path) -> dict:
    """The plan of certificate + platform + run, as the JSON ``afford plan --json`` prints."""
    from afford.planning import planner
    from afford.schema.cert import load_certificate
    from afford.schema.platform import load_platform
    from afford.schema.run import load_run

    result = planner.plan(load_certificate(cert), load_platform(str(platform)), load_run(run))
    return result.model_dump(mode="json", by_alias=True)


def budget_from_plan(doc: Any, where: str = "plan") -> Budget:
    """The budget of a plan document (a dict as ``afford plan --json`` prints it)."""
    if isinstance(doc, dict) and doc.get("schema") == "afford.preflight/1":
        doc = doc.get("plan")
    if not isinstance(doc, dict) or doc.get("schema") != "afford.plan/1":
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{where}: not an afford plan (schema {got!r}; expected one of "
                         f"{', '.join(PLAN_SCHEMAS)})")
    notes: list[str] = []
    chunk = _section(doc, "chunk", where, required=True)
    chunk_s = _value(chunk, "chunk_seconds", where + ": chunk")
    if chunk_s is None:
        notes.append("the plan has no session cap: the guard never stops the loop for one")
    cadence = _section(doc, "cadence", where)
    save_every = write = None
    if cadence is None:
        notes.append("the plan has no checkpoint cadence (no run, or no step time): no "
                      "periodic saves")
    else:
        save_every = _value(cadence, "save_every", where + ": cadence")
        write = _value(cadence, "write_seconds", where + ": cadence")
    if write is None:
        write = _final_save(chunk, where)
    step, source, tag, tokens = _run_step(doc, where)
    if step is None:
        notes.append("the plan has no step time for the run: live steps are not compared "
                      "with a prediction")
    run = (doc.get("run") or {}).get("name") if isinstance(doc.get("run"), dict) else None
    return Budget(chunk_seconds=_seconds(chunk_s, where, "chunk_seconds"),
                  save_every=None if save_every is None else _count(save_every, where),
                  write_seconds=_seconds(write, where, "write_seconds") or 0.0,
                  step_seconds=_seconds(step, where, "step_seconds"), step_source=source,
                  step_tag=tag, tokens_per_step=tokens, run=str(run or "run"),
                  notes=tuple(notes))


def resolve_budget(plan: Any = None, cert: Any = None, platform: Any = None, run: Any = None,
                   budget: Budget | None = None) -> Budget:
    """The budget of exactly one of: a plan (path or dict), cert + platform + run, a
    :class:`Budget`; InputError otherwise."""
    given = sum(x is not None for x in (plan, budget)) + (cert is not None)
    if given != 1:
        raise InputError("give the guard one of: plan= (a plan JSON), cert= with platform= and "
                         "run=, or budget=")
    if budget is not None:
        return budget
    if cert is not None:
        if platform is None or run is None:
            raise InputError("cert= needs platform= and run= too (the plan is made from all "
                             "three)")
        return budget_from_plan(plan_from_files(cert, platform, run), f"plan of {cert}")
    if isinstance(plan, dict):
        return budget_from_plan(plan)
    return load_plan(plan)


def _section(doc: dict, key: str, where: str, required: bool = False) -> dict | None:
    sec = doc.get(key)
    if sec is None and not required:
        return None
    if not isinstance(sec, dict):
        raise InputError(f"{where}: the plan's {key!r} section is missing or not an object")
    return sec


def _value(section: dict, key: str, where: str) -> Any:
    """A Tagged figure's value (``{"value": ..., "tag": ...}``) or a bare number; None."""
    fig = section.get(key)
    if isinstance(fig, dict):
        if "value" not in fig:
            raise InputError(f"{where}.{key}: a figure without a value")
        return fig["value"]
    return fig


def _final_save(chunk: dict, where: str) -> float | None:
    comps = ((chunk.get("startup") or {}).get("components")) or []
    for c in comps:
        if isinstance(c, dict) and c.get("name") == "final_save":
            return _value(c, "seconds", where + ": chunk.startup.final_save")
    return None


def _run_step(doc: dict, where: str) -> tuple[float | None, str, str, int | None]:
    """(step seconds, its source, its tag, tokens per step) of the run's row."""
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise InputError(f"{where}: the plan's 'rows' is missing or not a list")
    for row in rows:
        if isinstance(row, dict) and row.get("is_run"):
            fig = row.get("step_seconds")
            label = f"{row.get('workload')} {row.get('mode')} {row.get('sweep_param')}=" \
                    f"{row.get('value')}"
            tokens = _tokens(_value(row, "tokens_per_step", where))
            if isinstance(fig, dict):
                return (_value(row, "step_seconds", where), str(fig.get("source") or label),
                        str(fig.get("tag") or ""), tokens)
            return None, label, "", tokens
    return None, "", "", None


def _tokens(v: Any) -> int | None:
    """Tokens per step, or None where the plan gives none (or none that is a count)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
            v < 1 or v != int(v):
        return None
    return int(v)


def _seconds(v: Any, where: str, key: str) -> float | None:
    if v is None:
        return None
    try:
        return bounded(v, f"{where}: {key}", high=MAX_SECONDS, low_open=False)
    except UnitError as exc:
        raise InputError(f"{exc}: not a number of seconds") from None


def _count(v: Any, where: str) -> int:
    try:
        return whole(v, f"{where}: cadence.save_every")
    except UnitError as exc:
        raise InputError(f"{exc}: not a step count") from None
