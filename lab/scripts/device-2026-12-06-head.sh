#!/bin/bash
# Device call of 2026-12-06 (late session; the commit is in log.txt): the tree as it stands,
# validated where it changed the CUDA path after the last device run (225bd89: the
# profiling child's skipped shapes known by the reason the item carries; assemble_point
# handing device_side every child's record):
#   every CUDA test (pytest -m cuda), then RUNS (default: "default default hf") certify runs
#   of this tree, each under its own timeout, skipped when the call's budget (BUDGET, s)
#   cannot hold it; $OUT/run.tar.gz re-packed after each.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
r=/tmp/head; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
SPEC=${SPEC:-hf:gpt_neox@d1024L16H16F4096V32000}; BUDGET=${BUDGET:-580}
PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -m cuda \
  -p no:cacheprovider >$r/pytest-cuda.txt 2>&1
echo "pytest -m cuda rc=$? $(tail -1 $r/pytest-cuda.txt)" | tee -a $log
pack
n=0
for what in ${RUNS:-default default hf}; do
  n=$((n + 1))
  if [ "$what" = hf ]; then w=(-w "$SPEC"); t=110; else w=(); t=120; fi
  left=$(( BUDGET - $(date +%s) + T0 ))
  if [ $left -lt $t ]; then echo "certify $what-$n skipped: $left s left" | tee -a $log; continue; fi
  t0=$(now)
  PYTHONPATH=/tmp/site:$PWD/src AFFORD_TIMELINE=$r/tl-$what-$n.jsonl timeout $t \
    python3 -m afford certify "${w[@]}" --out $r/cert-$what-$n.json >>$log 2>&1
  echo "certify $what-$n ${w[*]} rc=$? wall $(since $t0) s" | tee -a $log
  pack
done
echo "done $(date -u +%FT%TZ)" >>$log
pack
