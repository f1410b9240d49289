#!/bin/bash
# One device call (issue 27): certify the default workloads and transformers models with the
# two-sided step model, each with an AFFORD_TIMELINE, then the cuda-marked device-time test.
#   bash lab/scripts/device_sides.sh SPEC...   (default: the built-in default)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
log=$OUT/log.txt
for spec in "$@"; do
  name=$(echo "$spec" | tr ':@+=' '____')
  args=(); [ "$spec" != default ] && args=(-w "$spec")
  t0=$(python3 -c 'import time; print(time.time())')
  AFFORD_TIMELINE=$OUT/tl-$name.jsonl python3 -m afford certify "${args[@]}" \
    --out "$OUT/cert-$name.json" >>"$log" 2>&1
  rc=$?
  python3 -c "import time; print('$spec rc=$rc wall %.1f s' % (time.time() - $t0))" | tee -a "$log"
done
