"""``softmax``: causal softmax attention mixing n sequences of length s and width d.

The s x s score matrix is materialised (no fused kernel), so the step's cost and memory
grow as s^2 and the memory law's C_op term is visible. Loss: mean squared error against a
fixed random target. Parameters: 4 d^2 (Q, K, V and output projections, no bias).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from afford.workloads.base import Built, Workload, causal_mask

_SHAPES = {  # device class -> (n, d, default sweep of s)
    "cpu": (4, 64, [64, 128, 256, 512]),
    "small-gpu": (8, 256, [256, 512, 1024, 2048]),
    "large-gpu": (16, 512, [1024, 2048, 4096, 8192]),
}


class SoftmaxMix(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (n, s, d) each
        scores = (q @ k.transpose(-2, -1)) * self.scale  # (n, s, s)
        scores = scores.masked_fill(~mask, float("-inf"))
        return self.out(scores.softmax(dim=-1) @ v)  # (n, s, d)


class Softmax(Workload):
    name = "softmax"
    sweep_param = "s"
    description = "causal softmax attention (materialised scores) over n x s x d"
    attention = "materialised"

    def __init__(self, n: int | None = None, d: int | None = None,
                 device_class: str = "cpu") -> None:
        dn, dd, _ = _SHAPES[device_class]
        self.n, self.d = n or dn, d or dd

    def default_sweep(self, device_class: str) -> list[int]:
        return list(_SHAPES[device_class][2])

    def shape(self, value: int) -> dict[str, int]:
        return {"n": self.n, "s": int(value), "d": self.d}

    def dims(self, shape: dict[str, int]) -> dict[str, int]:
        return {"B": shape["n"], "s": shape["s"], "d": shape["d"], "L": 1, "H": 1}

    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        torch.manual_seed(seed)
        n, s, d = shape["n"], shape["s"], shape["d"]
        model = SoftmaxMix(d).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        gen = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(n, s, d, device=device, generator=gen)
        target = torch.randn(n, s, d, device=device, generator=gen)
        mask = causal_mask(s, device)

        def loss() -> torch.Tensor:
            return (model(x, mask).float() - target).square().mean()

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=n * s)
