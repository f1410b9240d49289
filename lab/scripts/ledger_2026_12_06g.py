"""Ledger rows for the evening session's device calls of 2026-12-06 (run once, at the commit
that added it), one H100, the tree of 07b19c4, from lab/device-runs/2026-12-06-h100-families:
each certify's elapsed seconds, MEASURED, with their provenance. (The fresh-process truths
of the same calls go in through ``benches/truth_report.py --ledger``.)

    python3 lab/scripts/ledger_2026_12_06g.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUN = Path(__file__).parents[1] / "device-runs" / "2026-12-06-h100-families"
COMMIT = "07b19c4"
SCRIPT = "bash benches/device_truth.sh"
OPT = "hf:opt@d1024L16H16F4096V50272"
RUNS = (("cert-default-1", "default", "the first run on the machine: fills the bytecode cache"),
        ("cert-default-2", "default", "median-of-3 run 1"),
        ("cert-default-3", "default", "median-of-3 run 2"),
        ("cert-default-4", "default", "median-of-3 run 3"),
        ("cert-hf_opt_d1024L16H16F4096V50272", OPT, "median-of-3 run 1"),
        ("cert-hf_opt_d1024L16H16F4096V50272-2", OPT, "median-of-3 run 2"),
        ("cert-hf_opt_d1024L16H16F4096V50272-3", OPT, "median-of-3 run 3"),
        ("cert-hf_stablelm_d1024L16H16F4096V50272", "hf:stablelm@d1024L16H16F4096V50272",
         "before its truth"),
        ("cert-hf_gpt_bigcode_d1024L16H16F4096V50272",
         "hf:gpt_bigcode@d1024L16H16F4096V50272", "before its truth"),
        ("cert-hf_qwen2_d1024L16H16F4096V50272", "hf:qwen2@d1024L16H16F4096V50272",
         "before its truth"))


def main(path: str) -> int:
    rows = []
    for name, what, note in RUNS:
        doc = json.loads(gzip.decompress((RUN / f"{name}.json.gz").read_bytes()))
        env = doc["environment"]
        rows.append(ledger.new_reading(
            quantity=f"certify/{what}/elapsed_seconds", value=env["elapsed_seconds"],
            unit="s", tag="MEASURED", device=env["device_name"], torch=env["torch_version"],
            commit=COMMIT,
            date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify{'' if what == 'default' else ' -w ' + what} ({SCRIPT}; "
                    f"{note}; 2026-12-06-h100-families/{name}.json)"))
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
