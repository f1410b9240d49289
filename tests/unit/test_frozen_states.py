"""Frozen parameters carry only their weights: no gradient, no optimizer state.

The memory law counts bytes per *trainable* parameter and adds the frozen weights' measured
bytes; ZeRO's 16 B/param applies to a trained parameter (a frozen one is charged its fp32
weight, 4 B); the "4x model size" rule knows no frozen parameters and charges 16 B to all.
Worked by hand on a synthetic LoRA-like box: 1 % of the parameters trained.
"""

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from afford.certification.stage_memory import build_law, plan_job
from afford.fit.memory import sizing
from afford.measure.memory_sweep import frozen_bytes, states_bytes
from afford.schema.memory_section import MemoryShape
from afford.workloads import resolve, train_step
from afford.workloads.base import count_frozen, count_params
from afford.workloads.tinylm import tinylm_params

MiB = 2**20
C_RES, FIXED = 72.0, 30 * MiB
DEVICE = 150_000_000_000
TRAINED = 0.01  # share of the parameters that LoRA trains


def lora_like_shapes(job, w):
    """The memory child's report on a box where 1 % of the parameters are trained (16 B
    each: fp32 weight, gradient, two Adam moments) and 99 % are frozen (4 B: the weight)."""
    out = []
    for role, shape in job.runs:
        dims = w.dims(shape)
        total = tinylm_params(dims["d"], dims["L"], dims["s"])
        trainable = int(total * TRAINED)
        frozen = total - trainable
        states = 16 * trainable + 4 * frozen
        alloc = states + FIXED + C_RES * dims["L"] * dims["B"] * dims["s"] * dims["d"]
        out.append(MemoryShape(
            key=job.key(role, shape), role=role, shape=shape, dims=dims, params=trainable,
            frozen_params=frozen, frozen_bytes=4 * frozen, states_bytes=states, steps=3,
            memory_source="synthetic", allocated_by_step=[int(alloc)] * 3,
            reserved_by_step=[int(alloc * 1.1)] * 3))
    return out


@pytest.fixture(scope="module")
def lora_law():
    w = resolve("tinylm", "large-gpu")
    job = plan_job("tinylm", w, "fp32", "large-gpu")
    env = SimpleNamespace(device_type="cuda", device_memory_bytes=DEVICE)
    return build_law(job, lora_like_shapes(job, w), env)


def test_bytes_per_param_counts_trained_parameters_only(lora_law):
    # (states - frozen weights) / trainable = 16, not states / trainable (~412)
    assert lora_law.bytes_per_param == pytest.approx(16.0, rel=1e-3)
    b = lora_law.base_dims
    total = tinylm_params(b["d"], b["L"], b["s"])
    assert lora_law.frozen_bytes == pytest.approx(4 * (total - int(total * TRAINED)), rel=1e-3)
    assert lora_law.allocated.c_res == pytest.approx(C_RES, rel=1e-3)


def test_prediction_adds_the_frozen_weights(lora_law):
    b = lora_law.base_dims
    pred = sizing.predict(lora_law, {"B": b["B"], "s": b["s"]}, "test")
    total = tinylm_params(b["d"], b["L"], b["s"])
    trainable = int(total * TRAINED)
    assert pred.states.value == pytest.approx(16 * trainable + 4 * (total - trainable),
                                              rel=1e-3)
    assert "frozen weights" in pred.states.source


def test_zero_is_confirmed_with_frozen_parameters(lora_law):
    verdicts = {(v.default_name.split(" ")[0], v.constant): v for v in lora_law.verdicts}
    zero_bpp = next(v for (name, c), v in verdicts.items()
                    if name == "Korthikanti" and c == "bytes_per_param")
    assert zero_bpp.status == "CONFIRMED" and abs(zero_bpp.effect) < 1e-3  # 16 B per trained
    b = lora_law.base_dims
    total = tinylm_params(b["d"], b["L"], b["s"])
    four_x = next(v for v in lora_law.verdicts if v.default_name.startswith('"4x'))
    assert four_x.default_bytes == pytest.approx(16 * total, rel=1e-3)  # every parameter


def test_default_formula_by_hand():
    dims = {"B": 1, "s": 1, "d": 1, "L": 0, "H": 1}  # no activations: states only
    zero = sizing.korthikanti_zero("fp32", "fused", 64, 4)
    assert zero.bytes(1_000, dims, frozen=99_000) == 16 * 1_000 + 4 * 99_000
    assert sizing.four_x_model_size().bytes(1_000, dims, frozen=99_000) == 16 * 100_000
    assert zero.bytes(1_000, dims) == 16 * 1_000  # nothing frozen: as before


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed (pip install 'afford[hf]')")
def test_a_real_model_with_frozen_embeddings_counts_weights_only():
    cpu = torch.device("cpu")
    w = resolve("hf:gpt2@d32L1H2V128+frozen=embeddings", "cpu")
    built = w.build(w.shape(8), cpu, seed=0)
    for _ in range(2):
        train_step(built, "fp32", cpu)
    trainable, frozen = count_params(built.model), count_frozen(built.model)
    tensors = sum(1 for p in built.model.parameters() if p.requires_grad)
    assert frozen == (128 + 1024) * 32  # tokens (tied with the head) + positions
    assert frozen_bytes(built.model) == 4 * frozen
    # fp32 AdamW: weight, gradient, exp_avg, exp_avg_sq; plus one 4-byte step per tensor
    assert states_bytes(built.model, built.optimizer) == \
        16 * trainable + 4 * frozen + 4 * tensors
