"""Why is tinylm's launch floor 16-18 ms in certify's children and 9-11 ms in a plain script
(H200, 2026-12-02)? One launch-bound shape (tinylm q3 at 8 x 1024, bf16), each timing in a
fresh process, in four conditions, interleaved:

- ``alone``: nothing else of ours on the host or the device;
- ``sibling_context``: another process holds an idle CUDA context on the device (a child
  spawned ahead and pre-warmed, as certify did before ``--ahead``);
- ``sibling_startup``: another process starts up beside the timing (imports torch and
  transformers, creates a context, warms cuBLAS and AdamW: certify's next child);
- ``pinned``: the timing process pinned to the CPUs local to the GPU (NUMA), alone.

Each line: the async median (CUDA events per step, one sync per 30-step block), the synced
median (float(loss) each step), CPU seconds and involuntary context switches over the timed
steps, the CPU it ran on. If the floor moves with a sibling, certify's ``--ahead`` children
(no context until their job arrives) are the fix; if it moves with the CPU, pinning is.

    python3 benches/device_floor.py OUT.jsonl [repeats]     (benches/ and src on PYTHONPATH)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SHAPE = (8, 1024)


def measure() -> dict:
    t0 = time.perf_counter()
    import resource

    import torch

    from afford.workloads.base import train_step
    from afford.workloads.tinylm import TinyLM, q3

    imp = time.perf_counter() - t0
    dev = torch.device("cuda")
    w = TinyLM(q3())
    shape = {**w.shape(SHAPE[1]), "batch": SHAPE[0]}
    built = w.build(shape, dev, 0)
    for _ in range(20):
        train_step(built, "bf16", dev)
    torch.cuda.synchronize()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    steps = []
    for _ in range(3):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(31)]
        ev[0].record()
        for i in range(30):
            train_step(built, "bf16", dev)
            ev[i + 1].record()
        torch.cuda.synchronize()
        steps += [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(30)]
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    synced = []
    for _ in range(10):
        t = time.perf_counter()
        float(train_step(built, "bf16", dev))
        synced.append(time.perf_counter() - t)
    with open("/proc/self/stat") as fh:
        cpu = int(fh.read().rsplit(")", 1)[1].split()[36])
    return {"import_seconds": imp, "async_median": float(torch.tensor(steps).median()),
            "synced_median": float(torch.tensor(synced).median()),
            "cpu_seconds": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
            "involuntary_switches": ru1.ru_nivcsw - ru0.ru_nivcsw, "cpu": cpu,
            "affinity": sorted(os.sched_getaffinity(0))}


def gpu_local_cpus() -> str | None:
    """The GPU's NUMA-local CPU list (sysfs), or None when it is every CPU or unknown."""
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader",
                              "-i", "0"], capture_output=True, text=True, timeout=20).stdout
        bus = bus.strip().lower()
        dom, rest = bus.split(":", 1)
        path = f"/sys/bus/pci/devices/{dom[-4:]}:{rest}/local_cpulist"
        cpus = open(path).read().strip()
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    everything = f"0-{os.cpu_count() - 1}"
    return None if cpus == everything else cpus


SIBLING_CONTEXT = ("import torch, sys; torch.cuda.init(); x = torch.ones(8, 8, device='cuda');"
                   " (x @ x).sum().item(); print('ready', flush=True); sys.stdin.read()")


def run_one(mode: str, local: str | None) -> dict:
    me = [sys.executable, __file__, "--measure"]
    sib = None
    if mode == "sibling_context":
        sib = subprocess.Popen([sys.executable, "-c", SIBLING_CONTEXT], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        sib.stdout.readline()
    elif mode == "sibling_startup":
        sib = subprocess.Popen([sys.executable, "-m", "afford.measure.child", "--prewarm",
                                "cuda"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    elif mode == "pinned":
        if local is None:
            return {"mode": mode, "skipped": "no NUMA-local CPU list narrower than all CPUs"}
        me = ["taskset", "-c", local] + me
    try:
        out = subprocess.run(me, capture_output=True, text=True, timeout=120)
        row = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else \
            {"error": out.stderr[-500:]}
    finally:
        if sib is not None:
            sib.kill()
            sib.wait()
    return {"mode": mode, **row}


def main() -> int:
    if "--measure" in sys.argv:
        print(json.dumps(measure()))
        return 0
    path, repeats = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    local = gpu_local_cpus()
    modes = ["alone", "sibling_context", "sibling_startup", "pinned"]
    rows = []
    with open(path, "a") as fh:
        for r in range(repeats):
            for mode in modes[r % 4:] + modes[:r % 4]:
                row = {**run_one(mode, local), "repeat": r, "local_cpus": local}
                rows.append(row)
                fh.write(json.dumps(row) + "\n")
                fh.flush()
    for mode in modes:
        got = [x["async_median"] * 1e3 for x in rows if x["mode"] == mode and "async_median" in x]
        sw = [x["involuntary_switches"] for x in rows if x["mode"] == mode and "async_median" in x]
        print(f"{mode:16s} async ms {['%.2f' % g for g in got]}  ivcsw {sw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
