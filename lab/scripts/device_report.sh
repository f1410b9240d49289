#!/usr/bin/env bash
# Issue 8 on a GPU box: the ledger, report and compare paths on a real CUDA certificate.
# Nothing here is CUDA-specific code; it checks that a real GPU certificate goes through
# `afford history add --cert`, `afford report` (Markdown + HTML with plots) and
# `afford compare` against a second, independent certificate of the same box.
#
#   lab/scripts/device_report.sh [COMMITTED_CERT.json]     (outputs under $OUT, default ./out)
#
# Look for: both reports written; compare's verdict (two quick runs of one box should
# REPRODUCE at 10 %; if not, the table says which points and by how much); and, with
# COMMITTED_CERT, whether the committed certificate's laws still describe this box at 10 %.
set -uo pipefail
OUT=${OUT:-./out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
log() { echo "== $*" | tee -a "$OUT/device_report.log"; }

log "certify --quick, twice (independent runs of this box)"
for run in a b; do
    timeout 150 "$PY" -m afford certify --quick --workload tinylm --workload softmax \
        --sweep seq=128,256,512,1024 --sweep s=256,512,1024,2048 \
        --out "$OUT/cert_$run.json" --force >>"$OUT/device_report.log" 2>&1
    echo "certify $run: rc=$?" | tee -a "$OUT/device_report.log"
done

log "history add --cert"
cp lab/history.tsv "$OUT/history.tsv"
"$PY" -m afford history add -f "$OUT/history.tsv" --cert "$OUT/cert_a.json" --json \
    >"$OUT/history_added.json" 2>>"$OUT/device_report.log"
echo "history add: rc=$?" | tee -a "$OUT/device_report.log"
"$PY" -m afford history show -f "$OUT/history.tsv" >"$OUT/history_show.txt" 2>&1

log "report (Markdown with exported plots, self-contained HTML)"
"$PY" -m afford report "$OUT/cert_a.json" --history "$OUT/history.tsv" --expect "Tesla T4" \
    -o "$OUT/report.md" --plots-dir "$OUT/plots" --force 2>&1 | tee -a "$OUT/device_report.log"
"$PY" -m afford report "$OUT/cert_a.json" --history "$OUT/history.tsv" --expect "Tesla T4" \
    -o "$OUT/report.html" --force 2>&1 | tee -a "$OUT/device_report.log"

log "compare a -> b at 10 % (expected: REPRODUCES, exit 0)"
"$PY" -m afford compare "$OUT/cert_a.json" "$OUT/cert_b.json" --tol 10% >"$OUT/compare_ab.txt" 2>&1
echo "compare a b: rc=$?" | tee -a "$OUT/device_report.log"
"$PY" -m afford compare "$OUT/cert_a.json" "$OUT/cert_b.json" --tol 10% --json \
    >"$OUT/compare_ab.json" 2>>"$OUT/device_report.log"
if [ "${1:-}" != "" ]; then
    log "compare $1 -> this box at 10 %"
    "$PY" -m afford compare "$1" "$OUT/cert_a.json" --tol 10% >"$OUT/compare_committed.txt" 2>&1
    echo "compare committed: rc=$?" | tee -a "$OUT/device_report.log"
fi
tail -5 "$OUT/compare_ab.txt"
