"""Ledger rows for the late-evening session's device calls of 2026-12-06 (run once, at the
commit that added it), one H100, the tree of 4b0f9ab: each certify's elapsed seconds,
MEASURED, with their provenance, from lab/device-runs/2026-12-06-h100-families-2 (StarCoder2
and OLMo2, before their truths) and 2026-12-06-h100-drift (GPT-BigCode between two rounds of
floor truths). The fresh-process truths go in through ``benches/truth_report.py --ledger``,
except the drift call's second and third rounds, whose memory readings repeat the first's to
the byte (a reading is appended once): their step times are appended here (``--drift``).

    python3 lab/scripts/ledger_2026_12_06h.py lab/history.tsv
    python3 lab/scripts/ledger_2026_12_06h.py lab/history.tsv --drift
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUNS = Path(__file__).parents[1] / "device-runs"
COMMIT = "4b0f9ab"
ROWS = (("2026-12-06-h100-families-2", "cert-hf_starcoder2_d1024L16H16F4096V50272",
         "hf:starcoder2@d1024L16H16F4096V50272", "bash benches/device_truth.sh",
         "the machine's first certify: fills the bytecode cache; before its truth"),
        ("2026-12-06-h100-families-2", "cert-hf_olmo2_d1024L16H16F4096V50272",
         "hf:olmo2@d1024L16H16F4096V50272", "bash benches/device_truth.sh",
         "before its truth"),
        ("2026-12-06-h100-drift", "cert-hf_gpt_bigcode_d1024L16H16F4096V50272",
         "hf:gpt_bigcode@d1024L16H16F4096V50272",
         "bash lab/scripts/device-2026-12-06-drift.sh", "between two rounds of floor truths"))


def drift_rows() -> list:
    """The drift call's floor truths after the certify, rounds 2 and 3: step seconds."""
    rows = []
    for rnd in ("after", "after2"):
        for line in (RUNS / "2026-12-06-h100-drift" / f"truth-{rnd}.jsonl").read_text(
                encoding="utf-8").splitlines():
            t = json.loads(line)
            steps = t["readings"]
            rows.append(ledger.new_reading(
                quantity=f"truth/{t['spec']}/{t['batch']}x{t['seq']}/step_seconds",
                value=t["step_seconds"], unit="s", tag="MEASURED", device=t["device"],
                step_indices=f"{steps[0]['steps'][0]}-{steps[-1]['steps'][1]}",
                torch=t["torch"], commit=COMMIT, date=datetime(2026, 12, 6),
                command=f"python3 benches/step_truth.py {t['spec']} --shape "
                        f"{t['batch']}x{t['seq']} --blocks 5 --per-block 10 (fresh process; "
                        f"lab/scripts/device-2026-12-06-drift.sh, round {rnd})"))
    return rows


def main(path: str, drift: bool = False) -> int:
    if drift:
        rows = drift_rows()
        ledger.append(path, rows)
        print(f"{len(rows)} readings appended to {path}")
        return 0
    rows = []
    for folder, name, what, script, note in ROWS:
        doc = json.loads(gzip.decompress((RUNS / folder / f"{name}.json.gz").read_bytes()))
        env = doc["environment"]
        rows.append(ledger.new_reading(
            quantity=f"certify/{what}/elapsed_seconds", value=env["elapsed_seconds"],
            unit="s", tag="MEASURED", device=env["device_name"], torch=env["torch_version"],
            commit=COMMIT,
            date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify -w {what} ({script}; {note}; {folder}/{name}.json)"))
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--drift" in sys.argv[2:]))
