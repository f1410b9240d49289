"""The batch ladder: one shape at batch x1, x2, x4, each rung timed by the sweep's protocol
(:func:`afford.measure.timing.time_point`: step 0 and the warm-up kept apart, timed warm
steps with their indices), and NVML utilisation sampled over the warm steps of the x1 rung.

The fit ``t = F + c * tokens`` and the verdict are pure functions
(:mod:`afford.fit.time.verdicts`) applied by the stage; this module only measures. The batch is
the shape's ``batch``, ``n`` or ``B`` entry (the built-ins use ``batch`` and ``n``); a shape
with none of them cannot be laddered and says so.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from afford.core.provenance import CannotRunHere
from afford.measure.memory_peaks import is_oom
from afford.measure.probes.nvml import Reader, UtilisationSampler
from afford.measure.sweep_child import error_text
from afford.measure.timing import TimingRule, time_point
from afford.workloads.base import Built, Workload, check_gradients, train_step
from afford.workloads.clock import clock_for

BATCH_KEYS = ("batch", "n", "B")


def batch_key(shape: dict[str, int]) -> str | None:
    return next((k for k in BATCH_KEYS if k in shape), None)


def rung_rule(floor_seconds: float, warmup_seconds: float, min_steps: int) -> TimingRule:
    """A fixed floor (no adaptive extension): the ladder needs three medians, not 1 %."""
    return TimingRule(warmup_steps=2, warmup_seconds=warmup_seconds, min_steps=min_steps,
                      floor_seconds=floor_seconds, max_floor_seconds=floor_seconds)


def time_rung(workload: Workload, shape: dict[str, int], mode: str, device: torch.device,
              rule: TimingRule, seed: int, multiplier: int,
              sampler: UtilisationSampler | None = None,
              with_built: Callable[[Built], None] | None = None) -> dict:
    """Build and time one rung; the fields of :class:`~afford.schema.probes_section.Rung`.
    ``sampler`` runs over the timed warm steps; ``with_built`` gets the warm model after."""
    rec: dict = {"multiplier": multiplier, "shape": dict(shape)}
    built = None
    t0 = time.perf_counter()
    try:
        built = workload.build(shape, device, seed)
        rec["build_seconds"] = time.perf_counter() - t0
        rec["tokens_per_step"] = int(built.tokens_per_step)

        def after_warmup() -> None:
            check_gradients(built.model)
            if sampler is not None:
                sampler.start()

        clock = clock_for(device.type)
        timing = time_point(lambda i: train_step(built, mode, device), clock, rule, after_warmup)
        rec.update(step0_seconds=timing.step0_seconds, warmup_seconds=list(timing.warmup_seconds),
                   timed_seconds=list(timing.timed_seconds),
                   timed_step_indices=list(timing.timed_indices),
                   median_seconds=timing.median_seconds)
        if sampler is not None:
            sampler.stop()
        rec["wall_seconds"] = time.perf_counter() - t0
        if with_built is not None:
            with_built(built)
    except Exception as exc:  # a rung that fails is recorded; the ladder uses the others
        if sampler is not None:
            sampler.stop()
        rec["oom"] = is_oom(exc)
        rec["error"] = error_text(exc)
    finally:
        built = None
        if device.type == "cuda":  # cycles in a model would hold device memory
            gc.collect()
            torch.cuda.empty_cache()
    return rec


def run_ladder(workload: Workload, value: int, mode: str, device: torch.device,
               rule: TimingRule, multipliers: list[int], seed: int,
               reader: Reader | None = None, hz: float = 10.0, window_seconds: float = 1.0,
               with_x1: Callable[[Built], None] | None = None) -> tuple[dict, dict | None]:
    """(ladder fields, NVML trace fields or None). The x1 rung times at least
    ``window_seconds`` of warm steps when a reader is given, sampling NVML meanwhile."""
    shape = workload.shape(value)
    key = batch_key(shape)
    if key is None:
        raise CannotRunHere(f"shape {shape} has no batch entry ({', '.join(BATCH_KEYS)}) to "
                            "multiply")
    rungs, trace = [], None
    for m in multipliers:
        sampler = None
        r = rule
        if m == multipliers[0] and reader is not None:
            sampler = UtilisationSampler(read=reader, hz=hz, clock=time.monotonic)
            floor = max(rule.floor_seconds, window_seconds)
            r = replace(rule, floor_seconds=floor, max_floor_seconds=floor)
        rung_shape = {**shape, key: shape[key] * m}
        rungs.append(time_rung(workload, rung_shape, mode, device, r, seed, m, sampler,
                               with_x1 if m == multipliers[0] else None))
        if sampler is not None:
            trace = {"hz": hz, "t_seconds": sampler.t_seconds, "gpu": sampler.gpu,
                     "memory": sampler.memory, "error": sampler.error}
    return {"batch_key": key, "rungs": rungs}, trace
