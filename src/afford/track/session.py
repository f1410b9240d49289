"""The loop guard: a few lines in the user's own training loop.

::

    guard = afford.track.Session(plan="plan.json", ledger="history.tsv")
    if guard.resume_step > 0:
        load(f"ckpt-{guard.resume_step - 1}.pt")          # the last confirmed save
    for step in range(guard.resume_step, total_steps):
        ...train...
        guard.step(step, loss=loss)      # step index, its seconds, peak memory
        if guard.should_save(step): save(step)            # save_every from the plan
        if guard.should_stop(): save(step); guard.saved(step); break   # before the cap
    guard.close()

What it keeps (docs/DESIGN.md section 3, rule 1): every step's index and seconds (the time
between two ``step`` calls, so data loading counts; a save's time falls into the step after
it, which is kept apart as ``after-save``; the guard's own bookkeeping is kept out), with the
session's first step (allocation, compilation) and the warm-up apart from the warm steps.
The warm median over a recent window is compared with the certificate's prediction for the
run; a difference beyond ``drift_tol`` is a warning in ``warnings`` and on the
``afford.track`` logger. :meth:`Session.readings` gives the figures after each step for a
logger (:mod:`afford.track.metrics`). At every confirmed save the readings of the steps since
the save before go to the history ledger (:mod:`afford.track.readings`) before the marker
names the save, the rest at the close: a killed session's readings up to its last save are
kept. (The first flush imports the ledger module, which takes a sizeable fraction of a
second; that and every flush are kept out of the step times, not out of the session's
elapsed time.)

When to stop: after each step, with ``t`` the seconds since the *process* started (its
imports count against the session cap; ``elapsed_seconds=`` overrides it, e.g. with the
time a notebook's machine has been up), ``est`` the larger of the live warm median and the
planned step, ``w`` the larger of the planned and the slowest observed checkpoint write, and
``safety`` (default: the larger of the slowest recent warm step and ``est``, plus a quarter
of ``w``, for a write slower than any seen)::

    stop  when  t (+ w if a save is asked and not yet written) + est (+ w if the next step
                saves) + w + safety > chunk seconds

so one more step and the final save end within the chunk (the session cap less its margin).

The resume marker (:mod:`afford.track.marker`) names the last *completed* save. In the plain
loop (``confirm="call"``) a save is complete when its call returns: a periodic save is
confirmed by the ``should_stop`` call that follows it (which also times it), else by the next
``step``; the final save at :meth:`saved`, :meth:`close` (or the end of a ``with`` block), or
when the interpreter exits without an uncaught exception. The framework callbacks use
``confirm="explicit"``: only :meth:`saved`, called from the framework's own after-save hook,
confirms. A kill during a save leaves the marker at the save before, so a kill loses at most
one save interval. Keep the last two checkpoints (the plan's ``checkpoints_kept``) and load
the one of step ``resume_step - 1`` (its path is ``resume_checkpoint`` where the loop named
it in :meth:`saved`). The next session reports how this one ended (:attr:`previous`).

The guard never raises into the loop for its own bookkeeping: a marker, step-log or ledger
write that fails (a full disk) is a warning, and ``resume_saved`` says whether the marker
holds the last confirmed save. No torch import here: torch is read from ``sys.modules`` when
the loop has imported it, for ``max_memory_allocated`` on CUDA.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import resource
import statistics
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from afford.core.errors import InputError
from afford.track import marker as mk
from afford.track.budget import Budget, resolve_budget
from afford.track.ending import EXIT, describe, process_age_seconds
from afford.track.metrics import Metric, metrics_of
from afford.track.readings import AFTER_SAVE, FIRST, WARM, WARMUP
from afford.track.session_files import SessionFiles
from afford.track.warm_window import WarmWindow

log = logging.getLogger("afford.track")
MARKER_SCHEMA = mk.SCHEMA
KINDS = ("first", "warm-up", "warm", "after-save")
WINDOW = 101  # recent warm steps the live median is taken over
MIN_DRIFT_STEPS = 10  # warm steps before drift is judged (after every warm step from then)
CONFIRM = ("call", "explicit")


class Session(SessionFiles):
    """The loop guard. Give a plan (path or dict), or ``cert`` + ``platform`` + ``run``, or a
    :class:`Budget`. ``clock`` returns seconds (injectable for tests). ``elapsed_seconds``:
    session time already spent when the guard is made; None (the default) counts from the
    process's start. ``confirm``: ``"call"`` (the plain loop: the loop's next call after a
    save confirms it) or ``"explicit"`` (only :meth:`saved` does: framework callbacks).
    ``writes``: False on the other ranks of a data-parallel job (they read the marker and
    time their steps, but write no marker, step log or ledger)."""

    def __init__(self, plan: str | Path | dict | None = None, *, cert: str | Path | None = None,
                 platform: str | Path | None = None, run: str | Path | None = None,
                 budget: Budget | None = None, ledger: str | Path | None = None,
                 marker: str | Path | None = "afford-resume.json",
                 clock: Callable[[], float] = time.monotonic, drift_tol: float = 0.10,
                 warmup_steps: int = 2, safety_seconds: float | None = None,
                 elapsed_seconds: float | None = None, command: str | None = None,
                 confirm: str = "call", writes: bool = True) -> None:
        self.budget = resolve_budget(plan, cert, platform, run, budget)
        if not 0 < drift_tol < 10:
            raise InputError(f"drift_tol {drift_tol!r}: give a fraction such as 0.10")
        if confirm not in CONFIRM:
            raise InputError(f"confirm {confirm!r}: give one of {', '.join(CONFIRM)}")
        self.drift_tol, self.warmup_steps, self.safety_seconds = drift_tol, warmup_steps, \
            safety_seconds
        self.confirm, self.command = confirm, command
        self.marker = Path(marker) if marker is not None else None
        self.writes = bool(writes)
        self.ledger = Path(ledger) if ledger is not None and self.writes else None
        self.warnings: list[str] = list(self.budget.notes)
        self._warned: set[str] = set()
        self._clock = clock
        now = clock()
        self._t0 = now - self._elapsed_at_start(elapsed_seconds)
        self._last = now
        self.indices, self.seconds = array("q"), array("d")
        self.kinds, self.peak_bytes = array("b"), array("q")
        self._recent = WarmWindow(WINDOW)
        self._n = 0
        self._pending: int | None = None  # a save asked for and not yet confirmed
        self._asked_at: float | None = None  # clock when the save was asked
        self._after_save = False
        self.write_observed: list[float] = []
        self.stopped_at: float | None = None  # session seconds when should_stop said yes
        self.last_loss: Any = None
        self.bookkeeping_seconds = 0.0  # marker, step log and ledger: kept out of step times
        self.resume_saved = True  # False while the marker misses the last confirmed save
        self._flushed_pos = 0
        self.flushed_step: int | None = None
        self._drift_warned = 0
        self._cuda: Any = None
        self._closed = False
        self._crashed = False
        self._error = ""
        self._steplog: mk.StepLog | None = None
        self._started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for what, path in (("marker", self.marker), ("ledger", self.ledger)):
            if self.writes and path is not None and not path.parent.is_dir():
                raise InputError(f"{what}={path}: the folder {path.parent} does not exist")
        self._resume_from(mk.read(self.marker, self.budget.run) if self.marker else None)
        if self.writes and self.marker is not None:
            self._start_files()
        self._hook_exit()

    # ---------------------------------------------------------------- the loop's calls

    def step(self, step: int, loss: Any = None) -> None:
        """The end of training step ``step`` (its global index): record it."""
        now = self._clock()
        dt = now - self._last
        self._last = now
        n = self._n = self._n + 1
        kind = FIRST if n == 1 else WARMUP if n <= 1 + self.warmup_steps else \
            AFTER_SAVE if self._after_save else WARM
        self.indices.append(step)
        self.seconds.append(dt)
        self.kinds.append(kind)
        self.peak_bytes.append(self._peak(n))
        self.last_loss = loss
        if self._pending is not None and self.confirm == "call":  # no should_stop after it
            median = self._recent.median
            if median is not None and self._asked_at is not None:
                self.write_observed.append(max(0.0, dt - median))
            self._confirm(self._pending)
        if kind == WARM:
            self._warm(dt)
        elif kind == AFTER_SAVE:
            self._after_save = False
        if self._steplog is not None:
            self._record_step(step, n, now)

    def should_save(self, step: int) -> bool:
        """True every ``save_every`` steps (after steps save_every - 1, 2 save_every - 1, ...)."""
        every = self.budget.save_every
        if every is None or (step + 1) % every:
            return False
        self._asked(step, self._clock())
        return True

    def should_stop(self) -> bool:
        """True when one more step and the final save would not end within the chunk; then
        the loop should save and stop. In the plain loop, called after a periodic save it
        confirms that save and times it."""
        if self.stopped_at is not None:
            return True
        now = self._clock()
        if self._pending is not None and self._asked_at is not None and self.confirm == "call":
            self.write_observed.append(now - self._asked_at)
            self._confirm(self._pending)
            now = self._clock()
        chunk = self.budget.chunk_seconds
        if chunk is None or self._n == 0:
            return False
        elapsed = now - self._t0
        est = self.step_estimate()
        write = self.write_estimate()
        unwritten = write if self._pending is not None else 0.0
        upcoming = est + (write if self._next_saves() else 0.0)
        safety = self.safety_seconds if self.safety_seconds is not None else \
            max(self._recent.slowest, est) + 0.25 * write
        if elapsed + unwritten + upcoming + write + safety <= chunk:
            return False
        self.stopped_at = elapsed
        self._asked(self.indices[-1], now)
        log.info("afford.track: stop after step %d at %.1f s of the %.1f s chunk (next step "
                 "%.3g s, final save %.3g s)", self.indices[-1], elapsed, chunk, est, write)
        return True

    def stop_now(self, why: str) -> None:
        """A stop after the last step that this guard did not decide (``why``: e.g. another
        rank's guard reached the cap first): recorded as the session's stop, as if
        :meth:`should_stop` had said yes, so its final save is asked and the marker ends
        ``stopped``, not ``finished``. Nothing before the first step, or once stopped."""
        if self.stopped_at is not None or not self.indices:
            return
        now = self._clock()
        self.stopped_at = now - self._t0
        self._asked(self.indices[-1], now)
        log.info("afford.track: stop after step %d at %.1f s: %s", self.indices[-1],
                 self.stopped_at, why)

    def saved(self, step: int, checkpoint: str | os.PathLike | None = None) -> None:
        """Confirm that the checkpoint of ``step`` is completely written (``checkpoint``: its
        path, recorded in the marker for the next session's ``resume_checkpoint``). In the
        plain loop optional (the next call confirms); in ``confirm="explicit"`` the only
        confirmation."""
        now = self._clock()
        if self._pending is not None and step >= self._pending and self._asked_at is not None:
            self.write_observed.append(max(0.0, now - self._asked_at))
        self._confirm(step, None if checkpoint is None else os.fspath(checkpoint))

    def close(self) -> None:
        """Confirm a requested save (plain loop, no exception in flight), append the
        remaining readings to the ledger, and record how the session ended in the marker;
        idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._at_exit)
        crashed = self._crashed or EXIT.crashed
        if crashed and not self._error:
            self._error = EXIT.error
        if self._pending is not None and not crashed and self.confirm == "call":
            self._confirm(self._pending)
        self._flush(len(self.indices), final=True)
        self._write_marker("crashed" if crashed else
                           "stopped" if self.stopped_at is not None else "finished")
        if self._steplog is not None:
            self._steplog.close()
            self._steplog = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._crashed = True  # a save in flight is not confirmed
            self._error = describe(exc_type, exc)
        self.close()

    def readings(self) -> Iterator[Metric]:
        """The figures after the last step, for a logger: ``afford/step``,
        ``afford/drift``, ``afford/chunk_seconds_left``, ... (:mod:`afford.track.metrics`),
        each a :class:`~afford.track.metrics.Metric` (name, value, unit, tag)."""
        return metrics_of(self)

    def adopt(self, step: int, checkpoint: str | os.PathLike | None = None) -> bool:
        """The framework resumed from a complete checkpoint of ``step`` that the marker does
        not name yet (the kill came after the framework had written it, before the marker
        was): the marker names it now and the previous session's report is corrected. False,
        and nothing changes, when ``step`` is not newer than the marker's save."""
        if self.last_saved is not None and step <= self.last_saved:
            return False
        if self.previous is not None:
            self.previous = replace(self.previous, last_saved_step=step,
                                    saved_session=self.previous.session)
            log.warning("afford.track: resumed from the checkpoint of step %d, newer than the "
                        "marker's: %s", step, self.previous.line())
        self.last_saved, self.resume_step = step, step + 1
        self._saved_session = self.previous.session if self.previous else None
        self.checkpoint = self.resume_checkpoint = \
            None if checkpoint is None else os.fspath(checkpoint)
        self._write_marker("running")
        return True

    def mark_loop_start(self) -> None:
        """The training loop starts now: the first step's time counts from here (the
        callbacks call it when the framework's loop begins)."""
        if self._n == 0:
            self._last = self._clock()

    # ---------------------------------------------------------------- estimates

    def elapsed(self) -> float:
        """Session seconds so far (from the process's start unless ``elapsed_seconds``)."""
        return self._clock() - self._t0

    def step_estimate(self) -> float:
        """The larger of the live warm median and the planned step; before any warm step,
        the larger of the planned step and the last step seen."""
        planned = self.budget.step_seconds or 0.0
        live = self._recent.median
        if live is None:
            live = self.seconds[-1] if self.seconds else 0.0
        return max(planned, live)

    def write_estimate(self) -> float:
        return max([self.budget.write_seconds, *self.write_observed])

    def next_save_step(self) -> int | None:
        """The next step index that saves on the cadence; None without one or once stopped."""
        every = self.budget.save_every
        if every is None or self.stopped_at is not None or not self.indices:
            return None
        return ((self.indices[-1] + 1) // every + 1) * every - 1

    @property
    def warm_median(self) -> float | None:
        """The live warm median (over the last WINDOW warm steps); reading it changes
        nothing."""
        return self._recent.median

    @property
    def drift(self) -> float | None:
        """live warm median / predicted step - 1; None before MIN_DRIFT_STEPS or with no
        prediction."""
        m, p = self.warm_median, self.budget.step_seconds
        if m is None or not p or len(self._recent) < MIN_DRIFT_STEPS:
            return None
        return m / p - 1.0

    # ---------------------------------------------------------------- internals

    def _elapsed_at_start(self, given: float | None) -> float:
        if given is None:
            age = process_age_seconds()
            if age is not None:
                return age
            self._warn("the process's start time cannot be read here (no /proc): the session "
                       "cap counts from Session(); pass elapsed_seconds= for the time spent "
                       "before it", "age", level=logging.INFO)
            return 0.0
        if isinstance(given, bool) or not isinstance(given, (int, float)) or \
                not math.isfinite(given) or given < 0:
            raise InputError(f"elapsed_seconds {given!r}: give the seconds already spent "
                             "(>= 0), or None to count from the process's start")
        return float(given)

    def _warm(self, dt: float) -> None:
        """A warm step: into the live window, and drift judged after it (every warm step,
        whatever reads the figures in between: :mod:`afford.track.warm_window`)."""
        self._recent.add(dt)
        self._check_drift()

    def _check_drift(self) -> None:
        d = self.drift
        if d is None or abs(d) <= self.drift_tol:
            return
        sign = 1 if d > 0 else -1
        if self._drift_warned == sign:
            return
        self._drift_warned = sign
        msg = (f"step {self.indices[-1]}: the live warm median {self.warm_median:.4g} s is "
               f"{abs(d):.1%} {'slower' if d > 0 else 'faster'} than the certificate's "
               f"{self.budget.step_seconds:.4g} s (tolerance {self.drift_tol:.0%}); "
               f"{self.budget.step_source}")
        self.warnings.append(msg)
        log.warning(msg)

    def _next_saves(self) -> bool:
        every = self.budget.save_every
        return every is not None and (self.indices[-1] + 2) % every == 0

    def _asked(self, step: int, now: float) -> None:
        self._pending = step
        self._after_save = True
        self._asked_at = now

    def _confirm(self, step: int, checkpoint: str | None = None) -> None:
        if self._pending is not None and step >= self._pending:
            self._pending = None
            self._asked_at = None
        if self.last_saved is not None and step <= self.last_saved:
            return
        t0 = self._clock()
        end = len(self.indices)
        while end > self._flushed_pos and self.indices[end - 1] > step:
            end -= 1
        self._flush(end)  # first: a marker naming step k means its readings are kept
        self.last_saved, self._saved_session = step, self.session_number
        self.checkpoint = checkpoint
        self._write_marker("running")
        self._keep_out(t0)

    def _keep_out(self, t0: float) -> None:
        """Bookkeeping ran from ``t0`` to now: out of the next step's time, not the cap's."""
        spent = self._clock() - t0
        self._last += spent
        self.bookkeeping_seconds += spent

    def _peak(self, n: int) -> int:
        if n <= 3:  # CUDA may start in the first steps
            torch = sys.modules.get("torch")
            self._cuda = torch.cuda if torch is not None and torch.cuda.is_initialized() \
                else None
        try:
            if self._cuda is not None:
                return int(self._cuda.max_memory_allocated())
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        except Exception:  # a CUDA error here is the loop's to raise, not the guard's
            return 0

    def _warn(self, msg: str, key: str, level: int = logging.WARNING) -> None:
        """A bookkeeping problem: in ``warnings`` and on the logger, once per ``key``."""
        if key in self._warned:
            return
        self._warned.add(key)
        self.warnings.append(msg)
        log.log(level, "afford.track: %s", msg)

    def _hook_exit(self) -> None:
        """Close at exit: confirm the final save at a clean exit; an uncaught exception (which
        Python reports through sys.excepthook before the exit handlers run) leaves it
        unconfirmed and the session is recorded as crashed."""
        EXIT.install()
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        try:
            self.close()
        except Exception as exc:  # at exit nothing can be raised to; say it
            log.warning("afford.track: closing the session at exit failed: %s", exc)


def summary(s: Session) -> dict:
    """The session in numbers (for printing): steps, first step, warm median, drift, stop,
    how the previous session ended and whether the resume point is saved."""
    warm = [x for x, k in zip(s.seconds, s.kinds) if k == WARM]
    med = statistics.median(warm) if warm else None
    return {"steps": len(s.indices), "first_index": s.indices[0] if s.indices else None,
            "first_seconds": s.seconds[0] if s.seconds else None,
            "warm_steps": len(warm), "warm_median_seconds": med,
            "predicted_step_seconds": s.budget.step_seconds,
            "drift": (med / s.budget.step_seconds - 1) if med and s.budget.step_seconds
            else None, "chunk_seconds": s.budget.chunk_seconds, "stopped_at": s.stopped_at,
            "last_saved": s.last_saved, "resume_step": s.resume_step,
            "resume_saved": s.resume_saved, "session": s.session_number,
            "previous": s.previous.line() if s.previous else None,
            "bookkeeping_seconds": s.bookkeeping_seconds, "warnings": list(s.warnings)}
