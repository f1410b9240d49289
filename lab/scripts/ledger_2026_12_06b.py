"""Ledger rows for the afternoon's device runs of 2026-12-06 that no bench wrote (run once, at
the commit that added it): each certificate's elapsed seconds, MEASURED, with its provenance
(lab/device-runs/2026-12-06-h100-workspaces at 18d0ef3, -h100-minute at b504d44).

    python3 lab/scripts/ledger_2026_12_06b.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUNS = Path(__file__).parents[1] / "device-runs"
TORCH = "2.11.0+cu130"
DEVICE = "NVIDIA H100 80GB HBM3"


def certify_walls(folder: Path, commit: str, script: str) -> list:
    out = []
    for p in sorted(folder.glob("cert-*.json.gz")):
        c = json.loads(gzip.decompress(p.read_bytes()))
        env = c["environment"]
        spec = "default" if "default" in p.name else c["workloads"][0]["name"]
        out.append(ledger.new_reading(
            quantity=f"certify/{spec}/elapsed_seconds", value=env["elapsed_seconds"], unit="s",
            tag="MEASURED", device=DEVICE, torch=TORCH, commit=commit,
            date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify{'' if spec == 'default' else ' -w ' + spec} "
            f"({script}, {p.name})"))
    return out


def main(path: str) -> int:
    rows = certify_walls(RUNS / "2026-12-06-h100-workspaces", "18d0ef3",
                         "lab/scripts/device-2026-12-06-workspaces.sh")
    rows += certify_walls(RUNS / "2026-12-06-h100-minute", "b504d44",
                          "lab/scripts/device-2026-12-06-minute.sh")
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
