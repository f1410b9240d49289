#!/usr/bin/env bash
# Every CUDA path of afford on a lent GPU, in two parts that each fit one 10-minute call.
#   bash lab/scripts/device_all.sh A   default certify (timed; the committed certificate), the
#                                  probes' figures, the tiny launch-bound shape, the memory
#                                  table, the gates on CUDA, every cuda-marked test
#   bash lab/scripts/device_all.sh B   sizes + ladder + levers, then the distributed path (ws 1)
# Run from the repository root with PYTHONPATH holding src (and pydantic). Outputs: $OUT.
set -uo pipefail
OUT="${OUT:-./out}"; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$(pwd)/lab/scripts:$(pwd)/src:$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS=200 PYTHONUNBUFFERED=1
LOG="$OUT/device_all_$1.log"
step() { echo "== $(date -u +%H:%M:%S) [$SECONDS s] $*" | tee -a "$LOG"; }

part_a() {
  step "environment"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee -a "$LOG"
  python3 - <<'PY' 2>&1 | tee -a "$LOG"
import os, subprocess, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
# does reading device properties (as the parent of certify does) create a CUDA context?
torch.cuda.get_device_properties(0); torch.cuda.is_bf16_supported()
q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                   capture_output=True, text=True).stdout.strip()
print("parent pid", os.getpid(), "compute apps after get_device_properties:", q or "none")
PY
  step "default certify (timed by benches/bench_certify.py)"
  timeout 240 python3 benches/bench_certify.py --out "$OUT" | tee "$OUT/bench_default.jsonl" | tee -a "$LOG"
  cp "$OUT/bench-cert-0.json" "$OUT/default.json" 2>/dev/null
  python3 -m afford report "$OUT/default.json" -o "$OUT/default.md" > /dev/null 2>&1
  step "tiny launch-bound shape, quick, probes only"
  timeout 120 python3 -m afford certify -w tiny_gpt:tiny --quick --no-memory --no-gates \
      --out "$OUT/tiny.json" --force --json > "$OUT/tiny.summary.json" 2> "$OUT/tiny.err"
  echo "tiny rc=$?" | tee -a "$LOG"
  python3 lab/scripts/probes_report.py "$OUT" "$OUT/default.json" "$OUT/tiny.json" > "$OUT/probes.txt" 2>&1
  step "memory table from the default certificate"
  python3 benches/memory_report.py "$OUT/default.json" > "$OUT/memory-table.md" 2>&1
  python3 tools/memory_defaults_from_cert.py "$OUT/default.json" > "$OUT/memory_defaults.toml" 2>&1
  for mode in fp32 bf16; do
    python3 -m afford size "$OUT/default.json" --seq 4096 --mode "$mode" >> "$OUT/size.txt" 2>&1
  done
  tail -5 "$OUT/memory-table.md" | tee -a "$LOG"
  step "gates on CUDA"
  timeout 200 python3 -m afford gate --device cuda --json > "$OUT/gate_cuda.json" 2> "$OUT/gate_cuda.err"
  echo "gate rc=$?" | tee -a "$LOG"
  step "cuda-marked tests"
  timeout $(( 570 - SECONDS > 30 ? 570 - SECONDS : 30 )) python3 -m pytest -q -p no:cacheprovider \
      -m cuda tests > "$OUT/pytest_cuda.txt" 2>&1
  echo "pytest rc=$?" | tee -a "$LOG"; tail -15 "$OUT/pytest_cuda.txt" | tee -a "$LOG"
}

part_b() {
  step "sizes, ladder, levers"
  OUT="$OUT/ladder" timeout 330 bash lab/scripts/device_ladder.sh > "$OUT/ladder.log" 2>&1
  echo "ladder rc=$?" | tee -a "$LOG"; tail -20 "$OUT/ladder.log" | tee -a "$LOG"
  step "distributed, world size 1, NCCL"
  OUT="$OUT/dist" timeout $(( 580 - SECONDS > 60 ? 580 - SECONDS : 60 )) \
      bash lab/scripts/device_distributed.sh > "$OUT/dist.log" 2>&1
  echo "dist rc=$?" | tee -a "$LOG"; tail -30 "$OUT/dist/device_distributed.txt" | tee -a "$LOG"
}

case "${1:-}" in
  A) part_a ;;
  B) part_b ;;
  *) echo "usage: $0 A|B" >&2; exit 2 ;;
esac
step "done"
