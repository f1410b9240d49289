#!/usr/bin/env bash
# certify's wall time on a lent GPU (issue 15's target: `afford certify -w hf:gpt2` <= 90 s):
# the parent's set-up phases timed alone, then hf:gpt2 and the default certify, each timed
# as a user runs it (the console script, wall clock). Outputs under $OUT.
set -uo pipefail
OUT="${OUT:-./out}"; mkdir -p "$OUT"
export PYTHONPATH="$(pwd)/src:$(pwd)${PYTHONPATH:+:$PYTHONPATH}" COLUMNS=200 PYTHONUNBUFFERED=1
LOG="$OUT/speed.log"
step() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*" | tee -a "$LOG"; }
step "environment"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$LOG"
git rev-parse --short HEAD 2>/dev/null | tee -a "$LOG"
step "parent set-up phases (hf:gpt2)"
python3 -c "import cProfile, pstats, torch
from afford.workloads import resolve
cProfile.run('resolve(\"hf:gpt2\", \"large-gpu\")', '/tmp/resolve.prof')
pstats.Stats('/tmp/resolve.prof').sort_stats('cumtime').print_stats(30)" > "$OUT/resolve_profile.txt" 2>&1
python3 -c "import pstats; pstats.Stats('/tmp/resolve.prof').sort_stats('tottime').print_stats(20)" >> "$OUT/resolve_profile.txt" 2>&1
python3 - <<'PY' 2>&1 | tee -a "$LOG"
import time
t = [time.perf_counter()]
import torch; t.append(time.perf_counter())
import afford.cli.certify; t.append(time.perf_counter())
from datetime import datetime, timezone
from afford.certify.request import CertifyRequest, resolve
from afford.measure import env as envmod
dev = envmod.choose_device(None); t.append(time.perf_counter())
env = envmod.capture(dev, "x", datetime.now(timezone.utc)); t.append(time.perf_counter())
plan = resolve(CertifyRequest(workloads=["hf:gpt2"]), dev.type, env.device_class, str(dev))
t.append(time.perf_counter())
names = ["import torch", "import afford.cli.certify", "choose_device", "capture", "resolve"]
print("; ".join(f"{n} {b - a:.2f} s" for n, a, b in zip(names, t, t[1:])))
PY
# a model none of the timing work was tuned on: grouped-query Llama, all stages
SPECS="${SPECS:-hf:gpt2 default hf:llama@d768L12H12K4V32000F2048}"
k=0
for w in $SPECS; do
  k=$((k + 1))
  step "certify $w"
  args=(); [ "$w" = default ] || args=(-w "$w")
  name=${w%%@*}; name=$k-${name//[:]/_}
  AFFORD_TIMELINE="$OUT/$name.timeline.jsonl" /usr/bin/time -f "certify wall %e s" \
    timeout 220 python3 -m afford certify "${args[@]}" \
    -o "$OUT/$name.json" > "$OUT/$name.txt" 2> "$OUT/$name.err"; echo "exit $?" | tee -a "$LOG"
  tail -2 "$OUT/$name.err" | tee -a "$LOG"
  python3 - "$OUT/$name.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1])); e = d["environment"]
print("elapsed", round(e["elapsed_seconds"], 1), {k: round(v, 1) for k, v in e["stage_seconds"].items()})
print("verdict", d["time_verdict"]["label"], d["time_verdict"]["reasons"])
for w in d["workloads"]:
    t = w.get("time") or {}
    ext = t.get("extension")
    held = [(h["label"], round(100 * h["rel_error"], 1)) for h in (t.get("model") or {}).get("held_out", [])]
    print(w["name"], w["mode"], "extension", ext and ext["shapes"], ext and ext["left_floor"], "held-out %", held)
PY
  python3 benches/timeline_report.py "$OUT/$name.timeline.jsonl" > "$OUT/$name.timeline.txt" 2>&1
done
if [ "${TESTS:-1}" = 1 ]; then
  step "cuda-marked tests"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tail -8 | tee -a "$LOG"
fi
step "done"
