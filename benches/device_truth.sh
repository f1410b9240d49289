#!/bin/bash
# One device call (the time and memory truth bench): for each SPEC, `afford certify -w SPEC`
# (with its AFFORD_TIMELINE and wall time), then benches/step_truth.py at the shapes that
# truth_shapes takes from that certificate, each in a fresh process. Everything lands in
# $OUT/truth.tar.gz, re-packed after each step so a call cut short keeps what it measured.
#   bash benches/device_truth.sh [--tests [K]] [--default N] [=]SPEC...
# --tests: the cuda-marked tests first (those matching -k K where K is given, K not a spec);
# --default N: N timed runs of the default certify; =SPEC: certify SPEC only, no truth (a
# SPEC given again is certified again, its files numbered: cert-NAME-2.json, ...).
# Then `python3 benches/certify_seconds.py truth/` says where each run's time went.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/truth; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/truth.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { python3 -c 'import time; print(time.time())'; }
since() { python3 -c "import time; print('%.1f' % (time.time() - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
if [ "${1:-}" = --tests ]; then
  shift; t0=$(now); k=()
  case "${1:-}" in ""|--*|=*|*:*) ;; *) k=(-k "$1"); shift ;; esac
  python3 -m pytest -q -m cuda -p no:cacheprovider "${k[@]}" tests >$r/pytest-cuda.txt 2>&1
  echo "cuda tests rc=$? wall $(since $t0) s: $(tail -1 $r/pytest-cuda.txt)" | tee -a $log
  pack
fi
if [ "${1:-}" = --default ]; then
  n=$2; shift 2
  for i in $(seq 1 "$n"); do
    t0=$(now)
    AFFORD_TIMELINE=$r/tl-default-$i.jsonl python3 -m afford certify \
      --out $r/cert-default-$i.json >>$log 2>&1
    echo "default certify run $i rc=$? wall $(since $t0) s" | tee -a $log
    pack
  done
fi
declare -A seen
for arg in "$@"; do
  spec=${arg#=}
  name=$(echo "$spec" | tr ':@+=/' '_____')
  seen[$name]=$(( ${seen[$name]:-0} + 1 ))
  [ "${seen[$name]}" -gt 1 ] && name=$name-${seen[$name]}
  t0=$(now)
  AFFORD_TIMELINE=$r/tl-$name.jsonl python3 -m afford certify -w "$spec" \
    --out $r/cert-$name.json >>$log 2>&1
  rc=$?
  echo "$spec certify rc=$rc wall $(since $t0) s" | tee -a $log
  pack
  [ "$arg" != "$spec" ] && continue
  # exit 2: bad input or the workload refused (no model to time); 3, a partial certificate,
  # still has its points
  [ $rc = 2 ] && { echo "$spec truth skipped: certify refused it" | tee -a $log; continue; }
  t0=$(now)
  python3 benches/step_truth.py "$spec" --cert $r/cert-$name.json --trace 3 \
    --out $r/truth-$name.jsonl >>$log 2>&1
  echo "$spec truth rc=$? wall $(since $t0) s" | tee -a $log
  pack
done
