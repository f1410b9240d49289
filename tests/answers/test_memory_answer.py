"""The one memory answer (issue 37, afford.figures.memory_answer) on fake certificates whose
laws and replays come from the synthetic training program (tests/memory_fakes.py): what was
measured at a shape answers there; else the replay where the certificate trusts it, the law
otherwise; a disagreement beyond the two models' held-out errors stands beside the answer
(and, past the measured range, widens what fits must allow for); size, predict and plans read
the same figure; a mode the memory stage measured can be sized and predicted; the
interpolation case of issue 28 replays to the truth."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from afford import figures
from afford.cli import app
from afford.core.provenance import module
from afford.figures import memory_at as answers
from afford.figures import memory_figures as fm
from afford.fit.memory import replay_fit as mr
from afford.fit.memory.allocator import replay
from afford.planning import planner
from afford.planning.prediction import predict
from afford.schema.cert import save_certificate
from tests import memory_fakes as mf
from tests.alloc_programs import MIB, program
from tests.plan_helpers import make_platform, make_run
from tests.time_certs import make_time_cert

RUN = "fake H200, certify"
STAGE = (32 * 1024, 48 * MIB)  # a staging buffer whose cap lies between the traced shapes


@pytest.fixture(scope="module")
def law():
    return mf.law()


@pytest.fixture(scope="module")
def staged():
    return mf.law(stage=STAGE)


def replayed(law, B, s) -> int:
    learned = mr.learn_shapes(list(law.shapes))
    return mr.predict(learned.model, learned.traced[0].trace.seed, B, s).peak_reserved_bytes


def budget(b: float):
    return module(b, "B", "a test budget")


def test_the_fake_replay_is_trusted_and_the_law_misses(law):
    rp = law.replay
    assert rp.trusted and rp.better == "replay" and rp.replay_worst_reserved_error == 0
    assert rp.law_worst_reserved_error > 0.2  # the law misses a held-out shape by 21 %
    assert rp.version >= 2 and rp.learned is not None  # stored: no command re-learns it


def test_the_replay_answers_where_it_is_trusted(law):
    a = answers.answer(law, {"batch": 16, "seq": 1024}, RUN)
    assert a.source == "replay" and a.reserved.value == replayed(law, 16, 1024)
    assert "allocator replay" in a.reserved.source and a.error.value == 0
    assert a.other is None and not a.extrapolated  # 16 x 1024 lies in the measured range


def test_a_measured_shape_answers_with_what_was_measured_there(law):
    base = next(s for s in law.shapes if s.role == "base")
    a = answers.answer(law, {"batch": 8, "seq": 512}, RUN)
    assert a.source == "measured" and a.reserved.value == base.peak("reserved")
    assert a.reserved.tag.value == "MEASURED" and "memory stage" in a.reserved.source


@pytest.mark.parametrize("update", [{"trusted": False}, {"better": "law"}])
def test_the_law_answers_where_the_replay_is_not_trusted_or_worse(law, update):
    worse = law.model_copy(update={"replay": law.replay.model_copy(update=update)})
    a = answers.answer(worse, {"batch": 16, "seq": 1024}, RUN)
    pred = mf_prediction(worse, 16, 1024)
    assert a.source == "law" and a.reserved == pred.reserved and a.allocated == pred.allocated
    assert a.error.value == pytest.approx(law.replay.law_worst_reserved_error)
    assert a.why.startswith("the memory law: ")


def mf_prediction(law, B, s):
    from afford.fit.memory import sizing

    return sizing.predict(law, {"batch": B, "seq": s}, RUN)


def test_another_model_shape_is_the_laws_and_extrapolated(law):
    a = answers.answer(law, {"batch": 16, "seq": 1024, "d": 1024}, RUN)
    assert a.source == "law" and "certified model only" in a.why
    assert a.extrapolated and "another model" in a.reasons[0]


def test_a_disagreement_beyond_the_errors_stands_beside_the_answer(law):
    """A law scaled to miss by 50 % is outside the two models' stated errors (replay 0 %,
    law 21 %): it stands beside the answer, which is still the replay's (trusted and
    better at the held-out shapes). Inside the measured range a budget both fit is a plain
    yes; one that only the answer fits is uncertain, with the command that settles it (the
    decision then rests on which model is right: OLMo2 at 16 x 384 reserved 6.6 % more than
    its trusted replay said, lab/device-runs/2026-12-06-h100-families-2)."""
    off = mf.scaled(law, 1.5)
    a = answers.answer(off, {"batch": 16, "seq": 512}, RUN, budget=budget(1e12))
    assert a.fits == "yes" and a.source == "replay" and a.other_source == "law"
    assert a.reserved.value == replayed(law, 16, 512) and a.other.value > a.reserved.value
    cap = (float(a.reserved.value) + float(a.other.value)) / 2  # between the two
    b = answers.answer(off, {"batch": 16, "seq": 512}, RUN, budget=budget(cap))
    assert not b.extrapolated and b.fits == "uncertain"
    assert b.share.value == pytest.approx(float(a.reserved.value) / cap)  # the same figure
    assert "the memory law says" in b.fits_why and "beyond their held-out errors" in b.fits_why
    assert b.settle is not None and "--batch 16 --seq 512 --measure" in b.settle
    below = answers.answer(off, {"batch": 16, "seq": 512}, RUN,
                           budget=budget(0.9 * float(a.reserved.value)))
    assert below.fits == "no"  # neither fits: a plain no


def test_past_the_range_a_disagreement_makes_fits_uncertain(law):
    """At 64 x 512 (2x the tokens measured) the same disagreement is part of the plausible
    error: a budget between the answer and the law's figure is not a plain yes."""
    off = mf.scaled(law, 1.5)
    a = answers.answer(off, {"batch": 64, "seq": 512}, RUN)
    assert a.extrapolated and "tokens 32768 is 2x the largest measured (16384)" in a.reasons
    cap = (float(a.reserved.value) + float(a.other.value)) / 2
    b = answers.answer(off, {"batch": 64, "seq": 512}, RUN, budget=budget(cap))
    assert b.fits == "uncertain" and b.settle is not None and "--measure" in b.settle
    assert answers.answer(off, {"batch": 64, "seq": 512}, RUN,
                          budget=budget(2 * float(a.other.value))).fits == "likely"


def test_the_largest_batch_fits_and_one_more_does_not(law):
    cert = mf.with_memory(mf.without_point_peaks(make_time_cert()), law)
    cap = float(answers.answer(law, {"batch": 20, "seq": 512}, RUN).reserved.value) * 1.01
    n = int(figures.max_batch(cert, "tinylm", {"seq": 512}, cap, "fp32").value)
    at = figures.memory_answer(cert, "tinylm", {"batch": n, "seq": 512}, "fp32",
                               budget=budget(cap))
    over = figures.memory_answer(cert, "tinylm", {"batch": n + 1, "seq": 512}, "fp32",
                                 budget=budget(cap))
    assert n >= 20 and at.fits in ("yes", "likely") and over.fits not in ("yes", "likely")


def test_a_plan_at_a_shape_nobody_ran_reads_the_answer(law):
    cert = mf.with_memory(make_time_cert(), law)
    run = make_run(value=None, shape={"batch": 16, "seq": 1024, "d": 512, "L": 8, "H": 8})
    rf = planner.run_figures(cert, run, planner.run_shape(cert, run))
    assert rf.memory.reserved.value == replayed(law, 16, 1024)
    assert "allocator replay" in rf.memory.reserved.source


def test_the_interpolation_case_replays_to_the_truth(staged):
    """issue 28's case on the synthetic program: the staging buffer stops growing between
    the traced shapes; at 6 x 256 and 3 x 512 (between them) the answer is the true
    history's reserved peak, not below it."""
    for B, s in ((6, 256), (3, 512)):
        truth, _ = replay(program(B, s, d=mf.D, stage=STAGE).events())
        a = answers.answer(staged, {"batch": B, "seq": s}, RUN)
        assert a.source == "replay" and a.reserved.value == truth.peak_reserved_bytes


# ---- every mode the memory stage measured (issue 28 item 3) ---------------------------


@pytest.fixture(scope="module")
def bf16_timed(law):
    """Timed in bf16 only; the memory stage measured fp32 and bf16."""
    cert = make_time_cert()
    timed = [r.model_copy(update={"mode": "bf16"}) for r in cert.workloads]
    return mf.with_memory(cert.model_copy(update={"workloads": timed}), law,
                          law.model_copy(update={"mode": "bf16"}))


def test_predict_in_a_mode_only_the_memory_stage_measured(bf16_timed, law):
    for kw in ({}, {"workloads": ["tinylm"]}):
        r = predict(bf16_timed, batch=16, seq=1024, mode="fp32", platform=make_platform(), **kw)
        (row,) = r.rows
        assert row.mode == "fp32" and row.row.step_seconds is None
        assert row.step_why.startswith("fp32 time was not measured: the certificate timed "
                                       "tinylm in bf16 only")
        assert row.row.projected_reserved_bytes.value == replayed(law, 16, 1024)
        assert row.row.fits is True and row.row.steps_per_chunk is None


def test_size_and_predict_cli_take_the_mode(bf16_timed, tmp_path, monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    path = tmp_path / "cert.json"
    save_certificate(bf16_timed, path)
    got = CliRunner().invoke(app, ["predict", str(path), "--batch", "16", "--seq", "1024",
                                   "--mode", "fp32", "--json"])
    assert got.exit_code == 0, got.output
    row = json.loads(got.stdout)["rows"][0]
    assert row["mode"] == "fp32" and "fp32 time was not measured" in row["step_why"]
    size = CliRunner().invoke(app, ["size", str(path), "--seq", "1024", "--batch", "16",
                                    "--mode", "fp32", "--json"])
    assert size.exit_code == 0, size.output
    doc = json.loads(size.stdout)
    assert doc["mode"] == "fp32" and doc["memory"]["source"] == "replay"
    assert doc["peak_reserved"]["value"] == row["row"]["projected_reserved_bytes"]["value"]
    assert doc["peak_reserved"] == doc["memory"]["reserved"] == row["memory"]["reserved"]
    assert doc["law"]["peak_reserved"]["tag"] == "FITTED"


# ---- what size shows ---------------------------------------------------------------------


def _text(report) -> str:
    from rich.console import Console

    from afford.report.memory_tables import replay_tables, size_tables

    console = Console(record=True, width=600)
    for t in size_tables(report) + replay_tables(report):
        console.print(t)
    return console.export_text()


def test_size_shows_the_other_model_and_where_the_certificate_stops(law):
    cert = mf.with_memory(make_time_cert(), mf.scaled(law, 1.5))
    text = _text(fm.size(cert, "tinylm", 512, 16, "fp32", 0.9, RUN))
    assert "peak reserved (allocator replay: answers)" in text
    assert "peak reserved (memory law: disagrees beyond the errors)" in text
    assert "measured range" in text and "batch 4-32, seq 256-2048" in text
    assert "where the memory goes at the peak (batch 16 x seq 512)" in text  # the replay's
    far = _text(fm.size(cert, "tinylm", 4096, 8, "fp32", 0.9, RUN))
    assert "seq 4096 is 2x the largest measured (2048)" in far
    assert "plausible error" in far and "settle it: afford size" in far


def test_without_a_replay_size_breaks_the_peak_down_by_the_answers_figures(law):
    cert = mf.with_memory(make_time_cert(), law.model_copy(update={"replay": None}))
    r = fm.size(cert, "tinylm", 512, 16, "fp32", 0.9, RUN)
    parts = dict(fm.law_breakdown(r.memory))
    assert parts["states (parameters, gradients, optimizer state)"] == r.memory.states
    assert sum(float(v.value) for v in parts.values()) == pytest.approx(
        float(r.memory.reserved.value))
    text = _text(r)
    assert "where the memory goes at the peak" in text and "allocator slack" in text


def test_a_default_that_predicts_no_memory_is_judged_not_refused(law):
    """The H200's inherited fixed term (-21.3 MiB in fp32) on a model of under a MiB of
    states predicts a negative peak at batch 1: the verdict is WRONG and optimistic; before,
    ``afford size`` refused the certificate's own law as broken (exit 2)."""
    cert = mf.with_memory(make_time_cert(), law)
    r = fm.size(cert, "tinylm", 512, 8, "fp32", 0.9, RUN)
    v = next(v for v in r.verdicts if v.constant == "fixed_bytes" and v.default_value < 0)
    assert v.status == "WRONG" and v.direction == "optimistic"


def test_preflight_says_no_go_where_the_budget_lies_between_the_two_models(law):
    """The run's shape inside the measured range, the budget between the replay's figure and
    the disagreeing law's: NO-GO, the memory not vouched for, with the command that measures
    it (and no empty list of extrapolation reasons); a budget above both: no memory reason."""
    from afford.planning.go_no_go import Facts, verdict

    off = mf.scaled(law, 1.5)
    cert = mf.with_memory(mf.without_point_peaks(make_time_cert()), off)
    run = make_run(value=None, shape={"batch": 16, "seq": 512, "d": 512, "L": 8, "H": 8})
    a = answers.answer(off, {"batch": 16, "seq": 512}, RUN)
    cap = (float(a.reserved.value) + float(a.other.value)) / 2
    device = 16 * 2**30  # make_platform's P100

    def reasons(budget_bytes: float) -> list[str]:
        plat = make_platform(budget_fraction={"value": budget_bytes / device,
                                              "cite": "a test"})
        plan = planner.plan(cert, plat, run)
        assert float(plan.memory.budget_bytes.value) == pytest.approx(budget_bytes)
        return [r for r in verdict(plan, Facts()).reasons if "memory" in r or "resident" in r]

    between = reasons(cap)
    assert len(between) == 1 and between[0].startswith("memory not vouched for: ")
    assert "the memory law says" in between[0] and "()" not in between[0]
    assert "--batch 16 --seq 512 --measure" in between[0]
    assert reasons(2 * float(a.other.value)) == []
