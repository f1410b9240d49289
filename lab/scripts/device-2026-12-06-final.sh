#!/bin/bash
# The session's last device call (2026-12-06), at the commit in log.txt, on an H100 (the
# machine kind of the morning's truths, lab/device-runs/2026-12-06-h100-truths):
#  1. `afford certify -w hf:phi@d1024L20H16F4096V32000` (the second untuned family; its
#     truth was timed in the morning) and `-w hf:gpt_neox@d1024L16H16F4096V32000` twice
#     (with the morning's, its certify times: a median of 3 is not reached in this budget);
#  2. default `afford certify` (its ladder sizes inside the sweep), then tinylm at 3-6.7x its
#     largest certified size in fresh processes (benches/step_truth.py), the ladder beside them;
#  3. `afford size CERT --batch 2 --seq 8192 --measure` on the GPT-NeoX certificate (the
#     CUDA path of --measure, run for real), then the default certify twice more;
#  4. the Llama + LoRA fresh process at 8 x 256 with its allocator history (trace 3), for
#     benches/trace_compare.py against its certificate offline.
# Each step under its own timeout; $OUT/final.tar.gz re-packed after each. Two calls:
#   bash lab/scripts/device-2026-12-06-final.sh 1   (1, 2, 3 and a second default certify)
#   bash lab/scripts/device-2026-12-06-final.sh 2   (a third default, a second and third
#                                                     GPT-NeoX certify, 4)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/final; mkdir -p $r; log=$r/log.txt
pack() { tar czf "$OUT/final.tar.gz" -C $r . ; cp $log "$OUT/log.txt"; }
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null; git status --porcelain 2>/dev/null | head -5
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
cert() {  # name spec-or-empty timeout
  t0=$(now)
  if [ -n "$2" ]; then w=(-w "$2"); else w=(); fi
  AFFORD_TIMELINE=$r/tl-$1.jsonl timeout $3 python3 -m afford certify "${w[@]}" \
    --out $r/cert-$1.json >>$log 2>&1
  echo "certify $1 ${2:-default} rc=$? wall $(since $t0) s" | tee -a $log
  pack
}
neox=hf:gpt_neox@d1024L16H16F4096V32000; phi=hf:phi@d1024L20H16F4096V32000
part=${1:-1}
if [ "$part" = 2 ]; then
  cert default-3 "" 130
  cert neox-2 $neox 130
  cert neox-3 $neox 130
  t0=$(now); timeout 40 python3 benches/step_truth.py 'hf:llama@d1024L16H16K8F2816V32000+lora=r16' \
    --shape 8x256 --shape 2x512 --trace 3 --blocks 2 --profile 0 --out $r/lora-truth.jsonl >>$log 2>&1
  echo "lora truth rc=$? wall $(since $t0) s" | tee -a $log
  echo "done $(date -u +%FT%TZ)" >>$log
  pack
  exit 0
fi
cert phi $phi 140
cert neox-1 $neox 130
cert default-1 "" 130
for spec in tinylm@d2048L24H32 tinylm@d2560L24H40 tinylm@d3072L24H48; do
  t0=$(now); timeout 45 python3 benches/step_truth.py "$spec" --shape 8x1024 --blocks 5 \
    --profile 2 --out $r/ladder-truth.jsonl >>$log 2>&1
  echo "$spec truth rc=$? wall $(since $t0) s" | tee -a $log
done
python3 benches/ladder_truth.py $r/cert-default-1.json $r/ladder-truth.jsonl \
  --json $r/ladder-vs-truth.json > $r/ladder-vs-truth.md 2>>$log
python3 -m afford ladder $r/cert-default-1.json > $r/ladder.txt 2>&1
pack
cp $r/cert-neox-1.json $r/cert-neox-measured.json
t0=$(now); timeout 60 python3 -m afford size $r/cert-neox-measured.json -w $neox --batch 2 \
  --seq 8192 --measure --json > $r/size-measure.json 2>>$log
echo "size --measure rc=$? wall $(since $t0) s" | tee -a $log
pack
cert default-2 "" 130
echo "done $(date -u +%FT%TZ)" >>$log
pack
