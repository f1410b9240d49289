"""What certify's parent computes between the device's stages (issue 38's minute): the
step-time models bounded by the probes' ceilings are fitted beside the memory stage on CUDA
(afford.certification._Ceilings through run_stages' on_section): the fitting starts as soon as the
probes' section is ready, the memory stage's child runs meanwhile, and the result is the one
a fit after both would give; the early round between the sweep's first and second child
assembles the first child's points without the throughput law it does not read."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

import afford.certification as certify_mod


def _stages(order: list[str], memory_started: threading.Event):
    def probes_stage(ctx):
        order.append("probes: device")
        if ctx.device_free is not None:
            ctx.device_free.set()
            assert memory_started.wait(10)
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
    def bound(results, designs, probes, device_type):
        order.append("ceilings fit")
        seen.append((results, designs, probes, device_type))
        return [f"{r} bounded by {probes}" for r in results]

    return bound


def test_on_cuda_the_fit_runs_beside_the_memory_stage(monkeypatch):
    order: list[str] = []
    seen: list = []
    probes, memory = _stages(order, threading.Event())
    monkeypatch.setattr(certify_mod, "probes_stage", probes)
    monkeypatch.setattr(certify_mod, "memory_stage", memory)
    monkeypatch.setattr(certify_mod, "bound_by_ceilings", _bound_recording(order, seen))
    ceilings = certify_mod._Ceilings(["r0", "r1"], ["d0", "d1"], "cuda")
    ctx = SimpleNamespace(plan=SimpleNamespace(device="cuda:0"), device_free=None)
    got = certify_mod.run_stages([probes, memory], ctx, [], {}, lambda e: None,
                                 on_section=ceilings.start)
    assert got == {"probes": "P", "memory": "M"}
    assert ceilings.future is not None
    # the fit began once the probes' writes ended, before the memory stage did
    assert order.index("ceilings fit") < order.index("memory ends")
    assert order.index("probes: writes") < order.index("ceilings fit")
    assert ceilings.join("P") == ["r0 bounded by P", "r1 bounded by P"]
    assert seen == [(["r0", "r1"], ["d0", "d1"], "P", "cuda")]  # fitted once


def test_without_the_hook_join_fits_then():
    calls = []
    ceilings = certify_mod._Ceilings(["r"], ["d"], "cpu")
    ceilings._bound = lambda probes: calls.append(probes) or ["fitted now"]
    ceilings.start("memory", {"memory": "M"})  # another stage's fields start nothing
    assert ceilings.future is None
    assert ceilings.join("P") == ["fitted now"] and calls == ["P"]


def test_a_failed_fit_is_raised_in_the_callers_thread(monkeypatch):
    def bound(*args):
        raise ValueError("the fit failed")

    monkeypatch.setattr(certify_mod, "bound_by_ceilings", bound)
    ceilings = certify_mod._Ceilings(["r"], ["d"], "cuda")
    ceilings.start("probes", {"probes": "P"})
    with pytest.raises(ValueError, match="the fit failed"):
        ceilings.join("P")


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
