"""What a guarded session writes for the next one, and reads from the one before: the resume
marker and the step log (:mod:`afford.track.marker`), and the history ledger
(:mod:`afford.track.readings`). A mixin of :class:`afford.track.session.Session`, kept apart
so the loop's calls read top to bottom there; every write here is a warning when it fails,
never an exception into the loop.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from afford.track import marker as mk

log = logging.getLogger("afford.track")


class SessionFiles:
    """The marker, step log and ledger of a :class:`~afford.track.session.Session`."""

    def _resume_from(self, doc: dict | None) -> None:
        """Where this session resumes, and how the previous one ended (logged)."""
        self._marker_doc = doc
        self.last_saved: int | None = doc["last_saved_step"] if doc else None
        self._saved_session = doc.get("saved_session") if doc else None
        self.resume_step = 0 if self.last_saved is None else self.last_saved + 1
        self.resume_checkpoint: str | None = doc.get("checkpoint") if doc else None
        self.checkpoint = self.resume_checkpoint
        self.marked_checkpoint = self.resume_checkpoint  # what the marker on disk names
        self.session_number = (int(doc.get("session") or 0) if doc else 0) + 1
        record = mk.StepLog.read(mk.step_log_path(self.marker)) if self.marker else None
        self.previous = mk.previous_of(doc, record)
        if self.previous is not None and self.writes:
            level = logging.INFO if self.previous.clean else logging.WARNING
            log.log(level, "afford.track: %s", self.previous.line())
            if doc.get("state") == "running" and alive(doc.get("pid")):
                self._warn(f"the marker {self.marker} says its session (pid {doc['pid']}) is "
                           "still running: two sessions on one marker overwrite each other's "
                           "resume point; give this one another marker=", "concurrent")

    def _start_files(self) -> None:
        """Sweep the marker's interrupted temp files, mark this session running, and open
        its step log; a failure is a warning."""
        from afford.core.io import clean_temps_of

        try:
            swept = clean_temps_of(self.marker, max_age_s=0)  # one writer per marker
        except OSError:
            swept = []
        if swept:
            log.info("afford.track: removed %d interrupted write(s) of %s", len(swept),
                     self.marker)
        self._write_marker("running")
        path = mk.step_log_path(self.marker)
        try:
            self._steplog = mk.StepLog(path, self.session_number)
        except (OSError, ValueError) as exc:
            self._warn(f"the step log {path} cannot be kept ({exc}): if this session is "
                       "killed, the next one will not know how many steps it lost", "steplog")

    def _record_step(self, step: int, n: int, now: float) -> None:
        try:
            self._steplog.record(step, n, self.flushed_step, now - self._t0)
        except (ValueError, TypeError, OverflowError) as exc:  # closed map, odd index
            self._steplog = None
            self._warn(f"the step log stopped at step {step} ({exc})", "steplog")

    def _write_marker(self, state: str) -> None:
        if not self.writes or self.marker is None:
            return
        doc = {"run": self.budget.run, "state": state, "session": self.session_number,
               "last_saved_step": self.last_saved,
               "resume_step": 0 if self.last_saved is None else self.last_saved + 1,
               "saved_session": self._saved_session, "checkpoint": self.checkpoint,
               "last_step": self.indices[-1] if self.indices else None,
               "steps": len(self.indices), "flushed_step": self.flushed_step,
               "ledger": None if self.ledger is None else str(self.ledger),
               "error": self._error, "started_at": self._started_at}
        error = mk.write(self.marker, doc)
        if error is None:
            self.marked_checkpoint = doc["checkpoint"]
            if not self.resume_saved:
                log.warning("afford.track: the resume marker %s is written again: resume at "
                            "step %s", self.marker, doc["resume_step"])
                self._warned.discard("marker")
            self.resume_saved = True
            return
        self.resume_saved = False
        what = f"the save of step {self.last_saved} is on disk, but the next session would " \
               "not resume from it" if self.last_saved is not None else \
               "the next session will not know how this one ended"
        self._warn(f"the resume marker {self.marker} could not be written ({error}): {what}; "
                   "the resume point is not saved", "marker")

    def _flush(self, end: int, final: bool = False) -> None:
        """The readings of the steps not yet in the ledger, up to position ``end``; a
        failure is a warning and they are tried again at the next flush."""
        if self.ledger is None:
            return
        if end <= self._flushed_pos and not (final and self.stopped_at is not None):
            return
        try:
            from afford.track.readings import flush

            flush(self, self.ledger, self._flushed_pos, end, final=final)
        except Exception as exc:  # a full disk, a broken ledger: never the loop's exception
            first = self.indices[self._flushed_pos] if end > self._flushed_pos else None
            self._warn(f"the readings from step {first} on were not appended to the ledger "
                       f"{self.ledger}: {exc}", "ledger")
            return
        self._flushed_pos = max(self._flushed_pos, end)
        if end:
            self.flushed_step = self.indices[end - 1]
        self._warned.discard("ledger")


def alive(pid: Any) -> bool:
    """Whether process ``pid`` exists and is not this one."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True
