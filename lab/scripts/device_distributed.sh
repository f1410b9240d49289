#!/usr/bin/env bash
# The distributed certify path on one GPU: torchrun at world size 1 with NCCL, the same code
# path as N GPUs (collectives 1 MiB..1 GiB, DDP/FSDP tinylm, per-rank readings, one
# certificate from rank 0), then the rank-0 sweep, then the CUDA tests. About 3 minutes.
# Run from the repository root; outputs go to $OUT (default ./out).
set -uo pipefail
OUT="${OUT:-./out}"
mkdir -p "$OUT"
# NVLink multicast stays off in everything started here (a multi-GPU host shares its GPUs).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
PY=python3
run() {  # name, timeout seconds, args...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$PY" -m torch.distributed.run --nproc-per-node=1 --standalone \
    -m afford certify --distributed "$@" --out "$OUT/$name.json" --force --json \
    > "$OUT/$name.summary.json" 2> "$OUT/$name.log"
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/device_distributed.txt"
}
: > "$OUT/device_distributed.txt"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'gpus', torch.cuda.device_count(), torch.cuda.get_device_name(0))" | tee -a "$OUT/device_distributed.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1 || true

# 1. distributed stages only, default (adaptive) precision: the main reading
run cert-dist-ws1 150 --dist-only
# 2. quick, with the rank-0 single-device sweep after the group closed (one workload)
run cert-dist-ws1-sweep 150 --quick --workload tinylm --sweep seq=512,1024,2048
# 3. the CUDA tests of this path
timeout 300 "$PY" -m pytest -q -p no:cacheprovider tests/test_distributed_cuda.py \
  > "$OUT/pytest-distributed-cuda.log" 2>&1
echo "pytest tests/test_distributed_cuda.py: exit $?" | tee -a "$OUT/device_distributed.txt"

# 4. a digest of what was measured
"$PY" - "$OUT" <<'PYEOF' | tee -a "$OUT/device_distributed.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("cert-dist-ws1", "cert-dist-ws1-sweep"):
    p = out / f"{name}.json"
    if not p.exists():
        print(name, "missing"); continue
    c = json.loads(p.read_text()); d = c["distributed"]
    print(f"== {name}: status {d['status']} backend {d['backend']} world {d['world_size']} "
          f"error {d['error']} elapsed {c['environment']['elapsed_seconds']:.1f} s")
    for pt in d["collectives"]["points"]:
        print(f"  {pt['op']:15s} {pt['bytes']:>11d} B  {pt['seconds']*1e6:10.1f} us  "
              f"algbw {pt['algbw_bytes_per_second']/1e9:8.2f} GB/s  iters {pt['iters_per_sample']}")
    for f in d["collectives"]["fits"]:
        print(f"  fit {f['op']}: alpha {f['alpha_seconds']*1e6:.2f} us beta "
              f"{(f['beta_bytes_per_second'] or 0)/1e9:.1f} GB/s R^2 {f['r2']:.4f}")
    for ne in d["collectives"]["not_executable"]:
        print("  NOT EXECUTABLE", ne["what"], ne["reason"])
    for s in d["data_parallel"]:
        for r in s["runs"]:
            print(f"  {s['strategy']} w={r['world_size']} step {r['step_seconds']*1e3:.2f} ms "
                  f"nosync {(r['nosync_step_seconds'] or 0)*1e3:.2f} ms steps {len(r['step_indices'])} "
                  f"step0 {r['rank_step0_seconds']} reserved {r['rank_peak_reserved_bytes']} "
                  f"mode {r['mode']} shape {r['shape']}")
        if s["not_executable"]:
            print("  NOT EXECUTABLE", s["not_executable"])
    print("  workloads:", [(w["name"], [(p["value"], p["median_seconds"]) for p in w["points"]])
                          for w in c["workloads"]])
    print("  warnings:", c["warnings"])
PYEOF
