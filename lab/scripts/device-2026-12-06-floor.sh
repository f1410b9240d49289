#!/bin/bash
# The launch floor on one machine (2026-12-06): `afford certify -w hf:gpt_neox@d1024L16H16F4096V32000`
# and, right after, its truth at three host-bound shapes and one device-bound one in fresh
# processes (benches/step_truth.py, 5 blocks of 10 pipelined steps): do the children's
# floor and a fresh process's agree when both run on the same machine? (The morning's
# truths and the afternoon's certificates, two H100 machines, read 51-58 ms and 36-40 ms.)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
log=$OUT/log.txt; spec=hf:gpt_neox@d1024L16H16F4096V32000
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  grep -m1 "model name" /proc/cpuinfo; } >>$log 2>&1
timeout 110 python3 -m afford certify -w $spec --out $OUT/cert-neox-floor.json >>$log 2>&1
echo "certify rc=$?" >>$log
timeout 80 python3 benches/step_truth.py $spec --shape 8x256 --shape 2x512 --shape 1x256 \
  --shape 16x1024 --blocks 5 --profile 0 --out $OUT/truth-floor.jsonl >>$log 2>&1
echo "truth rc=$?" >>$log
