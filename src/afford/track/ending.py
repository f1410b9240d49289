"""How the process that runs a guarded session ends, as the guard sees it: how long the
process has been running (the session cap counts from its start), and one
``sys.excepthook`` shared by every session that notes an uncaught exception, so that a save
in flight when the program crashed is not confirmed at exit (:mod:`afford.track.session`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def process_age_seconds() -> float | None:
    """Seconds since this process started (Linux: ``/proc/self/stat``'s start time against
    ``/proc/uptime``, 10 ms resolution); None where that cannot be read."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time, ticks
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started)


def describe(exc_type: type, exc: BaseException | None) -> str:
    """An exception in one line of at most 200 characters, for the marker's ``error``."""
    text = f"{exc_type.__name__}: {exc}" if exc is not None and str(exc) else exc_type.__name__
    return text[:200]


class ExitState:
    """One sys.excepthook for every session: notes that an uncaught exception ended the
    program, so that no save in flight is confirmed at exit."""

    def __init__(self) -> None:
        self.crashed = False
        self.error = ""
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        self.installed = True
        previous = sys.excepthook

        def hook(exc_type, exc, tb) -> None:
            self.crashed = True
            self.error = describe(exc_type, exc)
            previous(exc_type, exc, tb)

        sys.excepthook = hook


EXIT = ExitState()
