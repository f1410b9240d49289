"""Transformers models as afford user workloads, for the device benches: a GPT-2 small and a
small Llama, built from a config with random weights (no download), SDPA attention, fused
AdamW on CUDA. Named ``hf_models:gpt2`` / ``hf_models:llama`` with ``lab/scripts/`` on PYTHONPATH.
Neither was used to choose afford's time or memory model: they are the held-out workloads.
"""

from __future__ import annotations

import torch

from afford.workloads.base import Built, Workload


class HFCausalLM(Workload):
    sweep_param = "seq"
    attention = "fused"

    def __init__(self, name: str, make_config, batch: int, sweep: tuple[int, ...]) -> None:
        self.name = name
        self.description = f"transformers {name} (random weights), batch {batch} x seq"
        self._make_config = make_config
        self.batch = batch
        self.sweep = sweep

    def default_sweep(self, device_class: str) -> list[int]:
        return list(self.sweep)

    def shape(self, value: int) -> dict[str, int]:
        c = self._make_config(int(value))
        return {"batch": self.batch, "seq": int(value), "d": c.hidden_size,
                "L": c.num_hidden_layers, "H": c.num_attention_heads, "V": c.vocab_size}

    def dims(self, shape: dict[str, int]) -> dict[str, int]:
        return {"B": shape["batch"], "s": shape["seq"], "d": shape["d"], "L": shape["L"],
                "H": shape["H"]}

    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        config = self._make_config(shape["seq"])
        config._attn_implementation = "sdpa"
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device.type == "cuda")
        B, s, V = shape["batch"], shape["seq"], config.vocab_size
        gen = torch.Generator(device=device).manual_seed(seed)
        pool = torch.randint(0, V, (4, B, s), device=device, generator=gen)
        state = {"i": 0}

        def loss() -> torch.Tensor:
            ids = pool[state["i"] % len(pool)]
            state["i"] += 1
            return model(input_ids=ids, labels=ids).loss

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=B * s, vocab=V)


def _gpt2_config(seq: int):
    from transformers import GPT2Config

    return GPT2Config(n_positions=max(1024, seq), resid_pdrop=0.0, embd_pdrop=0.0,
                      attn_pdrop=0.0)


def _llama_config(seq: int):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                       num_attention_heads=12, num_key_value_heads=4, vocab_size=32000,
                       max_position_embeddings=max(2048, seq))


def gpt2() -> HFCausalLM:
    return HFCausalLM("gpt2", _gpt2_config, batch=4, sweep=(256, 512, 1024))


def llama() -> HFCausalLM:
    return HFCausalLM("llama-d768L12", _llama_config, batch=4, sweep=(256, 512, 1024))
