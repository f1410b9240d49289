"""``afford certify``'s exit code says whether it did its job (issue 40, item 1): a written,
usable certificate exits 0 whatever its verdicts; the verdicts (time, memory, gates) are the
last lines it prints, each with its cause; ``--strict`` exits 1 when one does not pass. A
partial certificate still exits 3 and a refused workload 2. The progress bar never counts
past its total."""

from __future__ import annotations

import io
import json

import pytest
from typer.testing import CliRunner

import afford.cli.certify as cli_certify
from afford.api.certify_command import WrittenCertificate, verdicts
from afford.cli import app
from afford.schema.cert import load_certificate
from tests.paths import DATA, data_file

CPU = DATA / "cpu_tinylm_tiny.json"            # NOISY (made at load 8), memory OK, no gates
H200 = data_file("h200_default_d89f7a2.json")      # no time model; softmax bf16 reserved 21 % off
runner = CliRunner()


def _certify(tmp_path, monkeypatch, cert, *flags):
    monkeypatch.setattr(cli_certify, "_measure", lambda req, show: cert)
    return runner.invoke(app, ["certify", "--out", str(tmp_path / "c.json"), "--force",
                               *flags])


def _halted(cert):
    return cert.model_copy(update={"gates": cert.gates.model_copy(update={"verdict": "HALT"})})


def test_the_verdicts_of_a_noisy_cpu_certificate_name_their_causes():
    time, memory, gates = verdicts(load_certificate(CPU))
    assert (time.stage, time.label, time.passed) == ("time", "NOISY", False)
    assert "worst point 4 x 128, children 686% apart" in time.figures[0]
    assert "host load average 7.7 before" in time.figures[1]  # the recorded load: the cause
    assert (memory.label, memory.passed) == ("OK", True)
    assert memory.figures[0].value == pytest.approx(0.01103, abs=1e-5)  # worst RSS error
    assert (gates.label, gates.passed, gates.cause) == ("NOT MEASURED", True, "--no-gates")


def test_the_memory_verdict_judges_the_figure_plans_budget_on():
    """The H200 certificate has no allocator replay: its softmax bf16 law's reserved missed
    a held-out shape by 20.8 %, beyond the stage's 5 % tolerance: ROUGH, named."""
    time, memory, gates = verdicts(load_certificate(H200))
    assert (time.label, time.passed) == ("NOT MEASURED", True)
    assert (memory.label, memory.passed) == ("ROUGH", False)
    assert memory.figures[:2] == ("softmax", "bf16")
    assert memory.figures[2].value == pytest.approx(0.2080, abs=1e-4)
    assert memory.figures[3].value == 0.05 and memory.figures[3].tag.value == "ASSUMED"
    assert (gates.label, gates.cause.format(*gates.figures)) == ("GO", "init-loss passed")


@pytest.mark.parametrize("cert,strict,code", [
    (CPU, False, 0), (CPU, True, 1), (H200, False, 0), (H200, True, 1)])
def test_the_exit_code_is_0_whatever_the_verdicts_and_1_under_strict(cert, strict, code,
                                                                     tmp_path):
    done = WrittenCertificate(load_certificate(cert), tmp_path / "c.json", False)
    assert done.exit_code(strict) == code


def test_strict_passes_a_certificate_whose_verdicts_all_pass(tmp_path):
    cpu = load_certificate(CPU)
    quiet = cpu.model_copy(update={"time_verdict": cpu.time_verdict.model_copy(
        update={"label": "OK", "reasons": []}), "workloads": [
            w.model_copy(update={"time": None}) for w in cpu.workloads]})
    done = WrittenCertificate(quiet, tmp_path / "c.json", False)
    assert [v.label for v in done.verdicts] == ["OK", "OK", "NOT MEASURED"]
    assert done.exit_code(strict=True) == 0


def test_certify_prints_its_verdicts_last_and_exits_0(tmp_path, monkeypatch):
    r = _certify(tmp_path, monkeypatch, load_certificate(CPU))
    assert r.exit_code == 0, r.output
    text = r.stdout
    tail = text[text.index("certificate written to"):]
    starts = [ln.split(":")[0] for ln in tail.splitlines() if " verdict" in ln.split(":")[0]]
    assert starts == ["time verdict", "memory verdict", "gates verdict"]
    assert text.rstrip().splitlines()[-1] == "gates verdict: NOT MEASURED: --no-gates"
    assert "Cause: host load average 7.7" in " ".join(tail.split())
    assert "rule" not in r.stderr  # the NOISY rule and every reason only with -v
    v = _certify(tmp_path, monkeypatch, load_certificate(CPU), "-v")
    assert "the time verdict's reasons:" in v.stderr and "after one re-measurement" in v.stderr


def test_strict_exits_1_on_a_failed_gate_and_json_carries_the_verdicts(tmp_path, monkeypatch):
    h200 = _halted(load_certificate(H200))
    r = _certify(tmp_path, monkeypatch, h200, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [(v["stage"], v["label"], v["passed"]) for v in doc["verdicts"]] == [
        ("time", "NOT MEASURED", True), ("memory", "ROUGH", False), ("gates", "HALT", False)]
    assert "softmax bf16 misses its held-out shapes by up to 20.80% M" in \
        doc["verdicts"][1]["cause"]
    r = _certify(tmp_path, monkeypatch, h200, "--strict")
    assert r.exit_code == 1 and (tmp_path / "c.json").exists()
    last = r.stdout[r.stdout.rindex("verdict: "):]
    assert " ".join(last.split()) == "verdict: HALT: a gate failed: the figures of a run it " \
        "guards are meaningless until it passes"


def test_a_partial_certificate_still_exits_3_with_no_verdict_lines(tmp_path, monkeypatch):
    cpu = load_certificate(CPU)
    partial = cpu.model_copy(update={"status": "partial", "failures": ["probes: boom"]})
    r = _certify(tmp_path, monkeypatch, partial)
    assert r.exit_code == 3 and "probes: boom" in r.stderr
    assert "memory verdict:" not in r.stdout and "gates verdict:" not in r.stdout


def test_the_progress_bar_never_counts_past_its_total():
    """The sweep planned 2 points x 3 children; a fresh child measuring a dead one's point
    adds one, and the time model's round counts anew, without a total (it read 44/33)."""
    from rich.console import Console

    from afford.report.progress import RichProgress

    seen = []
    with RichProgress(console=Console(file=io.StringIO(), force_terminal=True)) as bar:
        bar.planned(6)
        for _ in range(7):
            bar.point()
            t = bar.bar.tasks[0]
            seen.append((t.completed, t.total))
        bar.stage("time")
        bar.point()
        t = bar.bar.tasks[0]
        seen.append((t.completed, t.total))
    assert all(total is None or done <= total for done, total in seen)
    assert seen[5] == (6, 6) and seen[6] == (7, 7) and seen[7] == (1, None)


# ---- the headline: the law plans read, never an absurd one (issue 40, item 6)


def test_the_headline_is_the_step_time_model_plans_read():
    from afford.figures.summary import summarize
    from afford.figures.time_figures import summarize_times
    from afford.report.terminal import headline_law

    cpu = load_certificate(CPU)
    t = {(s.name, s.mode): s for s in summarize_times(cpu)}
    row = summarize(cpu)[0]
    law, error = headline_law(row, t[(row.name, row.mode)])
    assert law.startswith("step-time model: t = ") and law.endswith(" F")
    assert error.startswith("held-out median ") and ", worst " in error


def test_a_throughput_law_worse_than_the_mean_is_not_headlined():
    from dataclasses import replace

    from afford.core.provenance import module
    from afford.figures.summary import summarize
    from afford.report.terminal import headline_law

    row = summarize(load_certificate(H200))[0]  # no step-time model: the throughput law
    law, error = headline_law(row, None)
    assert law == row.law and error.startswith("R^2 0.9428 C, LOO max ")
    absurd = replace(row, r2=module(-0.4458, "", "fit_throughput (power)"))
    law, error = headline_law(absurd, None)
    assert law.startswith("not headlined: its R^2 -0.4458 C is below 0") and error == "-"


def test_warnings_about_a_law_plans_do_not_read_wait_for_verbose(tmp_path, monkeypatch):
    """The CPU certificate's tinylm has a step-time model; its throughput law's R^2 0.0633
    warning is about a figure no plan reads: counted, printed with -v."""
    cert = load_certificate(CPU)
    r = _certify(tmp_path, monkeypatch, cert)
    assert "R^2 0.0633" not in r.stderr
    assert "(1 warning(s) about the sweep's throughput law, which plans do not read" in r.stderr
    v = _certify(tmp_path, monkeypatch, cert, "-v")
    assert "R^2 0.0633 < 0.99" in v.stderr and "warning(s) about the sweep's" not in v.stderr


def test_a_missed_held_out_shape_is_a_verdict_strict_fails_on(tmp_path):
    """MISSED: the model's own error, reproduced on re-measurement (not noise): named, and
    --strict exits 1 on it as on NOISY."""
    cpu = load_certificate(CPU)
    missed = cpu.model_copy(update={"time_verdict": cpu.time_verdict.model_copy(update={
        "label": "MISSED", "reasons": ["tinylm (fp32): 1 x 1024 (held_out_seq): error -40%"]}),
        "workloads": [w.model_copy(update={"time": None}) for w in cpu.workloads]})
    time = verdicts(missed)[0]
    assert (time.label, time.passed) == ("MISSED", False)
    assert "1 x 1024 (held_out_seq): error -40%" in time.figures[0]
    done = WrittenCertificate(missed, tmp_path / "c.json", False)
    assert done.exit_code() == 0 and done.exit_code(strict=True) == 1
