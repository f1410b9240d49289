"""The truth a certificate's predictions are judged against: a workload's warm step and peak
memory at a list of shapes, each shape in its own fresh process, timed outside afford
(a bench for the GPU, not a test).

    python3 benches/step_truth.py SPEC --shape BxS [--shape ...] --out truth.jsonl
        [--mode bf16] [--warm 5] [--blocks 3] [--per-block 10] [--profile 3] [--trace 3]
        [--gc default|step|off]

Each shape gets one fresh Python process. All of them start together and import torch and
transformers and resolve the workload (CPU work only: none touches the GPU), then wait; the
shapes are then measured one at a time, so no two ever share the GPU. A worker builds the
model with the workload's own builder (the user's model, optimizer and data, as
``afford certify -w SPEC`` builds them) and runs its own training loop, written here and not
afford's: zero the gradients (to None), forward under autocast, backward, optimizer step.

- **step**: ``--warm`` synced steps, then ``--blocks`` blocks of ``--per-block`` steps each,
  pipelined (no sync inside a block), timed with CUDA events at the block's two ends; the
  block's seconds over its steps is one reading, the median of the blocks the truth. Each
  reading keeps the step indices it covers.
- **memory**: ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over every step
  of the process (``PYTORCH_CUDA_ALLOC_CONF`` as the caller's environment has it), and the
  cumulative peaks after each warm step and each block (``peaks_by_step``: [step, allocated,
  reserved]) with how often Python's garbage collector ran, to see when a peak grows;
  ``--trace N``: the allocator's history of the build and the first N warm steps (the form
  the certificate stores, :mod:`afford.measure.alloc_trace`), to replay offline.
- **device busy** (``--profile N``, after the above): N more steps under ``torch.profiler``
  read as afford reads them (:func:`afford.measure.device_time.profile_steps`), a second
  witness for the device side.

One JSON line per shape, with the process's torch version and device name. A shape that
ran out of memory says so and the bench goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def parse_shape(text: str) -> tuple[int, int]:
    """``3x768`` -> (3, 768); ValueError for anything else."""
    b, sep, s = text.lower().partition("x")
    if not sep or not b.isdigit() or not s.isdigit() or int(b) < 1 or int(s) < 1:
        raise ValueError(f"shape {text!r}: give BATCHxSEQ, e.g. 3x768")
    return int(b), int(s)


def truth_shapes(top_tokens: int, top_seq: int, seq_multiple: int = 64
                 ) -> list[tuple[int, int]]:
    """Shapes a user would plan with, from the largest token count ``top_tokens`` and the
    longest sequence ``top_seq`` of a certificate's sweep: short sequences at small
    and large batches (the launch floor and past it), sequences between and beyond the
    fitted ones, up to 4x ``top_tokens`` and, at batch 1, 8x ``top_seq``. Sorted by tokens;
    sequences rounded to ``seq_multiple``."""
    def r(v: float) -> int:
        return max(seq_multiple, int(round(v / seq_multiple)) * seq_multiple)

    s4 = r(top_seq / 4)
    cands = {
        (1, s4), (2, r(top_seq / 2)), (max(1, top_tokens // (4 * s4)), s4),
        (max(1, (3 * top_tokens) // (4 * r(top_seq * 3 / 8))), r(top_seq * 3 / 8)),
        (max(1, top_tokens // s4), s4), (max(1, (3 * top_tokens) // (2 * r(top_seq / 2))),
                                         r(top_seq / 2)),
        (max(1, (2 * top_tokens) // r(top_seq / 2)), r(top_seq / 2)),
        (max(1, (4 * top_tokens) // r(top_seq / 2)), r(top_seq / 2)),
        (max(1, (2 * top_tokens) // top_seq), top_seq),
        (max(1, (4 * top_tokens) // (2 * top_seq)), 2 * top_seq),
        (1, 3 * top_seq), (2, 4 * top_seq), (1, 8 * top_seq),
        (max(1, (3 * top_tokens) // (3 * top_seq)), 3 * top_seq),
    }
    cands = {(b, s) for b, s in cands if b * s <= 4 * top_tokens or (b == 1 and
                                                                     s <= 8 * top_seq)}
    return sorted(cands, key=lambda x: (x[0] * x[1], x))


# ---------------------------------------------------------------- the worker (one shape)

def _worker(spec: str, mode: str, device_class: str) -> int:
    import torch

    from afford.workloads import resolve
    from afford.workloads.base import autocast_for

    w = resolve(spec, device_class)  # transformers' import and the config: before "ready"
    print("ready", flush=True)
    job = json.loads(sys.stdin.readline())
    b, s = job["batch"], job["seq"]
    cuda = torch.cuda.is_available()  # a CPU run only checks the bench itself
    device = torch.device("cuda" if cuda else "cpu")
    out = {"spec": spec, "mode": mode, "batch": b, "seq": s, "tokens": b * s,
           "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0) if cuda else "cpu", "pid": os.getpid()}
    t0 = time.perf_counter()
    traced = cuda and job.get("trace", 0) > 0
    if traced:  # the allocator's history from the fresh process's first allocation
        from afford.measure import alloc_trace

        seed_segments = alloc_trace.start(device)
    try:
        built = w.build({**w.shape(s), "batch": b}, device, job["seed"])
        out["params"] = sum(p.numel() for p in built.model.parameters())
        out["trainable_params"] = sum(p.numel() for p in built.model.parameters()
                                      if p.requires_grad)

        import gc

        if job.get("gc") == "off":
            gc.disable()
        out["gc"] = job.get("gc") or "default"

        def step(i: int):
            built.optimizer.zero_grad(set_to_none=True)
            with autocast_for(mode, device):
                loss = built.loss()
            loss.backward()
            built.optimizer.step()
            if job.get("gc") == "step":  # cyclic garbage freed at once, not when gc runs
                gc.collect()
            return loss.detach()


        def collections() -> int:
            return sum(g["collections"] for g in gc.get_stats())

        def peaks() -> list[int]:  # cumulative peak allocated, reserved so far
            return [torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()] \
                if cuda else []

        gc0 = collections()
        i = 0
        by_step = []  # when the peaks grow: the certificate's memory child runs 3 steps
        for _ in range(job["warm"]):
            float(step(i))
            by_step.append([i, *peaks()])
            i += 1
            if traced and i == job["trace"]:
                out["trace"] = alloc_trace.stop(device, b, s, seed_segments)
                out["traced_steps"] = i
                traced = False
        if cuda:
            torch.cuda.synchronize()
        readings = []
        for _ in range(job["blocks"]):
            first = i
            seconds = _block(step, i, job["per_block"], cuda)
            i += job["per_block"]
            readings.append({"seconds": seconds / job["per_block"], "steps": [first, i - 1]})
            by_step.append([i - 1, *peaks()])
        out["readings"] = readings
        out["peaks_by_step"] = by_step
        out["gc_collections"] = collections() - gc0  # Python's collector ran this often
        out["step_seconds"] = statistics.median(r["seconds"] for r in readings)
        if cuda:
            out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        if job["profile"] and cuda:
            from afford.measure.device_time import profile_steps

            sides = profile_steps(step, i, job["profile"])
            out["sides"] = sides
            out["busy_seconds"] = statistics.median(x["busy_seconds"] for x in sides)
            out["kernels"] = statistics.median(x["kernels"] for x in sides)
    except torch.cuda.OutOfMemoryError as exc:
        out["error"] = f"out of memory: {str(exc).splitlines()[0]}"
    out["wall_seconds"] = time.perf_counter() - t0
    print(json.dumps(out), flush=True)
    return 0


def _block(step, first: int, n: int, cuda: bool) -> float:
    """Seconds of ``n`` pipelined steps: CUDA events at the block's two ends (no sync
    inside), or the host clock on a CPU."""
    import torch

    if not cuda:
        t = time.perf_counter()
        for i in range(first, first + n):
            float(step(i))
        return time.perf_counter() - t
    a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(first, first + n):
        step(i)
    z.record()
    z.synchronize()
    return a.elapsed_time(z) / 1e3


# ---------------------------------------------------------------- the coordinator

def _spawn(spec: str, mode: str, device_class: str) -> subprocess.Popen:
    cmd = [sys.executable, "-P", str(Path(__file__).resolve()), "--worker", spec,
           "--mode", mode, "--device-class", device_class]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def run(spec: str, shapes: list[tuple[int, int]], out: Path, *, mode: str = "bf16",
        device_class: str = "large-gpu", warm: int = 5, blocks: int = 3,
        per_block: int = 10, profile: int = 3, seed: int = 0, trace: int = 0,
        gc: str = "default") -> list[dict]:
    """Every shape in its own fresh process, one on the GPU at a time; the records, also
    appended to ``out`` as JSON lines. ``trace`` > 0: the allocator's history of the build
    and the first ``trace`` warm steps, as the certificate's memory child records it;
    ``gc``: Python's collector as a loop leaves it (``default``), run after every step
    (``step``: cyclic garbage holding tensors freed at once) or ``off``."""
    t0 = time.perf_counter()
    procs = [_spawn(spec, mode, device_class) for _ in shapes]
    for p in procs:  # all import together, none touches the GPU
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"a worker for {spec} did not start: {line!r}")
    ready = time.perf_counter() - t0
    recs = []
    for (b, s), p in zip(shapes, procs):
        job = {"batch": b, "seq": s, "warm": warm, "blocks": blocks, "per_block": per_block,
               "profile": profile, "seed": seed, "trace": trace, "gc": gc}
        p.stdin.write(json.dumps(job) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        p.wait()
        rec = json.loads(line) if line.strip() else {
            "spec": spec, "batch": b, "seq": s, "error": f"worker exited {p.returncode}"}
        rec["workers_ready_seconds"] = ready
        recs.append(rec)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
        step = rec.get("step_seconds")
        res = rec.get("peak_reserved_bytes")
        print(f"{spec} {b}x{s}: " + (f"step {step * 1e3:.2f} ms, reserved "
                                    f"{res / 2**20 if res else float('nan'):.0f} MiB"
                                    if step else rec.get("error", "?")),
              file=sys.stderr, flush=True)
    return recs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shape", action="append", default=[], type=parse_shape)
    ap.add_argument("--cert", type=Path, help="take the shapes from this certificate "
                    "(truth_shapes of its sweep's largest tokens and longest sequence)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--mode", default="bf16")
    ap.add_argument("--device-class", default="large-gpu")
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--per-block", type=int, default=10)
    ap.add_argument("--profile", type=int, default=3)
    ap.add_argument("--trace", type=int, default=0, help="record the allocator's history of "
                    "the build and this many warm steps (at most --warm), to replay offline "
                    "against the certificate's")
    ap.add_argument("--gc", choices=("default", "step", "off"), default="default",
                    help="Python's garbage collector in the worker: as a training loop "
                    "leaves it, run after every step, or off (does garbage in reference "
                    "cycles move a peak?)")
    a = ap.parse_args(argv)
    if a.worker:
        return _worker(a.spec, a.mode, a.device_class)
    shapes = list(a.shape)
    if a.cert:
        from afford.core.errors import InputError

        try:
            shapes += truth_shapes(*sweep_top(a.cert, a.mode))
        except InputError as exc:  # no certificate (its certify failed): say so, no traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if not shapes or a.out is None:
        ap.error("give --out and --shape BxS (or --cert)")
    run(a.spec, shapes, a.out, mode=a.mode, device_class=a.device_class, warm=a.warm,
        blocks=a.blocks, per_block=a.per_block, profile=a.profile,
        trace=min(a.trace, a.warm), gc=a.gc)
    return 0


def sweep_top(cert_path: Path, mode: str) -> tuple[int, int]:
    """The largest token count and the longest sequence of the certificate's sweep (the
    shapes its user asked for), of its (single) workload in ``mode``."""
    from afford.schema.cert import load_certificate

    cert = load_certificate(cert_path)
    r = next(x for x in cert.workloads if x.mode == mode)
    pts = [p for p in r.points if p.batch and p.seq]
    if not pts:
        raise SystemExit(f"{cert_path}: no sweep points with a batch and a sequence in {mode}")
    return (int(max(p.batch * p.seq for p in pts)), int(max(p.seq for p in pts)))


if __name__ == "__main__":
    sys.exit(main())
