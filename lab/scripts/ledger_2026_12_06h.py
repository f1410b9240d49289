"""Ledger rows for the late-evening session's device calls of 2026-12-06 (run once, at the
commit that added it), one H100, the tree of 4b0f9ab: each certify's elapsed seconds,
MEASURED, with their provenance, from lab/device-runs/2026-12-06-h100-families-2 (StarCoder2
and OLMo2, before their truths) and 2026-12-06-h100-drift (GPT-BigCode between two rounds of
floor truths). The fresh-process truths go in through ``benches/truth_report.py --ledger``,
except the drift call's second and third rounds, whose memory readings repeat the first's to
the byte (a reading is appended once): their step times are appended here (``--drift``).

    python3 lab/scripts/ledger_2026_12_06h.py lab/history.tsv
    python3 lab/scripts/ledger_2026_12_06h.py lab/history.tsv --drift
    python3 lab/scripts/ledger_2026_12_06h.py lab/history.tsv --h200

``--h200``: the H200 calls of lab/device-runs/2026-12-06-h200-trace-minute (the tree of
abf148b): four default certifies' elapsed seconds, and the traced fresh processes' step and
peak memory (OLMo2 at six shapes, 16 x 384 twice; StarCoder2 at 16 x 384).
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


H200 = RUNS / "2026-12-06-h200-trace-minute"
H200_COMMIT = "abf148b"


def h200_rows() -> list:
    rows = []
    for i in range(1, 5):
        doc = json.loads(gzip.decompress((H200 / f"cert-default-{i}.json.gz").read_bytes()))
        env = doc["environment"]
        note = "the machine's first certify: fills the bytecode cache" if i == 1 else \
            f"median-of-3 run {i - 1}"
        rows.append(ledger.new_reading(
            quantity="certify/default/elapsed_seconds", value=env["elapsed_seconds"], unit="s",
            tag="MEASURED", device=env["device_name"], torch=env["torch_version"],
            commit=H200_COMMIT,
            date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify ({note}; 2026-12-06-h200-trace-minute/cert-default-{i}.json)"))
    seen: dict[str, int] = {}
    for name in ("olmo2-trace", "starcoder2-trace"):
        for line in gzip.decompress((H200 / f"{name}.jsonl.gz").read_bytes()).decode().splitlines():
            t = json.loads(line)
            where = f"truth/{t['spec']}/{t['batch']}x{t['seq']}"
            seen[where] = seen.get(where, 0) + 1
            steps = t["readings"]
            cmd = (f"python3 benches/step_truth.py {t['spec']} --shape {t['batch']}x{t['seq']} "
                   f"--blocks 2 --per-block 5 --trace 3 (fresh process {seen[where]}; "
                   "lab/scripts/device-2026-12-06-olmo2-trace.sh)")
            base = dict(tag="MEASURED", device=t["device"], torch=t["torch"],
                        commit=H200_COMMIT, date=datetime(2026, 12, 6), command=cmd)
            rows.append(ledger.new_reading(
                quantity=f"{where}/step_seconds", value=t["step_seconds"], unit="s",
                step_indices=f"{steps[0]['steps'][0]}-{steps[-1]['steps'][1]}", **base))
            if seen[where] == 1:  # a second process's bytes repeat the first's exactly
                for q in ("peak_allocated_bytes", "peak_reserved_bytes"):
                    rows.append(ledger.new_reading(quantity=f"{where}/{q}", value=t[q],
                                                   unit="B", **base))
    return rows


def main(path: str, drift: bool = False, h200: bool = False) -> int:
    if h200:
        rows = h200_rows()
        ledger.append(path, rows)
        print(f"{len(rows)} readings appended to {path}")
        return 0
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
    sys.exit(main(sys.argv[1], "--drift" in sys.argv[2:], "--h200" in sys.argv[2:]))
