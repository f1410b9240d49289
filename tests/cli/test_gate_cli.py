"""``afford gate`` and the certify stage through typer's runner: exit codes and documents."""

import json

import pytest
import torch
from typer.testing import CliRunner

from afford.certification import stages_for
from afford.certification.request import CertifyRequest
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


def _put_raises_here() -> bool:
    torch.use_deterministic_algorithms(True)
    try:
        torch.zeros(2).put_(torch.tensor([0]), torch.tensor([1.0]))
        return False
    except RuntimeError:
        return True
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.slow
def test_audit_catches_an_unseeded_workload_and_names_an_op_without_kernel(monkeypatch):
    """Both audit children for real: the unseeded workload differs with the flag off and on
    (deterministic-mode FAILs, exit 1); put_ runs with the flag off and, where this torch
    refuses it under the flag, is NOT EXECUTABLE with the op named."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    r = run("gate", "-w", "tests.gate_workloads:noisy", "-w", "tests.gate_workloads:putop",
            "--device", "cpu", "--steps", "1", "--repeats", "3", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    sec = doc["sections"]["determinism"]
    runs = {(x["workload"].split(":")[-1], x["deterministic"]): x for x in sec["runs"]}
    assert len(runs) == 4 and sec["warnings"] == [] and sec["repeats"] == 3
    for flag in (False, True):
        noisy = runs["noisy", flag]
        assert [c["quantity"] for c in noisy["comparisons"]] == [
            "forward output", "loss", "gradients", "parameters after step"]
        assert all(not c["bitwise_equal"] and c["repeats_differing"] == 2
                   for c in noisy["comparisons"])
        assert noisy["comparisons"][2]["first_differing"] == "0.weight"
        assert len(noisy["timing"]["timed_seconds"]) == 8
    assert runs["noisy", True]["cublas_workspace_config"] == ":4096:8"
    assert runs["noisy", False]["cublas_workspace_config"] is None
    put_off = runs["putop", False]
    assert put_off["not_executable"] is None
    assert all(c["bitwise_equal"] for c in put_off["comparisons"])
    gate = next(g for g in doc["sections"]["gates"]["gates"] if g["name"] == "deterministic-mode")
    assert gate["status"] == "FAIL" and gate["rows"][0]["status"] == "FAIL"
    if _put_raises_here():
        put = runs["putop", True]
        assert put["op"] == "put_" and put["stage"] == "forward"
        assert "deterministic implementation" in put["not_executable"]["reason"]
        assert gate["rows"][1]["status"] == "NOT EXECUTABLE"


def test_certify_runs_the_gate_stage_unless_told_not_to():
    def names(req):
        return [s.__name__ for s in stages_for(req)]

    assert "gates_stage" in names(CertifyRequest())
    assert "gates_stage" in names(CertifyRequest(gates=True))
    assert "gates_stage" not in names(CertifyRequest(gates=False))


@pytest.mark.slow
def test_default_certificate_carries_the_init_loss_gate(cpu_cert: Certificate):
    assert cpu_cert.determinism is None
    (gate,) = cpu_cert.gates.gates
    assert gate.name == "init-loss" and gate.status == "PASS"
    assert len(gate.rows) == 3  # tinylm at seq 16, 32, 64, the run's seed
    assert cpu_cert.gates.verdict == "GO"


@pytest.mark.slow
def test_certify_says_halt_when_a_gate_fails_and_exits_1_under_strict(tmp_path, monkeypatch,
                                                                       cpu_cert):
    import afford.certification as certify_pkg  # the command imports certify() when it runs
    from afford.fit.gates import GateSettings, init_loss_gate
    from afford.schema.determinism_section import InitLossReading

    leak = InitLossReading(workload="tinylm", value=16, seed=0, mode="fp32", vocab=256,
                           loss=5.0)  # 5.0 / ln 256 = 0.90
    gate = init_loss_gate([leak], GateSettings())
    halted = cpu_cert.model_copy(update={"gates": cpu_cert.gates.model_copy(
        update={"gates": [gate], "verdict": "HALT"})})
    monkeypatch.setattr(certify_pkg, "certify", lambda req, **kw: halted)
    out = tmp_path / "leaky.json"
    r = run("certify", "--device", "cpu", "--out", str(out), "--json")
    assert r.exit_code == 0, r.output  # written and usable: the verdict is its finding
    assert json.loads(r.stdout)["gates"] == "HALT" and "FAIL init-loss" in r.stderr
    assert json.loads(out.read_text())["gates"]["verdict"] == "HALT"
    r = run("certify", "--device", "cpu", "--out", str(tmp_path / "t.json"))
    assert r.exit_code == 0 and "verdict: HALT" in r.stdout
    assert " ".join(r.stdout[r.stdout.rindex("gates verdict"):].split()) == (
        "gates verdict: HALT: init-loss failed: the figures of a run it guards are "
        "meaningless until it passes")
    r = run("certify", "--device", "cpu", "--out", str(tmp_path / "s.json"), "--strict")
    assert r.exit_code == 1 and (tmp_path / "s.json").exists()


def _result(name, mode, points):
    """A WorkloadResult with points (value, vocab, [child first losses])."""
    from afford.schema.cert import WorkloadResult
    from afford.schema.point import ChildPoint, Point

    pts = [Point(value=v, shape={}, vocab=vocab, resident=True,
                 children=[ChildPoint(child=i, order_position=0, first_loss=x)
                           for i, x in enumerate(losses)],
                 excluded_reason=None if losses else "failed in child 0: boom")
           for v, vocab, losses in points]
    return WorkloadResult(name=name, source="builtin", mode=mode, sweep_param="seq",
                          points=pts)


def test_default_init_loss_readings_come_from_the_sweeps_step_0():
    from afford.certification.stage_gates import sweep_init_losses

    results = [_result("tinylm", "bf16", [(16, 256, [5.5, 5.7, 5.6]), (32, 256, []),
                                           (64, 256, [5.0])]),
               _result("softmax", "bf16", [(8, None, [1.0]), (16, None, [2.0])])]
    got = sweep_init_losses(results, seed=7)
    assert [(r.workload, r.value, r.vocab, r.loss, r.seed) for r in got] == [
        ("tinylm", 16, 256, 5.6, 7), ("tinylm", 32, None, None, 7), ("tinylm", 64, 256, 5.0, 7),
        ("softmax", 8, None, None, 7)]  # no vocab: one reading says so, the rest are skipped
    assert got[1].error == "failed in child 0: boom"


@pytest.mark.slow
def test_default_certificate_times_its_stages(cpu_cert: Certificate):
    got = cpu_cert.environment.stage_seconds
    assert list(got) == ["setup", "sweep", "time", "probes", "memory", "gates"]
    assert all(v >= 0 for v in got.values())
    assert sum(got.values()) <= cpu_cert.environment.elapsed_seconds
