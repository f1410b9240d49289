"""What a workload is: the typed protocol that built-ins and user workloads follow.

A workload names one sweep parameter (``sweep_param``), turns a sweep value into a full
shape (``shape``), and builds, for a shape, a model, its optimizer and a ``loss`` closure
that runs the forward pass on the step's batch (``build``). afford owns the training step
(:func:`train_step`): zero the gradients, forward under the dtype mode's autocast, backward,
optimizer step. So every timed step is a whole step.

A user workload is a factory ``pkg.module:factory`` returning an instance of a
:class:`Workload` subclass; the test suite carries one (``tests/user_workload.py``)::

    class MyWorkload(Workload):
        name = "mine"
        sweep_param = "seq"
        description = "my model at sequence length seq"

        def default_sweep(self, device_class): return [128, 256, 512]
        def shape(self, value): return {"batch": 8, "seq": value, "d": 256}
        def build(self, shape, device, seed):
            torch.manual_seed(seed)
            model = MyModel(shape["d"]).to(device)
            opt = torch.optim.AdamW(model.parameters())
            x = torch.randn(shape["batch"], shape["seq"], shape["d"], device=device)
            return Built(model=model, optimizer=opt, loss=lambda: model(x).square().mean(),
                         tokens_per_step=shape["batch"] * shape["seq"])

    def factory(): return MyWorkload()
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from afford.core.published_constants import MODES
from afford.schema.memory_section import CodePath

DEVICE_CLASSES = ("cpu", "small-gpu", "large-gpu")


@dataclass
class Built:
    """One shape, built on a device, ready to step.

    ``loss()`` runs the forward pass on this step's batch and returns a scalar loss.
    ``vocab`` is the number of classes when the loss is a cross-entropy over them (the
    init-loss gate compares step-0 loss with ln(vocab)); ``None`` otherwise.
    ``report()``, when set, is called once after the point is timed and its memory read;
    it returns extra readings (a JSON-serialisable dict, e.g. per-phase step times) that the
    child sends back with the point as ``report``.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    loss: Callable[[], torch.Tensor]
    tokens_per_step: int
    vocab: int | None = None
    report: Callable[[], dict] | None = None


# how a workload's attention keeps its s x s scores (Workload.attention)
Attention = Literal["fused", "materialised"]


class Workload(ABC):
    """The protocol. Subclasses set the three class attributes and the three methods."""

    name: ClassVar[str]
    sweep_param: ClassVar[str]
    description: ClassVar[str] = ""
    # how the attention keeps its s x s scores, for the memory law (fit/memory.py): "fused"
    # (scaled_dot_product_attention: never stored, no s^2 term), "materialised" (stored,
    # an s^2 term), None: not declared (the fit chooses with or without one).
    attention: ClassVar[Attention | None] = None

    @abstractmethod
    def default_sweep(self, device_class: str) -> list[int]:
        """Sweep values that suit ``device_class`` (``cpu``, ``small-gpu``, ``large-gpu``)."""

    @abstractmethod
    def shape(self, value: int) -> dict[str, int]:
        """The whole shape at sweep value ``value``; it must contain ``sweep_param``."""

    @abstractmethod
    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        """Model, optimizer and loss closure for ``shape`` on ``device``."""

    def dims(self, shape: dict[str, int]) -> dict[str, int] | None:
        """Transformer-shaped dimensions (B, s, d, L, H) for the memory law, if any."""
        return None

    def code_paths(self) -> list[CodePath]:
        """The sizes at which its step takes another code path, as far as the workload
        knows them (:mod:`afford.workloads.paths`); the memory law keeps them, and a figure
        past one no measured shape crossed is marked extrapolated."""
        return []


def autocast_for(mode: str, device: torch.device):
    """The autocast context of a dtype mode: fp32 runs without autocast."""
    if mode == "fp32":
        return contextlib.nullcontext()
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    dtype = torch.bfloat16 if mode == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def train_step(built: Built, mode: str, device: torch.device) -> torch.Tensor:
    """One whole training step: zero grads, forward (autocast), backward, optimizer step."""
    built.optimizer.zero_grad(set_to_none=True)
    with autocast_for(mode, device):
        loss = built.loss()
    loss.backward()
    built.optimizer.step()
    return loss.detach()


class WorkloadRefused(Exception):
    """The step is not a whole training step (no gradient, or a non-finite one)."""


def check_gradients(model: torch.nn.Module) -> int:
    """Every trainable parameter must hold a finite gradient after a step.

    Returns the number of parameters checked; raises :class:`WorkloadRefused` naming the
    first parameter without a gradient or with a non-finite one. (A published ablation once
    timed a step whose backward silently did not run.)
    """
    checked = 0
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.grad is None:
            raise WorkloadRefused(f"parameter {name!r} received no gradient: the backward "
                                  "pass did not reach it, so this is not a whole training step")
        if not bool(torch.isfinite(p.grad).all()):
            raise WorkloadRefused(f"parameter {name!r} has a non-finite gradient")
        checked += 1
    if checked == 0:
        raise WorkloadRefused("the model has no trainable parameters")
    return checked


def count_params(model: torch.nn.Module) -> int:
    """Trainable parameters: those the optimizer updates (a frozen one carries no gradient
    and no optimizer state)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def count_frozen(model: torch.nn.Module) -> int:
    """Frozen parameters (``requires_grad`` off: a LoRA base, frozen embeddings): they hold
    only their weights."""
    return sum(p.numel() for p in model.parameters() if not p.requires_grad)


def validate_shape(workload: Workload, value: int) -> dict[str, int]:
    """The shape at ``value``, checked: positive integers, sweep parameter present."""
    shape = workload.shape(value)
    if workload.sweep_param not in shape:
        raise ValueError(f"workload {workload.name!r}: shape({value}) lacks its sweep "
                         f"parameter {workload.sweep_param!r}")
    for key, v in shape.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"workload {workload.name!r}: shape[{key!r}] = {v!r} "
                             "is not a positive integer")
    return shape


def causal_mask(s: int, device: torch.device) -> torch.Tensor:
    return torch.ones(s, s, dtype=torch.bool, device=device).tril()  # (s, s)
