"""The measurements behind the gates, on the CPU for real: step capture, init losses (a
leaking mask fails), the noise floor (an unseeded workload is caught), the audit's child
processes, parity without CUDA, and a user gate registered through an entry point."""

import math
import textwrap

import pytest
import torch

from afford.certification.stage_gates import GateRequest, run_gates
from afford.fit.gates import GateSettings, evaluate, init_loss_gate, noise_floor_gate
from afford.measure import gate_runs
from afford.measure.determinism import audit_workload
from afford.measure.step_capture import bitwise_equal, capture_step, max_abs_delta, move_built
from afford.schema.determinism_section import GateReadings
from afford.workloads import resolve
from tests import gate_workloads as gw

CPU = torch.device("cpu")
S = GateSettings()


def test_bitwise_and_max_delta_by_hand():
    a = torch.tensor([1.0, 2.0, float("nan")])
    assert bitwise_equal(a, a.clone())
    assert not bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert not bitwise_equal(a, a.double())
    assert max_abs_delta(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 1.0])) == 1.0
    assert max_abs_delta(a, a.clone()) == 0.0  # NaN where both are NaN
    assert max_abs_delta(a, torch.tensor([1.0, 2.0, 3.0])) == math.inf
    assert max_abs_delta(torch.zeros(2), torch.zeros(3)) == math.inf


def test_capture_step_takes_the_whole_step_apart():
    w = resolve("tinylm", "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    before = {n: p.detach().clone() for n, p in built.model.named_parameters()}
    snap = capture_step(built, "fp32", CPU)
    assert snap.forward_of == "ln" and snap.forward.shape == (4, 16, 64)  # (B, s, d)
    assert snap.grads.keys() == before.keys() == snap.params.keys()
    assert any(not torch.equal(before[n], snap.params[n]) for n in before)
    again = capture_step(w.build(w.shape(16), CPU, seed=0), "fp32", CPU)
    assert bitwise_equal(snap.loss, again.loss)


def test_move_built_moves_the_closure_inputs():
    w = resolve("softmax", "cpu")
    built = move_built(w.build(w.shape(8), CPU, seed=0), torch.device("meta"))
    assert next(built.model.parameters()).device.type == "meta"
    cells = [c.cell_contents for c in built.loss.__closure__
             if isinstance(c.cell_contents, torch.Tensor)]
    assert cells and all(t.device.type == "meta" for t in cells)


def test_a_leaking_mask_fails_the_init_loss_gate_and_the_causal_one_passes():
    items = [("leaky", gw.leaky(), "fp32", [16]), ("causal", gw.causal(), "fp32", [16])]
    readings = gate_runs.init_losses(items, (0, 1, 2), CPU)
    assert len(readings) == 6 and all(r.vocab == 256 for r in readings)
    leaky = init_loss_gate([r for r in readings if r.workload == "leaky"], S)
    causal = init_loss_gate([r for r in readings if r.workload == "causal"], S)
    assert leaky.status == "FAIL" and all(r.status == "FAIL" for r in leaky.rows)
    assert all(r.delta > 0.05 for r in leaky.rows)  # measured: ratio 0.92-0.93
    assert causal.status == "PASS" and all(r.delta < 0.01 for r in causal.rows)


def test_init_losses_of_a_workload_without_vocab_is_one_skipped_reading():
    readings = gate_runs.init_losses([("softmax", resolve("softmax", "cpu"), "fp32",
                                       [8, 16])], (0, 1), CPU)
    assert len(readings) == 1 and readings[0].vocab is None and readings[0].loss is None


def test_noise_floor_same_seed_is_bitwise_for_softmax_and_not_for_an_unseeded_workload():
    items = [("softmax", resolve("softmax", "cpu"), "fp32", 16), ("noisy", gw.noisy(), "fp32", 16)]
    soft, noisy = gate_runs.noise_floor(items, CPU, steps=3, seed_a=0, seed_b=1)
    assert soft.params_bitwise_equal and soft.losses_a == soft.losses_a_again
    assert soft.losses_a != soft.losses_b and len(soft.losses_a) == 3
    assert not noisy.params_bitwise_equal and noisy.losses_a != noisy.losses_a_again
    g = noise_floor_gate([soft], S)
    assert g.status == "PASS" and g.rows[0].delta == 0.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_parity_is_not_executable_without_cuda():
    readings, ne = gate_runs.parity([("softmax", resolve("softmax", "cpu"), 8)], seed=0)
    assert readings == [] and "no CUDA device" in ne.reason


@pytest.mark.cuda
def test_parity_on_cuda_within_fp32_tolerance():
    items = [(n, resolve(n, "cpu"), min(resolve(n, "cpu").default_sweep("cpu")))
             for n in ("softmax", "scan", "tinylm")]
    readings, ne = gate_runs.parity(items, seed=0)
    assert ne is None and len(readings) == 9
    g = evaluate(GateReadings(parity=readings), S)[0]
    assert g.status == "PASS", [r.detail for r in g.rows]


def test_audit_of_softmax_is_bitwise_on_the_cpu():
    run = audit_workload(resolve("softmax", "cpu"), "softmax", 16, CPU, "fp32", repeats=3,
                         seed=0, deterministic=False, timing_steps=3)
    assert [c["quantity"] for c in run["comparisons"]] == [
        "forward output", "loss", "gradients", "parameters after step"]
    assert all(c["bitwise_equal"] and c["max_abs_delta"] == 0.0 for c in run["comparisons"])
    assert run["forward_output_of"] == "SoftmaxMix" and run["shape"] == {"n": 4, "s": 16,
                                                                          "d": 64}
    assert len(run["timing"]["timed_seconds"]) == 3 and "not_executable" not in run


def _register_user_gate(tmp_path, monkeypatch, body: str, module: str) -> None:
    """A distribution with an ``afford.fit.gates`` entry point, on sys.path for this test."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
    info = tmp_path / "my_gates-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-gates\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[afford.fit.gates]\nbudget = {module}:budget\n"
                                           f"needs-data = {module}:needs_data\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_user_gate_registered_as_an_entry_point_runs(tmp_path, monkeypatch):
    _register_user_gate(tmp_path, monkeypatch, """
        from afford.fit.gates import GateNotExecutable, GateResult
        seen = []

        def budget(ctx):
            seen.append(ctx)
            return GateResult(name="budget", delta=0.3 if ctx.device == "cpu" else 9.0,
                              tolerance=0.5, description="a user's check")

        def needs_data(ctx):
            raise GateNotExecutable("no dataset mounted here")
    """, "my_gates_a")
    req = GateRequest(workloads=["tests.gate_workloads:causal"], device="cpu",
                      values={"tests.gate_workloads:causal": [16]}, audit=False,
                      pairs=[("tests.gate_workloads:causal", "tests.gate_workloads:leaky")],
                      settings=GateSettings(noise_steps=2, seeds=(0,)))
    out = run_gates(req)
    import my_gates_a

    assert my_gates_a.seen[0].workloads == ("tests.gate_workloads:causal",)
    by_name = {g.name: g for g in out.gates.gates}
    assert by_name["budget"].status == "PASS" and by_name["budget"].rows[0].delta == 0.3
    assert by_name["budget"].source == "entry point afford.fit.gates: budget = my_gates_a:budget"
    assert by_name["needs-data"].status == "NOT EXECUTABLE"
    assert out.gates.verdict == "GO" and out.determinism is None
    assert [g.name for g in out.gates.gates] == ["init-loss", "cpu-cuda-parity", "noise-floor",
                                                 "matched-params", "budget", "needs-data"]
    (matched,) = by_name["matched-params"].rows
    assert matched.delta == 0.0 and "(tests.gate_workloads:causal at 16," in matched.detail
    # the leaky variant is not selected, so it is counted at its default (smallest) shape
    assert "tests.gate_workloads:leaky at 16)" in matched.detail


def test_a_failing_user_gate_halts(tmp_path, monkeypatch):
    _register_user_gate(tmp_path, monkeypatch, """
        def budget(ctx):
            return {"name": "budget", "delta": 2.0, "tolerance": 1.0}

        def needs_data(ctx):
            raise KeyError("oops")
    """, "my_gates_b")
    req = GateRequest(workloads=["tests.gate_workloads:causal"], device="cpu",
                      values={"tests.gate_workloads:causal": [16]}, audit=False,
                      settings=GateSettings(noise_steps=1, seeds=(0,)))
    out = run_gates(req)
    by_name = {g.name: g for g in out.gates.gates}
    assert by_name["budget"].status == "FAIL" and by_name["needs-data"].status == "FAIL"
    assert out.gates.verdict == "HALT"


def test_a_crashed_audit_child_leaves_its_runs_not_executable(monkeypatch):
    from afford.measure import determinism

    def fake_child(job, timeout=0):
        if job["deterministic"]:
            return [], "audit child exited with -9: Killed"
        run = {"workload": "w", "value": 8, "mode": "fp32", "deterministic": False,
               "repeats": 2, "comparisons": []}
        return [{"event": "start", "device_name": "box", "torch_version": "t"},
                {"event": "run", "run": run}, ], ""

    monkeypatch.setattr(determinism, "run_child", fake_child)
    sec = determinism.run_audit([{"workload": "w", "value": 8, "mode": "fp32"}],
                                device="cpu", device_class="cpu", repeats=2)
    off, on = sec.runs
    assert off.not_executable is None and sec.device_name == "box"
    assert on.not_executable.reason == "audit child exited with -9: Killed"
    assert on.stage == "child" and sec.warnings == ["audit child exited with -9: Killed"]
    gate = evaluate(GateReadings(), S, determinism=sec)[0]
    assert gate.status == "NOT EXECUTABLE"


def test_the_audit_keeps_what_ran_when_only_the_backward_cannot():
    """Issue 30, item 6 (COSTS 1.6): when only the backward has no deterministic kernel, the
    forward output and the loss are compared (bitwise here) and only the gradients and the
    parameters after the step are NOT EXECUTABLE, with the op torch names."""
    from afford.fit.gates import determinism_gate
    from afford.schema.determinism_section import AuditRun, DeterminismSection
    from tests.gate_workloads import backward_refuses

    run = audit_workload(backward_refuses(), "tests.gate_workloads:backward_refuses", 16, CPU,
                         "fp32", repeats=3, seed=0, deterministic=True, timing_steps=3)
    assert [c["quantity"] for c in run["comparisons"]] == ["forward output", "loss"]
    assert all(c["bitwise_equal"] for c in run["comparisons"])
    assert run["stage"] == "backward" and run["op"] == "cumsum_cuda_kernel"
    assert "gradients, parameters after step (backward)" in run["not_executable"]["what"]
    sec = DeterminismSection(device="cpu", device_name="box", torch_version="2.x", repeats=3,
                             seed=0, runs=[AuditRun(**run)])
    g = determinism_gate(sec)
    assert [(r.label.split(": ")[-1], r.status) for r in g.rows] == [
        ("forward output, loss", "PASS"), ("gradients, parameters after step", "NOT EXECUTABLE")]
    assert g.status == "PASS"


@pytest.mark.cuda
def test_a_bilinear_upsample_keeps_its_forward_bitwise_under_the_flag_on_cuda():
    """On CUDA with use_deterministic_algorithms(True), upsample_bilinear2d's backward has no
    deterministic kernel: the audit keeps forward and loss and marks the gradient NOT
    EXECUTABLE (run in a child, as the audit runs, so the flag is set before CUDA starts)."""
    from afford.measure.determinism import run_audit

    sec = run_audit([{"workload": "tests.gate_workloads:upsample", "value": 2, "mode": "fp32"}],
                    device="cuda", device_class="large-gpu", repeats=3, timing_steps=3)
    on = next(r for r in sec.runs if r.deterministic)
    got = {c.quantity: c.bitwise_equal for c in on.comparisons}
    if on.not_executable is None:
        pytest.skip(f"torch {sec.torch_version} has a deterministic upsample backward here")
    assert on.stage == "backward" and got == {"forward output": True, "loss": True}
    assert "upsample" in (on.op or "") and "gradients" in on.not_executable.what
