"""Real sweep children timed beside busy loops the caller starts: what the contention test
and ``benches/contention_idle.py`` both run. Every busy loop ends by itself after
``BURN_SECONDS``, whatever happens to its caller."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from afford.measure.timing import TimingRule

BURN_SECONDS = 90
# 30 timed steps where a core is left free, so that free steps are to be had; with a busy
# loop on every core the protocol's own 12 (a step there always waits, and its wait share is
# a ratio of each step's own times)
FREE_RULE = TimingRule(warmup_steps=3, warmup_seconds=0.1, min_steps=30, floor_seconds=0.5,
                       max_floor_seconds=0.5)
EVERY_CORE_RULE = TimingRule(warmup_steps=3, warmup_seconds=0.1, min_steps=12,
                             floor_seconds=0.5, max_floor_seconds=0.5)


def burners(n: int) -> list[subprocess.Popen]:
    """``n`` busy loops, each its own process."""
    code = f"import time\nend = time.time() + {BURN_SECONDS}\nwhile time.time() < end:\n    pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def tinylm_items(seqs: tuple[int, ...] = (32, 128)) -> list[dict]:
    """tinylm fp32 at batch 4 and each sequence in ``seqs``: one sweep child's items."""
    return [{"key": f"tinylm|fp32|{s}", "workload": "tinylm", "mode": "fp32", "value": s}
            for s in seqs]


def measure_at_load(n: int, items: list[dict], rule: TimingRule) -> tuple[dict, float]:
    """One real sweep child over ``items`` with ``n`` busy loops beside it: its records by
    key, and the 1-minute load average as it ended."""
    from afford.measure.children import run_child

    procs = burners(n)
    try:
        time.sleep(0.5 if n else 0.0)
        got = run_child(0, items, device="cpu", device_class="cpu", rule=rule, seed=0,
                        on_event=lambda e: None, timeout=600)
        return got, os.getloadavg()[0]
    finally:
        for p in procs:
            p.kill()
            p.wait()
