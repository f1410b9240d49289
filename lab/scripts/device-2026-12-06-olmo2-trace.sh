#!/bin/bash
# Device call of 2026-12-06 (late evening session): why did the memory answer of OLMo2 d1024
# L16 (lab/device-runs/2026-12-06-h100-families-2) say 6.6 % less reserved than a fresh
# process at 16 x 384, a shape inside its measured range? Fresh processes with their
# allocator history recorded (benches/step_truth.py --trace 3) at that shape twice and at its
# neighbours, for benches/trace_compare.py against the certificate on the CPU box; then
# StarCoder2 at the same shape (its answer held there). Then, on an H200 only, the default
# certify N times (benches/device_truth.sh --default N), for the minute there.
# $OUT/trace.tar.gz, $OUT/truth.tar.gz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
r=/tmp/trace; mkdir -p $r; log=$r/log.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} >>$log 2>&1
S=hf:olmo2@d1024L16H16F4096V50272
python3 benches/step_truth.py $S --shape 16x384 --shape 16x384 --shape 12x384 --shape 16x320 \
  --shape 24x384 --shape 16x448 --blocks 2 --per-block 5 --profile 0 --trace 3 \
  --out $r/olmo2-trace.jsonl >>$log 2>&1
echo "olmo2 trace rc=$?" | tee -a $log
python3 benches/step_truth.py hf:starcoder2@d1024L16H16F4096V50272 --shape 16x384 --blocks 2 \
  --per-block 5 --profile 0 --trace 3 --out $r/starcoder2-trace.jsonl >>$log 2>&1
echo "starcoder2 trace rc=$?" | tee -a $log
tar czf "$OUT/trace.tar.gz" -C $r .
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benches/device_truth.sh --default "${1:-4}"
fi
