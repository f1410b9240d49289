"""The CUDA paths of the levers and the phase split (run on the lent GPU; skipped here)."""

import pytest
import torch

from afford.certification.stage_levers import LEVERS, LeverJob, measure_levers
from afford.measure.timing import rule_for, time_point
from afford.workloads import resolve, train_step
from afford.workloads.base import check_gradients, validate_shape
from afford.workloads.clock import CudaClock, clock_name

pytestmark = pytest.mark.cuda
CUDA = torch.device("cuda")
TINY = "tinylm@d64L2H2b4s64"


def _built(spec):
    w = resolve(spec, "large-gpu")
    return w.build(validate_shape(w, 64), CUDA, 0)


@pytest.mark.parametrize("mode", ["bf16", "fp32"])
def test_whole_step_cuda_graph_trains(mode):
    built = _built(TINY + "+cudagraphs")
    first = train_step(built, mode, CUDA)  # step 0: warm-up, capture, first replay
    before = [p.detach().clone() for p in built.model.parameters()]
    for _ in range(3):
        train_step(built, mode, CUDA)
    torch.cuda.synchronize()
    assert torch.isfinite(first) and float(first) == pytest.approx(5.545, abs=0.1)  # ln 256
    assert check_gradients(built.model) == len(before)
    assert all(not torch.equal(a, b) for a, b in zip(before, built.model.parameters())
               if a.dim() > 1)


def test_phases_on_cuda_events_fit_inside_the_step():
    built = _built(TINY + "+phases")
    timing = time_point(lambda i: train_step(built, "bf16", CUDA), CudaClock(),
                        rule_for("quick"), lambda: check_gradients(built.model))
    ph = built.report()["phases"]
    for i, whole in zip(timing.timed_indices, timing.timed_seconds):
        parts = [ph[f"{p}_seconds"][i] for p in ("forward", "backward", "optimizer")]
        assert all(x > 0 for x in parts) and sum(parts) <= whole * 1.001


def test_flops_counted_on_cuda_include_attention():
    built = _built(TINY + "+flops")
    train_step(built, "bf16", CUDA)
    flops = built.report()["flops_per_step"]
    tokens, d, L = 4 * 64, 64, 2
    linear = 6 * tokens * (12 * L * d * d + 256 * d)
    # SDPA as torch's flop counter counts it (causality not discounted): forward 2 bmms,
    # 4 B s^2 d; flash backward 5 bmms, 10 B s^2 d (torch.utils.flop_counter,
    # sdpa_backward_flop); seen on the H200 2026-12-02: 205,520,896 FLOPs for this step
    attention = (4 + 10) * 4 * 64 * 64 * d * L
    assert flops == linear + attention


def test_levers_run_on_cuda_quick():
    props = torch.cuda.get_device_properties(0)
    job = LeverJob(workloads=[TINY], levers=tuple(n for n in LEVERS if n != "compile"),
                   mode="bf16", device="cuda", device_type="cuda", device_class="large-gpu",
                   device_name=props.name, device_memory=props.total_memory,
                   rule=rule_for("quick"), precision="quick", children=3, seed=0,
                   clock=clock_name("cuda"), torch_version=torch.__version__, command="test")
    section = measure_levers(job)
    levers = {lv.name: lv for lv in section.runs[0].levers}
    for name, lever in levers.items():
        assert lever.not_executable is None, (name, lever.not_executable)
        assert len(lever.per_child) == 3 and lever.speedup > 0
    assert section.runs[0].flops_per_step > 0
