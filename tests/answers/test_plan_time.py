"""Plans at any shape from the certificate's step-time model (issue 19 item 2, issue 15
item 3) and NOISY certificates in plan and preflight (issue 19 item 5)."""

from __future__ import annotations

import json

import pytest

from afford.core.errors import InputError
from afford.core.provenance import Tag
from afford.figures import time_figures as ft
from afford.planning import planner
from afford.planning.prediction import predict
from afford.schema.run import RunFile
from afford.schema.time_accuracy import accuracy_text, held_out_accuracy
from afford.schema.time_law import measured_ranges, predict_at
from tests.plan_helpers import make_cert, make_platform, make_run
from tests.time_certs import H200_DEFAULT, H200_HF, h200, make_time_cert, seconds, time_model

TINY = {"d": 512, "L": 8, "H": 8}


# --- reading a stored model (schema/step_time.py) ------------------------------------------


def test_predict_at_evaluates_the_stored_form():
    m = time_model()
    p = predict_at(m, batch=16, seq=512)
    assert p.seconds == pytest.approx(2.0) and p.tokens == 8192
    assert p.extrapolated and p.beyond == ["tokens 8192 > 4096"]
    inside = predict_at(m, batch=8, seq=384)
    assert inside.seconds == pytest.approx(0.75) and not inside.extrapolated
    assert predict_at(m, batch=1, seq=8).seconds == pytest.approx(0.01)  # the floor


def test_measured_range_includes_the_held_out_shapes():
    m = time_model()
    r = measured_ranges(m)
    assert r["batch"] == (2.0, 16.0) and r["seq"] == (256.0, 1024.0)
    assert r["tokens"] == (2048.0, 4096.0)
    # 2 x 1024 was measured (held out): not beyond, though outside the fitted range
    assert not predict_at(m, batch=2, seq=1024).extrapolated
    # the one judge: as the model stood when it was fitted (no held-out shape yet), beyond
    fitted_only = m.model_copy(update={"held_out": []})
    assert predict_at(fitted_only, batch=2, seq=1024).beyond == ["batch 2 < 4", "seq 1024 > 512"]
    assert predict_at(m, batch=1, seq=1024).beyond == ["batch 1 < 2", "tokens 1024 < 2048"]


def test_held_out_accuracy_and_its_words():
    n, med, worst = held_out_accuracy(time_model())
    assert n == 1 and med == pytest.approx(1 - 0.5 / 0.52)
    assert worst == pytest.approx(1 - 0.5 / 0.52)
    assert accuracy_text(time_model()) == ("max form, held-out error median 3.8%, worst 3.8% "
                                           "over 1 shapes never fitted")


def test_predict_at_needs_the_model_axes():
    with pytest.raises(ValueError, match="need batch and seq"):
        predict_at(time_model(), seq=512)


@pytest.mark.parametrize("which", ["default", "hf"])
def test_real_h200_models_reproduce_their_stored_predictions(which):
    """Evaluating a stored model at each measured shape gives the prediction the fitter
    stored there: the reading side computes what the fitting side did."""
    cert = h200(which)
    checked = 0
    for r in cert.workloads:
        m = r.time.model
        for p in [*m.points, *m.held_out]:
            got = predict_at(m, batch=p.batch, seq=p.seq)
            # the fitter evaluated the FLOPs counted at the point, the reader the feature
            # laws fitted to them (exact within their stored max_rel_error: 2.8e-7 at most here)
            tol = max(1e-9, 10 * max(law.max_rel_error for law in m.scaling.laws.values()))
            assert got.seconds == pytest.approx(p.predicted_seconds, rel=tol), (r.name, p)
            assert not got.extrapolated  # every measured shape is in the measured range
            checked += 1
    assert checked >= 10 * len(cert.workloads) // 2


# --- a step at any shape (figures/time.py) ------------------------------------------------


def test_step_at_measured_design_model_and_why_not():
    cert = make_time_cert()
    at = ft.step_at(cert, "tinylm", {"batch": 8, "seq": 512, **TINY})
    assert at.step.tag is Tag.MEASURED and at.step.value == 1.0
    design = ft.step_at(cert, "tinylm", {"batch": 16, "seq": 256, **TINY})
    assert design.step.tag is Tag.MEASURED and "across point" in design.step.source
    fit = ft.step_at(cert, "tinylm", {"batch": 16, "seq": 512, **TINY})
    assert fit.step.tag is Tag.FITTED and fit.step.value == pytest.approx(2.0)
    assert fit.step.extrapolated
    assert "max form, held-out error median 3.8%" in fit.step.source
    assert "beyond the measured range: tokens 8192 > 4096" in fit.step.source
    other = ft.step_at(cert, "tinylm", {"batch": 8, "seq": 512, "d": 768, "L": 8, "H": 8})
    assert other.step is None and "differs in d 768 vs 512" in other.why


def test_an_unmeasured_sweep_value_reads_the_model_before_the_law():
    cert = make_time_cert()
    from afford import figures

    s = figures.step_seconds(cert, "tinylm", 384, "fp32")
    assert s.tag is Tag.FITTED and s.value == pytest.approx(seconds(8, 384))
    assert "step-time model" in s.source
    old = figures.step_seconds(make_cert(), "tinylm", 384, "fp32")
    assert "step-time model" not in old.source  # the throughput law, as before


def test_hf_spec_shape_option():
    assert ft.split_shape_option("hf:gpt2+b8s1024+fused") == ("hf:gpt2+fused", 8, 1024)
    assert ft.split_shape_option("hf:llama@d768L12+s512") == ("hf:llama@d768L12", None, 512)
    assert ft.split_shape_option("tinylm") == ("tinylm", None, None)
    assert ft.split_shape_option("hf:gpt2+lora=r16") == ("hf:gpt2+lora=r16", None, None)


def test_find_workload_names_what_is_there():
    cert = make_time_cert()
    with pytest.raises(InputError, match=r"no workload 'hf:gpt2'.*tinylm \(fp32\).*afford "
                       r"certify -w hf:gpt2"):
        ft.find_workload(cert, "hf:gpt2", "fp32")
    hf = cert.model_copy(update={"workloads": [cert.workloads[0].model_copy(
        update={"name": "hf:gpt2+b8s512"})]})
    assert ft.find_workload(hf, "hf:gpt2+b16s256", "fp32").name == "hf:gpt2+b8s512"


# --- plans at the run's shape ---------------------------------------------------------------


def test_plan_at_another_batch_uses_the_time_model():
    p = planner.plan(make_time_cert(), make_platform(), make_run(batch=16))
    row = p.rows[0]
    assert row.is_run and row.step_seconds.tag is Tag.FITTED
    assert row.step_seconds.value == pytest.approx(2.0) and row.step_seconds.extrapolated
    assert row.steps_per_chunk.value == 19800  # floor(39600 s / 2.0 s)
    assert row.steps_per_chunk.extrapolated
    assert p.run.shape == {"batch": 16, "seq": 512, **TINY} and not p.run.in_family
    assert row.tokens_per_step.value == 16 * 512
    # only the batch differs from the measured seq-512 point: its parameter count holds
    assert row.params.value == 25_000_000 and "the batch holds none" in row.params.source
    assert "batch=16" in row.note
    assert p.target is not None and p.target.target_steps.value == -(-10**9 // 8192)
    assert p.cadence is not None and p.failures is not None
    # step 0: warm x the median step-0/warm ratio (10 at both sweep points)
    first = next(c for c in p.chunk.startup.components if c.name == "first_step")
    assert first.seconds.value == pytest.approx(20.0)
    assert any("beyond the measured range" in n for n in p.notes)


def test_plan_at_a_measured_design_shape_reads_its_measurements():
    p = planner.plan(make_time_cert(), make_platform(), make_run(value=256, batch=16))
    row = p.rows[0]
    assert row.step_seconds.tag is Tag.MEASURED and row.step_seconds.value == 1.0
    assert row.allocated_bytes.tag is Tag.MEASURED and row.fits is not None
    assert row.params.value == 25_000_000


def test_shape_given_in_full_and_in_the_run_file_batch_agree():
    a = planner.plan(make_time_cert(), make_platform(), make_run(batch=16))
    b = planner.plan(make_time_cert(), make_platform(),
                     make_run(value=None, shape={"batch": 16, "seq": 512}))
    assert a.rows[0].step_seconds == b.rows[0].step_seconds
    with pytest.raises(InputError, match="batch 4 contradicts batch=16"):
        planner.plan(make_time_cert(), make_platform(),
                     make_run(value=None, shape={"batch": 16, "seq": 512}, batch=4))
    with pytest.raises(InputError, match="has no dimension 'width'"):
        planner.plan(make_time_cert(), make_platform(),
                     make_run(value=None, shape={"seq": 512, "width": 3}))


def test_hf_run_takes_its_shape_from_the_spec():
    cert = make_time_cert()
    hf = cert.model_copy(update={"workloads": [cert.workloads[0].model_copy(
        update={"name": "hf:gpt2"})]})
    run = RunFile.model_validate({"name": "r", "workload": "hf:gpt2+b16s512", "mode": "fp32",
                                  "target_tokens": "1B", "checkpoints_kept": 2})
    p = planner.plan(hf, make_platform(), run)
    assert p.run.workload == "hf:gpt2" and p.run.shape["batch"] == 16
    assert p.rows[0].step_seconds.value == pytest.approx(2.0)
    # the run file's own value and batch win over the spec's shape option
    mine = run.model_copy(update={"value": 256, "batch": 8})
    q = planner.plan(hf, make_platform(), mine)
    assert q.run.shape["seq"] == 256 and q.rows[0].step_seconds.tag is Tag.MEASURED


def test_without_a_time_model_another_batch_is_refused_with_the_reasons():
    with pytest.raises(InputError, match="no step-time model .it predates it.*no memory law"):
        planner.plan(make_cert(), make_platform(), make_run(batch=16))
    # the sweep value alone still plans off the throughput law, as before
    p = planner.plan(make_cert(), make_platform(), make_run(value=384))
    assert p.rows[0].step_seconds.tag is Tag.FITTED and p.run.in_family


def test_no_step_time_at_the_shape_but_a_memory_figure_plans_and_preflight_says_why():
    with pytest.raises(InputError, match="tinylm fp32: fewer than 3 resident shapes"):
        planner.plan(make_time_cert(model=False), make_platform(), make_run(batch=16))
    hcert = h200()
    # a memory law but no model for the shape's d: plan made, preflight NO-GO with the why
    run = RunFile.model_validate({"name": "r", "workload": "tinylm", "mode": "bf16",
                                  "shape": {"batch": 8, "seq": 1024, "d": 768},
                                  "target_tokens": "1B", "checkpoints_kept": 2})
    plat = make_platform(device={"name": "H200", "memory": {"value": "141GiB", "cite": "x"}})
    v = planner.preflight(hcert, plat, run, accept_noisy=True)
    assert v.plan.rows[0].step_seconds is None
    assert v.plan.rows[0].allocated_bytes.tag is Tag.FITTED
    # the parameters come from the memory law's count, scaled to d = 768
    assert v.plan.rows[0].params.source.startswith("params scaled as L*d^2 from the fitted")
    assert any("no step time at tinylm at batch=8, seq=1024, d=768" in r and
               "differs in d 768 vs 512" in r for r in v.reasons)


# --- the real H200 certificates --------------------------------------------------------------


def h200_platform():
    return make_platform(name="h200-box", device={"name": "H200", "memory": {
        "value": "141GiB", "cite": "datasheet"}})


def test_real_certificate_plan_at_any_shape():
    run = RunFile.model_validate({"name": "big", "workload": "tinylm", "mode": "bf16",
                                  "value": 4096, "batch": 32, "target_tokens": "2B",
                                  "checkpoints_kept": 2})
    p = planner.plan(h200(), h200_platform(), run)
    row = p.rows[0]
    m = h200().workloads[2].time.model
    assert row.step_seconds.tag is Tag.FITTED
    assert row.step_seconds.value == pytest.approx(predict_at(m, batch=32, seq=4096).seconds)
    assert "max form" in row.step_seconds.source and "worst 0.7%" in row.step_seconds.source
    assert row.step_seconds.extrapolated  # 131072 tokens > the 65536 measured
    assert row.allocated_bytes.tag is Tag.FITTED and row.fits is True
    # the memory law's reserved stands, not allocated x the worst ratio of a tiny shape
    assert row.projected_reserved_bytes.tag is Tag.FITTED
    assert p.time_verdict == "NOISY" and "scan (bf16): 2 x 4096" in p.noisy[0]
    assert any("tinylm (bf16): seq=1024: children disagree" in w
               for w in p.certificate_warnings)


def test_real_certificate_preflight_noisy_is_go_unless_the_spread_flips_it():
    """The H200 certificate is NOISY: a run whose decision holds at the slow end of its
    point's children is GO, the spread stated; a max_weeks between the median's weeks and
    the slow end's is NO-GO unless accepted (issue 40, item 2)."""
    from afford import figures

    run = RunFile.model_validate({"name": "r", "workload": "tinylm", "mode": "bf16",
                                  "value": 2048, "batch": 16, "target_tokens": "100M",
                                  "checkpoints_kept": 2, "max_weeks": 1})
    go = planner.preflight(h200(), h200_platform(), run)
    assert go.go, go.reasons
    assert any("NOISY" in w and "the decision holds" in w for w in go.warnings)
    assert any(w.startswith("certificate: tinylm (bf16)") for w in go.warnings)
    # the measured design point 16 x 2048: MEASURED
    assert go.plan.rows[0].step_seconds.tag is Tag.MEASURED
    weeks = go.plan.target.weeks.value
    factor = figures.children_slow_end(h200(), "tinylm", None, "bf16").value
    assert factor > 1.0
    tight = run.model_copy(update={"max_weeks": weeks * (1 + (factor - 1) / 2)})
    no = planner.preflight(h200(), h200_platform(), tight)
    assert not no.go and "flips inside their measured spread" in no.reasons[0]
    assert "--accept-noisy" in no.reasons[0]
    yes = planner.preflight(h200(), h200_platform(), tight, accept_noisy=True)
    assert yes.go, yes.reasons
    assert any("NOISY" in w and "accepted" in w for w in yes.warnings)


def test_real_hf_certificate_plans_gpt2_at_another_shape_without_memory_law():
    run = RunFile.model_validate({"name": "g", "workload": "hf_models:gpt2", "mode": "bf16",
                                  "value": 2048, "batch": 8, "target_tokens": "100M",
                                  "checkpoints_kept": 2})
    v = planner.preflight(h200("hf"), h200_platform(), run)
    row = v.plan.rows[0]
    assert row.step_seconds.tag is Tag.FITTED and "smooth_max form" in row.step_seconds.source
    assert v.plan.time_verdict == "OK" and not v.plan.noisy
    assert row.fits is None and not v.go  # no memory law in this certificate
    assert any("no memory figure" in r for r in v.reasons)
    assert any("step-time model: work coefficients not identified" in w
               for w in v.plan.certificate_warnings)


# --- NOISY -----------------------------------------------------------------------------------


def test_noisy_certificate_plan_and_preflight():
    """The plan says NOISY; preflight plans the slow end of the children's spread too: the
    synthetic point's three children agree exactly, so the decision cannot flip (GO), and
    the NOISY verdict is stated among the warnings (tests/answers/test_preflight_noise.py checks
    the spread that flips)."""
    cert = make_time_cert(workload_verdict="NOISY", cert_verdict="NOISY",
                          reasons=["8 x 512: children disagree by 9% > 5%"],
                          warnings=["seq=512: children disagree by 9% (> 5%)"])
    p = planner.plan(cert, make_platform(), make_run())
    assert p.time_verdict == "NOISY"
    assert p.noisy == ("tinylm (fp32): 8 x 512: children disagree by 9% > 5%",)
    assert p.certificate_warnings == ("tinylm (fp32): seq=512: children disagree by 9% (> 5%)",)
    v = planner.preflight(cert, make_platform(), make_run())
    assert v.go and not any("NOISY" in r for r in v.reasons)
    assert any(w.startswith("the certificate's step times are NOISY (tinylm (fp32): 8 x 512")
               and "the decision holds" in w for w in v.warnings)
    assert "certificate: tinylm (fp32): seq=512: children disagree by 9% (> 5%)" in v.warnings


def test_a_workload_noisy_verdict_alone_makes_the_plan_noisy():
    cert = make_time_cert(workload_verdict="NOISY", cert_verdict=None,
                          reasons=["2 x 1024 (held_out_seq): error -9% beyond 5%"])
    p = planner.plan(cert, make_platform())
    assert p.time_verdict == "NOISY" and "held_out_seq" in p.noisy[0]
    quiet = planner.plan(make_time_cert(), make_platform())
    assert quiet.time_verdict == "OK" and quiet.noisy == ()
    assert planner.plan(make_cert(), make_platform()).time_verdict is None


# --- afford predict ---------------------------------------------------------------------------


def test_predict_every_workload_at_a_shape():
    r = predict(h200(), batch=16, seq=4096, platform=h200_platform())
    by = {x.workload: x for x in r.rows}
    assert set(by) == {"tinylm", "softmax", "scan"}
    t = by["tinylm"]
    assert t.row.step_seconds.tag is Tag.FITTED
    assert t.tokens_per_second.value == pytest.approx(16 * 4096 / t.row.step_seconds.value)
    assert t.row.steps_per_chunk.value == int(39600 // t.row.step_seconds.value)
    assert by["softmax"].row.step_seconds.tag is Tag.MEASURED  # n=16, s=4096 is a sweep point
    assert r.time_verdict == "NOISY"


def test_predict_in_a_mode_reads_that_modes_workloads_only():
    cert = make_time_cert()
    assert [x.workload for x in predict(cert, batch=16, seq=512, mode="fp32").rows] == \
        ["tinylm"]
    with pytest.raises(InputError, match="no workload in mode bf16; its modes: fp32"):
        predict(cert, batch=16, seq=512, mode="bf16")


def test_predict_needs_a_positive_batch_and_seq():
    for batch, seq in ((0, 512), (16, 0), (-1, -1)):
        with pytest.raises(InputError, match="--batch and --seq must be positive"):
            predict(make_time_cert(), batch=batch, seq=seq)
    assert predict(make_time_cert(), batch=1, seq=1).rows  # the smallest shape is one


def test_predict_says_why_a_workload_without_batch_and_seq_has_no_row():
    c = make_cert()
    wl = c.workloads[0]
    pts = [pt.model_copy(update={"shape": {"n": pt.value}}) for pt in wl.points]
    nwl = wl.model_copy(update={"name": "softmax", "sweep_param": "n", "points": pts})
    r = predict(c.model_copy(update={"workloads": [nwl]}), batch=2, seq=8)
    row = r.rows[0]
    assert row.row is None and row.shape == {}
    assert row.step_why == "softmax has no batch and sequence dimensions (its sweep parameter " \
        "is n)"


def test_predict_budgets_memory_on_the_measured_card():
    # 16 GiB measured x 0.9 (the platform's default fraction), or x 0.5 when asked
    r = predict(make_time_cert(), batch=16, seq=512, platform=make_platform())
    assert r.memory.budget_bytes.value == int(0.9 * 16 * 2**30)
    half = predict(make_time_cert(), batch=16, seq=512, memory_fraction=0.5)
    assert half.memory.budget_bytes.value == 8 * 2**30 and half.memory.reserved_ratio is None


def test_predict_without_device_memory_gives_the_peaks_and_no_verdict():
    """No device memory in the certificate: the measured peaks are the figures (reserved as
    measured, not allocated x a ratio), and whether they fit is not judged."""
    c = make_time_cert()
    blind = c.model_copy(update={"environment": c.environment.model_copy(
        update={"device_memory_bytes": None})})
    r = predict(blind, batch=8, seq=256)
    row = r.rows[0].row
    assert r.memory is None and row.fits is None and row.budget_share is None
    assert row.allocated_bytes.value == 8 * 2**30
    assert row.projected_reserved_bytes.value == 9 * 2**30
    assert row.projected_reserved_bytes.tag is Tag.MEASURED


def test_predict_at_a_point_with_only_an_allocated_peak_has_a_memory_figure():
    """A CPU certificate records no reserved peak: the allocated one (RSS) is the figure, and
    no reason for a missing one is given; an unmeasured shape without a law gets the reason."""
    c = make_cert()
    pts = [pt.model_copy(update={"peak_reserved_bytes": None}) for pt in c.workloads[0].points]
    cpu = c.model_copy(update={
        "environment": c.environment.model_copy(update={"device_type": "cpu"}),
        "workloads": [c.workloads[0].model_copy(update={"points": pts})]})
    at = predict(cpu, batch=8, seq=512).rows[0]
    assert at.memory_why == "" and at.row.allocated_bytes.value == 10 * 2**30
    off = predict(cpu, batch=8, seq=300).rows[0]
    assert off.memory_why == "no memory law for tinylm (fp32) in the certificate and the " \
        "shape not measured"


def test_predict_names_a_missing_workload():
    with pytest.raises(InputError, match="no workload 'gpt2'"):
        predict(h200(), batch=1, seq=128, workloads=["gpt2"])


# --- the command line ----------------------------------------------------------------------

H200_PLATFORM = """
name = "h200-box"
device = { name = "H200", memory = { value = "141GiB", cite = "datasheet" } }
session_cap = { value = "12h", cite = "docs" }
weekly_quota = { value = "none", assumed = "own box" }
disk = { value = "2TB", cite = "df" }
"""
BIG_RUN = """
workload = "tinylm"
mode = "bf16"
value = 4096
batch = 32
target_tokens = "200M"
checkpoints_kept = 2
max_weeks = 2
"""


@pytest.fixture(autouse=False)
def wide(monkeypatch):
    """The commands' console at 240 columns (COLUMNS alone does not do: a console whose
    width was once set, as tests/answers/test_ledger.py's monkeypatch leaves it, keeps it)."""
    from afford.cli import common

    monkeypatch.setattr(common.out, "width", 240)


def _cli(*args):
    from typer.testing import CliRunner

    from afford.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "240"})


def _files(tmp_path):
    (tmp_path / "p.toml").write_text(H200_PLATFORM)
    (tmp_path / "r.toml").write_text(BIG_RUN)
    return tmp_path / "p.toml", tmp_path / "r.toml"


def test_cli_plan_at_another_batch_says_noisy_under_its_answer(tmp_path, wide):
    plat, run = _files(tmp_path)
    r = _cli("plan", H200_DEFAULT, "-p", plat, "-r", run)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    said = flat.find("the certificate's step times are NOISY: scan (bf16)")
    assert 0 < flat.find("the run's figures") < said < flat.find("chunk and margin"), \
        r.output[:2000]
    assert "certificate warnings" not in flat  # with -v, in full
    r = _cli("plan", H200_DEFAULT, "-p", plat, "-r", run, "-v")
    flat = " ".join(r.output.split())
    first = flat.find("WARNING: the certificate's step times are NOISY: scan (bf16)")
    assert 0 < first < flat.find("certificate warnings") < flat.find("chunk and margin"), \
        r.output[:2000]
    assert "(run)" in flat and "F*" in flat  # the run row, its step fitted beyond the range
    doc = json.loads(_cli("plan", H200_DEFAULT, "-p", plat, "-r", run, "--json").output)
    assert doc["time_verdict"] == "NOISY" and doc["run"]["shape"]["batch"] == 32
    step = doc["rows"][0]["step_seconds"]
    assert step["tag"] == "FITTED" and step["extrapolated"] is True
    assert "max form, held-out error median 0.4%, worst 0.7%" in step["source"]


def test_cli_preflight_noisy_exit_1_where_the_spread_flips_then_go_with_accept_noisy(
        tmp_path, wide):
    from afford import figures

    plat, run = _files(tmp_path)
    held = _cli("preflight", H200_DEFAULT, "-p", plat, "-r", run, "--json")
    weeks = json.loads(held.stdout)["plan"]["target"]["weeks"]["value"]
    factor = figures.children_slow_end(h200(), "tinylm", None, "bf16").value
    tight = tmp_path / "tight.toml"  # between the step's weeks and its slow end's
    tight.write_text(run.read_text().replace("max_weeks = 2", "max_weeks = "
                                             f"{weeks * (1 + (factor - 1) / 2)}"))
    r = _cli("preflight", H200_DEFAULT, "-p", plat, "-r", tight)
    assert r.exit_code == 1, r.output
    assert "NO-GO" in r.output and "flips inside their measured spread" in " ".join(
        r.output.split())
    ok = _cli("preflight", H200_DEFAULT, "-p", plat, "-r", tight, "--accept-noisy")
    assert ok.exit_code == 0, ok.output
    assert ok.output.startswith("GO") and "accepted with --accept-noisy" in " ".join(
        ok.output.split())


def test_cli_plan_run_naming_a_workload_the_certificate_lacks_exits_2(tmp_path):
    plat, _ = _files(tmp_path)
    run = tmp_path / "x.toml"
    run.write_text(BIG_RUN.replace('"tinylm"', '"hf:gpt2"'))
    r = _cli("plan", H200_DEFAULT, "-p", plat, "-r", run)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "no workload 'hf:gpt2'" in " ".join(r.output.split())


def test_cli_predict(tmp_path, wide):
    plat, _ = _files(tmp_path)
    r = _cli("predict", H200_HF, "--batch", "8", "--seq", "2Ki", "-p", plat)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "predicted at batch 8, seq 2048 on platform h200-box" in flat
    assert "hf_models:llama" in flat
    doc = json.loads(_cli("predict", H200_HF, "--batch", "8", "--seq", "2048", "-w",
                          "hf_models:gpt2", "--json").output)
    assert doc["schema"] == "afford.predict/1" and len(doc["rows"]) == 1
    step = doc["rows"][0]["row"]["step_seconds"]
    assert step["tag"] == "FITTED" and step["extrapolated"] is True
    assert "smooth_max form" in step["source"]
    bad = _cli("predict", H200_HF, "--batch", "0", "--seq", "2048")
    assert bad.exit_code == 2 and "positive whole number" in bad.output


# --- the report's step-time section ----------------------------------------------------------


def test_report_time_section_from_a_real_certificate():
    from afford.report.cells import cell_text
    from afford.report.time_model import NO_MODEL, time_section

    s = time_section(h200())
    load, models, *held = s.tables  # NOISY: the host load first, beside the verdict
    assert [row[0] for row in load.rows] == ["before", "after"]
    assert [row[0] for row in models.rows] == ["softmax (bf16)", "scan (bf16)", "tinylm (bf16)"]
    assert [row[1] for row in models.rows] == ["smooth_max", "max", "max"]
    assert [cell_text(row[5], "worst") for row in models.rows] == ["2.78% C", "5.25% C",
                                                                    "0.75% C"]
    assert len(held) == 3 and all(len(t.rows) == 3 for t in held)
    scan = held[1]
    assert [r[0] for r in scan.rows] == ["8 x 1536", "2 x 4096", "64 x 256"]
    assert cell_text(scan.rows[1][4], "error") == "-5.25% C"
    assert scan.rows[2][7] == "no (floor)"
    assert s.notes[0].startswith("Time verdict: NOISY: scan (bf16): 2 x 4096")
    assert time_section(make_cert()).notes == (NO_MODEL,)


def test_a_noisy_plan_in_the_report_opens_with_its_warning():
    from afford.report.build import plan_section

    cert = make_time_cert(workload_verdict="NOISY", cert_verdict="NOISY",
                          reasons=["8 x 512: children disagree by 9% > 5%"],
                          warnings=["seq=512: children disagree by 9% (> 5%)"])
    doc = planner.plan(cert, make_platform(), make_run()).model_dump(mode="json", by_alias=True)
    notes = plan_section("plan.json", doc, None).notes
    assert notes[1].startswith("WARNING: the certificate's step times are NOISY: tinylm (fp32)")
    assert notes[2] == "Certificate warning: tinylm (fp32): seq=512: children disagree by 9% (> 5%)"


def test_a_partial_certificate_says_so_in_plan_and_preflight_warnings():
    from afford.figures.time_figures import time_warnings
    from tests.synthetic_cert import certificate

    c = certificate(None).model_copy(update={"status": "partial",
                                             "failures": ["probes: the stage raised"]})
    w = time_warnings(c)
    assert w[0].startswith("the certificate is PARTIAL") and "probes: the stage raised" in w[0]
    assert not any("PARTIAL" in x for x in time_warnings(certificate(None)))


def test_the_sweep_laws_poor_fit_is_not_said_of_the_predictions_where_a_model_answers():
    """A GPU sweep on the launch floor fits its throughput law poorly (R^2 0.15 on an H200);
    plans and predictions read the step-time model, so the note says whose fit it is."""
    from afford.figures.time_figures import time_warnings

    note = ("R^2 0.1480 < 0.99: the power law describes these points poorly; predictions "
            "from it are rough")
    with_model = make_time_cert(warnings=[note])
    law = with_model.workloads[0].law.model_copy(update={"warnings": [note]})
    with_model = with_model.model_copy(update={"workloads": [
        with_model.workloads[0].model_copy(update={"law": law})]})
    assert time_warnings(with_model)[0] == (
        f"tinylm (fp32): {note} (the sweep's throughput law: plans and predictions read the "
        "step-time model instead)")
    bare = with_model.model_copy(update={"workloads": [with_model.workloads[0].model_copy(
        update={"time": with_model.workloads[0].time.model_copy(update={"model": None})})]})
    assert time_warnings(bare)[0] == f"tinylm (fp32): {note}"


def test_a_sweep_points_spread_on_the_launch_floor_says_how_the_verdict_judged_it():
    """On an H200 every sweep point of a transformers model sat on the launch floor, its
    children up to 39 % apart, and the time verdict OK (floor points are judged by the
    floor's spread, 50 %): the precision notes say where the point lies and what the verdict
    made of it; a point in the work regime keeps its note as it is."""
    from afford.figures.time_figures import time_warnings
    from afford.schema.time_section import Regime

    cert = make_time_cert()
    r = cert.workloads[0]
    pts = [p.model_copy(update={"batch": 8, "seq": p.value, "child_spread": 0.3})
           for p in r.points]
    floor, work = pts[0], pts[1]
    regimes = [Regime(label="8 x 256", role="sweep", seconds=0.5, work=False),
               Regime(label="8 x 512", role="sweep", seconds=0.9, work=True)]
    notes = [f"tinylm (fp32): {w}" for p in (floor, work) for w in p.quality_notes("seq")]
    cert = cert.model_copy(update={"warnings": notes, "workloads": [r.model_copy(update={
        "points": pts, "time": r.time.model_copy(update={"regimes": regimes})})]})
    got = time_warnings(cert)
    assert got[0] == ("tinylm (fp32): seq=256: children disagree by 30.0% (> 5%) (a point "
                      "on the launch floor: the time verdict judges it by the floor's spread, "
                      "50%, and says OK)")
    assert got[1] == "tinylm (fp32): seq=512: children disagree by 30.0% (> 5%)"
