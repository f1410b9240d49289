"""Does a child timing a point while the next process starts beside it read slower? Replayed
on recorded certificates and their stage timelines (a bench report, not a test).

    python3 benches/contention_replay.py [--window S ...] CERT:TIMELINE [CERT:TIMELINE ...]

On CUDA certify spawns child k+1 as child k takes its job (and, as the last child starts,
the stages' children): those processes import torch (and transformers), compiling it where
the image carries no bytecode, and create their CUDA contexts while child k times its
points. A point whose timing began within ``--window`` seconds of its child's job is
*contended*. Per point timed by at least one contended and one quiet child, the ratio of the
contended children's mean median to the quiet ones': in the work regime (device busy at
least 60 % of the step) and on the launch floor (less), where the host's speed is the step.
``.gz`` files are read too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import defaultdict

HOST_SHARE = 0.6  # device busy under this share of the wall step: the host bounds it


def _read(path: str):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return f.read()


def windows(timeline: list[dict]) -> tuple[dict[int, float], dict[tuple[int, str], float]]:
    """Each sweep child's job time, and when each of its points began (by child and key)."""
    jobs, child_of, begun = {}, {}, {}
    for e in timeline:
        if e.get("what") == "job" and e.get("child") is not None and e.get("round") is None:
            jobs.setdefault(e["child"], e["wall"])
            child_of[e["pid"]] = e["child"]
    for e in timeline:
        c = child_of.get(e.get("pid"))
        if c is not None and e.get("what") == "event" and e.get("event") == "begin":
            begun.setdefault((c, e["key"]), e["wall"])
    return jobs, begun


def pairs(cert: dict, timeline: list[dict], window: float) -> dict[str, list[float]]:
    """Contended / quiet ratios by regime (``work``, ``floor``) for one certificate."""
    jobs, begun = windows(timeline)
    out: dict[str, list[float]] = defaultdict(list)
    for w in cert["workloads"]:
        for role, pts in (("sweep", w.get("points") or []),
                          ("design", w.get("design_points") or [])):
            for p in pts:
                kids = {c["child"]: c["median_seconds"] for c in p.get("children", [])
                        if c.get("median_seconds") and c.get("round") in (None, "sweep")}
                busy = p.get("device_busy_seconds")
                if len(kids) < 2 or not busy:
                    continue
                keys = [f"{w['name']}|{w['mode']}|{p['value']}"]
                if role == "design" and p.get("batch"):
                    keys.insert(0, keys[0] + f"|b{p['batch']}")
                contended, quiet = [], []
                for c, m in kids.items():
                    start = next((begun[(c, k)] for k in keys if (c, k) in begun), None)
                    if start is None or c not in jobs:
                        continue
                    (contended if start < jobs[c] + window else quiet).append(m)
                if contended and quiet:
                    regime = "floor" if busy < HOST_SHARE * statistics.median(kids.values()) \
                        else "work"
                    out[regime].append(statistics.mean(contended) / statistics.mean(quiet))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="CERT:TIMELINE")
    ap.add_argument("--window", type=float, action="append",
                    help="seconds after a child's job in which a neighbour starts (repeat; "
                         "default 4, 8 and 12)")
    a = ap.parse_args(argv)
    docs = []
    for pair in a.pairs:
        cert, tl = pair.split(":")
        doc = json.loads(_read(cert))
        if doc["environment"].get("device_type") != "cuda":
            continue
        docs.append((doc, [json.loads(x) for x in _read(tl).splitlines() if x.strip()]))
    print(f"{len(docs)} CUDA certificates with their timelines")
    for window in a.window or [4.0, 8.0, 12.0]:
        pooled: dict[str, list[float]] = defaultdict(list)
        for doc, tl in docs:
            for k, v in pairs(doc, tl, window).items():
                pooled[k] += v
        for regime in ("work", "floor"):
            r = pooled[regime]
            if not r:
                continue
            print(f"window {window:g} s, {regime}: {len(r)} points; contended / quiet median "
                  f"{statistics.median(r):.4f}, mean {statistics.mean(r):.4f}; above 1.05 in "
                  f"{sum(x > 1.05 for x in r) / len(r):.0%}, below 0.95 in "
                  f"{sum(x < 0.95 for x in r) / len(r):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
