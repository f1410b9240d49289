#!/bin/bash
# Device call of 2026-12-06 (late night session; the commit is in log.txt): certify's time at
# this session's start (e7cc832, its src unpacked as .base/src beside the tree, carried) and
# now (the settled points not profiled, their busy time read off the wall; a precise median
# stopping at 6 steps in blocks of 3; the synced witness on the floor only; the ceilings'
# refit started as the probes free the device), on one machine, interleaved:
#   RUNS="new:default base:default new:hf ...": those runs in that order (hf: -w $SPEC)
#   TESTS=1: the CUDA tests of tests/unit/test_device_time.py first
# Each run under its own timeout, skipped when the call's budget (BUDGET, s) cannot hold it;
# $OUT/run.tar.gz re-packed after each; a line per run with its elapsed and stage seconds.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
# a fresh folder each call: a warm machine keeps /tmp, and an old certificate of the same name
# made a later call's certify exit 2 (2026-12-07)
r=/tmp/cuts; rm -rf $r; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
SPEC=${SPEC:-hf:opt@d1024L16H16F4096V50272}; BUDGET=${BUDGET:-580}
if [ -n "${TESTS:-}" ]; then
  PYTHONPATH=/tmp/site:$PWD/src timeout 120 python3 -m pytest -q -m cuda -p no:cacheprovider \
    tests/unit/test_device_time.py >$r/pytest-cuda.txt 2>&1
  echo "pytest -m cuda tests/unit/test_device_time.py rc=$? $(tail -1 $r/pytest-cuda.txt)" | tee -a $log
fi
summary() {  # cert path
  python3 - "$1" <<'PY' 2>/dev/null
import json, sys
c = json.load(open(sys.argv[1]))
e = c["environment"]; v = c.get("time_verdict") or {}
st = " ".join(f"{k} {s:.1f}" for k, s in (e.get("stage_seconds") or {}).items() if s >= 0.05)
print(f"  elapsed {e['elapsed_seconds']:.1f} s ({st}); time verdict {v.get('label')}")
PY
}
cert() {  # name src-folder timeout what
  left=$(( BUDGET - $(date +%s) + T0 ))
  if [ $left -lt $3 ]; then echo "certify $1 skipped: $left s left" | tee -a $log; return; fi
  if [ "$4" = hf ]; then w=(-w "$SPEC"); else w=(); fi
  t0=$(now)
  PYTHONPATH=/tmp/site:$2/src AFFORD_TIMELINE=$r/tl-$1.jsonl timeout $3 \
    python3 -m afford certify "${w[@]}" --out $r/cert-$1.json >>$log 2>&1
  rc=$?
  echo "certify $1 ($2) ${w[*]} rc=$rc wall $(since $t0) s" | tee -a $log
  [ $rc = 0 ] || [ $rc = 3 ] && summary $r/cert-$1.json | tee -a $log
  pack
}
n=0
for run in ${RUNS:-new:default base:default new:default base:default new:default}; do
  n=$((n + 1)); tree=${run%%:*}; what=${run#*:}
  if [ "$tree" = base ]; then src=$PWD/.base; else src=$PWD; fi
  if [ "$what" = hf ]; then t=110; else t=100; fi
  cert $tree-$what-$n $src $t $what
done
echo "done $(date -u +%FT%TZ)" >>$log
pack
