#!/bin/bash
# Device call of 2026-12-06 (evening session; tree 07b19c4 plus this script): does a neighbour
# process starting up (what certify's children spawned ahead do while a child measures:
# import torch and transformers, compiled from source on an image without bytecode, then a
# CUDA context) slow a host-bound step? For each SPEC, benches/step_truth.py at two of its
# launch-floor shapes, alternately quiet (as the truth benches run) and beside NOISE
# processes that start such a process over and over, RUNS times each; every run's workers
# fresh. Everything lands in $OUT/contend.tar.gz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/contend; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/contend.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc; python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
NOISE=${NOISE:-3}; RUNS=${RUNS:-3}
NEIGHBOUR='import torch, transformers
from transformers import AutoConfig; AutoConfig.for_model("opt")
torch.cuda.init(); x = torch.ones(8, 8, device="cuda"); y = x @ x
p = torch.nn.Parameter(y.sum().reshape(1)); p.grad = torch.ones_like(p)
torch.optim.AdamW([p], fused=True).step(); float(p.sum())'
neighbour() {  # one certify child's start-up, again and again, until $r/stop exists
  while [ ! -e $r/stop ]; do
    PYTHONDONTWRITEBYTECODE=1 python3 -c "$NEIGHBOUR" afford-neighbour >/dev/null 2>&1
  done
}
for spec in "$@"; do
  name=$(echo "$spec" | tr ':@+=/' '_____')
  for i in $(seq 1 $RUNS); do
    for cond in quiet noisy; do
      if [ $cond = noisy ]; then
        for k in $(seq 1 $NOISE); do neighbour & done
      fi
      t0=$(date +%s.%N)
      python3 benches/step_truth.py "$spec" --shape 2x512 --shape 8x256 --blocks 5 \
        --per-block 10 --profile 0 --out $r/$name-$cond-$i.jsonl >>$log 2>&1
      echo "$spec $cond $i rc=$? wall $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))") s" | tee -a $log
      touch $r/stop; pkill -f afford-neighbour; wait; rm -f $r/stop
      pack
    done
  done
done
echo "done $(date -u +%FT%TZ)" >>$log; pack
