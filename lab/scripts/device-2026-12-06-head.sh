#!/bin/bash
# Device call of 2026-12-06 (late session; the commit is in log.txt): the tree as it stands,
# validated where it changed the CUDA path after the last device run (225bd89: the
# profiling child's skipped shapes known by the reason the item carries; assemble_point
# handing device_side every child's record), and the floor's band under the children's
# current timing (a block read once the next is queued, one sync a run) against fresh
# processes:
#   1. every CUDA test (pytest -m cuda);
#   2. certify -w $SPEC (an OPT-like model no test uses), then benches/step_truth.py at
#      $SHAPES (the launch floor), each shape given twice: two fresh processes a shape,
#      5 blocks of 10 steps each;
#   3. RUNS more certify runs of this tree ("default", "hf"), each under its own timeout,
#      skipped when the call's budget (BUDGET, s) cannot hold it.
# $OUT/run.tar.gz re-packed after each step.
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
r=/tmp/head; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/run.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
left() { echo $(( BUDGET - $(date +%s) + T0 )); }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
SPEC=${SPEC:-hf:opt@d1024L16H16F4096V50272}; BUDGET=${BUDGET:-560}
SHAPES=${SHAPES:-1x512 8x256 2x512 8x768}
t0=$(now)
PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -m cuda \
  -p no:cacheprovider tests >$r/pytest-cuda.txt 2>&1
echo "pytest -m cuda rc=$? wall $(since $t0) s: $(tail -1 $r/pytest-cuda.txt)" | tee -a $log
pack
cert() {  # name timeout [-w SPEC]
  local name=$1 t=$2; shift 2
  if [ "$(left)" -lt "$t" ]; then echo "certify $name skipped: $(left) s left" | tee -a $log; return 1; fi
  t0=$(now)
  PYTHONPATH=/tmp/site:$PWD/src AFFORD_TIMELINE=$r/tl-$name.jsonl timeout $t \
    python3 -m afford certify "$@" --out $r/cert-$name.json >>$log 2>&1
  echo "certify $name $* rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
if cert hf-1 130 -w "$SPEC"; then
  args=(); for s in $SHAPES; do args+=(--shape "$s" --shape "$s"); done
  t0=$(now)
  PYTHONPATH=/tmp/site:$PWD/src timeout $(( $(left) > 200 ? 200 : $(left) )) \
    python3 benches/step_truth.py "$SPEC" "${args[@]}" --blocks 5 --out $r/truth-floor.jsonl \
    >>$log 2>&1
  echo "truth ${SHAPES} (two fresh processes each) rc=$? wall $(since $t0) s" | tee -a $log
  pack
fi
n=1
for what in ${RUNS:-default}; do
  n=$((n + 1))
  if [ "$what" = hf ]; then cert hf-$n 130 -w "$SPEC"; else cert default-$n 120; fi
done
echo "done $(date -u +%FT%TZ)" >>$log
pack
