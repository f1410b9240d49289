#!/bin/bash
# The README's first session on one GPU, as its GPU paragraph tells a GPU user to run it:
# `afford certify -o cert.json`, then predict, size, plan (-o plan.json) and preflight with
# examples/runs/example.toml on the `local` platform, then the ladder. Each line's exit
# code, wall seconds and first 12 lines go to $OUT/summary.txt, every line's whole output to
# $OUT/outputs.txt, the certificate and the plan to $OUT (four files). What it should show: every
# line exits 0 (certify 0 whatever its verdicts; preflight GO, or NO-GO only where its
# reasons say a check fails), each answer first, certify's last three lines its verdicts.
# About 3 minutes on an H100 or H200 (certify's default, three workloads: 1-2 minutes).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
w=/tmp/first; rm -rf $w; mkdir -p $w; cp -r examples $w/; cd $w
sum=$OUT/summary.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; } >$sum
step() {
  t0=$(date +%s.%N)
  timeout 300 python3 -m afford "$@" >$w/out.txt 2>&1; rc=$?
  wall=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))")
  { echo "== afford $*: rc=$rc, $wall s"; head -12 $w/out.txt; } >>$sum
  { echo "== afford $*: rc=$rc, $wall s"; cat $w/out.txt; } >>$OUT/outputs.txt
}
step certify -o cert.json
tail -8 $w/out.txt >>$sum
step predict cert.json --batch 16 --seq 2048
step size cert.json --seq 4096
step plan cert.json --platform local --run examples/runs/example.toml -o plan.json
step preflight cert.json --platform local --run examples/runs/example.toml
step ladder cert.json --budget 7d
cp cert.json plan.json $OUT/ 2>/dev/null
