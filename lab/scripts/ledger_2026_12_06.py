"""Ledger rows for the 2026-12-06 device runs that no bench wrote (run once, at the commit
that added it): the ladder's fresh-process truths (lab/device-runs/2026-12-06-h100-truths and
-h100-final) and the certify wall times of the final calls, MEASURED, with their provenance.

    python3 lab/scripts/ledger_2026_12_06.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.figures import ledger

RUNS = Path(__file__).parents[1] / "device-runs"
TORCH = "2.11.0+cu130"
DEVICE = "NVIDIA H100 80GB HBM3"


def truths(path: Path, commit: str, date: str) -> list:
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        steps = f"{d['readings'][0]['steps'][0]}-{d['readings'][-1]['steps'][1]}"
        base = dict(device=DEVICE, torch=TORCH, commit=commit,
                    date=datetime.fromisoformat(date), command=f"python3 benches/step_truth.py "
                    f"{d['spec']} --shape 8x1024 --blocks 5 --profile 2 (fresh process)")
        where = f"ladder-truth/{d['spec']}/8x1024"
        out.append(ledger.new_reading(quantity=f"{where}/step_seconds", value=d["step_seconds"],
                                      unit="s", tag="MEASURED", step_indices=steps, **base))
        out.append(ledger.new_reading(quantity=f"{where}/params", value=d["params"],
                                      unit="params", tag="MEASURED", **base))
    return out


def certify_walls(folder: Path, commit: str) -> list:
    out = []
    for p in sorted(folder.glob("cert-*.json.gz")):
        if "measured" in p.name:
            continue
        c = json.loads(gzip.decompress(p.read_bytes()))
        env = c["environment"]
        spec = ",".join(w["name"] for w in c["workloads"][:1]) if "default" not in p.name \
            else "default"
        out.append(ledger.new_reading(
            quantity=f"certify/{spec}/elapsed_seconds", value=env["elapsed_seconds"], unit="s",
            tag="MEASURED", device=DEVICE, torch=TORCH,
            commit=commit, date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify{'' if spec == 'default' else ' -w ' + spec} "
            f"(lab/scripts/device-2026-12-06-final.sh, {p.name})"))
    return out


def main(path: str) -> int:
    rows = truths(RUNS / "2026-12-06-h100-truths" / "ladder-truth.jsonl", "afff5a5",
                  "2026-12-06T04:42:00+00:00")
    rows += truths(RUNS / "2026-12-06-h100-final" / "ladder-truth.jsonl", "b6288e0",
                   "2026-12-06T06:42:00+00:00")
    rows += certify_walls(RUNS / "2026-12-06-h100-final", "b6288e0")
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
