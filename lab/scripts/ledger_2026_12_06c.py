"""Ledger rows for the session's last device call of 2026-12-06 (run once, at the commit that
added it): the default certify's elapsed seconds at e069054 and at 3bb9276 on one H100
(lab/device-runs/2026-12-06-h100-baseline), MEASURED, with their provenance.

    python3 lab/scripts/ledger_2026_12_06c.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUN = Path(__file__).parents[1] / "device-runs" / "2026-12-06-h100-baseline"


def main(path: str) -> int:
    rows = []
    for name, commit in (("base-1", "e069054"), ("new-1", "3bb9276")):
        env = json.loads(gzip.decompress((RUN / f"cert-{name}.json.gz").read_bytes()))[
            "environment"]
        rows.append(ledger.new_reading(
            quantity="certify/default/elapsed_seconds", value=env["elapsed_seconds"],
            unit="s", tag="MEASURED", device="NVIDIA H100 80GB HBM3", torch="2.11.0+cu130",
            commit=commit, date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command="afford certify (lab/scripts/device-2026-12-06-baseline.sh, one machine, "
                    f"cert-{name}.json.gz)"))
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
