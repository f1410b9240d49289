"""The loop guard: a few lines in the user's own training loop.

::

    guard = afford.track.Session(plan="plan.json")       # or cert=, platform=, run=
    for step, batch in enumerate(loader, start=guard.resume_step):
        ...train...
        guard.step(step, loss=loss)      # step index, its seconds, peak memory
        if guard.should_save(step): save(...)             # save_every from the plan
        if guard.should_stop(): save(...); break          # before the cap, with the final save

What it keeps (docs/DESIGN.md section 3, rule 1): every step's index and seconds (the time between
two ``step`` calls, so data loading counts; a save's time falls into the step after it, which
is kept apart as ``after-save``), with the session's first step (allocation, compilation) and
the warm-up apart from the warm steps. The warm median over a recent window is compared with
the certificate's prediction for the run; a difference beyond ``drift_tol`` is a warning in
``warnings`` and on the ``afford.track`` logger. At the stop (or :meth:`close`) the readings
go to the history ledger (:mod:`afford.ledger`: warm steps with their indices, the first step
with its own).

When to stop: after each step, with ``t`` the session's elapsed seconds, ``est`` the larger of
the live warm median and the planned step, ``w`` the larger of the planned and the slowest
observed checkpoint write, and ``safety`` (default: the larger of the slowest recent warm
step and ``est``, plus a quarter of ``w``, for a write slower than any seen)::

    stop  when  t + est (+ w if the next step saves) + w + safety > chunk seconds

so one more step and the final save end within the chunk (the session cap less its margin).

The resume marker (JSON, written atomically) names the last *completed* save (a save is
complete when its call returns): a periodic save is confirmed by the ``should_stop`` call
that follows it (which also times it), else by the next ``step``; the final save at
:meth:`saved`, :meth:`close` (or the end of a ``with`` block), or when the interpreter exits
without an uncaught exception. A kill during a save leaves the marker at the save before, so
a kill loses at most one save interval. Keep the last two checkpoints (the plan's
``checkpoints_kept``) and load the one of step ``resume_step - 1``.

No torch import here: torch is read from ``sys.modules`` when the loop has imported it, for
``max_memory_allocated`` on CUDA.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import resource
import statistics
import sys
import time
from array import array
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from afford.errors import InputError
from afford.track.budget import Budget, budget_from_plan, load_plan, plan_from_files
from afford.track.readings import AFTER_SAVE, FIRST, WARM, WARMUP

log = logging.getLogger("afford.track")
MARKER_SCHEMA = "afford.resume/1"
KINDS = ("first", "warm-up", "warm", "after-save")
WINDOW = 101  # recent warm steps the live median is taken over
REFRESH = 8  # warm steps between two recomputations of the live median
MIN_DRIFT_STEPS = 10  # warm steps before drift is judged


class Session:
    """The loop guard. Give a plan (path or dict), or ``cert`` + ``platform`` + ``run``, or a
    :class:`Budget`. ``clock`` returns seconds (injectable for tests); ``elapsed_seconds`` is
    session time already spent before the guard was made (e.g. startup), when known."""

    def __init__(self, plan: str | Path | dict | None = None, *, cert: str | Path | None = None,
                 platform: str | Path | None = None, run: str | Path | None = None,
                 budget: Budget | None = None, ledger: str | Path | None = None,
                 marker: str | Path | None = "afford-resume.json",
                 clock: Callable[[], float] = time.monotonic, drift_tol: float = 0.10,
                 warmup_steps: int = 2, safety_seconds: float | None = None,
                 elapsed_seconds: float = 0.0, command: str | None = None) -> None:
        self.budget = _budget(plan, cert, platform, run, budget)
        if not 0 < drift_tol < 10:
            raise InputError(f"drift_tol {drift_tol!r}: give a fraction such as 0.10")
        self.drift_tol, self.warmup_steps, self.safety_seconds = drift_tol, warmup_steps, \
            safety_seconds
        self.ledger, self.command = ledger, command
        self.marker = Path(marker) if marker is not None else None
        self.warnings: list[str] = list(self.budget.notes)
        self._clock = clock
        now = clock()
        self._t0 = now - float(elapsed_seconds)
        self._last = now
        self.indices, self.seconds = array("q"), array("d")
        self.kinds, self.peak_bytes = array("b"), array("q")
        self._recent: deque[float] = deque(maxlen=WINDOW)
        self._median: float | None = None
        self._worst = 0.0
        self._fresh = 0
        self._n = 0
        self._pending: int | None = None  # a save asked for and not yet confirmed
        self._asked_at: float | None = None  # clock when should_save said yes
        self._after_save = False
        self.write_observed: list[float] = []
        self.stopped_at: float | None = None  # session seconds when should_stop said yes
        self.last_saved: int | None = None
        self.last_loss: Any = None
        self._drift_warned = 0
        self._cuda: Any = None
        self._closed = False
        self._crashed = False
        self._ledgered = False
        self._marker_doc = self._read_marker()
        self.resume_step = 0 if self.last_saved is None else self.last_saved + 1
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
        if self._pending is not None:  # should_stop was not called after the save
            if self._median is not None and self._asked_at is not None:
                self.write_observed.append(max(0.0, dt - self._median))
            self._confirm(self._pending)
        if kind == WARM:
            self._warm(dt)
        elif kind == AFTER_SAVE:
            self._after_save = False

    def should_save(self, step: int) -> bool:
        """True every ``save_every`` steps (after steps save_every - 1, 2 save_every - 1, ...)."""
        every = self.budget.save_every
        if every is None or (step + 1) % every:
            return False
        self._asked(step)
        self._asked_at = self._clock()
        return True

    def should_stop(self) -> bool:
        """True when one more step and the final save would not end within the chunk; then
        the loop should save and stop (that save is confirmed at close, at exit or by
        :meth:`saved`). Called after a periodic save, it confirms that save and times it."""
        if self.stopped_at is not None:
            return True
        now = self._clock()
        if self._pending is not None and self._asked_at is not None:
            self.write_observed.append(now - self._asked_at)
            self._confirm(self._pending)
        chunk = self.budget.chunk_seconds
        if chunk is None or self._n == 0:
            return False
        elapsed = now - self._t0
        est = self.step_estimate()
        write = self.write_estimate()
        upcoming = est + (write if self._next_saves() else 0.0)
        safety = self.safety_seconds if self.safety_seconds is not None else \
            max(self._worst, est) + 0.25 * write
        if elapsed + upcoming + write + safety <= chunk:
            return False
        self.stopped_at = elapsed
        self._asked(self.indices[-1])
        return True

    def saved(self, step: int) -> None:
        """Confirm that the checkpoint of ``step`` is written (optional: the next ``step``
        call, :meth:`close` or a clean exit confirm it too)."""
        self._confirm(step)

    def close(self) -> None:
        """Confirm a requested save, then append the readings to the ledger (after the final
        save: importing the ledger's statistics takes seconds); idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._at_exit)
        if self._pending is not None and not (self._crashed or _EXIT.crashed):
            self._confirm(self._pending)
        self._append_ledger()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._crashed = True  # a save in flight is not confirmed
        self.close()

    # ---------------------------------------------------------------- estimates

    def step_estimate(self) -> float:
        """The larger of the live warm median and the planned step; before any warm step,
        the larger of the planned step and the last step seen."""
        planned = self.budget.step_seconds or 0.0
        if self._median is None and self._recent:
            self._refresh()
        live = self._median if self._median is not None else (self.seconds[-1]
                                                               if self.seconds else 0.0)
        return max(planned, live)

    def write_estimate(self) -> float:
        return max([self.budget.write_seconds, *self.write_observed])

    @property
    def warm_median(self) -> float | None:
        """The live warm median (over the last WINDOW warm steps)."""
        if self._recent:
            self._refresh()
        return self._median

    @property
    def drift(self) -> float | None:
        """live warm median / predicted step - 1; None before MIN_DRIFT_STEPS or with no
        prediction."""
        m, p = self.warm_median, self.budget.step_seconds
        if m is None or not p or len(self._recent) < MIN_DRIFT_STEPS:
            return None
        return m / p - 1.0

    # ---------------------------------------------------------------- internals

    def _warm(self, dt: float) -> None:
        self._recent.append(dt)
        self._fresh += 1
        if dt > self._worst:
            self._worst = dt
        if self._fresh >= REFRESH or self._median is None:
            self._refresh()
            self._check_drift()

    def _refresh(self) -> None:
        xs = sorted(self._recent)
        k = len(xs)
        self._median = xs[k // 2] if k % 2 else 0.5 * (xs[k // 2 - 1] + xs[k // 2])
        self._worst = xs[-1]
        self._fresh = 0

    def _check_drift(self) -> None:
        d = self.drift
        if d is None or abs(d) <= self.drift_tol:
            return
        sign = 1 if d > 0 else -1
        if self._drift_warned == sign:
            return
        self._drift_warned = sign
        msg = (f"step {self.indices[-1]}: the live warm median {self._median:.4g} s is "
               f"{abs(d):.1%} {'slower' if d > 0 else 'faster'} than the certificate's "
               f"{self.budget.step_seconds:.4g} s (tolerance {self.drift_tol:.0%}); "
               f"{self.budget.step_source}")
        self.warnings.append(msg)
        log.warning(msg)

    def _next_saves(self) -> bool:
        every = self.budget.save_every
        return every is not None and (self.indices[-1] + 2) % every == 0

    def _asked(self, step: int) -> None:
        self._pending = step
        self._after_save = True
        self._asked_at = None

    def _confirm(self, step: int) -> None:
        self._pending = None
        self._asked_at = None
        if self.last_saved is not None and step <= self.last_saved:
            return
        self.last_saved = step
        self._write_marker()

    def _peak(self, n: int) -> int:
        if n <= 3:  # CUDA may start in the first steps
            torch = sys.modules.get("torch")
            self._cuda = torch.cuda if torch is not None and torch.cuda.is_initialized() \
                else None
        if self._cuda is not None:
            return int(self._cuda.max_memory_allocated())
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

    # ---------------------------------------------------------------- marker and ledger

    def _read_marker(self) -> dict | None:
        if self.marker is None or not self.marker.exists():
            return None
        try:
            doc = json.loads(self.marker.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{self.marker}: cannot read the resume marker: {exc}") from None
        if not isinstance(doc, dict) or doc.get("schema") != MARKER_SCHEMA or \
                not isinstance(doc.get("last_saved_step"), int):
            raise InputError(f"{self.marker}: not an {MARKER_SCHEMA} resume marker")
        if doc.get("run") not in (None, self.budget.run):
            raise InputError(f"{self.marker}: the marker is run {doc.get('run')!r}'s, this is "
                             f"run {self.budget.run!r}; give another marker= path")
        self.last_saved = doc["last_saved_step"]
        return doc

    def _write_marker(self) -> None:
        if self.marker is None:
            return
        from afford.io import atomic_write_text

        sessions = int((self._marker_doc or {}).get("sessions", 0)) + 1
        doc = {"schema": MARKER_SCHEMA, "run": self.budget.run,
               "last_saved_step": self.last_saved, "resume_step": self.last_saved + 1,
               "sessions": sessions, "pid": os.getpid(),
               "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        atomic_write_text(self.marker, json.dumps(doc, indent=1) + "\n")

    def _append_ledger(self) -> None:
        """The session's readings to the ledger; a failure is a warning, never an exception
        in the user's loop."""
        if self.ledger is None or self._ledgered:
            return
        self._ledgered = True
        try:
            from afford.track.readings import append_session

            append_session(self, self.ledger)
        except Exception as exc:
            msg = f"the readings were not appended to the ledger {self.ledger}: {exc}"
            self.warnings.append(msg)
            log.warning(msg)

    def _hook_exit(self) -> None:
        """Confirm the final save at a clean exit; an uncaught exception (which Python
        reports through sys.excepthook before the exit handlers run) leaves it unconfirmed."""
        _EXIT.install()
        atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        try:
            self.close()
        except Exception as exc:  # at exit nothing can be raised to; say it
            log.warning("afford.track: closing the session at exit failed: %s", exc)


class _ExitState:
    """One sys.excepthook for every session: notes that an uncaught exception ended the
    program, so that no save in flight is confirmed at exit."""

    def __init__(self) -> None:
        self.crashed = False
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        self.installed = True
        previous = sys.excepthook

        def hook(*args: Any) -> None:
            self.crashed = True
            previous(*args)

        sys.excepthook = hook


_EXIT = _ExitState()


def _budget(plan, cert, platform, run, budget: Budget | None) -> Budget:
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


def summary(s: Session) -> dict:
    """The session in numbers (for printing): steps, first step, warm median, drift, stop."""
    warm = [x for x, k in zip(s.seconds, s.kinds) if k == WARM]
    med = statistics.median(warm) if warm else None
    return {"steps": len(s.indices), "first_index": s.indices[0] if s.indices else None,
            "first_seconds": s.seconds[0] if s.seconds else None,
            "warm_steps": len(warm), "warm_median_seconds": med,
            "predicted_step_seconds": s.budget.step_seconds,
            "drift": (med / s.budget.step_seconds - 1) if med and s.budget.step_seconds
            else None, "chunk_seconds": s.budget.chunk_seconds, "stopped_at": s.stopped_at,
            "last_saved": s.last_saved, "resume_step": s.resume_step,
            "warnings": list(s.warnings)}
