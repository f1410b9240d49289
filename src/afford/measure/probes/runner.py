"""Spawn the device probe child and collect its JSON lines (parent side).

The spawn style of :mod:`afford.measure.children`: ``python -m`` with the parent's
``sys.path`` on ``PYTHONPATH``, a JSON job on stdin, results as JSON lines on stdout, stderr
kept for the error message. The parent's clock times the child from spawn to its first line
(the child's own import report), so the probe child doubles as a startup run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from afford.measure.children import Event, child_env

TIMEOUT_SECONDS = 900.0


def run_probe_child(job: dict, on_event: Callable[[Event], None] = lambda e: None,
                    timeout: float = TIMEOUT_SECONDS) -> tuple[dict[str, dict], str | None]:
    """(probe events by key, why the child stopped early or None). The startup event gets
    ``process_seconds``: spawn to its arrival."""
    cuda = str(job["device"]).startswith("cuda")
    cmd = [sys.executable, "-m", "afford.measure.probes.child"] + \
        (["--device", str(job["device"])] if cuda else [])
    err = tempfile.TemporaryFile(mode="w+")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                            text=True, env=child_env())
    results: dict[str, dict] = {}
    done = False
    watchdog = threading.Timer(timeout, proc.kill)  # a hung child must not hang certify
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(job))
            proc.stdin.close()
        except BrokenPipeError:  # the child died at once; its stderr says why
            pass
        for line in proc.stdout:
            event: dict[str, Any] = json.loads(line)
            event["child"] = "probes"
            if event["event"] == "probe":
                if event["key"] == "startup":
                    event["result"]["process_seconds"] = time.perf_counter() - t0
                results[event["key"]] = event
            done = done or event["event"] == "done"
            on_event(event)
        rc = proc.wait()
    finally:
        timed_out = not watchdog.is_alive() and not done
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.seek(0)
        tail = err.read()[-1500:].strip()
        err.close()
    if done and rc == 0:
        return results, None
    why = f"the probe child ran past {timeout:.0f} s and was stopped" if timed_out else \
        f"the probe child exited with code {rc}"
    return results, why + (f": {tail}" if tail else "")
