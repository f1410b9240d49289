#!/usr/bin/env bash
# Issue 7 on a GPU: throughput across model sizes, the scale ladder, the measured levers.
# Run from the repository root; python3 must have torch with CUDA and afford importable
# (PYTHONPATH=src). Everything lands under $OUT (default ./out). About 4-5 minutes on an
# H200 (torch.compile's first, cold compile is most of the levers' time):
#   1. afford certify --sizes (tinylm only, short main sweep): the size law and phase split
#   2. afford ladder for 7.5M, 20M, 124M (GPT-2 small shape) and 1B at a 7-day budget
#   3. afford levers on tinylm@q3 and a launch-bound tiny shape (d64 L2, batch 4 x 256)
#   4. the ladder again, now listing the measured levers; the cuda-marked tests
#   5. a summary (summary.md) and history rows (history_rows.tsv)
set -uo pipefail
OUT="${OUT:-./out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export COLUMNS=220
LOG="$OUT/device_ladder.log"
step() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

step "environment"
"$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" \
    2>&1 | tee -a "$LOG"

step "1. certify --sizes"
timeout 240 "$PY" -m afford certify --workload tinylm --sweep seq=512,1024 --sizes --no-gates \
    --out "$OUT/cert-sizes.json" --force > "$OUT/certify.txt" 2> "$OUT/certify.err"
echo "rc=$?" | tee -a "$LOG"

PARAMS="7.5M,20M,124M:d768L12H12,1B:d2048L20H16"
step "2. ladder"
"$PY" -m afford ladder "$OUT/cert-sizes.json" --params "$PARAMS" --budget 7d \
    > "$OUT/ladder.txt" 2>&1; echo "rc=$?" | tee -a "$LOG"
"$PY" -m afford ladder "$OUT/cert-sizes.json" --params "$PARAMS" --budget 7d --json \
    > "$OUT/ladder.json" 2>> "$OUT/ladder.err"

step "3. levers (q3 and the launch-bound tiny shape)"
timeout 360 "$PY" -m afford levers "$OUT/cert-sizes.json" -w tinylm@q3 -w tinylm@d64L2H2b4s256 \
    --out "$OUT/cert-levers.json" --force > "$OUT/levers.txt" 2> "$OUT/levers.err"
echo "rc=$?" | tee -a "$LOG"

step "4. ladder with the measured levers; cuda tests"
"$PY" -m afford ladder "$OUT/cert-levers.json" --params "$PARAMS" --budget 7d \
    > "$OUT/ladder-with-levers.txt" 2>&1
if [ "$SECONDS" -lt 420 ]; then
    timeout 150 "$PY" -m pytest -q -m cuda tests/test_levers_cuda.py \
        > "$OUT/pytest-cuda.txt" 2>&1; echo "pytest rc=$?" | tee -a "$LOG"
else
    echo "skipped the cuda tests: $SECONDS s spent already" | tee -a "$LOG"
fi

step "5. summary"
"$PY" lab/scripts/device_ladder_summary.py "$OUT" 2>&1 | tee -a "$LOG"
step "done"
