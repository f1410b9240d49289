"""The measurements behind the gates (:mod:`afford.fit.gates` evaluates them; this only reads).

- :func:`init_losses`: the step-0 loss (no gradient, no step) of each workload whose
  ``Built.vocab`` is set, per shape and seed;
- :func:`parity`: forward output, loss and gradients of one workload built on the CPU, and
  of the same build moved to CUDA (same weights, same inputs), compared;
- :func:`noise_floor`: two runs of k steps from one seed and one from another;
- :func:`param_counts`: trainable parameters of a workload at a shape;
- :func:`user_gate_outcomes`: calls every gate registered in the entry-point group
  ``afford.fit.gates`` (a user gate may touch the device, so it is called here).

Each returns readings (:mod:`afford.schema.determinism_section`); a case that fails records its
error text instead of a number (rule 9).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import torch

from afford.core.provenance import NotExecutable
from afford.fit.gates import ENTRY_POINT_GROUP, GateContext
from afford.measure.step_capture import (
    StageError,
    bitwise_equal,
    capture_step,
    max_abs,
    max_abs_delta,
    move_built,
)
from afford.measure.sweep_child import error_text
from afford.schema.determinism_section import (
    InitLossReading,
    NoiseFloorReading,
    ParamCountReading,
    ParityReading,
)
from afford.workloads.base import Workload, autocast_for, count_params, train_step, validate_shape

CPU = torch.device("cpu")


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _why(exc: BaseException) -> str:
    if isinstance(exc, StageError):
        return f"{exc.stage}: {error_text(exc.exc)}"
    return error_text(exc)


def init_losses(items: Iterable[tuple[str, Workload, str, list[int]]], seeds: Iterable[int],
                device: torch.device) -> list[InitLossReading]:
    """Loss of the untrained model for every (workload, value, seed), forward only.
    A workload without a vocabulary gives one reading with ``vocab=None`` and is skipped."""
    seeds = list(seeds)
    out: list[InitLossReading] = []
    for spec, w, mode, values in items:
        for value in values:
            done = False
            for seed in seeds:
                r = _init_loss(spec, w, mode, value, seed, device)
                out.append(r)
                if r.vocab is None and r.error is None:
                    done = True
                    break
            if done:
                break
    return out


def _init_loss(spec: str, w: Workload, mode: str, value: int, seed: int,
               device: torch.device) -> InitLossReading:
    base = {"workload": spec, "value": value, "seed": seed, "mode": mode}
    try:
        built = w.build(validate_shape(w, value), device, seed)
        if built.vocab is None:
            return InitLossReading(**base)
        with torch.no_grad(), autocast_for(mode, device):
            loss = float(built.loss())
        return InitLossReading(**base, vocab=int(built.vocab), loss=loss)
    except Exception as exc:
        return InitLossReading(**base, error=_why(exc))
    finally:
        _release(device)


def parity(items: Iterable[tuple[str, Workload, int]], seed: int, mode: str = "fp32",
           cuda: torch.device | None = None
           ) -> tuple[list[ParityReading], NotExecutable | None]:
    """CPU against CUDA for each (workload, value): the workload is built on the CPU, run,
    built again from the same seed and moved to CUDA (so both see the same weights and the
    same inputs: CPU and CUDA random generators differ), run, compared."""
    if not torch.cuda.is_available():
        return [], NotExecutable(what="CPU/CUDA parity",
                                 reason=f"no CUDA device here (torch.cuda.is_available() is "
                                        f"False; torch {torch.__version__}, CUDA build "
                                        f"{torch.version.cuda})")
    cuda = cuda or torch.device("cuda")
    out: list[ParityReading] = []
    for spec, w, value in items:
        out.extend(_parity_one(spec, w, value, seed, mode, cuda))
        _release(cuda)
    return out, None


def _parity_one(spec: str, w: Workload, value: int, seed: int, mode: str,
                cuda: torch.device) -> list[ParityReading]:
    base = {"workload": spec, "value": value, "mode": mode}
    try:
        shape = validate_shape(w, value)
        a = capture_step(w.build(shape, CPU, seed), mode, CPU, optimizer_step=False)
        b = capture_step(move_built(w.build(shape, CPU, seed), cuda), mode, cuda,
                         optimizer_step=False)
    except Exception as exc:
        return [ParityReading(**base, quantity="forward output", error=_why(exc))]
    pairs = {"forward output": ({a.forward_of or "output": a.forward},
                                {b.forward_of or "output": b.forward}),
             "loss": ({"loss": a.loss}, {"loss": b.loss}),
             "gradients": (a.grads, b.grads)}
    return [ParityReading(**base, quantity=q, **_relative(x, y)) for q, (x, y) in pairs.items()
            if x and all(v is not None for v in x.values())]


def _relative(cpu: dict[str, torch.Tensor], dev: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Worst tensor by max |cpu - dev| / max |cpu| (a zero reference: the delta itself)."""
    worst = {"rel_delta": -1.0, "max_abs_delta": 0.0, "worst_tensor": None}
    for name, a in cpu.items():
        b = dev.get(name)
        d = max_abs_delta(a, b.cpu()) if b is not None else float("inf")
        ref = max_abs(a)
        rel = d / ref if ref > 0 else d
        if rel > worst["rel_delta"] or rel != rel:
            worst = {"rel_delta": rel, "max_abs_delta": d, "worst_tensor": name}
    return worst


def noise_floor(items: Iterable[tuple[str, Workload, str, int]], device: torch.device,
                steps: int, seed_a: int, seed_b: int) -> list[NoiseFloorReading]:
    """Per workload: k steps from seed a, again from seed a, then from seed b."""
    out = []
    for spec, w, mode, value in items:
        base = {"workload": spec, "value": value, "mode": mode, "steps": steps,
                "seed_a": seed_a, "seed_b": seed_b}
        try:
            la, pa = _train(w, value, mode, device, steps, seed_a)
            la2, pa2 = _train(w, value, mode, device, steps, seed_a)
            lb, _ = _train(w, value, mode, device, steps, seed_b)
            same = pa.keys() == pa2.keys() and all(bitwise_equal(pa[k], pa2[k]) for k in pa)
            out.append(NoiseFloorReading(**base, losses_a=la, losses_a_again=la2, losses_b=lb,
                                         params_bitwise_equal=same))
        except Exception as exc:
            out.append(NoiseFloorReading(**base, error=_why(exc)))
        finally:
            _release(device)
    return out


def _train(w: Workload, value: int, mode: str, device: torch.device, steps: int,
           seed: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    built = w.build(validate_shape(w, value), device, seed)
    losses = [float(train_step(built, mode, device)) for _ in range(steps)]
    return losses, {n: p.detach().clone() for n, p in built.model.named_parameters()}


def param_counts(items: Iterable[tuple[str, Workload, int]], seed: int = 0
                 ) -> list[ParamCountReading]:
    """Trainable parameters of each workload at a shape (built on the CPU: the count does
    not depend on the device)."""
    out = []
    for spec, w, value in items:
        try:
            built = w.build(validate_shape(w, value), CPU, seed)
            out.append(ParamCountReading(workload=spec, value=value,
                                         params=count_params(built.model)))
        except Exception as exc:
            out.append(ParamCountReading(workload=spec, value=value, error=_why(exc)))
        finally:
            _release(CPU)
    return out


def user_gate_outcomes(ctx: GateContext) -> list[tuple[str, str, Any]]:
    """(entry-point name, source, result or the exception it raised) for every gate
    registered in the group ``afford.fit.gates``, in name order."""
    out = []
    eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    for ep in eps:
        source = f"entry point {ENTRY_POINT_GROUP}: {ep.name} = {ep.value}"
        try:
            outcome = ep.load()(ctx)
        except Exception as exc:  # the gate's failure is its outcome
            outcome = exc
        out.append((ep.name, source, outcome))
    return out
