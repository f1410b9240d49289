"""The guard's figures after a step, for a framework's log or the user's own logger: each a
:class:`Metric` with its name under ``afford/``, its value, unit and provenance tag.

======================================  ======  ========  =================================
name                                    unit    tag       what
======================================  ======  ========  =================================
``afford/step``                                 MEASURED  the step's global index
``afford/step_seconds``                 s       MEASURED  the step's wall time
``afford/warm_median_seconds``          s       MEASURED  live median of recent warm steps
``afford/predicted_step_seconds``       s       the plan  the certificate's step for the run
``afford/drift``                        ratio   MODULE    warm median / predicted - 1
``afford/tokens_per_second``            1/s     MODULE    the run's tokens per step / median
``afford/session_seconds``              s       MEASURED  since the process started
``afford/chunk_seconds_left``           s       MODULE    the chunk (cap - margin) left
``afford/next_save_step``                       MODULE    the next step that saves
``afford/last_saved_step``                      MEASURED  the last save confirmed
``afford/stop``                                 MODULE    1 once the guard said stop
======================================  ======  ========  =================================

A figure the session cannot give (no prediction, no cap, no warm step yet) is left out, never
written as 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

PREFIX = "afford/"


class Metric(NamedTuple):
    name: str
    value: float
    unit: str
    tag: str


def metrics_of(s: object) -> Iterator[Metric]:
    """The figures of session ``s`` (an :class:`afford.track.Session`) after its last step;
    nothing before its first."""
    if not s.indices:
        return
    b = s.budget
    yield Metric(PREFIX + "step", s.indices[-1], "", "MEASURED")
    yield Metric(PREFIX + "step_seconds", s.seconds[-1], "s", "MEASURED")
    med = s.warm_median
    if med is not None:
        yield Metric(PREFIX + "warm_median_seconds", med, "s", "MEASURED")
    if b.step_seconds:
        yield Metric(PREFIX + "predicted_step_seconds", b.step_seconds, "s",
                     b.step_tag or "INHERITED")
    if s.drift is not None:
        yield Metric(PREFIX + "drift", s.drift, "ratio", "MODULE")
    if med and b.tokens_per_step:
        yield Metric(PREFIX + "tokens_per_second", b.tokens_per_step / med, "1/s", "MODULE")
    elapsed = s.elapsed()
    yield Metric(PREFIX + "session_seconds", elapsed, "s", "MEASURED")
    if b.chunk_seconds is not None:
        yield Metric(PREFIX + "chunk_seconds_left", b.chunk_seconds - elapsed, "s", "MODULE")
    nxt = s.next_save_step()
    if nxt is not None:
        yield Metric(PREFIX + "next_save_step", nxt, "", "MODULE")
    if s.last_saved is not None:
        yield Metric(PREFIX + "last_saved_step", s.last_saved, "", "MEASURED")
    yield Metric(PREFIX + "stop", 1 if s.stopped_at is not None else 0, "", "MODULE")
