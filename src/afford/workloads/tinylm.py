"""``tinylm``: a byte-level decoder-only transformer (GPT-2 shape, Radford et al. 2019).

Pre-LayerNorm blocks of causal self-attention (``scaled_dot_product_attention``) and a
4d GELU MLP, learned positions, the output head tied to the byte embedding, AdamW.
Data are uniformly random bytes, so an untrained model sits at chance: loss ln(256).
Parameters: 12 L d^2 + 13 L d + (256 + seq) d + 2 d (weights and biases; head tied).

Presets are named functions returning a :class:`TinyLMConfig` (torchtitan's habit):
``q3`` = d512, L8, H8, seq 512, batch 8.

A size is named in the workload spec after ``@`` (:func:`parse_size`): an optional preset,
then fields that override it, each a letter and a positive integer: ``d`` width, ``L``
layers, ``H`` heads, ``b`` batch, ``s`` sequence length. ``tinylm@d256L4`` is the device
class's default shape at width 256 and 4 layers; ``tinylm@q3b16`` is q3 at batch 16;
``tinylm@d512L8H8b8s1024`` names every field (:func:`size_spec` writes that form).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

from afford.schema.memory_section import CodePath
from afford.workloads.base import Built, Workload
from afford.workloads.names import TINYLM_PRESETS, tinylm_size_fields
from afford.workloads.paths import embedding_sort

VOCAB = 256


@dataclass(frozen=True)
class TinyLMConfig:
    d: int = 64       # model width
    L: int = 2        # layers
    H: int = 2        # attention heads
    seq: int = 128    # sequence length (bytes)
    batch: int = 4    # sequences per step
    sweep_param: str = "seq"
    sweep: tuple[int, ...] = (32, 64, 128, 256)


def q3() -> TinyLMConfig:
    """The reference shape: d512, L8, H8, seq 512, batch 8."""
    return TinyLMConfig(d=512, L=8, H=8, seq=512, batch=8, sweep=(128, 256, 512, 1024))


def default(device_class: str) -> TinyLMConfig:
    """A shape that suits the device class when no preset is named."""
    if device_class == "large-gpu":  # seq 512 sits on the launch-bound floor with 1024
        return replace(q3(), sweep=(1024, 2048, 4096, 8192))
    if device_class == "small-gpu":
        return TinyLMConfig(d=256, L=4, H=4, seq=256, batch=8, sweep=(128, 256, 512, 1024))
    return TinyLMConfig()


PRESETS = {"q3": q3}
assert tuple(PRESETS) == TINYLM_PRESETS  # the grammar names them torch-free

def parse_size(text: str, base: TinyLMConfig) -> TinyLMConfig:
    """``q3``, ``d256L4``, ``q3b16``: a preset (optional) then field overrides of it (or of
    ``base`` without a preset). ``ValueError`` with the grammar when it cannot be read
    (:func:`afford.workloads.names.tinylm_size_fields`) or the width does not divide into
    the heads."""
    preset, values = tinylm_size_fields(text)
    config = replace(PRESETS[preset]() if preset else base, **values)
    if config.d % config.H:
        raise ValueError(f"tinylm size {text!r}: width d={config.d} is not divisible by "
                         f"H={config.H} heads")
    return config


def size_spec(c: TinyLMConfig) -> str:
    """The spec naming every field of ``c``: ``tinylm@d512L8H8b8s1024``."""
    return f"tinylm@d{c.d}L{c.L}H{c.H}b{c.batch}s{c.seq}"


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.h = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, s, dh)
        x = x + self.proj(y.transpose(1, 2).reshape(B, s, d))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class TinyLMModel(nn.Module):
    def __init__(self, d: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d={d} is not divisible by H={heads}")
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        s = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(s, device=idx.device))  # (B, s, d)
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.t()  # (B, s, VOCAB), head tied
        return F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))


class TinyLM(Workload):
    name = "tinylm"
    sweep_param = "seq"
    description = "byte-level decoder-only transformer (B, d, L, H, seq)"
    attention = "fused"  # scaled_dot_product_attention

    def __init__(self, config: TinyLMConfig | None = None, device_class: str = "cpu") -> None:
        self.config = config or default(device_class)
        self.sweep_param = self.config.sweep_param

    def default_sweep(self, device_class: str) -> list[int]:
        return list(self.config.sweep)

    def code_paths(self) -> list[CodePath]:
        return [embedding_sort()]  # its byte embedding's backward

    def shape(self, value: int) -> dict[str, int]:
        c = self.config
        shape = {"batch": c.batch, "seq": c.seq, "d": c.d, "L": c.L, "H": c.H}
        shape[self.sweep_param] = int(value)
        return shape

    def dims(self, shape: dict[str, int]) -> dict[str, int]:
        return {"B": shape["batch"], "s": shape["seq"], "d": shape["d"], "L": shape["L"],
                "H": shape["H"]}

    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        torch.manual_seed(seed)
        B, s = shape["batch"], shape["seq"]
        with torch.device(device):  # weights made where they live: on a GPU many times
            model = TinyLMModel(shape["d"], shape["L"], shape["H"], s)  # faster than CPU + copy
        fused = device.type == "cuda"
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=fused)
        gen = torch.Generator(device=device).manual_seed(seed)
        pool = torch.randint(0, VOCAB, (4, B, s + 1), device=device, generator=gen)
        state = {"i": 0}

        def loss() -> torch.Tensor:
            batch = pool[state["i"] % len(pool)]
            state["i"] += 1
            return model(batch[:, :-1], batch[:, 1:])

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=B * s, vocab=VOCAB)


def tinylm_params(d: int, L: int, seq: int) -> int:
    """Trainable parameters of :class:`TinyLMModel`, counted by hand (head tied)."""
    per_layer = 12 * d * d + 13 * d  # qkv 3d^2+3d, proj d^2+d, fc 4d^2+4d, fc2 4d^2+d, 2 LN 4d
    return L * per_layer + (VOCAB + seq) * d + 2 * d
