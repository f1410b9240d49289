"""An optional timeline of certify's run, for finding where its wall time goes: with
``AFFORD_TIMELINE=FILE`` set, every child conversation (job sent, each event received, exit)
and every stage boundary is appended to FILE as one JSON line stamped with the wall clock.
Unset (the default), :func:`mark` does nothing. Diagnostics only: nothing reads it back.

    AFFORD_TIMELINE=timeline.jsonl afford certify -w hf:gpt2
"""

from __future__ import annotations

import json
import os
import threading
import time

TIMELINE_ENV = "AFFORD_TIMELINE"
_lock = threading.Lock()


def mark(what: str, **fields) -> None:
    """Append one line (``what``, the wall clock, ``fields``) when the timeline is on."""
    path = os.environ.get(TIMELINE_ENV)
    if not path:
        return
    line = json.dumps({"wall": time.time(), "what": what, **fields}, default=str)
    with _lock:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError:  # a diagnostic never fails the run
            pass
