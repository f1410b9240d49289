"""How the memory law's held-out errors depend on the base shape of its sweep (a device
diagnostic for issue 3, not a test): tinylm, fp32 and bf16, the memory stage's child and fit
with the base (B0, s0) replaced, under the allocator configuration of the environment.

    python3 lab/scripts/device_memory_bases.py OUT_DIR [B0xS0 ...]     (default 8x512 8x1024 16x1024)

Writes ``bases-<alloc>.json`` (every law's held-out errors) and prints a table. With
``--trace`` it also records the allocator's history, with Python stacks, of one bf16 step
at 8 x 2048 and prints where the largest short-lived blocks were allocated.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import afford.certify.stage_memory as stage
from afford.measure.memory_sweep import run_memory_child
from afford.workloads import resolve


def laws_for(base: tuple[int, int], device: str) -> list:
    stage.BASE["tinylm"]["large-gpu"] = base
    w = resolve("tinylm", "large-gpu")
    env = SimpleNamespace(device_type="cuda", device_memory_bytes=150_000_000_000)
    out = []
    for mode in ("fp32", "bf16"):
        job = stage.plan_job("tinylm", w, mode, "large-gpu")
        items = stage.items_for(job, w, 3)
        t0 = time.perf_counter()
        rec = run_memory_child(items, device=device, device_class="large-gpu", seed=0)
        wall = time.perf_counter() - t0
        shapes = [stage._shape(it, rec[it["key"]]) for it in items]
        law = stage.build_law(job, shapes, env)
        out.append({"base": list(base), "mode": mode, "wall_seconds": wall,
                    "heldout": [{"role": h.role, "dims": h.dims, "allocated": h.error,
                                 "reserved": h.reserved_error} for h in law.heldout],
                    "allocated_law": law.allocated.describe(),
                    "reserved_law": law.reserved.describe() if law.reserved else None})
    return out


def trace(device: str) -> None:
    import torch

    from afford.workloads.base import train_step

    w = resolve("tinylm", "large-gpu")
    built = w.build({**w.shape(2048), "batch": 8}, torch.device(device), 0)
    for _ in range(2):
        train_step(built, "bf16", torch.device(device))
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                             max_entries=1_000_000)
    train_step(built, "bf16", torch.device(device))
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    ev = snap["device_traces"][0]
    seen = set()
    for e in sorted((e for e in ev if e["action"] == "alloc"), key=lambda e: -e["size"])[:40]:
        frames = [f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']} {f['name']}"
                  for f in e.get("frames", [])[:6]]
        key = (e["size"], tuple(frames))
        if key in seen:
            continue
        seen.add(key)
        print(f"{e['size'] / 2**20:8.1f} MiB  " + " <- ".join(frames))


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(args[0] if args else "out")
    out.mkdir(parents=True, exist_ok=True)
    bases = [tuple(int(x) for x in b.split("x")) for b in args[1:]] or \
        [(8, 512), (8, 1024), (16, 1024)]
    alloc = "expandable" if "expandable_segments:True" in os.environ.get(
        "PYTORCH_CUDA_ALLOC_CONF", "") else "native"
    rows = []
    for base in bases:
        for r in laws_for(base, "cuda"):
            rows.append(r)
            errs = "  ".join(f"{h['role'][8:]} {h['allocated']:+.2%}/{h['reserved']:+.2%}"
                             for h in r["heldout"])
            print(f"{alloc:10s} base {base[0]}x{base[1]:<5d} {r['mode']}: {errs}  "
                  f"({r['wall_seconds']:.1f} s)", flush=True)
    (out / f"bases-{alloc}.json").write_text(json.dumps(rows, indent=1))
    if "--trace" in sys.argv:
        trace("cuda")


if __name__ == "__main__":
    main()
