"""GEMM probes at the workload's own shapes: the recorder sees every matmul of a step (its
arithmetic agrees with FlopCounterMode's matmul count), and the shapes are timed alone."""

import pytest
import torch

from afford.measure.probes.flops import count_step_flops
from afford.measure.probes.gemm_shapes import gemm_shape_probe, record_gemm_shapes
from afford.schema.probes_section import ShapeGemms
from afford.workloads.softmax import Softmax
from afford.workloads.tinylm import TinyLM, TinyLMConfig

CPU = torch.device("cpu")
MATMUL_OPS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm")


@pytest.mark.parametrize("workload,value", [
    (TinyLM(TinyLMConfig(d=32, L=2, H=2, seq=16, batch=2, sweep=(16,))), 16),
    (Softmax(device_class="cpu"), 32),
])
def test_recorded_shapes_carry_the_counters_matmul_flops(workload, value):
    built = workload.build(workload.shape(value), CPU, seed=0)
    rows = record_gemm_shapes(built, "fp32", CPU)
    _, by_op = count_step_flops(workload.build(workload.shape(value), CPU, seed=0), "fp32", CPU)
    counted = sum(v for op, v in by_op.items() if op.split(".default")[0] in MATMUL_OPS)
    assert counted > 0
    assert sum(r["flops_per_call"] * r["calls"] for r in rows) == pytest.approx(counted)
    totals = [r["flops_per_call"] * r["calls"] for r in rows]
    assert totals == sorted(totals, reverse=True) and all(r["dtype"] == "fp32" for r in rows)


def test_tinylm_output_projection_is_among_the_shapes():
    # tinylm d32, batch 2 x seq 16, vocab 256: the LM head is a (32 tokens x 32) @ (32 x 256)
    w = TinyLM(TinyLMConfig(d=32, L=2, H=2, seq=16, batch=2, sweep=(16,)))
    rows = record_gemm_shapes(w.build(w.shape(16), CPU, seed=0), "fp32", CPU)
    assert any((r["m"], r["n"], r["k"]) == (32, 256, 32) for r in rows)


def test_the_top_shapes_are_timed_and_validate():
    w = TinyLM(TinyLMConfig(d=32, L=1, H=2, seq=16, batch=2, sweep=(16,)))
    raw = gemm_shape_probe(w.build(w.shape(16), CPU, seed=0), "bf16", CPU, top=2, warmup=1,
                           reps=3)
    section = ShapeGemms(distinct_shapes=raw["distinct_shapes"],
                         matmul_flops_per_step=raw["matmul_flops_per_step"], timed=raw["timed"])
    assert len(section.timed) == 2 and section.distinct_shapes >= 2
    for r in section.timed:
        assert r.dtype == "bf16" and len(r.seconds) == 3 and r.flops_per_second > 0
        assert 0 < r.share_of_step_matmul_flops <= 1
