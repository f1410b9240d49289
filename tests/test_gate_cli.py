"""``afford gate`` and the certify stage through typer's runner: exit codes and documents."""

import json

import pytest
import torch
from typer.testing import CliRunner

from afford.certify import CertifyRequest, stages_for
from afford.cli import app
from afford.schema.cert import Certificate

runner = CliRunner()
CAUSAL = "tests.gate_workloads:causal"
LEAKY = "tests.gate_workloads:leaky"


def run(*args):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("args,match", [
    (["gate", "--workload", "nope"], "unknown workload"),
    (["gate", "--pair", "softmax"], "A,B"),
    (["gate", "--pair", "softmax,nope"], "unknown workload"),
    (["gate", "--tol", "init-loss"], "NAME=VALUE"),
    (["gate", "--tol", "speed=1"], "NAME=VALUE"),
    (["gate", "--repeats", "1"], "at least 2"),
    (["gate", "--steps", "0"], "at least 1"),
    (["gate", "--sweep", "zz=1,2", "-w", "softmax"], "no selected workload"),
    (["gate", "--device", "tpu"], "choose cpu or cuda"),
])
def test_gate_bad_input_exits_2_without_traceback(args, match):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_gate_on_cuda_without_cuda_exits_2():
    r = run("gate", "--device", "cuda")
    assert r.exit_code == 2 and "no CUDA device" in r.output


def test_gate_halts_with_exit_1_on_a_leaking_mask():
    r = run("gate", "-w", LEAKY, "--sweep", "seq=16", "--device", "cpu", "--no-audit",
            "--steps", "1", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "HALT" and doc["schema"] == "afford.gate-report/1"
    init = next(g for g in doc["gates"] if g["name"] == "init-loss")
    assert init["status"] == "FAIL" and init["delta_over_tolerance"] > 2
    assert doc["sections"]["determinism"] is None
    parity = next(g for g in doc["gates"] if g["name"] == "cpu-cuda-parity")
    assert parity["status"] == ("PASS" if torch.cuda.is_available() else "NOT EXECUTABLE")


def test_gate_passes_with_exit_0_and_renders_tables():
    r = run("gate", "-w", CAUSAL, "--sweep", "seq=16", "--device", "cpu", "--no-audit",
            "--steps", "2")
    assert r.exit_code == 0, r.output
    assert "init-loss" in r.output and "noise-floor" in r.output and "verdict: GO" in r.output


@pytest.mark.slow
def test_gate_with_the_audit_end_to_end():
    r = run("gate", "-w", CAUSAL, "--sweep", "seq=16", "--device", "cpu", "--steps", "1",
            "--repeats", "2", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    runs = doc["sections"]["determinism"]["runs"]
    assert [run["deterministic"] for run in runs] == [False, True]
    assert all(c["bitwise_equal"] for run in runs for c in run["comparisons"])
    names = [g["name"] for g in doc["gates"]]
    assert names == ["init-loss", "cpu-cuda-parity", "noise-floor", "deterministic-mode"]


def test_certify_runs_the_gate_stage_unless_told_not_to():
    assert len(stages_for(CertifyRequest())) == 1
    assert len(stages_for(CertifyRequest(gates=True))) == 1
    assert stages_for(CertifyRequest(gates=False)) == []


@pytest.mark.slow
def test_default_certificate_carries_the_init_loss_gate(cpu_cert: Certificate):
    assert cpu_cert.determinism is None
    (gate,) = cpu_cert.gates.gates
    assert gate.name == "init-loss" and gate.status == "PASS"
    assert len(gate.rows) == 3  # tinylm at seq 16, 32, 64, the run's seed
    assert cpu_cert.gates.verdict == "GO"


@pytest.mark.slow
def test_certify_exits_1_when_a_gate_fails_but_writes_the_certificate(tmp_path):
    out = tmp_path / "leaky.json"
    r = run("certify", "--quick", "--device", "cpu", "--workload", LEAKY, "--sweep",
            "seq=16", "--out", str(out), "--json")
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["gates"] == "HALT"
    cert = json.loads(out.read_text())
    assert cert["gates"]["verdict"] == "HALT" and cert["determinism"] is None
