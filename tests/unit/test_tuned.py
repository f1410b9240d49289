"""tinylm sizes in the workload spec, and the +step options (levers, phases, FLOP count)."""

import pytest
import torch

from afford.core.errors import InputError
from afford.measure.timing import rule_for, time_point
from afford.workloads import resolve, train_step
from afford.workloads.base import WorkloadRefused, check_gradients, validate_shape
from afford.workloads.clock import HostClock
from afford.workloads.tinylm import TinyLMConfig, parse_size, q3, size_spec, tinylm_params
from afford.workloads.tuned import Tuned, parse_options

CPU = torch.device("cpu")


def test_size_fields_override_the_default_or_a_preset():
    c = resolve("tinylm@d256L4", "cpu").config
    assert (c.d, c.L, c.H, c.seq, c.batch) == (256, 4, 2, 128, 4)  # cpu default H, seq, batch
    c = resolve("tinylm@q3b16", "cpu").config
    assert (c.d, c.L, c.H, c.seq, c.batch) == (512, 8, 8, 512, 16)
    c = parse_size("d64L2H2b4s256", TinyLMConfig())
    assert size_spec(c) == "tinylm@d64L2H2b4s256"
    c = resolve(size_spec(q3()), "large-gpu").config
    assert (c.d, c.L, c.H, c.seq, c.batch) == (q3().d, q3().L, q3().H, q3().seq, q3().batch)


@pytest.mark.parametrize("spec,match", [
    ("tinylm@d256L4L2", "given twice"), ("tinylm@d100H3", "not divisible"),
    ("tinylm@d0", "positive"), ("tinylm@dL4", "cannot read"), ("tinylm@q3z1", "cannot read"),
    ("tinylm@q9", "unknown tinylm preset"), ("tinylm@d64+turbo", "unknown step option"),
    ("tinylm+fused+foreach", "cannot be combined"), ("tinylm+x2+x4", "one batch factor"),
    ("tinylm+compile+compile", "twice"),
])
def test_bad_specs(spec, match):
    with pytest.raises(InputError, match=match):
        resolve(spec, "cpu")


def test_options_parse():
    assert parse_options("compile+x2") == ("compile", "x2")
    with pytest.raises(ValueError, match="cudagraphs"):
        parse_options("phases+cudagraphs")


def test_batch_factor_multiplies_the_batch_entry():
    assert resolve("tinylm@d64L2b4+x4", "cpu").shape(32)["batch"] == 16
    assert resolve("softmax+x2", "cpu").shape(64)["n"] == 8
    inner = resolve("tests.user_workload:factory", "cpu")
    inner.shape = lambda value: {"width": int(value)}  # no batch entry
    with pytest.raises(ValueError, match="needs a batch entry"):
        Tuned(inner, ("x2",)).shape(16)


@pytest.mark.parametrize("opt,fused,foreach", [("fused", True, False), ("foreach", False, True)])
def test_optimizer_options_rebuild_adamw(opt, fused, foreach):
    w = resolve(f"tinylm@d32L1H2b2s16+{opt}", "cpu")
    built = w.build(validate_shape(w, 16), CPU, 0)
    assert isinstance(built.optimizer, torch.optim.AdamW)
    g = built.optimizer.param_groups[0]
    assert g["fused"] is fused and g["foreach"] is foreach and g["lr"] == 3e-4
    before = [p.detach().clone() for p in built.model.parameters()]
    train_step(built, "fp32", CPU)
    assert any(not torch.equal(a, b) for a, b in zip(before, built.model.parameters()))


def test_optimizer_options_refuse_other_optimizers():
    w = resolve("tests.user_workload:factory+fused", "cpu")
    with pytest.raises(WorkloadRefused, match="SGD"):
        w.build(validate_shape(w, 16), CPU, 0)


def test_cuda_graphs_refused_on_cpu():
    w = resolve("tinylm@d32L1H2b2s16+cudagraphs", "cpu")
    with pytest.raises(WorkloadRefused, match="need a CUDA device"):
        w.build(validate_shape(w, 16), CPU, 0)


def test_phases_cover_every_step_and_fit_inside_it():
    w = resolve("tinylm@d32L1H2b2s16+phases", "cpu")
    built = w.build(validate_shape(w, 16), CPU, 0)
    timing = time_point(lambda i: train_step(built, "fp32", CPU), HostClock(),
                        rule_for("quick"), lambda: check_gradients(built.model))
    ph = built.report()["phases"]
    steps = 1 + len(timing.warmup_seconds) + len(timing.timed_seconds)
    assert ph["step_index"] == list(range(steps))
    for i, whole in zip(timing.timed_indices, timing.timed_seconds):
        parts = [ph[f"{p}_seconds"][i] for p in ("forward", "backward", "optimizer")]
        assert all(x > 0 for x in parts) and sum(parts) <= whole


def test_flops_counted_by_hand():
    """Linear layers and the tied head, x3 for forward + backward (the CPU's fused attention
    kernel is not counted): 6 x tokens x (12 L d^2 + 256 d) = 6 x 128 x 114,688."""
    w = resolve("tinylm@d64L2H2b4s32+flops", "cpu")
    built = w.build(validate_shape(w, 32), CPU, 0)
    train_step(built, "fp32", CPU)
    report = built.report()
    assert report["flops_per_step"] == 6 * 128 * (12 * 2 * 64**2 + 256 * 64) == 88_080_384
    assert "FlopCounterMode" in report["flops_source"] and "not counted" in report["flops_source"]
    assert tinylm_params(64, 2, 32) == 2 * (12 * 64**2 + 13 * 64) + (256 + 32) * 64 + 128
