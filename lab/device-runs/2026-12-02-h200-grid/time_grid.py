"""Step time over a 2-D (batch x seq) grid, for choosing and checking afford's time model.

For each workload and shape: step 0 apart, warm-up, then warm steps timed as a training loop
that syncs rarely runs them (CUDA events around each step, one host sync per block) and,
separately, with a host sync after every step (what a loop that logs loss.item() sees);
FLOPs of one step counted by FlopCounterMode by op class; peak allocated/reserved bytes.
Usage: python time_grid.py WORKLOAD REPEAT OUT.jsonl [budget_seconds]
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time

import torch

GEMM = {"mm", "addmm", "matmul", "linear", "_scaled_mm"}
ATTN = {"bmm", "baddbmm", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward", "_flash_attention_backward",
        "_efficient_attention_forward", "_efficient_attention_backward",
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_cudnn_attention_backward"}


def grid(name: str) -> list[tuple[int, int]]:
    if name == "tinylm":
        pts = [(b, s) for b in (2, 8, 32) for s in (512, 1024, 2048, 4096, 8192)]
        pts += [(4, 1024), (16, 2048), (64, 1024), (16, 8192), (64, 2048)]
        return [(b, s) for b, s in pts if b * s <= 131072]
    if name in ("gpt2", "llama"):
        pts = [(b, s) for b in (1, 2, 4, 8, 16) for s in (256, 512, 1024, 2048)]
        return [(b, s) for b, s in pts if b * s <= 32768]
    if name == "softmax":
        pts = [(b, s) for b in (4, 16, 64) for s in (1024, 2048, 4096, 8192)]
        return [(b, s) for b, s in pts if b * s * s <= 16 * 8192 * 8192]
    if name == "scan":
        pts = [(b, s) for b in (2, 8, 32) for s in (256, 512, 1024, 2048)]
        return [(b, s) for b, s in pts if b * s * s <= 8 * 2048 * 2048 * 2]
    raise SystemExit(f"unknown {name}")


def workload(name: str):
    if name == "tinylm":
        from afford.workloads.tinylm import TinyLM, q3
        w = TinyLM(q3())
        return w, w.shape(1024), "batch", "seq"
    if name == "softmax":
        from afford.workloads.softmax import Softmax
        w = Softmax(device_class="large-gpu")
        return w, w.shape(1024), "n", "s"
    if name == "scan":
        from afford.workloads.scan import Scan
        w = Scan(device_class="large-gpu")
        return w, w.shape(256), "n", "s"
    import hf_models
    w = getattr(hf_models, name)()
    return w, w.shape(1024), "batch", "seq"


def count_flops(built, mode, device):
    from torch.utils.flop_counter import FlopCounterMode
    from afford.workloads.base import train_step
    fc = FlopCounterMode(display=False)
    with fc:
        train_step(built, mode, device)
    by = {"gemm": 0, "attn": 0, "other": 0}
    for op, n in fc.get_flop_counts()["Global"].items():
        base = str(op).split(".")[1] if "." in str(op) else str(op)
        by["gemm" if base in GEMM else "attn" if base in ATTN else "other"] += int(n)
        by.setdefault("ops", {})[base] = by.get("ops", {}).get(base, 0) + int(n)
    return by


def measure(w, shape, mode, device, do_flops):
    from afford.workloads.base import train_step
    torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    built = w.build(shape, device, seed=0)
    torch.cuda.synchronize()
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    train_step(built, mode, device)
    torch.cuda.synchronize()
    step0 = time.perf_counter() - t0
    for _ in range(3):
        train_step(built, mode, device)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        train_step(built, mode, device)
    torch.cuda.synchronize()
    est = (time.perf_counter() - t0) / 3
    k = int(min(200, max(10, 0.3 / max(est, 1e-4))))
    async_steps, block_walls = [], []
    for _ in range(2):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(k + 1)]
        w0 = time.perf_counter()
        ev[0].record()
        for i in range(k):
            train_step(built, mode, device)
            ev[i + 1].record()
        torch.cuda.synchronize()
        block_walls.append((time.perf_counter() - w0) / k)
        async_steps += [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(k)]
    synced = []
    for _ in range(max(5, min(20, k // 2))):
        t0 = time.perf_counter()
        loss = train_step(built, mode, device)
        float(loss)
        synced.append(time.perf_counter() - t0)
    rec = {"build_s": build_s, "step0_s": step0, "k": k,
           "async_median": float(torch.tensor(async_steps).median()),
           "async_steps": async_steps, "block_wall": block_walls,
           "synced_median": float(torch.tensor(synced).median()),
           "peak_alloc": torch.cuda.max_memory_allocated(device),
           "peak_reserved": torch.cuda.max_memory_reserved(device)}
    if do_flops:
        rec["flops"] = count_flops(built, mode, device)
    del built
    gc.collect()
    torch.cuda.empty_cache()
    return rec


def main() -> None:
    name, repeat, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    budget = float(sys.argv[4]) if len(sys.argv) > 4 else 120.0
    mode = sys.argv[5] if len(sys.argv) > 5 else "bf16"
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    w, base, bkey, skey = workload(name)
    shapes = grid(name)
    random.Random(repeat).shuffle(shapes)
    start = time.perf_counter()
    with open(out, "a") as fh:
        for b, s in shapes:
            shape = dict(base, **{bkey: b, skey: s})
            if time.perf_counter() - start > budget:
                fh.write(json.dumps({"workload": name, "mode": mode, "repeat": repeat,
                                     "B": b, "s": s, "skipped": "budget"}) + "\n")
                continue
            try:
                rec = measure(w, shape, mode, device, do_flops=(repeat == 0))
            except torch.cuda.OutOfMemoryError as exc:
                rec = {"oom": str(exc)[:200]}
                gc.collect()
                torch.cuda.empty_cache()
            rec.update(workload=name, mode=mode, repeat=repeat, B=b, s=s, shape=shape)
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            print(name, repeat, b, s, f"{rec.get('async_median', float('nan'))*1e3:.2f} ms",
                  f"synced {rec.get('synced_median', float('nan'))*1e3:.2f}", flush=True)


if __name__ == "__main__":
    main()
