"""Issue 38: a band wherever the host bounds the step (measured or fitted), in the JSON and
every table, steps per chunk planned with its slow end; one prediction function; a verdict
that names the held-out shape it missed; old one-axis models upgraded on load.

The two-sided model of :func:`tests.time_certs.make_sides_cert`, worked by hand there:
2 x 256 is host-bound, 0.5 s in the band 0.4-0.7 s; the measured 8 x 256 point 0.5 s, its
band 0.42-0.7 s; 8 x 512 and 16 x 512 device-bound points (1.0 s, 2.0 s)."""

from __future__ import annotations

import json

import pydantic
import pytest
from rich.console import Console

from afford.core.provenance import Tag, fitted
from afford.figures import step_seconds
from afford.figures import time_figures as ft
from afford.planning import planner
from afford.planning.prediction import predict
from afford.report.markdown import table as markdown_table
from afford.report.plan_tables import plan_sections, render_plan
from afford.report.predict_tables import render_predict
from afford.report.terminal import fmt
from afford.schema.cert import load_certificate, save_certificate
from afford.schema.time_law import TimeVerdict, evaluate_form, predict_at
from tests.plan_helpers import make_platform, make_run
from tests.time_certs import H200_HF, make_sides_cert, make_time_cert, verdict

CHUNK = 39600  # the test platform's 12 h cap less its 1 h margin, in seconds


def text(renderable, width=220) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


# --- the band on a figure ------------------------------------------------------------------


def test_a_band_has_both_ends_around_a_numeric_figure():
    t = fitted(0.5, "s", "x").with_band(0.4, 0.7)
    assert t.band == (0.4, 0.7) and fmt(t) == "500.00 ms (400.00..700.00 ms) F"
    with pytest.raises(pydantic.ValidationError, match="does not hold"):
        fitted(0.8, "s", "x").with_band(0.4, 0.7)
    with pytest.raises(pydantic.ValidationError, match="both"):
        fitted(0.5, "s", "x").model_copy(update={"low": 0.4}).model_validate(
            {**fitted(0.5, "s", "x").model_dump(), "low": 0.4})
    with pytest.raises(pydantic.ValidationError, match="numeric"):
        fitted("yes", "", "x").with_band(0.4, 0.7)


def test_a_point_is_written_as_before_and_a_band_round_trips():
    point = fitted(0.5, "s", "x")
    assert "low" not in json.loads(point.model_dump_json())
    band = point.with_band(0.4, 0.7)
    doc = json.loads(band.model_dump_json())
    assert (doc["low"], doc["high"]) == (0.4, 0.7)
    assert type(band).model_validate(doc) == band


# --- predicted and measured, host- and device-bound --------------------------------------


def test_the_one_prediction_function_gives_the_band_where_the_host_can_bound_the_step():
    m = make_sides_cert().workloads[0].time.model
    host = predict_at(m, batch=2, seq=256)
    assert host.regime == "host" and host.seconds == pytest.approx(0.5)
    assert host.band == pytest.approx((0.4, 0.7))
    # the device side within its 10 % leave-one-out error reaches into the host band: 0.45
    mixed = predict_at(m, batch=8, seq=256)
    assert mixed.regime == "device" and mixed.band == pytest.approx((0.45, 0.7))
    work = predict_at(m, batch=16, seq=512)  # device 2.0 s, 1.8 s at its low end: a point
    assert work.band is None and work.seconds == pytest.approx(2.0)


def test_a_host_bound_prediction_carries_its_band_in_the_json_and_plans_with_its_slow_end():
    r = predict(make_sides_cert(), batch=2, seq=256, platform=make_platform())
    row = r.rows[0].row
    step = row.step_seconds
    assert step.tag is Tag.FITTED and step.value == pytest.approx(0.5)
    assert step.band == pytest.approx((0.4, 0.7))
    # a chunk plans with the slow end: floor(39600 / 0.7), the fast end's count beside it
    assert row.steps_per_chunk.value == CHUNK * 10 // 7 == row.steps_per_chunk.low
    assert row.steps_per_chunk.high == CHUNK / 0.4
    assert "slow end" in row.steps_per_chunk.source
    assert row.steps_per_hour.value == 5142 and row.steps_per_hour.high == 9000
    tps = r.rows[0].tokens_per_second
    assert tps.value == pytest.approx(1024) and tps.band == pytest.approx((512 / 0.7, 1280))
    doc = json.loads(r.model_dump_json(by_alias=True))
    got = doc["rows"][0]["row"]["step_seconds"]
    assert (got["value"], got["low"], got["high"]) == pytest.approx((0.5, 0.4, 0.7))
    assert doc["rows"][0]["row"]["steps_per_chunk"]["low"] == CHUNK * 10 // 7


def test_a_host_bound_measured_point_gets_a_band_too():
    """8 x 256 was measured 0.5 s (children 0.42-0.66 s): MEASURED, with the band that holds
    the model's band there (0.45-0.7 s) and its own children."""
    cert = make_sides_cert()
    step = ft.step_at(cert, "tinylm", {"batch": 8, "seq": 256, "d": 512, "L": 8, "H": 8}).step
    assert step.tag is Tag.MEASURED and step.value == 0.5
    assert step.band == pytest.approx((0.42, 0.7))
    assert "host-bound here" in step.source
    # the fake's host side predates the band's level: its source says what the band is
    assert "the lowest and highest issue cost over the children's processes" in step.source
    # the sweep value reads the same answer
    assert step_seconds(cert, "tinylm", 256) == step


def test_the_band_says_its_level_where_the_fit_stated_one(tmp_path):
    """A host side fitted now carries the share of fresh processes its band holds; the
    figure's source and the accuracy sentence say it, and the JSON keeps it."""
    cert = make_sides_cert()
    r = cert.workloads[0]
    m = r.time.model
    host = m.sides.host.model_copy(update={"band_level": 0.9})
    sides = m.sides.model_copy(update={"host": host})
    leveled = cert.model_copy(update={"workloads": [r.model_copy(update={"time": r.time.model_copy(
        update={"model": m.model_copy(update={"sides": sides})})})]})
    shape = {"batch": 2, "seq": 256, "d": 512, "L": 8, "H": 8}
    fitted_step = ft.step_at(leveled, "tinylm", shape).step
    assert fitted_step.band == pytest.approx((0.4, 0.7))
    assert "where 90% of fresh processes land" in fitted_step.source
    measured = ft.step_at(leveled, "tinylm", {**shape, "batch": 8}).step
    assert "where 90% of fresh processes land" in measured.source
    again = load_certificate(save_certificate(leveled, tmp_path / "cert.json"))
    assert again.workloads[0].time.model.sides.host.band_level == 0.9
    with pytest.raises(pydantic.ValidationError):
        host.model_validate({**host.model_dump(), "band_level": 1.5})


def test_a_device_bound_shape_is_a_point_measured_or_fitted():
    cert = make_sides_cert()
    assert step_seconds(cert, "tinylm", 512).band is None  # measured 1.0 s
    r = predict(cert, batch=16, seq=512, platform=make_platform()).rows[0].row
    assert r.step_seconds.band is None and r.steps_per_chunk.value == CHUNK // 2
    assert r.steps_per_chunk.band is None


def test_a_one_sided_model_gives_no_band():
    r = predict(make_time_cert(), batch=2, seq=256, platform=make_platform()).rows[0].row
    assert r.step_seconds.band is None


# --- every table ---------------------------------------------------------------------------


def test_the_band_in_the_predict_table_the_plan_tables_and_the_report():
    cert = make_sides_cert()
    band = "(400.00..700.00 ms)"
    assert band in text(render_predict(predict(cert, batch=2, seq=256,
                                               platform=make_platform())))
    p = planner.plan(cert, make_platform(), make_run(value=256, batch=2))
    run = next(r for r in p.rows if r.is_run)
    assert run.step_seconds.band == pytest.approx((0.4, 0.7))
    assert run.steps_per_chunk.value == CHUNK * 10 // 7
    assert band in text(render_plan(p))
    chunk = next(s for s in plan_sections(p) if s.title == "chunk table")
    assert band in "\n".join(markdown_table(chunk.tables[0], "chunk table"))
    doc = next(r for r in json.loads(p.to_json())["rows"] if r["is_run"])
    assert doc["step_seconds"]["high"] == pytest.approx(0.7)


def test_the_weekly_quota_counts_the_slow_end():
    p = planner.plan(make_sides_cert(), make_platform(), make_run(value=256, batch=2))
    run = next(r for r in p.rows if r.is_run)
    q = p.quota
    whole = q.whole_chunks.value
    tail = int(q.trainable_remainder_seconds.value / 0.7 + 1e-9)
    assert q.steps_per_week.value == whole * run.steps_per_chunk.value + tail


# --- the verdict names what failed ---------------------------------------------------------


MISS = ("1 x 8192 (held_out_seq, judged on wall and device busy; worst wall): error +5.3% "
        "beyond 5.0% (re-measured; its children agree: the model's error, not noise)")


def test_ok_with_a_failed_held_out_shape_is_missed_and_names_it():
    v = TimeVerdict.model_validate({**verdict().model_dump(), "failed_held_out": [1],
                                    "model_misses": [MISS], "remeasured": True})
    assert v.label == "MISSED" and v.reasons == [MISS]
    assert verdict().label == "OK"  # nothing failed: OK stays OK


def test_plans_and_preflight_repeat_the_missed_shape():
    cert = make_time_cert()
    r = cert.workloads[0]
    missed = TimeVerdict.model_validate({**r.time.verdict.model_dump(), "failed_held_out": [0],
                                         "model_misses": [MISS]})
    cert = cert.model_copy(update={"workloads": [r.model_copy(update={"time": r.time.model_copy(
        update={"verdict": missed})})]})
    assert ft.verdict_label(cert) == "MISSED"  # the certificate's own label says OK
    assert ft.noisy_reasons(cert) == [f"tinylm (fp32): {MISS}"]
    p = planner.plan(cert, make_platform(), make_run())
    assert p.time_verdict == "MISSED" and "1 x 8192" in text(render_plan(p))
    v = planner.preflight(cert, make_platform(), make_run())
    assert any("1 x 8192" in w and "+5.3%" in w for w in v.warnings)
    assert not any("1 x 8192" in x for x in v.reasons)  # a stated error, not a refusal


def test_a_stored_ok_verdict_with_a_miss_reads_missed_on_load(tmp_path):
    raw = json.loads(H200_HF.read_text())
    v = raw["workloads"][0]["time"]["verdict"]
    v.update(label="OK", reasons=[], failed_held_out=[0], model_misses=[MISS])
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw))
    cert = load_certificate(path)
    assert cert.workloads[0].time.verdict.label == "MISSED"
    assert ft.verdict_label(cert) in ("NOISY", "MISSED")


# --- old certificates: the one-axis forms upgraded away ------------------------------------


def test_a_model_that_chose_a_one_axis_form_is_upgraded_on_load(tmp_path):
    raw = json.loads(H200_HF.read_text())
    t = next(w["time"] for w in raw["workloads"] if not w["time"]["model"].get("sides"))
    m = t["model"]
    old = next(c for c in m["candidates"] if c["form"] == "floor_power")
    m.update(form="floor_power", params=old["params"])
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw))
    cert = load_certificate(path)
    got = next(w.time.model for w in cert.workloads if w.time.model.sides is None)
    assert got.form in ("max", "sum", "smooth_max")
    assert [c.form for c in got.candidates] == ["max", "sum", "smooth_max"]
    worst = {c.form: c.loo_max for c in got.candidates}
    assert worst[got.form] == min(worst.values())
    assert "upgraded on load: the one-axis form floor_power" in got.warnings[-1]
    for h in got.held_out:  # the held-out errors are the upgraded form's own
        feats = got.scaling.features(batch=h.batch, seq=h.seq)
        assert h.predicted_seconds == pytest.approx(evaluate_form(got.form, got.params, feats))
        assert h.rel_error == pytest.approx(h.predicted_seconds / h.measured_seconds - 1)
    assert "ranges" not in got.model_dump()  # the one judge is the measured range


def test_a_stored_model_too_malformed_to_upgrade_is_a_clear_error(tmp_path):
    from afford.core.errors import InputError

    raw = json.loads(H200_HF.read_text())
    m = next(w["time"]["model"] for w in raw["workloads"] if not w["time"]["model"].get("sides"))
    m.update(form="power", points=[1, 2])  # an old form over points that are not points
    raw["workloads"][0]["time"]["verdict"].update(label="OK", failed_held_out=3)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match="malformed afford.cert/1 file"):
        load_certificate(path)
