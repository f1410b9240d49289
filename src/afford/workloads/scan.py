"""``scan``: a complex64 gated linear recurrence, materialised as a path-product operator.

h_t = a_t * h_{t-1} + u_t with complex gates a_t = sigmoid(g) * exp(i * pi * tanh(phi)),
one gate per position and head. The recurrence is written as y = P u with the s x s
path-product operator P[t, j] = prod_{j < k <= t} a_k (t >= j), built as a masked
cumulative product along s: the kind of sequence-mixing arm whose backward leans on
cumprod/cumsum, which is why its determinism is worth auditing. Loss: mean squared error
of the real part against a fixed target. Parameters: 2 d^2 + 2 d H + 2 H + d.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from afford.workloads.base import Built, Workload

_SHAPES = {  # device class -> (n, d, H, default sweep of s)
    "cpu": (2, 64, 4, [32, 64, 128, 256]),
    "small-gpu": (4, 256, 8, [128, 256, 512, 1024]),
    "large-gpu": (8, 512, 8, [256, 512, 1024, 2048]),
}


class NonzeroCumprod(torch.autograd.Function):
    """``torch.cumprod`` whose backward is the O(s) branch PyTorch itself takes when the
    input holds no zero: ``reversed_cumsum(out.conj() * grad).div(input.conj())``
    (``cumprod_backward`` in ``FunctionsManual.cpp``), written out.

    The gates are never zero (``sigmoid > 0``; the masked entries are 1), so this is the
    branch the native op runs anyway, minus its host sync (``is_zero.any().item()``). Written
    out, it stays that branch under a Python dispatch mode too: under one (``FlopCounterMode``),
    PyTorch takes its composite-compliant O(s^2) loop instead, one slice per position, and
    counting a step at a long sequence takes hundreds of times as long as the step itself. A
    zero gate would make this gradient non-finite, which the sweep refuses.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int) -> torch.Tensor:
        out = torch.cumprod(x, dim=dim)
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        w = (out.conj() * grad).flip(ctx.dim).cumsum(ctx.dim).flip(ctx.dim)
        return w.div(x.conj()), None


class ScanMix(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d={d} is not divisible by H={heads}")
        self.h = heads
        self.inp = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, 2 * heads)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, s, d = x.shape
        u = self.inp(x).float().view(n, s, self.h, d // self.h).transpose(1, 2)  # (n, H, s, dh)
        g = self.gate(x).float()  # (n, s, 2H)
        a = torch.polar(torch.sigmoid(g[..., : self.h]),
                        math.pi * torch.tanh(g[..., self.h:]))  # (n, s, H) complex64
        a = a.transpose(1, 2)  # (n, H, s)
        tri = torch.ones(s, s, dtype=torch.bool, device=x.device).tril(-1)  # t > j
        m = torch.where(tri, a.unsqueeze(-1).expand(n, self.h, s, s),
                        torch.ones((), dtype=a.dtype, device=x.device))  # (n, H, s, s)
        path = NonzeroCumprod.apply(m, -2) * tri.logical_or(
            torch.eye(s, dtype=torch.bool, device=x.device))  # P[t, j], zero above diagonal
        y = path @ u.to(torch.complex64)  # (n, H, s, dh)
        return self.out(y.real.transpose(1, 2).reshape(n, s, d).to(x.dtype))


class Scan(Workload):
    name = "scan"
    sweep_param = "s"
    description = "complex64 gated linear recurrence as an s x s masked cumulative product"

    def __init__(self, n: int | None = None, d: int | None = None, heads: int | None = None,
                 device_class: str = "cpu") -> None:
        dn, dd, dh, _ = _SHAPES[device_class]
        self.n, self.d, self.heads = n or dn, d or dd, heads or dh

    def default_sweep(self, device_class: str) -> list[int]:
        return list(_SHAPES[device_class][3])

    def shape(self, value: int) -> dict[str, int]:
        return {"n": self.n, "s": int(value), "d": self.d, "H": self.heads}

    def dims(self, shape: dict[str, int]) -> dict[str, int]:
        return {"B": shape["n"], "s": shape["s"], "d": shape["d"], "L": 1, "H": shape["H"]}

    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        torch.manual_seed(seed)
        n, s, d = shape["n"], shape["s"], shape["d"]
        model = ScanMix(d, shape["H"]).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        gen = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(n, s, d, device=device, generator=gen)
        target = torch.randn(n, s, d, device=device, generator=gen)

        def loss() -> torch.Tensor:
            return (model(x).float() - target).square().mean()

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=n * s)
