#!/usr/bin/env bash
# Issue 19 on a lent H200: the step-time model as certify measures it, one call (~6 min).
#   1. the default certify, timed (target well under 90 s; its stages say where time goes);
#   2. afford certify -w hf:gpt2 (issue 15: within 90 s), all default stages;
#   3. a workload nobody tuned the model on: a Llama-shaped transformers model
#      (hf:llama@d768L12H12K4V32000F2048: grouped-query attention, the shape of
#      lab/scripts/hf_models.py's llama), sweep and time model only;
#   4. afford compare of each certificate with itself, --tol 5% (exit 0 expected);
#   5. the before/after tables (lab/scripts/time_report.py): shape, measured, old law, new model.
# Needs .whl/ carried (pydantic and its kin). Run from the repository root; outputs in $OUT.
set -uo pipefail
OUT="${OUT:-./out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site ${WHL:-.whl}/*.whl >/dev/null 2>&1
export PYTHONPATH="/tmp/site:$(pwd)/src:$(pwd)/lab/scripts${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 COLUMNS=160
LOG="$OUT/device_time.log"
step() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*" | tee -a "$LOG"; }
wall() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$@"; }

step "environment"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu --format=csv
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  uptime; } 2>&1 | tee -a "$LOG"

run_cert() {  # name timeout args...
  local name=$1 limit=$2; shift 2
  step "certify $name: $*"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout "$limit" python3 -m afford certify "$@" --out "$OUT/cert-$name.json" --force \
    > "$OUT/cert-$name.txt" 2> "$OUT/cert-$name.err"
  rc=$?; t1=$(date +%s.%N)
  echo "certify $name: exit $rc, wall $(wall "$t0" "$t1") s" | tee -a "$LOG"
}

run_cert default 220
run_cert gpt2 160 -w hf:gpt2
run_cert llama 150 -w hf:llama@d768L12H12K4V32000F2048 --no-memory --no-probes

step "each certificate compared with itself (--tol 5%)"
for c in default gpt2 llama; do
  [ -f "$OUT/cert-$c.json" ] || continue
  timeout 60 python3 -m afford compare "$OUT/cert-$c.json" "$OUT/cert-$c.json" --tol 5% \
    > "$OUT/compare-$c.txt" 2>&1
  echo "compare $c with itself: exit $?" | tee -a "$LOG"
done

step "before/after tables"
ls "$OUT"/cert-*.json >/dev/null 2>&1 && python3 lab/scripts/time_report.py "$OUT"/cert-*.json \
  > "$OUT/time_report.txt" 2>&1
step "done"; uptime | tee -a "$LOG"
