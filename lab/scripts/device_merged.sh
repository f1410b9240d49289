#!/usr/bin/env bash
# The merged tree on a lent GPU, in one call (<= 10 min): every cuda-marked test, the default
# certify (timed per stage), a transformers GPT-2 certify, a user arm in afford levers, and the
# commands that read the certificate (compare with itself, ladder with offload, predict, size).
# Run from the repository root with pydantic importable; outputs under $OUT.
set -uo pipefail
OUT="${OUT:-./out}"; mkdir -p "$OUT"
export PYTHONPATH="$(pwd)/src:$(pwd)${PYTHONPATH:+:$PYTHONPATH}" COLUMNS=200 PYTHONUNBUFFERED=1
LOG="$OUT/device_merged.log"
step() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*" | tee -a "$LOG"; }
step "environment"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$LOG"
git rev-parse --short HEAD 2>/dev/null | tee -a "$LOG"
step "cuda-marked tests"
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tail -15 | tee -a "$LOG"
step "default certify"
/usr/bin/time -f "certify wall %e s" timeout 200 python3 -m afford certify -o "$OUT/default.json" \
  > "$OUT/default.txt" 2> "$OUT/default.err"; echo "exit $?" | tee -a "$LOG"
tail -3 "$OUT/default.err" | tee -a "$LOG"
step "hf:gpt2 certify"
/usr/bin/time -f "certify wall %e s" timeout 150 python3 -m afford certify -w hf:gpt2 -o "$OUT/gpt2.json" \
  > "$OUT/gpt2.txt" 2> "$OUT/gpt2.err"; echo "exit $?" | tee -a "$LOG"
tail -3 "$OUT/gpt2.err" | tee -a "$LOG"
step "levers with a user arm"
timeout 90 python3 -m afford levers "$OUT/default.json" -w tinylm@q3 --levers bf16 \
  --arm half=tinylm@d256L4H4b8s1024 --quick --json > "$OUT/levers_arm.json" 2> "$OUT/levers_arm.err"
echo "exit $?" | tee -a "$LOG"
step "readers"
for c in default gpt2; do
  [ -f "$OUT/$c.json" ] || continue
  python3 -m afford compare "$OUT/$c.json" "$OUT/$c.json" --tol 5% > "$OUT/compare_$c.txt" 2>&1
  echo "compare $c exit $?" | tee -a "$LOG"
done
python3 -m afford ladder "$OUT/default.json" --params 124M:d768L12,1B,1.5B > "$OUT/ladder.txt" 2>&1
python3 -m afford predict "$OUT/default.json" --batch 16 --seq 4096 > "$OUT/predict.txt" 2>&1
python3 -m afford size "$OUT/default.json" > "$OUT/size.txt" 2>&1
step "done"
