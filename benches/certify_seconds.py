"""Where certify's wall time went, run by run, and the median of the runs of one command:
from each certificate (``stage_seconds``, the children's per-point walls) and, where it lies
beside it, its ``AFFORD_TIMELINE`` (``tl-NAME.jsonl`` beside ``cert-NAME.json``, as
``benches/device_truth.sh`` writes them).

Per run: the wall time (the certificate's elapsed seconds), each stage, and from the
timeline the seconds before the sweep (the console script's entry to the sweep's start,
child 0's start-up included where it was later), the gaps with no child measuring inside the
sweep (parent-side fits between children, a child's exit), and the last child's profile
pass (its last point to its ``done``). Per command (the certificates' ``command`` less its
``--out``): the median wall of its runs.

    python3 benches/certify_seconds.py FOLDER_OR_CERT...
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def certificates(args: list[str]) -> list[Path]:
    out: list[Path] = []
    for a in args:
        p = Path(a)
        out += sorted(p.glob("cert-*.json")) if p.is_dir() else [p]
    return out


def timeline(cert: Path) -> list[dict]:
    tl = cert.with_name("tl-" + cert.name.removeprefix("cert-")).with_suffix(".jsonl")
    if not tl.exists():
        return []
    return [json.loads(x) for x in tl.read_text().splitlines() if x.strip()]


def sweep_parts(lines: list[dict]) -> dict[str, float]:
    """Seconds before the sweep, idle gaps between the sweep's children, the profile pass."""
    if not lines:
        return {}
    t0 = next((x["wall"] for x in lines if x["what"] == "entry"), lines[0]["wall"])
    stages = [(x["name"], x["wall"]) for x in lines if x["what"] == "stage"]
    sweep = next((w for n, w in stages if n == "sweep"), None)
    after = next((w for n, w in stages if n != "sweep" and sweep and w > sweep), None)
    if sweep is None:
        return {}
    out = {"before sweep": sweep - t0}
    busy_until, gaps, profile = sweep, 0.0, 0.0
    last_point: dict[int, float] = {}
    for x in lines:
        if not (sweep <= x["wall"] <= (after or float("inf"))):
            continue
        pid = x.get("pid")
        if x["what"] == "event" and x.get("event") == "start":
            gaps += max(0.0, x["wall"] - busy_until)
        if x["what"] == "event" and x.get("event") == "point":
            last_point[pid] = x["wall"]
        if x["what"] == "event" and x.get("event") == "done" and pid in last_point:
            profile = max(profile, x["wall"] - last_point[pid])
        if x["what"] in ("event", "exit"):
            busy_until = x["wall"]
    out.update({"idle between children": gaps, "longest done after last point": profile})
    return out


def _without_out(command: str) -> str:
    """The command less its ``--out FILE`` (each run writes its own)."""
    words = command.split()
    return " ".join(w for i, w in enumerate(words)
                    if w != "--out" and (i == 0 or words[i - 1] != "--out"))


def main(args: list[str]) -> None:
    walls: dict[str, list[float]] = defaultdict(list)
    for path in certificates(args):
        d = json.loads(path.read_text())
        env = d["environment"]
        wall = env.get("elapsed_seconds") or 0.0
        walls[_without_out(env.get("command", "?"))].append(wall)
        stages = ", ".join(f"{k} {v:.1f}" for k, v in (env.get("stage_seconds") or {}).items())
        points = sum(c.get("wall_seconds") or 0.0 for w in d["workloads"]
                     for p in w["points"] + (w.get("design_points") or []) for c in p["children"])
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sweep_parts(timeline(path)).items())
        print(f"{path.name}: {wall:.1f} s ({stages}); children's points {points:.1f} s"
              + (f"; {parts}" if parts else ""))
    for command, ws in walls.items():
        print(f"{command}: median {statistics.median(ws):.1f} s of {len(ws)} run(s) "
              f"({', '.join(f'{w:.1f}' for w in ws)})")


if __name__ == "__main__":
    main(sys.argv[1:])
