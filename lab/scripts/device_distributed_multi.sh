#!/usr/bin/env bash
# The multi-GPU run (a machine with N > 1 GPUs on one host): torchrun with N = every visible
# GPU. Certifies the node (collectives, DDP/FSDP at world sizes 1..N, the rank-0 sweep) and
# checks the dead-rank path on NCCL. Run from the repository root; outputs under $OUT.
#   The command it runs, for the README:
#   torchrun --nproc-per-node=$N --standalone -m afford certify --distributed
set -uo pipefail
OUT="${OUT:-./out}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
PY=python3
N=$("$PY" -c "import torch; print(torch.cuda.device_count())")
echo "GPUs: $N" | tee "$OUT/device_distributed_multi.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1 || true
trun() { "$PY" -m torch.distributed.run --nproc-per-node="$N" --standalone -m afford "$@"; }

# 1. the node's distributed stages, default precision (about a minute on 8 GPUs)
t0=$SECONDS
timeout 300 trun certify --distributed --dist-only --out "$OUT/cert-node-dist.json" --force \
  --json > "$OUT/cert-node-dist.summary.json" 2> "$OUT/cert-node-dist.log"
echo "dist-only: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/device_distributed_multi.txt"

# 2. the dead-rank path on NCCL: rank 1 exits at the start of the DDP stage; expect a
#    non-zero exit and a partial certificate naming the ranks
t0=$SECONDS
AFFORD_TEST_FAIL=1:ddp:exit timeout 300 trun certify --distributed --dist-only --quick \
  --dist-timeout 60 --out "$OUT/cert-node-deadrank.json" --force \
  > "$OUT/cert-node-deadrank.out" 2> "$OUT/cert-node-deadrank.log"
echo "dead rank (expect non-zero): exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/device_distributed_multi.txt"

# 3. the whole certificate: distributed stages, then the single-device sweep on rank 0
t0=$SECONDS
timeout 400 trun certify --distributed --out "$OUT/cert-node.json" --force --json \
  > "$OUT/cert-node.summary.json" 2> "$OUT/cert-node.log"
echo "full: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/device_distributed_multi.txt"

timeout 400 "$PY" -m pytest -q -p no:cacheprovider tests/test_distributed_cuda.py \
  > "$OUT/pytest-distributed-cuda.log" 2>&1
echo "pytest: exit $?" | tee -a "$OUT/device_distributed_multi.txt"
"$PY" - "$OUT" <<'PYEOF' | tee -a "$OUT/device_distributed_multi.txt"
import json, sys
from pathlib import Path
for name in ("cert-node-dist", "cert-node-deadrank", "cert-node"):
    p = Path(sys.argv[1]) / f"{name}.json"
    if not p.exists():
        print(name, "missing"); continue
    d = json.loads(p.read_text())["distributed"]
    print(f"== {name}: {d['status']} world {d['world_size']} error {d['error']}")
    print("  ranks:", [(r["rank"], r["stages_finished"], r["error"]) for r in d["ranks"]])
    for pt in (d["collectives"] or {}).get("points", []):
        print(f"  {pt['op']:15s} {pt['bytes']:>11d} B {pt['seconds']*1e6:10.1f} us busbw "
              f"{(pt['busbw_bytes_per_second'] or 0)/1e9:8.2f} GB/s ranks "
              f"{[round(m*1e6, 1) for m in pt['rank_medians']]}")
    for f in (d["collectives"] or {}).get("fits", []):
        print(f"  fit {f['op']}: alpha {f['alpha_seconds']*1e6:.2f} us beta "
              f"{(f['beta_bytes_per_second'] or 0)/1e9:.1f} GB/s R^2 {f['r2']:.4f}")
    for s in d["data_parallel"]:
        print(f"  {s['strategy']} efficiency {[round(e, 3) for e in s['efficiency']]} law "
              f"{s['law'] and (s['law']['A_seconds'], s['law']['B_seconds'], s['law']['r2'])}")
        for r in s["runs"]:
            print(f"    w={r['world_size']} step {r['step_seconds']*1e3:.2f} ms exposed "
                  f"{r['exposed_comm_share']} reserved {r['rank_peak_reserved_bytes']}")
PYEOF
