#!/bin/bash
# Device call of 2026-12-06 (evening session; the commit is in log.txt): certify's time at
# this session's start (6ed9fc1, its src unpacked as .base/src beside the tree, carried) and
# now (the agreement rule: children after the second skip the points the first two settled;
# the step-time fits' closed-form Jacobian), on one machine, interleaved:
#   MODE=default: the default certify base, new, new, base, new; first the CUDA tests of the
#                 two new paths (the profiling child's skipped points, its timed ones)
#   MODE=hf:      certify -w $SPEC base, new, new, base, new
#   RUNS="new:default base:hf ...": those runs in that order instead (TESTS=1: the CUDA tests
#                 of tests/unit/test_device_time.py first)
# Each run under its own timeout, skipped when the call's budget (BUDGET, s) cannot hold it;
# $OUT/run.tar.gz re-packed after each.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
r=/tmp/agree; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
MODE=${MODE:-default}; SPEC=${SPEC:-hf:gpt_neox@d1024L16H16F4096V32000}; BUDGET=${BUDGET:-580}
if [ "$MODE" = default ] && [ -z "${RUNS:-}" ] || [ -n "${TESTS:-}" ]; then
  PYTHONPATH=/tmp/site:$PWD/src timeout 120 python3 -m pytest -q -m cuda -p no:cacheprovider \
    tests/unit/test_device_time.py >$r/pytest-cuda.txt 2>&1
  echo "pytest -m cuda tests/unit/test_device_time.py rc=$? $(tail -1 $r/pytest-cuda.txt)" | tee -a $log
fi
cert() {  # name src-folder timeout
  left=$(( BUDGET - $(date +%s) + T0 ))
  if [ $left -lt $3 ]; then echo "certify $1 skipped: $left s left" | tee -a $log; return; fi
  if [ "$MODE" = hf ]; then w=(-w "$SPEC"); else w=(); fi
  t0=$(now)
  PYTHONPATH=/tmp/site:$2/src AFFORD_TIMELINE=$r/tl-$1.jsonl timeout $3 \
    python3 -m afford certify "${w[@]}" --out $r/cert-$1.json >>$log 2>&1
  echo "certify $1 ($2) ${w[*]} rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
if [ -n "${RUNS:-}" ]; then  # e.g. RUNS="new:default base:default new:hf"
  n=0
  for run in $RUNS; do
    n=$((n + 1)); tree=${run%%:*}; what=${run#*:}
    if [ "$tree" = base ]; then src=$PWD/.base; else src=$PWD; fi
    if [ "$what" = hf ]; then MODE=hf; t=110; else MODE=default; t=120; fi
    cert $tree-$what-$n $src $t
  done
else
  cert base-1 $PWD/.base 120
  cert new-1 $PWD 120
  cert new-2 $PWD 120
  cert base-2 $PWD/.base 120
  cert new-3 $PWD 120
fi
echo "done $(date -u +%FT%TZ)" >>$log
pack
