"""The probes' checkpoint writes need no device (issue 38 item 6): the probe child copies each
workload's state to host memory (timed, and added to every write's seconds), says
``device_free`` once its last device probe is done, then writes; on CUDA certify runs the
memory stage beside those writes and the stage after both, never beside them."""

from __future__ import annotations

import io
import json
import threading
import time
from types import SimpleNamespace

import pytest
import torch

import afford.certification as certify_mod
from afford.measure.probes.checkpoint import checkpoint_probe, host_state


def test_the_writes_come_after_the_device_is_free_and_carry_the_copy(tmp_path):
    from afford.measure.probes.probe_child import Emitter, run_device_probes
    from afford.measure.probes.protocol import probe_protocol

    out = io.StringIO()
    job = {"device": "cpu", "device_class": "cpu", "seed": 0,
           "protocol": probe_protocol("quick", "cpu", "cpu").model_dump(),
           "workloads": [{"index": 0, "spec": "tinylm", "mode": "fp32", "value": 16,
                          "flop_values": []}],
           "checkpoint_dir": str(tmp_path)}
    run_device_probes(job, Emitter(out))
    events = [json.loads(x) for x in out.getvalue().splitlines()]
    keys = [e.get("key", e["event"]) for e in events if e["event"] != "begin"]
    free = keys.index("device_free")
    assert keys[free + 1:] == ["w0.checkpoint"]  # after every probe that needs the device
    assert {"gemm.fp32", "copy", "w0.ladder", "w0.gemm_shapes"} <= set(keys[:free])
    ck = next(e for e in events if e["event"] == "probe" and e["key"] == "w0.checkpoint")
    ck = ck["result"]
    assert ck["verified"] and ck["value"] == 16 and ck["shape"]["seq"] == 16
    assert all(w >= ck["device_to_host_seconds"] >= 0 for w in ck["write_seconds"])
    assert list(tmp_path.iterdir()) == []  # the probe's folder is gone


def test_the_host_copy_is_a_copy_taken_once():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    state, seconds = host_state(model, opt)
    assert seconds >= 0
    before = state["model"]["weight"].clone()
    with torch.no_grad():
        model.weight.add_(1.0)  # training on does not move the copy
    assert torch.equal(state["model"]["weight"], before)
    assert state["optimizer"]["state"][0]["exp_avg"].device.type == "cpu"


def test_each_write_carries_the_copys_seconds(tmp_path):
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.AdamW(model.parameters())
    state, _ = host_state(model, opt)
    got = checkpoint_probe(state, tmp_path, writes=2, copy_seconds=5.0)
    assert all(5.0 <= w < 6.0 for w in got["write_seconds"])
    assert got["device_to_host_seconds"] == 5.0 and got["verified"]


def _stages(order: list[str], memory_started: threading.Event):
    def probes_stage(ctx):
        order.append("probes: device")
        if ctx.device_free is not None:
            ctx.device_free.set()
            assert memory_started.wait(10)  # the memory stage began beside the writes
            time.sleep(0.05)
        order.append("probes: writes")
        return {"probes": "P"}

    def memory_stage(ctx):
        order.append("memory")
        memory_started.set()
        time.sleep(0.2)
        order.append("memory ends")
        return {"memory": "M"}

    def gates_stage(ctx):
        order.append("gates")
        return {"gates": "G"}

    return probes_stage, memory_stage, gates_stage


@pytest.mark.parametrize("device, beside", [("cuda:0", True), ("cpu", False)])
def test_the_memory_stage_runs_beside_the_probes_writes_on_cuda_only(monkeypatch, device,
                                                                     beside):
    order: list[str] = []
    probes, memory, gates = _stages(order, threading.Event())
    monkeypatch.setattr(certify_mod, "probes_stage", probes)
    monkeypatch.setattr(certify_mod, "memory_stage", memory)
    ctx = SimpleNamespace(plan=SimpleNamespace(device=device), device_free=None)
    seconds: dict[str, float] = {}
    got = certify_mod.run_stages([probes, memory, gates], ctx, [], seconds, lambda e: None)
    assert got == {"probes": "P", "memory": "M", "gates": "G"}
    assert list(seconds) == ["probes", "memory", "gates"]  # in the stages' order
    if beside:
        assert order == ["probes: device", "memory", "probes: writes", "memory ends",
                         "gates"]
        assert seconds["probes"] < seconds["memory"]  # its writes ended inside the memory's
    else:
        assert order == ["probes: device", "probes: writes", "memory", "memory ends", "gates"]


def test_a_probes_stage_that_fails_before_freeing_the_device_does_not_hang(monkeypatch):
    def probes_stage(ctx):
        raise RuntimeError("the probe child could not start")

    def memory_stage(ctx):
        return {"memory": "M"}

    monkeypatch.setattr(certify_mod, "probes_stage", probes_stage)
    monkeypatch.setattr(certify_mod, "memory_stage", memory_stage)
    failures: list[str] = []
    ctx = SimpleNamespace(plan=SimpleNamespace(device="cuda:0"), device_free=None)
    got = certify_mod.run_stages([probes_stage, memory_stage], ctx, failures, {},
                                 lambda e: None)
    assert got == {"memory": "M"}
    assert failures == ["stage probes failed: RuntimeError: the probe child could not start"]
