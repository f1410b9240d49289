"""The measuring side of the step-time model (issue 19): a child's point with a batch from the
design, its FLOPs counted robustly, its CPU diagnostics; the host's load; certify's exit code on
a NOISY certificate; and the H200 2-D grid of 2026-12-02 as a pinned table for the model's
choice."""

import json
import os

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from afford.measure.host_load import host_load, is_own, others
from afford.measure.probes.flops import count_flops_or_why
from afford.measure.sweep_child import point_shape, run_point
from afford.measure.timing import rule_for
from afford.workloads import resolve
from tests.time_certs import h200_grid


def test_a_design_item_sets_the_batch_of_the_shape():
    w = resolve("tinylm", "cpu")
    assert point_shape(w, {"value": 32}) == {"batch": 4, "seq": 32, "d": 64, "L": 2, "H": 2}
    assert point_shape(w, {"value": 32, "batch": 16, "batch_key": "batch"})["batch"] == 16
    with pytest.raises(ValueError):
        point_shape(w, {"value": 32, "batch": 2, "batch_key": "B"})


def test_a_child_point_counts_flops_and_records_cpu_diagnostics():
    w = resolve("tinylm", "cpu")
    item = {"child": 0, "position": 0, "mode": "fp32", "value": 16, "batch": 2,
            "batch_key": "batch", "count_flops": True, "synced": True}
    out = run_point(w, item, torch.device("cpu"), rule_for("quick"), 0)
    rec = out["record"]
    assert out["shape"]["batch"] == 2 and out["tokens_per_step"] == 32
    assert "error" not in rec["flops"]
    assert rec["flops"]["gemm"] > 0 and rec["flops"]["attn"] > 0
    assert rec["cpu_seconds"] > 0 and rec["involuntary_switches"] >= 0
    assert "synced_seconds" not in rec  # a CPU: the host clock is already synchronous


def test_counting_that_fails_is_recorded_not_raised(monkeypatch):
    import afford.measure.probes.flops as flops

    def boom(*a, **k):
        raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible")

    monkeypatch.setattr(flops, "count_step_flops", boom)
    got = count_flops_or_why(None, "bf16", torch.device("cpu"))
    assert got["error"].startswith("AssertionError: sdpa_flop_count") and "gemm" not in got


def test_host_load_on_a_cpu_run():
    load = host_load("before", None)
    assert load["at"] == "before" and len(load["load_average"]) == 3
    assert load["gpu_processes"] is None and "CPU" in load["gpu_processes_error"]
    assert is_own(os.getpid()) is True and is_own(os.getppid()) is False
    assert others({"gpu_processes": [{"pid": 1, "own": False}, {"pid": 2, "own": True},
                                     {"pid": 3, "own": None}]}) == [
        {"pid": 1, "own": False}, {"pid": 3, "own": None}]


def test_certify_exits_0_on_a_noisy_certificate_and_1_under_strict(tmp_path, monkeypatch):
    """A NOISY certificate is written and usable: exit 0, its verdict the last lines;
    --strict (for CI) exits 1 on it."""
    import afford.cli.certify as cli_certify
    from afford.cli import app
    from afford.schema.time_section import CertTimeVerdict
    from tests.synthetic_cert import certificate

    cert = certificate(elapsed_seconds=10.0).model_copy(update={"time_verdict": CertTimeVerdict(
        label="NOISY", reasons=["tinylm (bf16): 8 x 8192 (sweep): children disagree by 30.0% "
                                "> 5.0%"], child_tolerance=0.05, held_out_tolerance=0.05,
        floor_tolerance=0.5, rule="the rule")})
    monkeypatch.setattr(cli_certify, "_measure", lambda req, show: cert)
    out = tmp_path / "c.json"
    res = CliRunner().invoke(app, ["certify", "--out", str(out)])
    assert res.exit_code == 0 and out.exists(), res.output
    assert "time verdict: NOISY:" in res.stdout
    res = CliRunner().invoke(app, ["certify", "--out", str(out), "--force", "-v"])
    assert res.exit_code == 0 and "children disagree by 30.0%" in res.stderr, res.output
    res = CliRunner().invoke(app, ["certify", "--out", str(out), "--force", "--json"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["time_verdict"]["label"] == "NOISY"
    assert doc["verdicts"][0]["label"] == "NOISY" and doc["verdicts"][0]["passed"] is False
    res = CliRunner().invoke(app, ["certify", "--out", str(out), "--force", "--strict"])
    assert res.exit_code == 1 and out.exists()


# ---- the H200 2-D grid (tests/data/h200_grid.jsonl.gz) ------------------------------------


def _grid(name):
    """The grid's (batch, seq) -> median of its repeats, and the counted FLOPs."""
    by, flops = h200_grid(name)
    return {k: float(np.median(v)) for k, v in by.items()}, flops


@pytest.mark.parametrize("name,design", [
    ("tinylm", [(8, 1024), (8, 2048), (8, 4096), (8, 8192), (2, 4096), (32, 1024), (16, 2048)]),
    ("softmax", [(16, 1024), (16, 2048), (16, 4096), (16, 8192), (4, 4096), (64, 1024)])])
def test_on_the_h200_grid_the_work_regime_decides_the_form(name, design):
    """Judged on every point, floor noise chose ``sum`` (held-out floor shapes off by
    23-50 %); judged on the work regime, a max form is chosen and every held-out
    work-regime shape of the grid is within 5 %."""
    from afford.fit.time.time_fit import StepPoint, fit_step_time, work_regime

    seconds, flops = _grid(name)
    pts = [StepPoint(batch=b, seq=s, tokens=b * s, seconds=seconds[(b, s)],
                     gemm_flops=flops[(b, s)]["gemm"], attn_flops=flops[(b, s)]["attn"])
           for b, s in design]
    held = [StepPoint(batch=b, seq=s, tokens=b * s, seconds=t, label=f"{b}x{s}")
            for (b, s), t in seconds.items() if (b, s) not in design]
    m = fit_step_time(pts, held_out=held)
    assert m.form in ("max", "smooth_max") and "work-regime points" in m.reason
    floor = min(p.seconds for p in pts)
    work = [h for h, w in zip(m.held_out, work_regime([h.measured_seconds for h in m.held_out],
                                                      floor)) if w]
    assert len(work) >= 3 and max(abs(h.rel_error) for h in work) < 0.05


def test_an_items_cap_shortens_the_adaptive_extension_never_the_floor():
    from afford.measure.sweep_child import _capped

    rule = rule_for("adaptive")
    assert _capped(rule, None) is rule
    assert _capped(rule, 0.5).max_floor_seconds == 0.5
    assert _capped(rule, 0.1).max_floor_seconds == rule.floor_seconds
    assert _capped(rule, 9.0).max_floor_seconds == rule.max_floor_seconds
