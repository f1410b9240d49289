"""Ledger rows for the late session's device call of 2026-12-06 (run once, at the commit that
added it), one H100, the tree of 71ca0c6 (its src as at 56fefc7), from
lab/device-runs/2026-12-06-h100-head: each certify's elapsed seconds (the default and an
OPT-like ``hf:`` model), and the fresh-process truths at the OPT model's launch-floor shapes
(two processes a shape; benches/truth_report.py's rows, a reading the second process repeats
exactly, such as a peak in bytes, kept once), MEASURED, with their provenance.

    python3 lab/scripts/ledger_2026_12_06e.py lab/history.tsv
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benches"))

from truth_report import ledger_rows, rows_for  # noqa: E402

from afford.schema import ledger  # noqa: E402
from afford.schema.cert import load_certificate  # noqa: E402

RUN = Path(__file__).parents[1] / "device-runs" / "2026-12-06-h100-head"
COMMIT = "71ca0c6"
SPEC = "hf:opt@d1024L16H16F4096V50272"
SCRIPT = "BUDGET=540 bash lab/scripts/device-2026-12-06-head.sh"


def main(path: str) -> int:
    rows = []
    for name, what in (("cert-hf-1", SPEC), ("cert-default-2", "default")):
        doc = json.loads(gzip.decompress((RUN / f"{name}.json.gz").read_bytes()))
        env = doc["environment"]
        rows.append(ledger.new_reading(
            quantity=f"certify/{what}/elapsed_seconds", value=env["elapsed_seconds"],
            unit="s", tag="MEASURED", device=env["device_name"], torch=env["torch_version"],
            commit=COMMIT, date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify{'' if what == 'default' else ' -w ' + what} ({SCRIPT}, "
                    f"2026-12-06-h100-head/{name}.json)"))
    tmp = Path("/tmp") if Path("/tmp").is_dir() else Path(".")
    cert, truth = tmp / "cert-hf-1.json", tmp / "truth-floor.jsonl"
    cert.write_bytes(gzip.decompress((RUN / "cert-hf-1.json.gz").read_bytes()))
    truth.write_bytes(gzip.decompress((RUN / "truth-floor.jsonl.gz").read_bytes()))
    env = load_certificate(cert).environment
    date = datetime.fromisoformat("2026-12-06T14:18:00+00:00")
    truths = ledger_rows(rows_for(cert, truth), COMMIT, date, env.device_name, env.torch_version,
                         f"python3 benches/step_truth.py {SPEC} --shape BxS (twice each) "
                         f"--blocks 5 ({SCRIPT}; fresh process per shape)")
    seen = set()
    for r in truths:
        if r.id not in seen:
            seen.add(r.id)
            rows.append(r)
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
