"""The sizes stage and the levers for real on this CPU (child processes), and the levers CLI."""

import json
import os

import pytest
import torch
from typer.testing import CliRunner

from afford.certification.stage_sizes import measure_sizes
from afford.cli import app
from afford.measure.timing import rule_for
from afford.schema.cert import load_certificate, save_certificate
from afford.workloads.tinylm import TinyLMConfig
from tests.synthetic_cert import certificate, environment

runner = CliRunner()


@pytest.mark.slow
def test_reduced_cpu_sizes_stage(tmp_path, cpu_cert):
    configs = [TinyLMConfig(d=d, L=L, H=2, seq=16, batch=2, sweep=(16,))
               for d, L in ((16, 1), (32, 1), (48, 2))]
    load_before = os.getloadavg()[0]
    section = measure_sizes(configs, mode="fp32", device="cpu", device_class="cpu",
                            rule=rule_for("quick"), children=3, seed=0,
                            device_memory=cpu_cert.environment.device_memory_bytes)
    assert [s.spec for s in section.sizes] == ["tinylm@d16L1H2b2s16", "tinylm@d32L1H2b2s16",
                                               "tinylm@d48L2H2b2s16"]
    assert section.tokens_per_step == 32
    for s in section.sizes:
        assert len(s.point.children) == 3 and s.point.resident is True
        assert all(len(k.timed_seconds) >= 12 for k in s.point.children)
    params = [s.params for s in section.sizes]
    law = section.size_law
    assert params == sorted(params) and [p.params for p in law.points] == [float(p) for p in
                                                                          params]
    assert law.sides == "wall"  # a CPU: no device side apart from the host
    assert section.scaling.source.startswith("FLOPs counted at each size")  # the first child
    assert [p.spec for p in section.phases] == ["tinylm@d16L1H2b2s16+phases",
                                                "tinylm@d48L2H2b2s16+phases"]
    for split in section.phases:
        assert split.error is None and len(split.children) == 3
        assert split.forward_seconds > 0 and split.optimizer_seconds > 0
        # medians of the parts need not add up to the median of the whole (they are taken
        # separately); the parts never exceed the step by more than a few percent, and on a
        # host that is not oversubscribed they account for at least half of it (under load a
        # whole step's median inflates with the waits between its phases)
        parts = split.forward_seconds + split.backward_seconds + split.optimizer_seconds
        assert parts <= 1.05 * split.step_seconds
        # the 1-minute load average lags: judge by it before and after the stage, with a
        # core to spare (a CPU hog that started during the stage shows in the later one)
        spare = (os.cpu_count() or 1) - 0.5
        if load_before < spare and os.getloadavg()[0] < spare:
            assert parts >= 0.5 * split.step_seconds
    assert {g.phase for g in section.growth} == {"forward", "backward", "optimizer", "step"}
    assert section.premise in ("holds", "fails") and "optimizer" in section.finding
    cert = cpu_cert.model_copy(update={"sizes": section})
    path = tmp_path / "sized.json"
    save_certificate(cert, path)
    assert load_certificate(path).sizes == section
    r = runner.invoke(app, ["ladder", str(path), "--params", "1M:d64L2", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["rows"][0]
    assert row["wall_a"]["tag"] == "FITTED" and row["wall_a"]["extrapolated"] is True
    assert row["step"]["tag"] == "FITTED" and row["beyond"] > 1
    assert row["flops_attention"]["value"] == pytest.approx(12 * 2 * 64 * 16 * 20e6)


@pytest.mark.slow
def test_levers_on_cpu_with_cuda_graphs_not_executable(tmp_path, cpu_cert_path):
    out = tmp_path / "with-levers.json"
    r = runner.invoke(app, ["levers", str(cpu_cert_path), "--quick", "--levers",
                            "bf16,cudagraphs", "-w", "tinylm@d32L1H2b2s16", "--out", str(out),
                            "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = {row["lever"]: row for row in doc["rows"]}
    assert rows["cudagraphs"]["not_executable"]["status"] == "NOT EXECUTABLE"
    assert "need a CUDA device" in rows["cudagraphs"]["not_executable"]["reason"]
    assert rows["cudagraphs"]["speedup"] is None
    bf16 = rows["bf16"]
    assert bf16["not_executable"] is None and bf16["speedup"]["value"] > 0
    assert bf16["a_label"] == "fp32 eager" and bf16["b_label"] == "bf16 eager"
    run = doc["levers"]["runs"][0]
    assert run["value"] == 16 and run["flops_per_step"] > 0
    lever = next(x for x in run["levers"] if x["name"] == "bf16")
    assert len(lever["per_child"]) == 3
    cert = load_certificate(out)
    assert cert.levers is not None and cert.workloads == load_certificate(cpu_cert_path).workloads
    r = runner.invoke(app, ["ladder", str(out), "--json"])
    figures = json.loads(r.stdout)["levers"]
    assert [f["lever"] for f in figures] == ["bf16"]  # not-executable levers are not figures
    assert figures[0]["speedup"]["tag"] == "MEASURED"


@pytest.mark.slow
def test_user_arms_run_as_ab_pairs_and_a_missing_backward_is_caught(cpu_cert_path):
    # the ladder note's ablation: an arm is timed in the same children as A; the arm whose
    # backward never reaches half the model is NOT EXECUTABLE, never a speedup
    r = runner.invoke(app, ["levers", str(cpu_cert_path), "--quick",
                            "-w", "tests.user_workload:factory",
                            "--arm", "narrow=tests.user_workload:narrow",
                            "--arm", "broken=tests.user_workload:no_backward", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = {row["lever"]: row for row in doc["rows"]}
    assert set(rows) == {"narrow", "broken"}  # --arm without --levers: only the arms
    assert rows["narrow"]["not_executable"] is None and rows["narrow"]["speedup"]["value"] > 0
    assert rows["broken"]["speedup"] is None
    assert "received no gradient" in rows["broken"]["not_executable"]["reason"]
    levers = {x["name"]: x for x in doc["levers"]["runs"][0]["levers"]}
    assert levers["narrow"]["arm"] == "tests.user_workload:narrow"
    assert len(levers["narrow"]["per_child"]) == 3  # A and the arm timed in each child


@pytest.mark.parametrize("arm,match", [
    ("narrow", "NAME=SPEC"), ("=x:y", "a name is a letter"), ("bf16=tinylm", "already taken"),
    ("9x=tinylm", "a name is a letter"), ("a=nosuchworkload", "unknown workload"),
])
def test_levers_cli_bad_arm(tmp_path, arm, match):
    path = tmp_path / "c.json"
    save_certificate(certificate(None).model_copy(update={"environment": environment(
        device_type="cpu", device_name="Some CPU", device_class="cpu")}), path)
    from afford.certification.stage_levers import check_arms, parse_arms

    with pytest.raises(Exception, match=match):
        check_arms(parse_arms([arm]), "cpu")
    r = runner.invoke(app, ["levers", str(path), "--arm", arm])
    assert r.exit_code == 2 and match in r.output and "Traceback" not in r.output


def test_arms_pair_with_the_base_variant():
    from afford.certification.stage_levers import Arm, pairs

    ps = pairs("tinylm", "bf16", ("fused",), (Arm("no-kda", "mypkg.m:without"),))
    arm = ps[-1]
    assert arm.a == ("tinylm+flops", "bf16") and arm.b == ("mypkg.m:without", "bf16")
    assert arm.metric == "step_seconds" and arm.description == "A -> arm mypkg.m:without"
    assert ps[0].arm is None and ps[0].description.startswith("AdamW")


def test_levers_cli_refuses_another_device(tmp_path):
    path = tmp_path / "h200.json"
    save_certificate(certificate(None), path)
    r = runner.invoke(app, ["levers", str(path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    if torch.cuda.is_available():  # pragma: no cover - on the lent GPU the name decides
        assert "not pooled" in r.output or "NVIDIA H200" in r.output
    else:
        assert "no CUDA device is visible" in r.output
    other = tmp_path / "other-cpu.json"
    save_certificate(certificate(None).model_copy(update={"environment": environment(
        device_type="cpu", device_name="Some Other CPU", device_class="cpu")}), other)
    r = runner.invoke(app, ["levers", str(other), "--levers", "bf16"])
    assert r.exit_code == 2 and "devices are not pooled" in r.output


@pytest.mark.parametrize("args,match", [
    (["--levers", "turbo"], "unknown lever"), (["--children", "2"], "at least 3"),
    (["--quick", "--full"], "contradict"), (["--mode", "int4"], "choose one of"),
])
def test_levers_cli_bad_input(tmp_path, args, match):
    path = tmp_path / "c.json"
    save_certificate(certificate(None), path)
    r = runner.invoke(app, ["levers", str(path), *args])
    assert r.exit_code == 2 and match in r.output
