"""Ledger rows for the late-night session's device calls of 2026-12-06 (run once per folder,
at the commit that added it): each certify's elapsed seconds, MEASURED, with their
provenance, the tree each ran named (this session's start, ``e7cc832``, unpacked beside the
tree as ``.base``; or the session's tree of the call).

    python3 lab/scripts/ledger_2026_12_06i.py lab/history.tsv FOLDER COMMIT

FOLDER: a folder of lab/device-runs with ``cert-{new,base}-{default,hf}-N.json.gz`` (from
``lab/scripts/device-2026-12-06-cuts.sh``); COMMIT: the commit of its ``new`` tree.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from datetime import datetime
from pathlib import Path

from afford.schema import ledger

RUNS = Path(__file__).parents[1] / "device-runs"
BASE = "e7cc832"
HF = "hf:opt@d1024L16H16F4096V50272"


def rows_for(folder: str, commit: str) -> list:
    rows = []
    for path in sorted((RUNS / folder).glob("cert-*.json.gz")):
        m = re.fullmatch(r"cert-(new|base)-(default|hf)-(\d+)\.json\.gz", path.name)
        if m is None:
            continue
        tree, what, n = m.groups()
        doc = json.loads(gzip.decompress(path.read_bytes()))
        env = doc["environment"]
        args = f" -w {HF}" if what == "hf" else ""
        rows.append(ledger.new_reading(
            quantity=f"certify/{HF if what == 'hf' else 'default'}/elapsed_seconds",
            value=env["elapsed_seconds"], unit="s", tag="MEASURED",
            device=env["device_name"], torch=env["torch_version"],
            commit=BASE if tree == "base" else commit,
            date=datetime.fromisoformat(env["started_at"].replace("Z", "+00:00")),
            command=f"afford certify{args} (run {n} of the call, the {tree} tree; "
                    f"lab/scripts/device-2026-12-06-cuts.sh; {folder}/{path.name[:-3]})"))
    return rows


def main(path: str, folder: str, commit: str) -> int:
    rows = rows_for(folder, commit)
    ledger.append(path, rows)
    print(f"{len(rows)} readings appended to {path}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
