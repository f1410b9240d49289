"""Allocator traces and peaks of training steps, for the reserved-memory model (issue 20).

One process per (workload, mode, allocator conf). For each shape, in order: build, step 0,
steps 1-2, with the caching allocator's history recorded (no stacks); peak allocated and
reserved after reset; everything freed and the cache emptied before the next shape.
Usage: python mem_trace.py WORKLOAD MODE OUT.jsonl.gz [notrace]
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import sys
import time

import torch

SHAPES = {
    "tinylm": [(4, 1024), (8, 1024), (4, 2048), (8, 2048), (16, 2048), (8, 4096)],
    "gpt2": [(2, 512), (4, 512), (2, 1024), (4, 1024), (8, 1024), (4, 2048)],
    "llama": [(2, 512), (4, 512), (2, 1024), (4, 1024), (8, 1024), (4, 2048)],
}


def workload(name):
    if name == "tinylm":
        from afford.workloads.tinylm import TinyLM, q3
        w = TinyLM(q3())
        return w, w.shape(1024), "batch", "seq"
    import hf_models
    w = getattr(hf_models, name)()
    return w, w.shape(1024), "batch", "seq"


def main() -> None:
    from afford.workloads.base import train_step
    name, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
    trace = "notrace" not in sys.argv[4:]
    device = torch.device("cuda")
    w, base, bk, sk = workload(name)
    torch.zeros(1, device=device)
    with gzip.open(out, "wt") as fh:
        for b, s in SHAPES[name]:
            shape = dict(base, **{bk: b, sk: s})
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            base_alloc = torch.cuda.memory_allocated(device)
            base_res = torch.cuda.memory_reserved(device)
            if trace:
                kw = dict(enabled="all", context=None, stacks="python", max_entries=2_000_000)
                try:
                    torch.cuda.memory._record_memory_history(clear_history=True, **kw)
                except TypeError:
                    torch.cuda.memory._record_memory_history(**kw)
            t0 = time.perf_counter()
            rec = {"workload": name, "mode": mode, "B": b, "s": s, "shape": shape,
                   "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                   "base_alloc": base_alloc, "base_reserved": base_res}
            try:
                built = w.build(shape, device, seed=0)
                rec["params"] = sum(p.numel() for p in built.model.parameters())
                peaks = []
                for i in range(3):
                    train_step(built, mode, device)
                    torch.cuda.synchronize()
                    peaks.append([torch.cuda.max_memory_allocated(device),
                                  torch.cuda.max_memory_reserved(device)])
                rec["peaks_by_step"] = peaks
                rec["peak_alloc"], rec["peak_reserved"] = peaks[-1]
            except torch.cuda.OutOfMemoryError as exc:
                rec["oom"] = str(exc)[:200]
            rec["seconds"] = time.perf_counter() - t0
            if trace:
                snap = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
                ev = []
                for e in snap["device_traces"][0]:
                    ev.append([e["action"], e["addr"], e["size"], e.get("stream", 0)])
                rec["events"] = ev
                rec["segments_at_end"] = [[sg["address"], sg["total_size"], sg["segment_type"],
                                           sg.get("allocated_size", 0)]
                                          for sg in snap["segments"]]
            fh.write(json.dumps(rec) + "\n")
            print(name, mode, rec["alloc_conf"] or "native", b, s, rec.get("peak_alloc"),
                  rec.get("peak_reserved"), f"{rec['seconds']:.1f}s",
                  len(rec.get("events", [])), flush=True)
            try:
                del built
            except NameError:
                pass


if __name__ == "__main__":
    main()
