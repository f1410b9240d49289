"""Diagnostics on a lent GPU (not a timed test): what the memory stage and the probes spend.

    python3 lab/scripts/device_diag.py OUT_DIR

1. The allocation trace of the memory stage's shapes (tinylm, fp32 and bf16): for each
   shape, from an emptied cache, the caching allocator's history over build + 3 training
   steps (``torch.cuda.memory._record_memory_history``), written compactly as
   ``memtrace-<mode>.json.gz`` with the measured peaks, so the allocator can be replayed
   off the device.
2. Why counting the FLOPs of a ``scan`` step is slow on CUDA: the step's wall time with and
   without ``FlopCounterMode``, and how many aten calls each dispatches.
3. tinylm's build: weights initialised on the host then moved, against on the device.
"""

from __future__ import annotations

import gc
import gzip
import json
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from afford.certify.stage_memory import plan_job
from afford.workloads import resolve
from afford.workloads.base import train_step

ACTIONS = {"alloc": "a", "free_requested": "r", "free_completed": "f", "segment_alloc": "S",
           "segment_free": "F", "segment_map": "M", "segment_unmap": "U", "snapshot": "s",
           "oom": "o"}


def trace_shape(w, shape, mode, dev, steps=3):
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory._snapshot()
    segs0 = [{"addr": s["address"], "size": s["total_size"], "pool": s.get("segment_type"),
              "blocks": [(b["size"], b["state"]) for b in s["blocks"]]}
             for s in start["segments"]]
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=10_000_000, clear_history=True)
    built = w.build(shape, dev, 0)
    marks, peaks = [], []
    for _ in range(steps):
        train_step(built, mode, dev)
        torch.cuda.synchronize()
        peaks.append((torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()))
        marks.append(len(torch.cuda.memory._snapshot()["device_traces"][0]))
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    ev = [(ACTIONS.get(e["action"], e["action"]), e["addr"], e["size"], e.get("stream", 0))
          for e in snap["device_traces"][0]]
    del built
    return {"shape": shape, "segments_at_start": segs0, "events": ev, "step_marks": marks,
            "peaks": peaks}


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.c = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.c[str(func)] += 1
        return func(*args, **(kwargs or {}))


def flops_diag(dev, log):
    from afford.measure.probes.flops import count_step_flops

    w = resolve("scan", "large-gpu")
    for s in (256, 1024):
        b = w.build(w.shape(s), dev, 0)
        for _ in range(3):
            train_step(b, "bf16", dev)
        torch.cuda.synchronize()
        t = time.perf_counter(); train_step(b, "bf16", dev); torch.cuda.synchronize()
        step = time.perf_counter() - t
        t = time.perf_counter(); count_step_flops(b, "bf16", dev)
        counted = time.perf_counter() - t
        with Count() as c:
            train_step(b, "bf16", dev)
        torch.cuda.synchronize()
        log(f"scan s={s}: step {step:.4f} s, counted step {counted:.3f} s, "
            f"aten calls {sum(c.c.values())}, top {c.c.most_common(6)}")
        del b


def build_diag(dev, log):
    from afford.workloads.tinylm import TinyLMModel

    for _ in range(2):
        t = time.perf_counter(); torch.manual_seed(0)
        m = TinyLMModel(512, 8, 8, 1024).to(dev); torch.cuda.synchronize()
        host = time.perf_counter() - t
        del m
        t = time.perf_counter(); torch.manual_seed(0)
        with torch.device(dev):
            m = TinyLMModel(512, 8, 8, 1024)
        torch.cuda.synchronize()
        ondev = time.perf_counter() - t
        del m
        log(f"tinylm d512 L8 build: host init + move {host:.3f} s, on device {ondev:.3f} s")


def main(out: str) -> None:
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    dev = torch.device("cuda")
    log(f"torch {torch.__version__} {torch.cuda.get_device_name(0)}")
    if "--memory-only" not in sys.argv:
        build_diag(dev, log)
        flops_diag(dev, log)
    w = resolve("tinylm", "large-gpu")
    for mode in ("fp32", "bf16"):
        job = plan_job("tinylm", w, mode, "large-gpu")
        shapes = []
        t0 = time.perf_counter()
        for role, shape in job.runs:
            rec = trace_shape(w, shape, mode, dev)
            rec["role"] = role
            shapes.append(rec)
            log(f"{mode} {role} {shape}: {len(rec['events'])} events, peaks {rec['peaks'][-1]}")
        log(f"{mode}: traced in {time.perf_counter() - t0:.1f} s")
        with gzip.open(outdir / f"memtrace-{mode}.json.gz", "wt") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                       "mode": mode, "shapes": shapes}, f)
    (outdir / "diag.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "out")
