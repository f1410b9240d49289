#!/bin/bash
# Device call for issue 39 (the scale ladder): a same-machine pair, in about 4 minutes.
#  1. `afford certify` with no flags (this branch's default: the ladder's three sizes, tinylm
#     d512 L8 / d1024 L12 / d2048 L8 at 8 x 1024, timed inside the sweep's children) under a
#     timeline, so the stage seconds and the sizes' share of the sweep can be read;
#  2. tinylm at 3x, 4.7x and 6.7x the largest size it certifies (d2048 L8, 403M): d2048 L24
#     (1.21B), d2560 L24 (1.89B), d3072 L24 (2.72B), each at 8 x 1024 bf16 in a fresh process
#     (benches/step_truth.py: 5 blocks of 10 pipelined steps, 2 profiled steps);
#  3. benches/ladder_truth.py: the ladder's per-step figure (and device busy time) against
#     those truths, and `afford ladder` of the certificate as a user sees it.
# Run from the repository root:  bash lab/scripts/device-ladder-truth.sh
# $OUT receives 8 files: cert-default.json, tl-default.jsonl, timeline.txt (per child and
# point: the seconds each took, so the ladder sizes' share of the sweep is read off),
# ladder-truth.jsonl, ladder-vs-truth.md, ladder-vs-truth.json, ladder.txt, log.txt.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
log=$OUT/log.txt
now() { date +%s.%N; }
since() { python3 -c "print('%.1f' % ($(date +%s.%N) - $1))"; }
{ date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'
} >>$log 2>&1
t0=$(now)
AFFORD_TIMELINE=$OUT/tl-default.jsonl timeout 170 python3 -m afford certify \
  --out $OUT/cert-default.json >>$log 2>&1
echo "default certify rc=$? wall $(since $t0) s" | tee -a $log
python3 benches/timeline_report.py $OUT/tl-default.jsonl > $OUT/timeline.txt 2>>$log
grep -E "point .*tinylm@d(1024L12H16|2048L8H32)" $OUT/timeline.txt \
  | sed -E 's/.*\(\+([0-9.]+) s\)/\1/' \
  | awk '{s += $1} END {print "ladder sizes in the sweep children:", s, "s"}' | tee -a $log
python3 - >>$log 2>&1 <<'EOF'
import json, os
c = json.load(open(os.environ["OUT"] + "/cert-default.json"))
print("stage seconds", c["environment"].get("stage_seconds"))
s = c.get("sizes") or {}
for z in s.get("sizes", []):
    p = z["point"]
    print(z["spec"], z["params"], p.get("median_seconds"), p.get("device_busy_seconds"),
          p.get("kernels_per_step"), (p.get("flops") or {}).get("gemm"))
law = s.get("size_law") or {}
print("held out", law.get("held_out"), "notes", law.get("notes"))
EOF
for spec in tinylm@d2048L24H32 tinylm@d2560L24H40 tinylm@d3072L24H48; do
  t0=$(now); timeout 60 python3 benches/step_truth.py "$spec" --shape 8x1024 --blocks 5 \
    --profile 2 --out $OUT/ladder-truth.jsonl >>$log 2>&1
  echo "$spec truth rc=$? wall $(since $t0) s" | tee -a $log
done
python3 benches/ladder_truth.py $OUT/cert-default.json $OUT/ladder-truth.jsonl \
  --json $OUT/ladder-vs-truth.json > $OUT/ladder-vs-truth.md 2>>$log
python3 -m afford ladder $OUT/cert-default.json --params 7.5M,124M,350M,1B:d2048L24,1B,3B \
  > $OUT/ladder.txt 2>&1
echo "done $(date -u +%FT%TZ)" >>$log
