"""A stand-in for the sweep child (afford.measure.sweep_child) that imports no torch: it reads the
job on stdin and answers every item with a made-up timing, in the child protocol's JSON
lines. Faults by environment, for the watchdog tests:

- ``FAKE_HANG_KEY``: on that item the process stops itself (SIGSTOP), as a hung child would;
- ``FAKE_DIE_KEY``: on that item the process exits with code 9 at once;
- ``FAKE_ONCE``: a file path; when set, the fault happens only while the file does not exist
  (the fault creates it), so a fresh child measuring the point again succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def _fault(key: str) -> str | None:
    once = os.environ.get("FAKE_ONCE")
    if once and os.path.exists(once):
        return None
    for what in ("HANG", "DIE"):
        if os.environ.get(f"FAKE_{what}_KEY") == key:
            if once:
                open(once, "w").close()
            return what
    return None


def main() -> int:
    job = json.loads(sys.stdin.read())
    out = sys.stdout

    def emit(event: dict) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    emit({"event": "start", "pid": os.getpid(), "ready_wall": time.time(),
          "child": job.get("child")})
    for item in job["items"]:
        emit({"event": "begin", "key": item["key"]})
        fault = _fault(item["key"])
        if fault == "HANG":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "DIE":
            os._exit(9)
        emit({"event": "point", "key": item["key"], "shape": {"n": item["value"]},
              "record": {"child": job.get("child"), "order_position": item.get("position"),
                         "median_seconds": 0.01 * item["value"], "timed_seconds": [0.01],
                         "timed_step_indices": [3]}})
    emit({"event": "done", "child": job.get("child")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
