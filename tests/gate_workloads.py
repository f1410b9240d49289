"""Workloads broken on purpose, for the gates and the determinism audit. Loaded as
``tests.gate_workloads:NAME`` (also inside the audit's child processes)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from afford.workloads.base import Built, Workload
from afford.workloads.tinylm import VOCAB, TinyLM, TinyLMConfig, TinyLMModel


class Noisy(Workload):
    """A small MLP whose input gets noise from a generator seeded from the OS at every
    build: no seed reaches it, so no two builds take the same step, flag or no flag."""

    name = "noisy"
    sweep_param = "width"
    description = "MLP with unseeded input noise (nondeterministic on purpose)"

    def default_sweep(self, device_class):
        return [16]

    def shape(self, value):
        return {"batch": 8, "width": int(value)}

    def build(self, shape, device, seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(16, shape["width"]), nn.Tanh(),
                              nn.Linear(shape["width"], 1)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(shape["batch"], 16, device=device)
        target = torch.randn(shape["batch"], 1, device=device)
        unseeded = torch.Generator(device=device)
        unseeded.seed()  # from the OS: a fresh, unrecorded seed

        def loss():
            noise = torch.randn(x.shape, generator=unseeded, device=device)
            return (model(x + noise) - target).square().mean()

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=shape["batch"])


class PutOp(Noisy):
    """Deterministic, but its forward calls ``Tensor.put_`` (accumulate=False), which
    torch 2.x refuses under ``use_deterministic_algorithms(True)``."""

    name = "putop"
    description = "MLP whose forward calls Tensor.put_"

    def build(self, shape, device, seed):
        built = super().build(shape, device, seed)
        model = built.model
        x = torch.randn(shape["batch"], 16, device=device)

        def loss():
            y = model(x)  # (batch, 1)
            slots = torch.zeros(4, device=device)
            slots.put_(torch.tensor([0, 1], device=device), y.detach()[:2, 0])
            return y.square().mean() + 0.0 * slots.sum()

        built.loss = loss
        return built


class ShiftMixLM(TinyLMModel):
    """tinylm with a token-shift mixer before the blocks: ``x_t += x_{t-1}``, the mask
    admitting only the previous position. ``leak=True`` puts the mask on the wrong side:
    ``x_t += x_{t+1}``, whose byte is position t's target (a leaking mask)."""

    def __init__(self, d, layers, heads, seq, leak):
        super().__init__(d, layers, heads, seq)
        self.offset = 1 if leak else -1

    def forward(self, idx, targets):
        s = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(s, device=idx.device))  # (B, s, d)
        mix = torch.ones(s - 1, device=idx.device).diag(self.offset)  # (s, s)
        x = x + mix @ x
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


class ShiftMix(TinyLM):
    name = "shiftmix"

    def __init__(self, leak: bool):
        super().__init__(TinyLMConfig(sweep=(16, 32)))
        self.leak = leak

    def build(self, shape, device, seed):
        torch.manual_seed(seed)
        B, s = shape["batch"], shape["seq"]
        model = ShiftMixLM(shape["d"], shape["L"], shape["H"], s, self.leak).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        gen = torch.Generator(device=device).manual_seed(seed)
        batch = torch.randint(0, VOCAB, (B, s + 1), device=device, generator=gen)
        return Built(model=model, optimizer=opt, tokens_per_step=B * s, vocab=VOCAB,
                     loss=lambda: model(batch[:, :-1], batch[:, 1:]))


def noisy():
    return Noisy()


def putop():
    return PutOp()


def leaky():
    return ShiftMix(leak=True)


def causal():
    return ShiftMix(leak=False)


class _NoDeterministicBackward(torch.autograd.Function):
    """Identity forward; a backward that refuses as torch does for an op with no
    deterministic kernel (COSTS 1.6: cumprod's backward calls cumsum_cuda_kernel)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("cumsum_cuda_kernel does not have a deterministic implementation, "
                           "but you set 'torch.use_deterministic_algorithms(True)'")


class BackwardRefuses(Noisy):
    """Seeded and bitwise in its forward; its backward raises a missing-deterministic-kernel
    error (on any device, flag or not: the audit's per-quantity handling is what is tested)."""

    name = "backward-refuses"
    description = "MLP whose backward raises like a missing deterministic kernel"

    def build(self, shape, device, seed):
        built = super().build(shape, device, seed)  # the seeded MLP; its noise left unused
        model = built.model
        x = torch.randn(shape["batch"], 16, device=device)
        built.loss = lambda: _NoDeterministicBackward.apply(model(x)).square().mean()
        return built


class Upsample(Noisy):
    """A bilinear upsample, whose CUDA backward (upsample_bilinear2d_backward_out_cuda) has
    no deterministic kernel: under the flag on CUDA the forward runs and the backward
    raises."""

    name = "upsample"
    description = "conv + bilinear upsample"

    def build(self, shape, device, seed):
        torch.manual_seed(seed)
        model = nn.Conv2d(3, 4, 3, padding=1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(shape["batch"], 3, 16, 16, device=device)

        def loss():
            y = F.interpolate(model(x), scale_factor=2, mode="bilinear", align_corners=False)
            return y.square().mean()

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=shape["batch"])


def backward_refuses():
    return BackwardRefuses()


def upsample():
    return Upsample()
