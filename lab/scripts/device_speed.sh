#!/usr/bin/env bash
# The default certify on a lent GPU, timed, and where its time went (issues 2 and 4:
# at most 90 s in all, at most 20 s of probes). Also the cuda-marked speed tests.
# Run from the repository root with PYTHONPATH holding src (and pydantic). Outputs: $OUT.
set -uo pipefail
OUT="${OUT:-./out}"; mkdir -p "$OUT"
export PYTHONPATH="$(pwd)/src:$(pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
( time timeout 300 python3 -m afford certify --out "$OUT/speed.json" --force --json \
    > "$OUT/speed.summary.json" 2> "$OUT/speed.err" ) 2> "$OUT/speed.time"
cat "$OUT/speed.time"
python3 benches/speed_report.py "$OUT/speed.json" | tee "$OUT/speed.txt"
timeout 120 python3 -m pytest -q tests/test_speed.py 2>&1 | tail -3 | tee -a "$OUT/speed.txt"
