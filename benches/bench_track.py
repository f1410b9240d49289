"""What the loop guard costs per step: ns per (guard.step + should_save + should_stop),
against a 10 ms training step (the issue's target: at most 0.5 %, i.e. 50 us).

Times N guarded iterations of an empty loop body against N unguarded ones, median of R
repeats; the guard runs on its real clock (time.monotonic). The cost is read as this
thread's CPU time (time.thread_time), which a loaded machine does not inflate, and as wall
time beside it (which it does: on shared cores the process waits for one). On a CPU the
guard reads the process's peak RSS each step (getrusage); with CUDA initialised it reads
max_memory_allocated instead.

    PYTHONPATH=src python3 benches/bench_track.py [--steps 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from afford.track import Budget, Session

STEP_SECONDS = 0.010  # the 10 ms step of the target


def guarded(n: int) -> tuple[float, float]:
    """(CPU, wall) seconds for n guarded iterations (no cap reached, no save due)."""
    g = Session(budget=Budget(chunk_seconds=1e9, save_every=10**9, write_seconds=1.0,
                              step_seconds=None), marker=None)
    c0, w0 = time.thread_time(), time.perf_counter()
    for i in range(n):
        g.step(i)
        if g.should_save(i):
            pass
        if g.should_stop():
            break
    c1, w1 = time.thread_time(), time.perf_counter()
    g.close()
    return c1 - c0, w1 - w0


def bare(n: int) -> tuple[float, float]:
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(n):
        pass
    return time.thread_time() - c0, time.perf_counter() - w0


def main(steps: int = 200_000, repeats: int = 5) -> dict:
    cpu, wall = [], []
    for _ in range(repeats):
        (gc_, gw), (bc, bw) = guarded(steps), bare(steps)
        cpu.append((gc_ - bc) / steps)
        wall.append((gw - bw) / steps)
    ns = statistics.median(cpu) * 1e9
    return {"steps": steps, "repeats": repeats, "ns_per_step": ns,
            "ns_per_step_all": [round(x * 1e9) for x in cpu],
            "wall_ns_per_step": statistics.median(wall) * 1e9,
            "share_of_10ms_step": ns * 1e-9 / STEP_SECONDS, "load": os.getloadavg()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    r = main(a.steps, a.repeats)
    print(f"guard per step: {r['ns_per_step']:.0f} ns of CPU (median of {r['repeats']} x "
          f"{r['steps']} steps; each: {r['ns_per_step_all']}); wall "
          f"{r['wall_ns_per_step']:.0f} ns")
    print(f"share of a 10 ms step: {r['share_of_10ms_step']:.4%} (target <= 0.5 %)")
    print(f"load average: {', '.join(f'{x:.2f}' for x in r['load'])} on {os.cpu_count()} cores")
