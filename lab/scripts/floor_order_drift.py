"""Does a sweep child's floor step slow down as the child times more shapes (garbage, heap,
allocator state)? Over every recorded certificate (lab/device-runs, ../shared/recorded): at
each point on the launch floor (median within 1.3x the workload's smallest), each sweep
child's median over the point's median (log), against the child's order position. A bench
report; run from the repository's root:

    python3 lab/scripts/floor_order_drift.py

2026-12-07: 1,569 child readings at floor points of 120 workload certificates: slope -0.2 %
per 10 positions (correlation -0.02); 49 of 120 certificates' own slopes positive. No drift:
a floor step's spread between processes is not the order in which a child timed it. (At the
37 measured floor shapes of lab/scripts/band_coverage_runs.sh, fresh processes outside
afford ran a median 0.98x the certificate's value, 19 of 37 faster: no offset either.)
"""

import glob
import gzip
import json
import math
import statistics

import numpy as np


def readings(cert: dict) -> list[list[tuple[int, float]]]:
    out = []
    for w in cert.get("workloads", []):
        pts = [p for p in w.get("points", []) + w.get("design_points", [])
               if p.get("median_seconds")]
        if len(pts) < 3:
            continue
        floor = min(p["median_seconds"] for p in pts)
        rows = []
        for p in pts:
            if p["median_seconds"] > 1.3 * floor:
                continue
            kids = [k for k in p.get("children", [])
                    if k.get("median_seconds") and k.get("round", "sweep") == "sweep"]
            if len(kids) < 2:
                continue
            m = statistics.median(k["median_seconds"] for k in kids)
            rows += [(k["order_position"], math.log(k["median_seconds"] / m)) for k in kids]
        if len(rows) >= 6:
            out.append(rows)
    return out


def main() -> None:
    files = sorted(set(glob.glob("lab/device-runs/**/cert*.json*", recursive=True)
                       + glob.glob("../shared/recorded/**/cert*.json*", recursive=True)))
    groups = []
    for f in files:
        opener = gzip.open if f.endswith(".gz") else open
        try:
            with opener(f, "rt") as fh:
                groups += readings(json.load(fh))
        except (OSError, ValueError):
            continue
    pooled = [r for g in groups for r in g]
    x = np.array([r[0] for r in pooled], float)
    y = np.array([r[1] for r in pooled])
    slopes = [np.polyfit([r[0] for r in g], [r[1] for r in g], 1)[0] for g in groups]
    print(f"{len(pooled)} child readings at floor points of {len(groups)} workload "
          f"certificates: slope {np.polyfit(x, y, 1)[0] * 10:+.2%} per 10 positions "
          f"(correlation {np.corrcoef(x, y)[0, 1]:+.3f}); "
          f"{sum(s > 0 for s in slopes)} of {len(slopes)} certificates' own slopes positive")


if __name__ == "__main__":
    main()
