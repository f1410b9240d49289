"""Ledger rows for the evening session's device calls of 2026-12-06 (run once, at the commit
that added it): each certify's elapsed seconds, base (6ed9fc1) and new, on three H100s
(lab/device-runs/2026-12-06-h100-agree-{1,2,3}), MEASURED, with their provenance. The commit
is the one whose tree the run used (the device's own git copy was stale).

    python3 lab/scripts/ledger_2026_12_06d.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUNS = Path(__file__).parents[1] / "device-runs"
NEOX = "hf:gpt_neox@d1024L16H16F4096V32000"
SCRIPT = "bash lab/scripts/device-2026-12-06-agree.sh"
CALLS = {  # folder -> (the new tree's commit, the command line of the script)
    "2026-12-06-h100-agree-1": ("b9ae042", f"MODE=default {SCRIPT}"),
    "2026-12-06-h100-agree-2": ("ff73784", 'TESTS=1 RUNS="new:default base:default new:default '
                                f'new:hf base:hf new:hf" {SCRIPT}'),
    "2026-12-06-h100-agree-3": ("7247fc9", 'BUDGET=440 TESTS=1 RUNS="new:default base:default '
                                f'new:default new:default" {SCRIPT}'),
}


def main(path: str) -> int:
    rows = []
    for folder, (commit, script) in CALLS.items():
        for cert in sorted((RUNS / folder).glob("cert-*.json.gz")):
            doc = json.loads(gzip.decompress(cert.read_bytes()))
            env = doc["environment"]
            base = cert.name.startswith("cert-base")
            what = NEOX if "-hf-" in cert.name else "default"
            rows.append(ledger.new_reading(
                quantity=f"certify/{what}/elapsed_seconds", value=env["elapsed_seconds"],
                unit="s", tag="MEASURED", device="NVIDIA H100 80GB HBM3",
                torch="2.11.0+cu130", commit="6ed9fc1" if base else commit,
                date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
                command=f"afford certify{'' if what == 'default' else ' -w ' + what} ({script}, "
                        f"one machine, {folder}/{cert.name})"))
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
