"""Where a profiled point's time goes in certify's last sweep child (2026-12-06, night): for a
few shapes, the build, the warm steps, and profile_steps' parts (the profiler's start, the
recorded steps, its stop with torch's own parsing of the events, the Chrome trace's export
and afford's reading of it), each timed on the host; printed as one JSON line per shape.

    python3 lab/scripts/profile_overhead.py 'SPEC|VALUE[|BATCH]' ...
"""

import json
import os
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

from afford.measure.device_time import MARKER_CYCLES, sides_from_trace
from afford.measure.sweep_child import point_shape
from afford.workloads import resolve
from afford.workloads.base import train_step


def main() -> None:
    device = torch.device("cuda")
    for arg in sys.argv[1:]:
        spec, value, *batch = arg.split("|")
        w = resolve(spec, "large-gpu")
        item = {"value": int(value)}
        if batch:
            item.update(batch=int(batch[0]), batch_key="batch" if "batch" in w.shape(int(value)) else "n")
        out = {"point": arg}
        t = time.perf_counter()
        built = w.build(point_shape(w, item), device, 0)
        torch.cuda.synchronize()
        out["build"] = time.perf_counter() - t

        def step(i):
            return train_step(built, "bf16", device)

        t = time.perf_counter()
        for i in range(2):
            step(i)
        torch.cuda.synchronize()
        out["warm2"] = time.perf_counter() - t
        t = time.perf_counter()
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        out["enter"] = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(2):
            torch.cuda._sleep(MARKER_CYCLES)
            step(i)
        torch.cuda._sleep(MARKER_CYCLES)
        torch.cuda.synchronize()
        out["steps2"] = time.perf_counter() - t
        t = time.perf_counter()
        prof.__exit__(None, None, None)
        out["exit"] = time.perf_counter() - t
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        t = time.perf_counter()
        prof.export_chrome_trace(path)
        out["export"] = time.perf_counter() - t
        t = time.perf_counter()
        with open(path, encoding="utf-8") as f:
            events = json.load(f).get("traceEvents", [])
        out["load"] = time.perf_counter() - t
        out["events"] = len(events)
        out["mb"] = os.path.getsize(path) / 1e6
        os.unlink(path)
        t = time.perf_counter()
        sides = sides_from_trace(events)
        out["sides"] = time.perf_counter() - t
        out["kernels"] = [s.kernels for s in sides]
        built = None
        t = time.perf_counter()
        import gc

        gc.collect()
        torch.cuda.empty_cache()
        out["free"] = time.perf_counter() - t
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}),
              flush=True)


main()
