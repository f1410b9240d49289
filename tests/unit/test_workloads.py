import math

import pytest
import torch

from afford.core.errors import InputError
from afford.workloads import resolve, train_step
from afford.workloads.base import WorkloadRefused, check_gradients, count_params
from afford.workloads.tinylm import TinyLM, q3, tinylm_params

CPU = torch.device("cpu")


@pytest.mark.parametrize("name", ["softmax", "scan", "tinylm"])
def test_builtins_take_whole_steps(name):
    w = resolve(name, "cpu")
    value = w.default_sweep("cpu")[0]
    built = w.build(w.shape(value), CPU, seed=0)
    before = [p.detach().clone() for p in built.model.parameters()]
    loss = train_step(built, "fp32", CPU)
    assert torch.isfinite(loss)
    assert check_gradients(built.model) == len(before)
    assert any(not torch.equal(a, b) for a, b in zip(before, built.model.parameters()))


def test_tinylm_parameter_count_by_hand():
    w = TinyLM(q3())
    built = w.build(w.shape(512), CPU, seed=0)
    # 8 * (12 * 512^2 + 13 * 512) + (256 + 512) * 512 + 2 * 512
    assert count_params(built.model) == tinylm_params(512, 8, 512) == 25_613_312
    assert built.tokens_per_step == 8 * 512


def test_tinylm_starts_at_chance():
    w = resolve("tinylm", "cpu")
    built = w.build(w.shape(64), CPU, seed=1)
    assert float(built.loss().detach()) == pytest.approx(math.log(256), rel=0.01)


def test_scan_path_product_is_the_recurrence():
    """y = P u with P[t, j] = prod_{j<k<=t} a_k equals h_t = a_t h_{t-1} + u_t."""
    from afford.workloads.scan import ScanMix

    torch.manual_seed(0)
    m = ScanMix(d=8, heads=2)
    x = torch.randn(1, 5, 8)
    u = m.inp(x).view(1, 5, 2, 4).transpose(1, 2).to(torch.complex64)
    g = m.gate(x)
    a = torch.polar(torch.sigmoid(g[..., :2]), math.pi * torch.tanh(g[..., 2:])).transpose(1, 2)
    h = torch.zeros(1, 2, 4, dtype=torch.complex64)
    ys = []
    for t in range(5):
        h = a[:, :, t, None] * h + u[:, :, t]
        ys.append(h.real)
    ref = m.out(torch.stack(ys, dim=2).transpose(1, 2).reshape(1, 5, 8))
    assert torch.allclose(m(x), ref, atol=1e-5)


def test_missing_gradient_is_refused():
    w = resolve("tests.user_workload:no_backward", "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    train_step(built, "fp32", CPU)
    with pytest.raises(WorkloadRefused, match="received no gradient"):
        check_gradients(built.model)


def test_non_finite_gradient_is_refused():
    w = resolve("tests.user_workload:factory", "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    train_step(built, "fp32", CPU)
    next(built.model.parameters()).grad[0, 0] = float("nan")
    with pytest.raises(WorkloadRefused, match="non-finite"):
        check_gradients(built.model)


@pytest.mark.parametrize("spec,match", [
    ("nope", "unknown workload"),
    ("tinylm@q9", "unknown tinylm preset"),
    ("no_such_module_xyz:f", "cannot import"),
    ("tests.user_workload:missing", "has no 'missing'"),
    ("tests.user_workload:not_a_workload", "not an afford.workloads.Workload"),
])
def test_bad_workload_names(spec, match):
    with pytest.raises(InputError, match=match):
        resolve(spec, "cpu")


def test_tinylm_large_gpu_sweep_starts_off_the_launch_bound_floor():
    from afford.workloads import resolve

    assert resolve("tinylm", "large-gpu").default_sweep("large-gpu") == [1024, 2048, 4096, 8192]


def test_scan_cumprod_gradient_is_the_native_one():
    """The written-out backward of scan's cumprod equals autograd's through torch.cumprod
    (complex128, gates away from zero as in the workload), and stays O(s) aten calls
    under a dispatch mode (the FLOP counter), where the native one loops over s."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from afford.workloads.scan import NonzeroCumprod

    torch.manual_seed(0)
    z = torch.polar(torch.rand(2, 3, 6, 6, dtype=torch.float64) + 0.1,
                    torch.randn(2, 3, 6, 6, dtype=torch.float64))
    g = torch.randn(2, 3, 6, 6, dtype=torch.complex128)
    a = z.clone().requires_grad_()
    b = z.clone().requires_grad_()
    (NonzeroCumprod.apply(a, -2) * g).real.sum().backward()
    (torch.cumprod(b, dim=-2) * g).real.sum().backward()
    assert torch.allclose(a.grad, b.grad, rtol=1e-12, atol=1e-12)

    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))

    def calls(s: int) -> int:
        x = torch.polar(torch.rand(1, 1, s, s) + 0.1, torch.randn(1, 1, s, s))
        x.requires_grad_()
        Count.calls = 0
        with Count():
            NonzeroCumprod.apply(x, -2).real.sum().backward()
        return Count.calls

    assert calls(8) == calls(64)
