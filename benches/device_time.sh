#!/usr/bin/env bash
# Issue 19 on a lent GPU: the step-time model measured by certify itself, about 5 minutes.
#   1. the default certify, timed (target <= 60 s wall; where the time goes: its stages);
#   2. certify of two transformers models as user workloads (benches/hf_models.py: GPT-2 124M
#      and a Llama d768 L12 with grouped-query attention), batch 4 x seq 256..2048, so the
#      sweep reaches the work regime (GPT-2's floor is ~17 ms; 4 x 1024 is ~31 ms);
#   3. afford compare of each certificate with itself, --tol 5%: exit 0 expected;
#   4. the before/after table of each (benches/time_report.py): shape, measured, old law,
#      new model, errors; held-out medians and worsts; stage seconds; time verdict;
#   5. the floor diagnostic (benches/device_floor.py): tinylm 8 x 1024 alone, beside an idle
#      CUDA context, beside a child's start-up, pinned to the GPU's NUMA-local CPUs.
# Needs only what is carried: .whl/ (pydantic and its kin; see /work/shared/tools/
# device-wheels.sh). Run from the repository root; outputs under $OUT.
set -uo pipefail
OUT="${OUT:-./out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1
export PYTHONPATH="/tmp/site:$(pwd)/src:$(pwd)/benches${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 COLUMNS=160
LOG="$OUT/device_time.log"
step() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*" | tee -a "$LOG"; }

step "environment"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu --format=csv
  nvidia-smi topo -m 2>&1 | head -12
  lscpu 2>/dev/null | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA)"
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  git log --oneline -1 2>/dev/null; uptime; } 2>&1 | tee -a "$LOG"

step "1. default certify"
t0=$(date +%s.%N)
timeout 240 python3 -m afford certify --out "$OUT/cert-default.json" --force --json \
  > "$OUT/cert-default.summary.json" 2> "$OUT/cert-default.err"
rc=$?
t1=$(date +%s.%N)
echo "default certify: exit $rc, wall $(python3 -c "print(f'{$t1 - $t0:.1f}')") s" | tee -a "$LOG"

step "2. transformers models as user workloads"
t0=$(date +%s.%N)
timeout 300 python3 -m afford certify -w hf_models:gpt2 -w hf_models:llama \
  --sweep seq=256,512,1024,2048 --no-memory --no-probes \
  --out "$OUT/cert-hf.json" --force --json > "$OUT/cert-hf.summary.json" 2> "$OUT/cert-hf.err"
rc=$?
t1=$(date +%s.%N)
echo "hf certify: exit $rc, wall $(python3 -c "print(f'{$t1 - $t0:.1f}')") s" | tee -a "$LOG"

step "3. each certificate compared with itself (--tol 5%)"
for c in default hf; do
  timeout 60 python3 -m afford compare "$OUT/cert-$c.json" "$OUT/cert-$c.json" --tol 5% \
    > "$OUT/compare-$c.txt" 2>&1
  echo "compare $c with itself: exit $?" | tee -a "$LOG"
done

step "4. before/after tables"
python3 benches/time_report.py "$OUT/cert-default.json" "$OUT/cert-hf.json" \
  | tee "$OUT/time_report.txt" | tee -a "$LOG"

step "5. the floor: alone, beside a context, beside a start-up, pinned"
timeout 150 python3 benches/device_floor.py "$OUT/floor.jsonl" 3 2>&1 | tee -a "$LOG"
step "done"; uptime | tee -a "$LOG"
