"""Ledger rows for the night session's device call of 2026-12-06 (run once, at the commit that
added it), one H100, the tree of 2ae3b93 (its src as at 388072b) and the session's start
(e2782a7) from .base/src, from lab/device-runs/2026-12-06-h100-start: each certify's elapsed
seconds, MEASURED, with their provenance.

    python3 lab/scripts/ledger_2026_12_06f.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUN = Path(__file__).parents[1] / "device-runs" / "2026-12-06-h100-start"
SPEC = "hf:opt@d1024L16H16F4096V50272"
SCRIPT = "bash lab/scripts/device-2026-12-06-pyc.sh"
RUNS = (("cert-hf-base-1", SPEC, "e2782a7", "session start"),
        ("cert-hf-new-1", SPEC, "2ae3b93", "bytecode cache empty"),
        ("cert-hf-new-2", SPEC, "2ae3b93", "bytecode cache filled"),
        ("cert-default-new-3", "default", "2ae3b93", "bytecode cache filled"))


def main(path: str) -> int:
    rows = []
    for name, what, commit, note in RUNS:
        doc = json.loads(gzip.decompress((RUN / f"{name}.json.gz").read_bytes()))
        env = doc["environment"]
        rows.append(ledger.new_reading(
            quantity=f"certify/{what}/elapsed_seconds", value=env["elapsed_seconds"],
            unit="s", tag="MEASURED", device=env["device_name"], torch=env["torch_version"],
            commit=commit, date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify{'' if what == 'default' else ' -w ' + what} ({SCRIPT}; "
                    f"{note}; 2026-12-06-h100-start/{name}.json)"))
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
