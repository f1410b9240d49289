"""Append the 2-D step-time grid and the allocator-trace peaks measured on the H200 to the
project's ledger (lab/history.tsv), with their step indices and provenance.

    python lab/scripts/record_grid.py [--ledger lab/history.tsv]

Inputs: lab/device-runs/2026-12-02-h200-grid/grid.jsonl (time_grid.py: per shape, step 0,
6 warm-up steps, then two blocks of k timed steps: indices 7 .. 7+2k-1; then synced steps)
and lab/device-runs/2026-12-02-h200-traces/trace-*.jsonl.gz (mem_trace.py: peaks after
step 2 of each shape).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

from afford.figures import ledger

HERE = Path(__file__).parent
GRID = HERE / "device-runs/2026-12-02-h200-grid"
TRACES = HERE / "device-runs/2026-12-02-h200-traces"
BASE = {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "commit": "59d5ef0"}


def grid_rows() -> list:
    date = datetime(2026, 12, 2, 22, 17, tzinfo=timezone.utc)
    cmd = "bash lab/device-runs/2026-12-02-h200-grid/run_grid.sh"
    out = []
    for line in (GRID / "grid.jsonl").read_text().splitlines():
        r = json.loads(line)
        if "async_median" not in r:
            continue
        q = f"grid/{r['workload']}/{r['mode']}/B={r['B']},s={r['s']}/r{r['repeat']}"
        k = r["k"]
        steps = f"7-{7 + 2 * k - 1}"
        out.append(ledger.new_reading(quantity=f"{q}/warm_step_seconds", unit="s",
                                      value=statistics.median(r["async_steps"]),
                                      step_indices=steps, command=cmd, date=date, **BASE))
        out.append(ledger.new_reading(quantity=f"{q}/step0_seconds", unit="s",
                                      value=r["step0_s"], step_indices="0", command=cmd,
                                      date=date, **BASE))
        first = 7 + 2 * k
        n_sync = max(5, min(20, k // 2))
        out.append(ledger.new_reading(quantity=f"{q}/synced_step_seconds", unit="s",
                                      value=r["synced_median"],
                                      step_indices=f"{first}-{first + n_sync - 1}",
                                      command=cmd, date=date, **BASE))
    return out


def trace_rows() -> list:
    date = datetime(2026, 12, 2, 22, 23, tzinfo=timezone.utc)
    cmd = "bash lab/device-runs/2026-12-02-h200-traces/run_mem.sh"
    out = []
    for path in sorted(TRACES.glob("trace-*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                r = json.loads(line)
                if "peak_reserved" not in r:
                    continue
                q = f"memory/trace/{r['workload']}/{r['mode']}/B={r['B']},s={r['s']}"
                for name, key in (("peak_allocated_bytes", "peak_alloc"),
                                  ("peak_reserved_bytes", "peak_reserved")):
                    out.append(ledger.new_reading(quantity=f"{q}/{name}", unit="B",
                                                  value=r[key], step_indices="0-2",
                                                  command=cmd, date=date, **BASE))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledger", default=str(HERE / "history.tsv"))
    args = ap.parse_args()
    rows = grid_rows() + trace_rows()
    ledger.append(args.ledger, rows)
    print(f"appended {len(rows)} readings to {args.ledger}")


if __name__ == "__main__":
    main()
