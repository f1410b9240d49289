"""What certify's parent computes between the device's stages (issue 38's minute): the
step-time models bounded by the probes' ceilings are fitted beside the probes' checkpoint
writes and the memory stage on CUDA (afford.certification._Ceilings through the stage
context's on_ceilings): the fitting starts as soon as the probe child has measured the GEMM
ceilings and freed the device, the memory stage's child runs meanwhile, and the result is
the one a fit after both would give; the early round between the sweep's first and second
child assembles the first child's points without the throughput law it does not read."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

import afford.certification as certify_mod
from afford.certification.stage_probes import ceilings_of


def _stages(order: list[str], memory_started: threading.Event):
    def probes_stage(ctx):
        order.append("probes: device")
        if ctx.on_ceilings is not None:
            ctx.on_ceilings({"bf16": 1e15})
        if ctx.device_free is not None:
            ctx.device_free.set()
            assert memory_started.wait(10)
        time.sleep(0.2)
        order.append("probes: writes")
        return {"probes": "P"}

    def memory_stage(ctx):
        order.append("memory")
        memory_started.set()
        time.sleep(0.3)
        order.append("memory ends")
        return {"memory": "M"}

    return probes_stage, memory_stage


def _bound_recording(order: list[str], seen: list):
    def bound(results, designs, rates, device_type):
        order.append("ceilings fit")
        seen.append((results, designs, rates, device_type))
        return [f"{r} bounded at {rates['bf16']:g}" for r in results]

    return bound


def test_on_cuda_the_fit_runs_beside_the_writes_and_the_memory_stage(monkeypatch):
    order: list[str] = []
    seen: list = []
    probes, memory = _stages(order, threading.Event())
    monkeypatch.setattr(certify_mod, "probes_stage", probes)
    monkeypatch.setattr(certify_mod, "memory_stage", memory)
    monkeypatch.setattr(certify_mod, "bound_by_ceilings", _bound_recording(order, seen))
    monkeypatch.setattr(certify_mod, "ceiling_rates", lambda probes: {"bf16": 1e15})
    ceilings = certify_mod._Ceilings(["r0", "r1"], ["d0", "d1"], "cuda")
    ctx = SimpleNamespace(plan=SimpleNamespace(device="cuda:0"), device_free=None,
                          on_ceilings=ceilings.start)
    got = certify_mod.run_stages([probes, memory], ctx, [], {}, lambda e: None)
    assert got == {"probes": "P", "memory": "M"}
    assert ceilings.future is not None
    # the fit began once the probes freed the device, before their writes and the memory
    # stage ended
    assert order.index("ceilings fit") < order.index("probes: writes")
    assert order.index("ceilings fit") < order.index("memory ends")
    assert ceilings.join("P") == ["r0 bounded at 1e+15", "r1 bounded at 1e+15"]
    assert seen == [(["r0", "r1"], ["d0", "d1"], {"bf16": 1e15}, "cuda")]  # fitted once


def test_without_the_hook_join_fits_then(monkeypatch):
    calls = []
    monkeypatch.setattr(certify_mod, "ceiling_rates", lambda probes: {"bf16": 2e15})
    ceilings = certify_mod._Ceilings(["r"], ["d"], "cpu")
    ceilings._bound = lambda rates: calls.append(rates) or ["fitted now"]
    assert ceilings.future is None
    assert ceilings.join("P") == ["fitted now"] and calls == [{"bf16": 2e15}]


def test_ceilings_the_section_does_not_hold_are_fitted_again(monkeypatch):
    calls = []
    monkeypatch.setattr(certify_mod, "ceiling_rates", lambda probes: {"bf16": 2e15})
    ceilings = certify_mod._Ceilings(["r"], ["d"], "cuda")
    ceilings._bound = lambda rates: calls.append(rates) or [f"with {rates['bf16']:g}"]
    ceilings.start({"bf16": 1e15})
    assert ceilings.join("P") == ["with 2e+15"]
    assert calls == [{"bf16": 1e15}, {"bf16": 2e15}]


def test_a_failed_fit_is_raised_in_the_callers_thread(monkeypatch):
    def bound(*args):
        raise ValueError("the fit failed")

    monkeypatch.setattr(certify_mod, "bound_by_ceilings", bound)
    monkeypatch.setattr(certify_mod, "ceiling_rates", lambda probes: {"bf16": 1e15})
    ceilings = certify_mod._Ceilings(["r"], ["d"], "cuda")
    ceilings.start({"bf16": 1e15})
    with pytest.raises(ValueError, match="the fit failed"):
        ceilings.join("P")


def test_the_ceilings_of_the_modes_from_the_probe_childs_gemm_events():
    env = SimpleNamespace(tf32_matmul=False, float32_matmul_precision="highest",
                          device_type="cuda")
    ok = {"event": "probe", "key": "gemm.bf16",  # an H200's reading, 2026-12-06
          "result": {"dtype": "bf16", "n": 8192, "flop_per_call": 2.0 * 8192 ** 3,
                     "warmup_calls": 3, "seconds": [0.0013808] * 10,
                     "median_seconds": 0.0013808, "flops_per_second": 7.963e14,
                     "max_rel_error": 0.002, "reference": "fp64 on 64 random rows",
                     "settings": {}}}
    failed = {"event": "probe", "key": "gemm.fp32",
              "not_executable": {"what": "GEMM fp32", "reason": "no", "failed": True}}
    got = ceilings_of({"bf16": ok, "fp32": failed}, ["bf16", "fp32", "fp16"], env)
    assert got == {"bf16": pytest.approx(7.963e14)}


def test_the_early_round_assembles_points_without_the_law():
    from afford.certification.sweep import fit_workload
    from afford.schema.point import Point
    from afford.workloads import resolve

    w = resolve("tinylm", "cpu")
    points = [Point(value=v, shape={"seq": v}, children=[], resident=True,
                    median_seconds=1e-4 * v)
              for v in (64, 128, 256, 512)]
    full = fit_workload("tinylm", w, "fp32", points)
    early = fit_workload("tinylm", w, "fp32", points, law_fit=False)
    assert full.law is not None and early.law is None
    assert early.points == full.points and early.warnings == [
        n for n in full.warnings if n not in full.law.warnings]
