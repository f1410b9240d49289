"""Exploration on a GPU: at each (batch, seq) of a workload, the pipelined warm step (CUDA
events, one sync per block), the host's per-step issue time without the profiler, synced
steps, and the profiled device side (busy time, kernels, queued gap), plus counted FLOPs.

    python3 lab/scripts/step_sides_probe.py OUT.jsonl SPEC B1xS1 B2xS2 ...

One JSON line per shape. A reading, not a test: it decides how the time model's two sides
are measured (issue 27)."""

from __future__ import annotations

import json
import statistics
import sys
import time


def main(argv: list[str]) -> int:
    import torch

    from afford.measure.device_time import profile_steps
    from afford.measure.probes.flops import count_flops_or_why
    from afford.measure.timing import timed_block
    from afford.workloads import resolve
    from afford.workloads.base import train_step
    from afford.workloads.clock import CudaClock

    out_path, spec, shapes = argv[0], argv[1], argv[2:]
    device = torch.device("cuda")
    w = resolve(spec, "large-gpu")
    clock = CudaClock()
    with open(out_path, "a", encoding="utf-8") as out:
        for text in shapes:
            b, s = (int(x) for x in text.split("x"))
            shape = {**w.shape(s), "batch": b}
            t0 = time.perf_counter()
            try:
                built = w.build(shape, device, 0)

                def step(i: int):
                    return train_step(built, "bf16", device)

                for i in range(6):
                    step(i)
                torch.cuda.synchronize()
                wall, _ = timed_block(step, clock, 6, 20)
                host = []
                for i in range(26, 46):
                    a = time.perf_counter()
                    step(i)
                    host.append(time.perf_counter() - a)
                torch.cuda.synchronize()
                synced = []
                for i in range(46, 52):
                    a = time.perf_counter()
                    float(step(i))
                    synced.append(time.perf_counter() - a)
                sides = profile_steps(step, 52, 4)
                flops = count_flops_or_why(built, "bf16", device)
                rec = {"spec": spec, "batch": b, "seq": s,
                       "wall_median": statistics.median(wall), "wall": wall,
                       "host_median": statistics.median(host), "host": host,
                       "synced_median": statistics.median(synced[1:]),
                       "sides": sides, "gemm": flops.get("gemm"), "attn": flops.get("attn"),
                       "other": flops.get("other"), "flops_error": flops.get("error"),
                       "peak_reserved": torch.cuda.max_memory_reserved(),
                       "seconds": time.perf_counter() - t0}
            except Exception as exc:  # one shape failing must not lose the others
                rec = {"spec": spec, "batch": b, "seq": s, "error": f"{type(exc).__name__}: {exc}"}
            finally:
                built = None
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            out.write(json.dumps(rec) + "\n")
            out.flush()
            if "error" in rec:
                print(spec, text, rec["error"][:300], flush=True)
                continue
            busy = statistics.median(x["busy_seconds"] for x in rec["sides"])
            k = statistics.median(x["kernels"] for x in rec["sides"])
            gaps = [x["queued_gap_seconds"] for x in rec["sides"] if x["queued_gap_seconds"]]
            g = statistics.median(gaps) if gaps else float("nan")
            print(f"{spec} {b}x{s}: wall {rec['wall_median']*1e3:.2f} host "
                  f"{rec['host_median']*1e3:.2f} synced {rec['synced_median']*1e3:.2f} busy "
                  f"{busy*1e3:.2f} K {k:.0f} gap {g*1e6:.2f}us busy+K*g "
                  f"{(busy + k * g)*1e3:.2f} ms ({rec['seconds']:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
