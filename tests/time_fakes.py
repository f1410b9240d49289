"""Children's events made by hand for the step-time stage (afford.certification.stage_time): a
known step law, exact FLOP counts, and a fake ``run_round`` that records what it was asked
to measure. No processes, no torch steps."""

from __future__ import annotations

from afford.certification.stage_time import Registry, assemble_design_points, plan_design
from afford.certification.sweep import assemble_point, fit_workload, point_key
from afford.workloads.tinylm import TinyLM, q3

GEMM_PER_TOKEN = 151781376.0  # tinylm q3's counted GEMM FLOPs per token (H200, 2026-12-02)
ATTN_PER_BSS = 57344.0        # and attention FLOPs per B*s^2
F, W0, W_GEMM, W_ATTN = 0.010, 0.0045, 3.3e-15, 1.2e-15  # the H200 grid's max-form fit


def law(b: int, s: int) -> float:
    return max(F, W0 + W_GEMM * GEMM_PER_TOKEN * b * s + W_ATTN * ATTN_PER_BSS * b * s * s)


def tinylm_large() -> TinyLM:
    """tinylm q3 with the large-GPU sweep (seq 1k-8k at batch 8)."""
    from dataclasses import replace

    return TinyLM(replace(q3(), sweep=(1024, 2048, 4096, 8192)))


def shape_of(item: dict) -> tuple[int, int]:
    return int(item.get("batch") or 8), int(item["value"])


def busy_law(b: int, s: int) -> float:
    """The device's busy time behind :func:`law`: its work less the gap of 1,000 kernels
    at 1 us each (so busy + kernels x gap is the work side of the max)."""
    return W0 - 1e-3 + W_GEMM * GEMM_PER_TOKEN * b * s + W_ATTN * ATTN_PER_BSS * b * s * s


def device_steps(b: int, s: int) -> list[dict]:
    return [{"index": 20 + i, "busy_seconds": busy_law(b, s), "kernels": 1000,
             "span_seconds": busy_law(b, s), "queued_gap_seconds": 1e-6, "queued_gaps": 900,
             "host_seconds": F} for i in range(3)]


def event(item: dict, child: int, seconds: float, round_: str = "sweep",
          error: str | None = None, flops: bool = True, device: bool = False) -> dict:
    b, s = shape_of(item)
    rec = {"child": child, "order_position": 0, "round": round_}
    if error:
        rec["error"] = error
    else:
        rec.update(timed_seconds=[seconds] * 12, timed_step_indices=list(range(4, 16)),
                   median_seconds=seconds, step0_seconds=10 * seconds,
                   peak_allocated_bytes=1000 * b * s, peak_reserved_bytes=1100 * b * s)
        if device:
            rec["device_steps"] = device_steps(b, s)
        if flops and child in (0, 3):
            rec["flops"] = {"total": (GEMM_PER_TOKEN + ATTN_PER_BSS * s) * b * s,
                            "gemm": GEMM_PER_TOKEN * b * s, "attn": ATTN_PER_BSS * b * s * s,
                            "other": 0.0}
    return {"event": "point", "key": item["key"], "child": child, "record": rec,
            "shape": {"batch": b, "seq": s, "d": 512, "L": 8, "H": 8},
            "tokens_per_step": b * s}


class FakeRounds:
    """``run_round`` for :func:`settle`: each child times each item by ``seconds(item,
    child, round)``; the calls are kept."""

    def __init__(self, seconds=None):
        self.seconds = seconds or (lambda item, child, round_: law(*shape_of(item)))
        self.calls: list[tuple[list[str], int, str]] = []

    def __call__(self, items: list[dict], n: int, round_: str) -> list[dict]:
        self.calls.append(([it["key"] for it in items], n, round_))
        first = 3  # numbered after the sweep's children, as certify numbers them
        return [{it["key"]: event(it, first + k, self.seconds(it, first + k, round_), round_)
                 for it in items} for k in range(n)]


def sweep(seconds=None, w=None, values=(1024, 2048, 4096, 8192), mode="bf16", spec="tinylm",
          error=None, device=False):
    """(result, design, registry) as certify has them after the sweep: every item timed by
    three children (``seconds(item, child)``; ``error(item, child)``: a failure text)."""
    w = w or tinylm_large()
    design = plan_design(spec, w, mode, list(values))
    items = [{"key": point_key(spec, mode, v), "workload": spec, "mode": mode, "value": v}
             for v in values] + design.items()
    seconds = seconds or (lambda item, child: law(*shape_of(item)))
    per_child = []
    for c in range(3):
        per_child.append({it["key"]: event(it, c, seconds(it, c),
                                           error=error(it, c) if error else None,
                                           device=device)
                          for it in items})
    reg = Registry()
    reg.add(per_child)
    points = [assemble_point(v, reg.events[point_key(spec, mode, v)], 10**12) for v in values]
    r = fit_workload(spec, w, mode, points)
    return assemble_design_points(r, design, reg, 0, 10**12, 3), design, reg, w
