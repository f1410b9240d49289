"""What a guarded session leaves for the next one: the resume marker and the step log.

The **marker** (JSON, ``afford.resume/2``, written atomically: temp file, fsync, rename) is
rewritten when a session starts (``state: running``), after every confirmed save (the step
and, where the loop names it, the checkpoint's path), and when the session closes
(``stopped``, ``finished`` or ``crashed``, with the last step it trained). A marker still
``running`` when the next session reads it belongs to a session that ended without closing:
killed (SIGKILL, the out-of-memory killer, a preempted machine) or gone through ``os._exit``.

The **step log** (``.NAME.steps`` beside the marker, 64 bytes) holds the last step the session
trained, how many it trained, the step up to which its readings reached the ledger, and its
elapsed seconds. It is memory-mapped and rewritten after every step: a store into a shared
page, no system call, which the kernel keeps when the process is killed; so the next session
can say how many steps the killed one lost. (A machine that loses power loses what the page
cache had not written back; the steps lost are then not known, and the report says so.)

Old markers (``afford.resume/1``: the last save and the resume step) are upgraded on read
(:func:`upgrade`); how their session ended is not known.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from afford.core.errors import InputError
from afford.core.io import atomic_write_text, loads_json, read_text

SCHEMA = "afford.resume/2"
OLD_SCHEMAS = ("afford.resume/1",)
STATES = ("running", "stopped", "finished", "crashed")


def upgrade(doc: dict) -> dict:
    """An ``afford.resume/1`` marker as /2: its end unknown, no checkpoint path."""
    if doc.get("schema") == SCHEMA:
        return doc
    return {"schema": SCHEMA, "run": doc.get("run"), "state": "unknown",
            "session": int(doc.get("sessions") or 0), "last_saved_step": doc["last_saved_step"],
            "saved_session": None, "checkpoint": None, "last_step": None,
            "flushed_step": None, "ledger": None, "pid": doc.get("pid"),
            "upgraded_from": doc.get("schema")}


def read(path: Path, run: str) -> dict | None:
    """The marker at ``path`` (upgraded to /2), or None when there is none; InputError when it
    is not a marker, or another run's."""
    if not path.exists():
        return None
    doc = loads_json(read_text(path, f"resume marker {path}"), f"resume marker {path}")
    if not isinstance(doc, dict) or doc.get("schema") not in (SCHEMA, *OLD_SCHEMAS) or \
            not _step_or_none(doc.get("last_saved_step"), doc.get("schema") == SCHEMA):
        raise InputError(f"{path}: not an {SCHEMA} resume marker (nor {OLD_SCHEMAS[0]})")
    if doc.get("run") not in (None, run):
        raise InputError(f"{path}: the marker is run {doc.get('run')!r}'s, this is run "
                         f"{run!r}; give another marker= path")
    return upgrade(doc)


def _step_or_none(v: object, none_ok: bool) -> bool:
    if v is None:
        return none_ok
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def write(path: Path, doc: dict) -> str | None:
    """Write the marker atomically; the error's text when it failed (full disk, read-only
    folder), never an exception: the guard's bookkeeping must not stop the loop."""
    doc = {**doc, "schema": SCHEMA, "pid": os.getpid(),
           "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    except Exception as exc:  # AffordError, OSError: a warning, never the loop's exception
        return str(exc)
    return None


# ---------------------------------------------------------------- the step log


@dataclass(frozen=True)
class StepRecord:
    """The step log's content: the last step a session trained and its bookkeeping."""

    pid: int
    session: int
    last_step: int
    steps: int
    flushed_step: int | None  # readings in the ledger up to this step; None: none yet
    elapsed_seconds: float


class StepLog:
    """The step log of one session (see the module docstring). ``record`` after each step;
    a torn record (a kill inside the 56-byte store) is detected by its repeated step."""

    FORMAT = "<8sqqqqqdq"  # magic, pid, session, last step, steps, flushed, elapsed, last step
    SIZE = 64
    MAGIC = b"afsteps1"

    def __init__(self, path: Path, session: int) -> None:
        """Opens (creating) the file and maps it; OSError where it cannot (the guard then
        goes without it). The block is written before it is mapped: a store into an
        unallocated page of a full disk would be a SIGBUS, not an error."""
        self.path, self.session, self._pid = path, session, os.getpid()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            os.pwrite(fd, bytes(self.SIZE), 0)
            os.fsync(fd)
            self._mm = mmap.mmap(fd, self.SIZE)
        finally:
            os.close(fd)

    def record(self, last_step: int, steps: int, flushed: int | None, elapsed: float) -> None:
        struct.pack_into(self.FORMAT, self._mm, 0, self.MAGIC, self._pid, self.session,
                         last_step, steps, -1 if flushed is None else flushed, elapsed,
                         last_step)

    def close(self) -> None:
        self._mm.close()

    @classmethod
    def read(cls, path: Path) -> StepRecord | None:
        """The record at ``path``; None when there is none, or it is torn or foreign."""
        try:
            raw = path.read_bytes()[:struct.calcsize(cls.FORMAT)]
            magic, pid, session, last, steps, flushed, elapsed, again = struct.unpack(
                cls.FORMAT, raw)
        except (OSError, struct.error):
            return None
        if magic != cls.MAGIC or last != again or steps < 1 or last < 0:
            return None
        return StepRecord(pid, session, last, steps, None if flushed < 0 else flushed,
                          elapsed)


def step_log_path(marker: Path) -> Path:
    return marker.parent / f".{marker.name}.steps"


# ---------------------------------------------------------------- the previous session


@dataclass(frozen=True)
class Previous:
    """How the session before this one ended, from its marker and step log."""

    session: int
    how: str  # stopped, finished, crashed, killed, or unknown (an upgraded /1 marker)
    last_saved_step: int | None
    saved_session: int | None  # whose save that is (None: not known)
    last_step: int | None  # the last step it trained; None: not known
    flushed_step: int | None  # its readings reached the ledger up to this step
    ledger: str | None  # the ledger it wrote to (None: none given)
    error: str = ""  # the exception that ended it (crashed)

    @property
    def steps_lost(self) -> int | None:
        """Steps it trained after the last confirmed save (they are trained again)."""
        if self.last_step is None:
            return None
        return max(0, self.last_step - (-1 if self.last_saved_step is None
                                        else self.last_saved_step))

    @property
    def clean(self) -> bool:
        return self.how in ("stopped", "finished")

    def line(self) -> str:
        """One line for the log: how it ended, steps lost, readings kept, where to resume."""
        who = f"the previous session ({self.session})"
        text = {"stopped": f"{who} stopped before the session cap",
                "finished": f"{who} ended without a stop request",
                "crashed": f"{who} ended by an exception ({self.error or 'unknown'})",
                "killed": f"{who} was killed (it ended without closing)",
                "unknown": f"{who} left an older marker that does not say how it ended"
                }[self.how]
        parts = [text + " " + self._saved()]
        lost = self.steps_lost
        if self.how != "unknown":
            if lost is None:
                parts.append("the steps it trained after that save are not known (no step log)")
            elif lost or not self.clean:
                first = -1 if self.last_saved_step is None else self.last_saved_step
                span = f" (steps {first + 1}-{self.last_step})" if lost else ""
                parts.append(f"{lost} step{'s' if lost != 1 else ''} lost{span}")
        if self.ledger is not None and self.how != "unknown":
            parts.append(f"its readings up to step {self.flushed_step} are in the ledger "
                         f"{self.ledger}" if self.flushed_step is not None else
                         f"none of its readings reached the ledger {self.ledger}")
        resume = 0 if self.last_saved_step is None else self.last_saved_step + 1
        return "; ".join(parts) + f"; resuming at step {resume}"

    def _saved(self) -> str:
        k = self.last_saved_step
        if k is None:
            return "before any save"
        if self.how in ("stopped", "finished") and self.last_step == k:
            return f"at step {k}, its final save confirmed"
        whose = "" if self.saved_session in (None, self.session) else \
            f" (session {self.saved_session}'s)"
        return f"after the save at step {k}{whose}"


def previous_of(doc: dict | None, record: StepRecord | None) -> Previous | None:
    """The previous session's end; its step log counts only if it is that session's."""
    if doc is None:
        return None
    how = doc.get("state", "unknown")
    how = "killed" if how == "running" else how if how in STATES + ("unknown",) else "unknown"
    last, flushed = doc.get("last_step"), doc.get("flushed_step")
    if how == "killed":
        mine = record is not None and record.session == doc.get("session") and \
            record.pid == doc.get("pid")
        last = record.last_step if mine else None
        logged = [x for x in (doc.get("flushed_step"), record.flushed_step if mine else None)
                  if x is not None]
        flushed = max(logged) if logged else None
    return Previous(session=int(doc.get("session") or 0), how=how,
                    last_saved_step=doc.get("last_saved_step"),
                    saved_session=doc.get("saved_session"), last_step=last,
                    flushed_step=flushed, ledger=doc.get("ledger"),
                    error=str(doc.get("error") or ""))
