"""One training step, taken apart: forward output, loss, gradients, parameters after the
optimizer step, each kept for comparison (the determinism audit and CPU/CUDA parity).

The step is the one :func:`afford.workloads.train_step` takes (zero grads, forward under
the mode's autocast, backward, optimizer step); here each stage is run by name, so an
error says where it happened. A workload's ``loss()`` closure returns only a scalar, so
the *forward output* is taken from a forward hook: the last non-scalar tensor a module
returned during the forward pass (the model's own output, or for a model that returns its
loss, the output of its last module before the loss, e.g. tinylm's final LayerNorm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from afford.workloads.base import Built, autocast_for


class StageError(Exception):
    """An exception raised in a named stage of the step (build, forward, backward, ...);
    ``partial``: what the stages before it produced (the forward output and loss when the
    backward raised), so that what ran is kept (COSTS 1.6: forward bitwise beside a gradient
    that is NOT EXECUTABLE)."""

    def __init__(self, stage: str, exc: BaseException, partial: "Snapshot | None" = None
                 ) -> None:
        super().__init__(f"{stage}: {exc}")
        self.stage = stage
        self.exc = exc
        self.partial = partial


@dataclass
class Snapshot:
    forward: torch.Tensor | None
    forward_of: str | None
    loss: torch.Tensor
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    params: dict[str, torch.Tensor] = field(default_factory=dict)  # after the optimizer step


def _last_output_hook(model: torch.nn.Module):
    """Hooks on every module that keep the last non-scalar tensor output and its module."""
    last: dict[str, object] = {}
    handles = []
    for name, mod in model.named_modules():
        def hook(_m, _inp, out, name=name or type(model).__name__):
            t = out[0] if isinstance(out, (tuple, list)) and out else out
            if isinstance(t, torch.Tensor) and t.numel() > 1:
                last["name"], last["out"] = name, t
        handles.append(mod.register_forward_hook(hook))
    return last, handles


def capture_step(built: Built, mode: str, device: torch.device, *,
                 optimizer_step: bool = True) -> Snapshot:
    """Run one step stage by stage and copy what it produced; :class:`StageError` names the
    stage that raised."""
    stage, snap = "forward", None
    last, handles = _last_output_hook(built.model)
    try:
        built.optimizer.zero_grad(set_to_none=True)
        with autocast_for(mode, device):
            loss = built.loss()
        for h in handles:
            h.remove()
        fwd = last.get("out")
        snap = Snapshot(forward=fwd.detach().clone() if isinstance(fwd, torch.Tensor) else None,
                        forward_of=last.get("name"), loss=loss.detach().clone())
        stage = "backward"
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in built.model.named_parameters()
                 if p.grad is not None}
        snap = Snapshot(snap.forward, snap.forward_of, snap.loss, grads)
        if optimizer_step:
            stage = "optimizer step"
            built.optimizer.step()
            snap.params = {n: p.detach().clone() for n, p in built.model.named_parameters()}
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:
        raise StageError(stage, exc, snap) from exc
    finally:
        for h in handles:
            h.remove()
    return snap


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bit pattern (so NaN equals the same NaN, and -0.0 != 0.0)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8),
                       b.contiguous().reshape(-1).view(torch.uint8))


def max_abs_delta(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| in double precision; NaN where only one side is NaN counts as infinite."""
    if a.shape != b.shape:
        return math.inf
    wide = torch.complex128 if (a.is_complex() or b.is_complex()) else torch.float64
    b = b.to(a.device)
    d = (a.to(wide) - b.to(wide)).abs()
    d = d.masked_fill(a.isnan() & b.isnan(), 0.0).nan_to_num(nan=math.inf)
    return float(d.max()) if d.numel() else 0.0


def max_abs(a: torch.Tensor) -> float:
    wide = torch.complex128 if a.is_complex() else torch.float64
    return float(a.to(wide).abs().max()) if a.numel() else 0.0


def move_built(built: Built, device: torch.device) -> Built:
    """The same built workload on another device: the model (in place, so the optimizer
    keeps its parameters) and every tensor the loss closure captured. A closure that reaches
    its inputs some other way fails at its forward pass, and says so."""
    built.model.to(device)
    for cell in getattr(built.loss, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, torch.Tensor):
            cell.cell_contents = value.to(device)
    return built
