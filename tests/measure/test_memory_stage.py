"""The memory stage for real: the reduced CPU certificate (conftest ``cpu_cert``: tinylm
and softmax, fp32) carries a memory law validated on held-out shapes; the child records
failures; the CUDA path on a GPU."""

import json

import pytest
import torch

from afford import figures
from afford.certification import stages_for
from afford.certification.request import CertifyRequest
from afford.core.provenance import Tag
from afford.measure.memory_sweep import run_memory_child
from afford.schema.memory_section import HELDOUT_ROLES

TINY = {"batch": 2, "seq": 16, "d": 32, "L": 1, "H": 2}


def test_no_memory_means_no_stage():
    assert "memory_stage" not in [s.__name__ for s in stages_for(CertifyRequest(memory=False))]
    assert "memory_stage" in [s.__name__ for s in stages_for(CertifyRequest())]


@pytest.mark.slow
def test_cpu_certificate_has_a_validated_memory_law(cpu_cert):
    mem = cpu_cert.memory
    assert mem is not None and mem.steps_per_shape == 3
    assert mem.targets == {"rss_increment": 0.10} and not mem.not_executable
    assert [(law.workload, law.mode) for law in mem.laws] == [("tinylm", "fp32"),
                                                               ("softmax", "fp32")]
    for law in mem.laws:
        assert law.device_type == "cpu" and law.reserved is None
        assert law.allocated.quantity == "rss_increment"
        assert law.allocated.n_points == 7  # base + 3 seq + 3 batch; warm-up and held-out not
        assert law.bytes_per_param == pytest.approx(16.0, rel=1e-3)  # fp32 AdamW: 4 + 4 + 8
        assert {h.role for h in law.heldout} == set(HELDOUT_ROLES)
        assert all(abs(h.error) <= mem.targets["rss_increment"] for h in law.heldout), \
            [(h.role, h.error) for h in law.heldout]
        assert law.loop is not None and law.loop.median_extra_bytes >= 0
        for s in law.shapes:
            assert s.ok and len(s.rss_by_step) == 3 and s.baseline_rss_bytes > 0
    tiny = mem.laws[0]
    assert tiny.params_per_s == pytest.approx(64.0)  # learned positions: d per position
    assert tiny.loop.median_extra_bytes_per_param > 4  # the Adam moments, 8 B/param at rest
    assert mem.wall_seconds > 0


@pytest.mark.slow
def test_size_and_readings_on_the_cpu_certificate(cpu_cert, cpu_cert_path):
    from typer.testing import CliRunner

    from afford.cli import app

    r = CliRunner().invoke(app, ["size", str(cpu_cert_path), "--seq", "512", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["peak_reserved"] is None and "peak RSS" in doc["peak_allocated"]["source"]
    assert doc["max_batch"]["value"] > 0
    rss, res = figures.predicted_memory(cpu_cert, "softmax", {"n": 3, "s": 200})
    assert rss.tag == Tag.FITTED and res is None
    law = cpu_cert.memory.laws[1]
    assert rss.value > law.baseline_rss_bytes


@pytest.mark.slow
def test_child_records_a_failing_shape_and_goes_on():
    bad = {**TINY, "d": 33}  # 33 is not divisible by H=2: the build raises
    items = [{"key": k, "workload": "tinylm", "mode": "fp32", "shape": s, "steps": 2}
             for k, s in (("bad", bad), ("good", TINY))]
    rec = run_memory_child(items, device="cpu", device_class="cpu", seed=0)
    assert "not divisible" in rec["bad"]["error"] and rec["bad"]["oom"] is False
    good = rec["good"]
    assert good.get("error") is None and len(good["rss_by_step"]) == 2
    assert good["states_bytes"] == pytest.approx(16 * good["params"], rel=1e-3)


@pytest.mark.cuda
def test_cuda_child_reads_the_caching_allocator():
    items = [{"key": f"b{b}{m}", "workload": "tinylm", "mode": m, "steps": 3,
              "shape": {**TINY, "batch": b, "seq": 256, "d": 256, "H": 4}}
             for b in (4, 8) for m in ("fp32", "bf16")]
    items[0]["trace"] = True
    items[0]["dims"] = {"B": 4, "s": 256}
    rec = run_memory_child(items, device="cuda", device_class="large-gpu", seed=0)
    traced = rec[items[0]["key"]]["trace"]
    assert traced["n_allocs"] > 0 and not traced["truncated"] and traced["seed"] is not None
    for r in rec.values():
        assert r.get("error") is None, r
        assert len(r["allocated_by_step"]) == len(r["reserved_by_step"]) == 3
        assert all(res >= a for a, res in zip(r["allocated_by_step"], r["reserved_by_step"]))
        assert r["allocated_by_step"][-1] >= r["allocated_by_step"][0]
        assert r["resting_allocated_bytes"] >= r["states_bytes"]
    assert torch.cuda.is_available()


# ---- the stage's orchestration with the child faked (no process, no device) ----------

def _fake_child(items, **kw):
    """A box whose allocated peak is 16 B/param + 30 MiB + 70 B per (L B s d)."""
    from afford.workloads.tinylm import tinylm_params

    out = {}
    for it in items:
        d = it["dims"]
        p = tinylm_params(d["d"], d["L"], d["s"])
        alloc = 16 * p + 30 * 2**20 + 70 * d["L"] * d["B"] * d["s"] * d["d"]
        out[it["key"]] = {"params": p, "states_bytes": 16 * p, "steps": it["steps"],
                          "allocated_by_step": [alloc] * it["steps"],
                          "reserved_by_step": [alloc + 2**26] * it["steps"],
                          "memory_source": "fake"}
    return out


def _ctx(modes=()):
    from types import SimpleNamespace

    from afford.certification.request import StageContext, resolve

    req = CertifyRequest(workloads=["tinylm", "tests.user_workload:factory"],
                         modes=list(modes), device="cuda")
    plan = resolve(req, "cuda", "large-gpu", "cuda")
    env = SimpleNamespace(device_type="cuda", compute_capability="9.0",
                          device_memory_bytes=150 * 10**9)
    return StageContext(req=req, env=env, plan=plan, results=[], on_event=lambda e: None)


def test_stage_fits_each_mode_and_skips_what_is_not_transformer_shaped(monkeypatch):
    import afford.certification.stage_memory as stage

    seen = {}
    monkeypatch.setattr(stage, "run_memory_child",
                        lambda items, **kw: seen.setdefault("items", items) and _fake_child(items))
    mem = stage.memory_stage(_ctx())["memory"]
    assert [(law.workload, law.mode) for law in mem.laws] == [("tinylm", "fp32"),
                                                               ("tinylm", "bf16")]
    # CUDA: warm-up, 4 traced sweep shapes, 3 held out; per mode
    assert len(seen["items"]) == 2 * 8
    assert [it["role"] for it in seen["items"] if it["trace"]] == \
        ["base", "seq", "batch", "corner"] * 2
    assert [n.what for n in mem.not_executable] == ["memory law of tests.user_workload:factory"]
    assert "not transformer-shaped" in mem.not_executable[0].reason
    for law in mem.laws:
        assert law.allocated.c_res == pytest.approx(70.0, rel=1e-6)
        assert all(abs(h.error) < 1e-6 for h in law.heldout) and len(law.heldout) == 3
        assert law.replay is None  # the fake child records no allocator history
    assert mem.targets == {"allocated": 0.02, "reserved": 0.03} and mem.steps_per_shape == 3


def test_stage_records_a_child_that_cannot_start(monkeypatch):
    import afford.certification.stage_memory as stage

    def broken(items, **kw):
        raise OSError("no such interpreter")

    monkeypatch.setattr(stage, "run_memory_child", broken)
    mem = stage.memory_stage(_ctx(["bf16"]))["memory"]
    assert mem.laws == []
    whats = [n.what for n in mem.not_executable]
    assert "memory child" in whats and "memory law of tinylm (bf16)" in whats
    child = next(n for n in mem.not_executable if n.what == "memory child")
    assert child.reason == "OSError: no such interpreter" and child.status == "NOT EXECUTABLE"


def test_loop_effect_with_three_steps_by_hand():
    """Step 0 peaks before the Adam moments exist; steps 1 and 2 carry them; the growth
    after step 1 is step 2's rise of the budgeted (reserved) peak."""
    from afford.certification.stage_memory import loop_effect
    from afford.schema.memory_section import MemoryShape

    def shape(params, alloc, res):
        return MemoryShape(key=f"k{params}", role="seq", shape={}, dims={}, params=params,
                           states_bytes=16 * params, steps=3, allocated_by_step=alloc,
                           reserved_by_step=res)

    sweep = [shape(100, [1000, 1800, 1800], [2000, 3000, 3100]),
             shape(200, [2000, 3600, 3600], [4000, 6000, 6000]),
             shape(300, [3000, 5400, 5400], [6000, 9000, 9500])]
    loop = loop_effect(sweep, "allocated", "reserved")
    assert loop.median_extra_bytes == 1600  # 800, 1600, 2400
    assert loop.median_extra_bytes_per_param == 8.0
    assert loop.median_extra_fraction == pytest.approx(0.8)
    assert loop.max_growth_after_step1_bytes == 500  # 100, 0, 500
    one_step = [s.model_copy(update={"steps": 1, "allocated_by_step": s.allocated_by_step[:1],
                                     "reserved_by_step": s.reserved_by_step[:1]})
                for s in sweep]
    assert loop_effect(one_step, "allocated", "reserved") is None
