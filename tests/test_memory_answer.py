"""The one memory answer (issue 28, afford.figures.reserved) on fake certificates whose laws
and replays come from the synthetic training program (tests/memory_fakes.py): the replay is
the printed figure where the certificate trusts it, the law otherwise; a disagreement beyond
the two models' held-out errors budgets the larger; size, predict and plans read the same
figure; a mode the memory stage measured can be sized and predicted; the interpolation case
of issue 28 replays to the truth."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from afford import figures
from afford.cli import app
from afford.figures import memory_figures as fm
from afford.figures import reserved
from afford.fit.memory import replay_fit as mr
from afford.fit.memory.allocator import replay
from afford.plan import planner
from afford.plan.prediction import predict
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


def test_the_fake_replay_is_trusted_and_the_law_misses(law):
    rp = law.replay
    assert rp.trusted and rp.better == "replay" and rp.replay_worst_reserved_error == 0
    assert rp.law_worst_reserved_error > 0.2  # the law misses a held-out shape by 21 %


def test_the_replay_answers_where_it_is_trusted(law):
    a = reserved.reserved_at(law, {"batch": 16, "seq": 1024}, RUN)
    assert a.source == "replay" and a.reserved.value == replayed(law, 16, 1024)
    assert "allocator replay" in a.reserved.source and a.error.value == 0
    assert a.other is None and a.budgeted.value == a.reserved.value  # no safety margin
    assert "agrees within their held-out errors" in a.basis


@pytest.mark.parametrize("update", [{"trusted": False}, {"better": "law"}])
def test_the_law_answers_where_the_replay_is_not_trusted_or_worse(law, update):
    worse = law.model_copy(update={"replay": law.replay.model_copy(update=update)})
    a = reserved.reserved_at(worse, {"batch": 16, "seq": 1024}, RUN)
    assert a.source == "law" and a.reserved == a.prediction.reserved
    assert a.allocated == a.prediction.allocated
    assert a.error.value == pytest.approx(law.replay.law_worst_reserved_error)


def test_another_model_shape_is_the_laws(law):
    a = reserved.reserved_at(law, {"batch": 16, "seq": 1024, "d": 1024}, RUN)
    assert a.source == "law" and "certified model only" in a.why


@pytest.mark.parametrize("factor, larger", [(1.5, "law"), (0.5, "replay")])
def test_a_disagreement_beyond_the_errors_budgets_the_larger(law, factor, larger):
    """A law scaled to miss by 50 % either way is outside the two models' stated errors
    (replay 0 %, law 21 %) at batch 8 x seq 512: the other model stands beside the answer
    and the larger of the two is what residency is decided on."""
    off = mf.scaled(law, factor)
    a = reserved.reserved_at(off, {"batch": 8, "seq": 512}, RUN)
    assert a.source == "replay" and a.disagree and a.other.model == "law"
    figs = {"replay": float(a.reserved.value), "law": float(a.other.reserved.value)}
    assert a.budgeted.value == max(figs.values()) == figs[larger]
    assert "disagree beyond their errors" in a.basis and a.basis.endswith(
        {"law": "the memory law's", "replay": "the allocator replay's"}[larger])


def test_a_difference_within_the_errors_is_no_disagreement(law):
    a = reserved.reserved_at(mf.scaled(law, 1.1), {"batch": 8, "seq": 512}, RUN)
    assert not a.disagree and a.budgeted.value == a.reserved.value


def test_fits_and_the_budget_share_rest_on_the_larger(law):
    """The law 50 % high: a budget between the replay's figure and the law's does not fit,
    its share is the law's; the largest batch is searched on the same figure, so it fits
    and one more does not."""
    off = mf.scaled(law, 1.5)
    cert = mf.with_memory(make_time_cert(), off)
    a = reserved.reserved_at(off, {"batch": 8, "seq": 512}, RUN)
    budget = (float(a.reserved.value) + float(a.other.reserved.value)) / 2
    frac = budget / cert.environment.device_memory_bytes
    r = fm.size(cert, "tinylm", 512, 8, "fp32", frac, RUN)
    assert r.fits is False and r.memory.budgeted.value == a.other.reserved.value
    assert r.budget_share.value == pytest.approx(a.other.reserved.value / r.budget.value)
    best = fm.size(cert, "tinylm", 512, None, "fp32", frac, RUN)
    n = int(best.max_batch.value)
    assert best.fits and best.prediction.dims["B"] == n and n >= 1
    over = reserved.reserved_at(off, {"batch": n + 1, "seq": 512}, RUN)
    assert over.budgeted.value > best.budget.value


def test_size_and_predict_give_one_memory_answer(law):
    """issue 29 item 5: ``afford size`` and ``afford predict`` at the same shape print the
    same allocated and reserved bytes (the answer's), whatever the law says."""
    cert = mf.with_memory(make_time_cert(), mf.scaled(law, 1.5))
    s = fm.size(cert, "tinylm", 1024, 16, "fp32", 0.9, RUN)
    row = predict(cert, batch=16, seq=1024, platform=make_platform()).rows[0]
    assert row.row.projected_reserved_bytes.value == s.memory.budgeted.value
    assert row.row.allocated_bytes.value == s.memory.allocated.value
    assert row.memory_basis == s.memory.basis
    assert (row.memory_other is None) == (s.memory.other is None)
    got = figures.predicted_memory(cert, "tinylm", {"batch": 16, "seq": 1024}, "fp32")
    assert [x.value for x in got] == [s.memory.allocated.value, s.memory.budgeted.value]


def test_a_plan_at_a_shape_nobody_ran_reads_the_answer(law):
    cert = mf.with_memory(make_time_cert(), law)
    run = make_run(value=None, shape={"batch": 16, "seq": 1024, "d": 512, "L": 8, "H": 8})
    rf = planner.run_figures(cert, run, planner.run_shape(cert, run))
    assert rf.reserved.value == replayed(law, 16, 1024)
    assert "allocator replay" in rf.reserved.source


def test_the_interpolation_case_replays_to_the_truth(staged):
    """issue 28's case on the synthetic program: the staging buffer stops growing between
    the traced shapes; at 6 x 256 and 3 x 512 (between them) the answer is the true
    history's reserved peak, not below it."""
    for B, s in ((6, 256), (3, 512)):
        truth, _ = replay(program(B, s, d=mf.D, stage=STAGE).events())
        a = reserved.reserved_at(staged, {"batch": B, "seq": s}, RUN)
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
    assert doc["memory"]["budgeted"]["value"] == row["row"]["projected_reserved_bytes"]["value"]
    assert doc["peak_reserved"] == doc["memory"]["peak_reserved"]
    assert doc["law"]["peak_reserved"]["tag"] == "FITTED"


# ---- what size shows ---------------------------------------------------------------------


def _text(report) -> str:
    from rich.console import Console

    from afford.report.memory_tables import replay_tables, size_tables

    console = Console(record=True, width=600)
    for t in size_tables(report) + replay_tables(report):
        console.print(t)
    return console.export_text()


def test_size_shows_the_other_model_and_what_it_budgets_on(law):
    cert = mf.with_memory(make_time_cert(), mf.scaled(law, 1.5))
    text = _text(fm.size(cert, "tinylm", 512, 8, "fp32", 0.9, RUN))
    assert "peak reserved (allocator replay: answers)" in text
    assert "peak reserved (memory law: disagrees beyond the errors)" in text
    assert "reserved budgeted (fits and share)" in text and "the memory law's" in text
    assert "where the memory goes at the peak (batch 8 x seq 512)" in text  # the replay's


def test_without_a_replay_size_breaks_the_peak_down_by_the_laws_terms(law):
    cert = mf.with_memory(make_time_cert(), law.model_copy(update={"replay": None}))
    r = fm.size(cert, "tinylm", 512, 8, "fp32", 0.9, RUN)
    parts = dict(r.law_breakdown)
    assert parts["states (parameters, gradients, optimizer state)"] == r.prediction.states
    assert sum(float(v.value) for v in parts.values()) == pytest.approx(
        float(r.memory.budgeted.value))
    text = _text(r)
    assert "by the memory law's terms" in text and "allocator slack" in text


def test_a_default_that_predicts_no_memory_is_judged_not_refused(law):
    """The H200's inherited fixed term (-21.3 MiB in fp32) on a model of under a MiB of
    states predicts a negative peak at batch 1: the verdict is WRONG and optimistic; before,
    ``afford size`` refused the certificate's own law as broken (exit 2)."""
    cert = mf.with_memory(make_time_cert(), law)
    r = fm.size(cert, "tinylm", 512, 8, "fp32", 0.9, RUN)
    v = next(v for v in r.verdicts if v.constant == "fixed_bytes" and v.default_value < 0)
    assert v.status == "WRONG" and v.direction == "optimistic"
