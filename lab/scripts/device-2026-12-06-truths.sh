#!/bin/bash
# Device call of 2026-12-06 (run at the commit recorded in log.txt): fresh-process truths that
# do not depend on afford's code, taken first so that they exist whatever later calls do.
#  1. the ladder's truth: tinylm at 1.5-9x the largest size the sizes stage certifies
#     (d1024 L16, 203M), and a GPT-NeoX at ~3x its certified 267M, each at 8 x 1024 in bf16,
#     one fresh process each (benches/step_truth.py);
#  2. `afford certify -w hf:gpt_neox@d1024L16H16F4096V32000` (this commit's code) and its truth
#     at the 14 shapes truth_shapes takes from it (5 blocks of 10 pipelined steps, the
#     allocator history of 3 warm steps, 2 profiled steps);
#  3. the truth of hf:phi@d1024L20H16F4096V32000 at the same 14 shapes (certified later).
# Everything lands in $OUT/truths.tar.gz, re-packed after each step.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/truths; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/truths.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
T="python3 benches/step_truth.py"
for spec in tinylm@d1024L24H16 tinylm@d1536L20H24 tinylm@d2048L16H32 tinylm@d2048L24H32 \
            tinylm@d2560L24H40 hf:gpt_neox@d2048L16H16F8192V32000; do
  t0=$(now); timeout 120 $T "$spec" --shape 8x1024 --blocks 5 --profile 2 \
    --out $r/ladder-truth.jsonl >>$log 2>&1
  echo "$spec ladder truth rc=$? wall $(since $t0) s" | tee -a $log
done
pack
neox=hf:gpt_neox@d1024L16H16F4096V32000; phi=hf:phi@d1024L20H16F4096V32000
t0=$(now)
AFFORD_TIMELINE=$r/tl-neox.jsonl timeout 200 python3 -m afford certify -w $neox \
  --out $r/cert-neox.json >>$log 2>&1
echo "$neox certify rc=$? wall $(since $t0) s" | tee -a $log
pack
for spec in $neox $phi; do
  t0=$(now); n=$(echo "$spec" | cut -d@ -f1 | tr ':' '_')
  timeout 170 $T "$spec" --cert $r/cert-neox.json --blocks 5 --trace 3 --profile 2 \
    --out $r/truth-$n.jsonl >>$log 2>&1
  echo "$spec truth rc=$? wall $(since $t0) s" | tee -a $log
  pack
done
