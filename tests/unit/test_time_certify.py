"""Certify's step-time stage (issue 19): the design, the model over it, the extension, the
noise verdict and its one re-measurement, the schema's migration; children's events made
by hand (tests/time_fakes.py), so every number is exact."""

import json

import pytest

from afford.certification.stage_time import (
    child_options,
    fit_time_model,
    plan_design,
    plan_extension,
    refit_law,
    settle,
)
from afford.fit.time.time_design import long_factors, static_design
from afford.fit.time.time_noise import disagreement, time_verdict
from afford.schema.cert import load_certificate
from afford.schema.time_law import predict_at
from tests.paths import data_file
from tests.time_fakes import FakeRounds, law, shape_of, sweep, tinylm_large


def shapes(design, role=None):
    return [(p.batch, p.value) for p in design.shapes if role is None or p.role == role]


# ---- the design ---------------------------------------------------------------------------


def test_the_static_design_of_the_default_large_gpu_sweeps():
    """tinylm (B 8), softmax (n 16), scan (n 8) at their large-GPU sweeps."""
    d = static_design(8, [1024, 2048, 4096, 8192])
    assert [(p.batch, p.seq) for p in d.across] == [(2, 4096), (32, 1024), (16, 2048)]
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [
        ("held_out_interpolated", 8, 6144), ("held_out_seq", 2, 16384),
        ("held_out_batch", 64, 1024)]
    soft = static_design(16, [1024, 2048, 4096, 8192])
    assert [(p.batch, p.seq) for p in soft.held_out] == [(16, 6144), (4, 16384), (128, 1024)]
    scan = static_design(8, [256, 512, 1024, 2048])
    assert [(p.batch, p.seq) for p in scan.across] == [(2, 1024), (32, 256), (16, 512)]
    assert [(p.batch, p.seq) for p in scan.held_out] == [(8, 1536), (2, 4096), (64, 256)]


@pytest.mark.parametrize("b0,seqs", [(8, [1024, 2048, 4096, 8192]), (4, [16, 32, 64]),
                                     (16, [256, 512]), (3, [100, 200, 400, 800])])
def test_design_shapes_stay_in_the_sweeps_memory_envelope(b0, seqs):
    d = static_design(b0, seqs)
    top_tokens, top_sq = b0 * seqs[-1], b0 * seqs[-1] ** 2
    for p in [*d.across, *d.held_out]:
        # a base batch below 4 has no smaller batch for 2x the sequence: up to 2x, said so
        relaxed = 2 if b0 < 4 and p.role == "held_out_seq" else 1
        assert p.batch * p.seq <= top_tokens and p.batch * p.seq ** 2 <= relaxed * top_sq
    fit = {(p.batch, p.seq) for p in d.fit_shapes}
    assert not fit & {(p.batch, p.seq) for p in d.held_out}
    assert len(d.held_out) == 3


def test_a_base_batch_below_four_still_holds_out_twice_the_sequence_and_says_why():
    d = static_design(2, [32, 64, 128, 256])
    seq = next(p for p in d.held_out if p.role == "held_out_seq")
    assert (seq.batch, seq.seq) == (1, 512)
    assert any("2x the sweep's largest" in n for n in d.notes)


def test_a_fused_design_adds_the_long_sequences_within_its_tokens():
    d = static_design(8, [256, 512, 1024], fused=True)  # 8 x 1024 tokens: 4x fitted, 8x out
    assert (1, 4096, "across") in [(p.batch, p.seq, p.role) for p in d.across]
    assert [(p.batch, p.seq) for p in d.held_out if p.role == "held_out_seq"] == [(1, 8192)]
    four = static_design(4, [16, 32, 64], fused=True)  # 8 x 64 > the 256 tokens: 2x, 4x
    assert (1, 128, "across") in [(p.batch, p.seq, p.role) for p in four.across]
    assert [(p.batch, p.seq) for p in four.held_out if p.role == "held_out_seq"] == [(1, 256)]
    small = static_design(2, [32, 64, 128], fused=True)  # 4 x 128 > the 256 tokens
    assert not any(p.role == "held_out_seq" for p in small.held_out)
    assert any(n.startswith("held_out_seq 1 x 512") and "tokens" in n for n in small.notes)
    assert long_factors(1024, 8192) == (4, 8)
    assert long_factors(8192, 65536) == (2, 4)  # 8 x 8192 is past LONG_SEQ_CAP
    plain = static_design(8, [256, 512, 1024])  # materialised scores: the B*s^2 envelope
    assert not any(p.seq > 2048 for p in plain.across + plain.held_out)


def test_plan_design_for_tinylm_keys_and_items():
    design = plan_design("tinylm", tinylm_large(), "bf16", [1024, 2048, 4096, 8192])
    assert design.axes == "batch_seq" and (design.batch_key, design.seq_key) == ("batch", "seq")
    assert shapes(design, "sweep") == [(None, 1024), (None, 2048), (None, 4096), (None, 8192)]
    items = design.items()
    assert len(items) == 7 and all(it["batch_key"] == "batch" for it in items)
    assert items[0]["key"] == "tinylm|bf16|4096|b2"
    # tinylm's attention is fused (SDPA): a long sequence at batch 1 is fitted (2x the
    # sweep's longest) and 4x is held out, beyond the B*s^2 envelope its memory does not have
    assert (1, 16384) in [(p.batch, p.value) for p in design.shapes if p.role == "across"]
    held = [p for p in design.shapes if p.held_out]
    assert [(p.batch, p.value) for p in held] == [(8, 6144), (1, 32768), (64, 1024)]


def test_a_workload_without_dims_keeps_one_axis_and_holds_out_from_five_points():
    from tests.user_workload import MLP

    few = plan_design("tests.user_workload:factory", MLP(), "fp32", [16, 32])
    assert few.axes == "n" and not any(p.held_out for p in few.shapes)
    assert "none can be held out" in few.notes[0]
    five = plan_design("tests.user_workload:factory", MLP(), "fp32", [8, 16, 32, 64, 128])
    assert {p.value: p.role for p in five.shapes if p.held_out} == {
        128: "held_out_largest", 32: "held_out_interpolated"}
    assert five.items() == []  # the held-out points are the sweep's own


def test_child_options_spread_the_extra_work():
    assert child_options(0, 0, 3, True) == {"count_flops": True, "synced": False,
                                             "profile": False}
    assert child_options(1, 0, 3, True) == {"count_flops": False, "synced": True,
                                             "profile": False}
    assert child_options(2, 0, 3, True)["profile"] is True  # the last child profiles
    assert child_options(1, 0, 3, False)["profile"] is False  # a CPU has no device side
    assert child_options(1, 0, 3, False)["synced"] is False  # a CPU: one clock
    assert child_options(3, 3, 1, True) == {"count_flops": True, "synced": False,
                                             "profile": True}


# ---- the model over the measured design ------------------------------------------------------


def test_the_model_fits_the_design_and_predicts_the_held_out_shapes():
    r, design, _, _ = sweep()
    t = fit_time_model(r, design, "cuda")
    m = t.model
    assert m.form == "max" and m.floor_left
    assert "FLOPs counted" in t.features and "B*s^2" in t.features
    assert [h.label for h in m.held_out] == ["8 x 6144", "1 x 32768", "64 x 1024"]
    assert max(abs(h.rel_error) for h in m.held_out) < 1e-6  # the law is the max form
    assert {p.label for p in m.points} == {"8 x 1024", "8 x 2048", "8 x 4096", "8 x 8192",
                                          "2 x 4096", "32 x 1024", "16 x 2048", "1 x 16384"}
    assert t.verdict.label == "OK" and t.floor_seconds == pytest.approx(0.010)
    work = {g.label: g.work for g in t.regimes}
    assert not work["8 x 1024"] and work["8 x 8192"]


def test_with_the_device_side_the_model_is_two_sided_and_judges_every_held_out_shape():
    r, design, _, _ = sweep(device=True)
    p = r.points[0]
    assert p.kernels_per_step == 1000 and p.device_gap_seconds == pytest.approx(1e-6)
    t = fit_time_model(r, design, "cuda")
    m = t.model
    assert m.used == "sides"
    # the floor points' devices are busy 92 % of the 10 ms floor: none is host-bound (90 %)
    assert m.sides.host is None and "never seen" in m.sides.notes[0]
    assert m.sides.gap_seconds == pytest.approx(1e-6) and "device-bound" in m.sides.gap_source
    assert all(h.device_rel_error == pytest.approx(0.0, abs=1e-3) for h in m.held_out)
    assert max(abs(h.rel_error) for h in m.held_out) < 0.01
    assert t.verdict.label == "OK" and t.verdict.judged == 3
    assert t.verdict.held_out_worst < 0.01


def test_points_not_profiled_in_the_work_regime_keep_the_model_two_sided():
    """The last child profiles only what it timed: a point settled in the work regime has no
    device side of its own, and the fit reads its busy time off its wall."""
    r, design, _, _ = sweep(device=True)
    floor = min(p.median_seconds for p in [*r.points, *r.design_points])

    def bare(p):
        if p.median_seconds < 2 * floor:
            return p
        return p.model_copy(update={"device_busy_seconds": None, "kernels_per_step": None,
                                    "device_gap_seconds": None, "device_busy_spread": None})

    r = r.model_copy(update={"points": [bare(p) for p in r.points],
                             "design_points": [bare(p) for p in r.design_points]})
    assert sum(p.device_busy_seconds is None for p in [*r.points, *r.design_points]) >= 3
    t = fit_time_model(r, design, "cuda")
    m = t.model
    assert m.used == "sides" and m.sides.gap_seconds == pytest.approx(1e-6)
    assert "not profiled, the wall less the gap" in m.floor_note
    # a held-out shape without a profile is judged on its wall alone
    for h in m.held_out:
        if h.measured_seconds >= 2 * floor:
            assert h.device_measured_seconds is None and h.device_rel_error is None
    assert max(abs(h.rel_error) for h in m.held_out) < 0.01
    assert t.verdict.label == "OK"
    assert predict_at(m, batch=8, seq=16384).seconds == pytest.approx(law(8, 16384), rel=0.02)


def test_judged_errors_take_the_device_side_on_the_floor_and_the_band():
    from afford.certification.stage_time import judged_errors
    from afford.schema.time_law import ModelPoint

    def mp(**kw):
        base = dict(tokens=1.0, measured_seconds=0.050, predicted_seconds=0.048,
                    rel_error=-0.04)
        return ModelPoint(**{**base, **kw})

    class M:  # the two attributes judged_errors reads
        sides = object()
        held_out = [mp(regime="host", band=(0.040, 0.045), device_rel_error=0.01),
                    mp(regime="host", band=(0.045, 0.055), device_rel_error=-0.02),
                    mp(regime="device", device_rel_error=0.03),
                    mp()]  # no device side profiled there: the wall, on the floor: unjudged
    errors, judged, what = judged_errors(M, [False, False, True, False])
    assert errors[0] == pytest.approx(0.045 / 0.050 - 1)  # 10 % above the band's top
    assert errors[1] == pytest.approx(-0.02) and "device busy" in what[1]  # inside the band
    assert errors[2] == pytest.approx(-0.04)  # the wall's -4 % beats the device's +3 %
    assert judged == [True, True, True, False] and "not judged" in what[3]


def test_held_out_seconds_never_move_their_own_judgement():
    """A held-out shape measured 3x slower is judged by the model fitted without it (its
    error -2/3, the other held-out predictions unmoved); only the model refitted after the
    judgement reads it."""
    base, design, _, _ = sweep()
    odd, _, _, _ = sweep(seconds=lambda it, c: law(*shape_of(it)) * (3.0 if "b64" in it["key"]
                                                                      else 1.0))
    a, b = fit_time_model(base, design, "cuda").model, fit_time_model(odd, design, "cuda").model
    assert a.form == b.form and a.fitted_with_held_out and b.fitted_with_held_out
    assert [h.predicted_seconds for h in a.held_out] == [h.predicted_seconds for h in b.held_out]
    assert b.held_out[2].rel_error == pytest.approx(1 / 3 - 1)
    assert a.params != b.params


def test_without_flop_counts_the_model_uses_the_shape_and_says_why():
    r, design, _, _ = sweep()
    no = [p.model_copy(update={"flops": p.flops.model_copy(update={
        "gemm": None, "attn": None, "total": None,
        "error": "AssertionError: sdpa_flop_count: query/key/value shapes are incompatible"})})
          if p.flops else p for p in r.points]
    r = r.model_copy(update={"points": no, "design_points": [
        p.model_copy(update={"flops": None}) for p in r.design_points]})
    t = fit_time_model(r, design, "cuda")
    assert t.features.startswith("shape only (tokens = B*s and B*s^2)")
    assert "incompatible" in t.features
    assert t.model is not None and "w_seq_tokens" in t.model.params
    assert max(abs(h.rel_error) for h in t.model.held_out) < 0.05


# ---- extension, verdict and re-measure -----------------------------------------------------


def _settle(r, design, reg, w, rounds, device="cuda"):
    results, verdict = settle([r], [design], reg, rounds, device_type=device,
                              device_memory=10**12, children=3,
                              refit=lambda i, x: refit_law("tinylm", w, "bf16", x))
    return results[0], verdict


def test_a_clean_sweep_settles_without_any_round():
    r, design, reg, w = sweep()
    rounds = FakeRounds()
    out, verdict = _settle(r, design, reg, w, rounds)
    assert rounds.calls == [] and verdict.label == "OK" and verdict.remeasured_points == 0
    assert out.time.model.form == "max" and out.time.extension is None


def test_a_noisy_work_point_is_measured_once_more_and_outvoted():
    noisy_key = "tinylm|bf16|8192"
    r, design, reg, w = sweep(seconds=lambda it, c: law(*shape_of(it)) *
                              (1.3 if it["key"] == noisy_key and c == 1 else 1.0))
    rounds = FakeRounds()
    out, verdict = _settle(r, design, reg, w, rounds)
    assert rounds.calls == [([noisy_key], 1, "remeasure")]
    point = next(p for p in out.points if p.value == 8192)
    assert point.remeasured and len(point.children) == 4 and point.children[3].child == 3
    assert verdict.label == "OK" and verdict.remeasured_points == 1
    assert out.time.first_verdict.label == "REMEASURE" and out.time.verdict.label == "OK"
    assert out.law is not None and out.law.x == [1024.0, 2048.0, 4096.0, 8192.0]


def test_noise_that_persists_makes_the_certificate_noisy():
    key = "tinylm|bf16|8192"
    def noisy(it, c, *rest):
        return law(*shape_of(it)) * (1.3 if it["key"] == key and c % 2 else 1)
    r, design, reg, w = sweep(seconds=noisy)
    out, verdict = _settle(r, design, reg, w, FakeRounds(noisy))
    assert verdict.label == "NOISY" and len(verdict.reasons) == 1
    assert verdict.reasons[0].startswith("tinylm (bf16): 8 x 8192 (sweep): children disagree")


def test_floor_points_disagreeing_are_the_floors_uncertainty_not_noise():
    r, design, reg, w = sweep(seconds=lambda it, c: law(*shape_of(it)) *
                              (1.4 if it["key"] == "tinylm|bf16|1024" and c == 2 else 1.0))
    rounds = FakeRounds()
    out, verdict = _settle(r, design, reg, w, rounds)
    assert rounds.calls == [] and verdict.label == "OK"
    assert out.time.floor_spread == pytest.approx(0.4)


def test_a_point_whose_child_died_is_measured_once_more_in_a_fresh_child():
    key = "tinylm|bf16|4096|b2"
    r, design, reg, w = sweep(error=lambda it, c: "child 1 exited with code -9"
                              if it["key"] == key and c == 1 else None)
    dead = next(p for p in r.design_points if p.batch == 2)
    assert dead.excluded_reason.startswith("failed in child 1")
    rounds = FakeRounds()
    out, verdict = _settle(r, design, reg, w, rounds)
    assert rounds.calls == [([key], 1, "remeasure")]
    again = next(p for p in out.design_points if p.batch == 2)
    assert again.excluded_reason is None and again.remeasured and len(again.child_medians) == 3


def test_a_sweep_on_the_floor_is_extended_in_fresh_children():
    def flat(it, c, *rest):  # everything on the floor
        return max(0.010, law(*shape_of(it)) / 40)
    r, design, reg, w = sweep(seconds=flat)
    assert not fit_time_model(r, design, "cuda").model.floor_left
    planned, notes = plan_extension(r, design, 10**12)
    assert [(p.batch, p.value) for p in planned] == [(8, 16384), (16, 16384)] and not notes
    rounds = FakeRounds(flat)
    out, _ = _settle(r, design, reg, w, rounds)
    assert rounds.calls[0] == (["tinylm|bf16|16384|b8", "tinylm|bf16|16384|b16"], 3,
                               "extension")
    ext = out.time.extension
    assert ext.shapes == [(8, 16384), (16, 16384)] and not ext.left_floor
    assert any("unsupported" in n for n in ext.notes)
    assert [p.role for p in out.design_points][-2:] == ["extension", "extension"]


def test_the_extension_stays_within_the_memory_and_time_budgets():
    # the top step (74 ms): rung 1 (8 x 16384) up to 74 ms x 2 x 2 x 15 steps = 4.4 s fits
    # the 5 s budget, rung 2 (16 x 16384) at 8.9 s does not
    r, design, _, _ = sweep()
    planned, notes = plan_extension(r, design, 10**12)
    assert [(p.batch, p.value) for p in planned] == [(8, 16384)]
    assert "point budget of 5 s" in notes[0]
    r, design, _, _ = sweep(seconds=lambda it, c: 0.010)
    top_peak = 1100 * 8 * 8192  # the fakes' reserved bytes at the largest fitted shape
    # rung 1 (8 x 16384) grows it by at most 2 (tokens) x 2 (seq) = 4; rung 2 by 8
    planned, notes = plan_extension(r, design, int(top_peak * 5 / 0.9))
    assert [(p.batch, p.value) for p in planned] == [(8, 16384)]
    assert notes == ["extension stopped before 16 x 16384: 16 x 16384 does not fit the "
                     "memory budget"]


# ---- the verdict's pure parts ------------------------------------------------------------------


def test_disagreement_lets_a_re_measure_outvote_one_child():
    assert disagreement([1.0, 1.3, 1.0]) == pytest.approx(0.3)
    assert disagreement([1.0, 1.3, 1.0, 1.0]) == pytest.approx(0.0)
    assert disagreement([1.0, 1.3, 1.0, 1.3]) == pytest.approx(0.3 / 1.3)


def test_floor_points_are_judged_against_the_floor_tolerance_only():
    meds = [[0.010, 0.014, 0.010], [0.05, 0.05, 0.05]]
    v = time_verdict(meds, [0.30, 0.01], work=[False, True], held_out_work=[False, True])
    assert v.label == "OK" and v.held_out_worst == pytest.approx(0.01)
    v = time_verdict([[0.010, 0.020, 0.010]], [], work=[False], labels=["8 x 1024"])
    assert v.label == "REMEASURE" and v.reasons == [
        "8 x 1024 (on the floor): children disagree by 100.0% > 50.0%"]


# ---- schema ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [data_file("h200_default_d89f7a2.json"),
                                  data_file("h200_distributed_ws1_63bd66d.json")])
def test_older_certificates_still_load(path):
    cert = load_certificate(path)
    assert cert.time_verdict is None and cert.host_load is None
    assert all(r.time is None and r.design_points == [] for r in cert.workloads)
    for r in cert.workloads:
        assert all(p.role == "sweep" and not p.held_out for p in r.points)


def test_a_certificate_with_a_time_model_round_trips(tmp_path):
    from afford.schema.cert import Certificate, save_certificate
    from tests.synthetic_cert import environment, protocol

    r, design, reg, w = sweep()
    out, verdict = _settle(r, design, reg, w, FakeRounds())
    cert = Certificate(environment=environment(), protocol=protocol(), workloads=[out],
                       time_verdict=verdict)
    path = save_certificate(cert, tmp_path / "c.json")
    again = load_certificate(path)
    assert again.workloads[0].time == out.time
    assert predict_at(again.workloads[0].time.model, batch=8, seq=6144) == \
        predict_at(out.time.model, batch=8, seq=6144)
    assert json.loads(path.read_text())["time_verdict"]["label"] == "OK"


def test_design_items_are_timed_for_the_model_not_to_one_percent():
    """Shapes beyond the sweep stop timing by DESIGN_CAP_SECONDS and run no synced steps;
    held-out shapes are not FLOP-counted (the scaling laws predict them); sweep items carry
    none of these flags."""
    from afford.certification.stage_time import DESIGN_CAP_SECONDS

    design = plan_design("tinylm", tinylm_large(), "bf16", [1024, 2048, 4096, 8192])
    items = {it["key"]: it for it in design.items()}
    across = items["tinylm|bf16|4096|b2"]
    held = items["tinylm|bf16|1024|b64"]
    assert across["cap"] == DESIGN_CAP_SECONDS == 0.5 and across["synced"] is False
    assert "count_flops" not in across and held["count_flops"] is False
    sweep_point = next(p for p in design.shapes if p.role == "sweep")
    assert set(design.item(sweep_point)) == {"key", "workload", "mode", "value"}


# ---- the extension decided early, from the first child's records ---------------------------


def _early_round(seconds, died=()):
    """(the plan's items, the items the sweep's later children get) after a first child
    whose steps follow ``seconds`` (and that died at the keys ``died``)."""
    from afford.certification.request import Plan
    from afford.certification.stage_time import early_round
    from tests.time_fakes import event

    w = tinylm_large()
    values = [1024, 2048, 4096, 8192]
    design = plan_design("tinylm", w, "bf16", values)
    plan = Plan(device="cuda:0", device_class="large-gpu",
                workloads=[("tinylm", w, "bf16", values)], designs=[design])
    first = {it["key"]: event(it, 0, seconds(it, 0), error="died" if it["key"] in died
                              else None) for it in plan.items}
    return plan.items, early_round(plan, first, plan.items, "cuda", 10**12, 0.25)


def test_a_point_the_first_child_could_not_time_keeps_its_synced_witness():
    """Its regime is unknown (no wall of its own), so the later children get it as planned:
    only a point the first child found off the floor loses the synced steps."""
    lost = "tinylm|bf16|2048"
    items, later = _early_round(lambda it, c: law(*shape_of(it)), died={lost})
    planned, got = {it["key"]: it for it in items}, {it["key"]: it for it in later}
    assert got[lost] == planned[lost]  # neither capped nor stripped of its witness
    assert got["tinylm|bf16|8192"]["synced"] is False  # 74 ms: off the floor


def _first_child(seconds):
    """The extension's items the first child's records call for."""
    return [it for it in _early_round(seconds)[1] if it.get("round") == "extension"]


def test_the_first_childs_floor_points_are_not_extended_by_the_later_children():
    items, later = _early_round(lambda it, c: law(*shape_of(it)))
    assert later[:len(items)] != items and len(later) == len(items)  # no extension
    caps = {it["key"]: it.get("cap") for it in later}
    # the law's floor is 10 ms: 8 x 1024 and 2 x 1024 lie on it, 8 x 8192 (74 ms) does not
    assert caps["tinylm|bf16|1024"] == 0.25 and caps["tinylm|bf16|8192"] is None
    assert caps["tinylm|bf16|4096|b2"] == 0.25  # a design shape's 0.5 s cap, lowered
    assert {k for k, c in caps.items() if c == 0.25} == {
        it["key"] for it in items if law(*shape_of(it)) < 2 * 0.010}
    # the synced witness (the second child's) only where the first child found the floor
    planned = {it["key"]: it.get("synced") for it in items}
    for it in later:
        assert it.get("synced") == (planned[it["key"]] if caps[it["key"]] == 0.25 else False)
    assert any(caps[k] == 0.25 and v is None for k, v in planned.items())  # a sweep point


def test_the_early_round_fits_only_a_workload_whose_walls_stay_on_the_floor(monkeypatch):
    import afford.certification.stage_time as stage_time

    calls = []
    real = stage_time.fit_time_model
    monkeypatch.setattr(stage_time, "fit_time_model",
                        lambda *a, **k: calls.append(a[0].name) or real(*a, **k))
    _early_round(lambda it, c: law(*shape_of(it)))  # 8 x 8192: 7x the floor
    assert calls == []

    def flat(it, c, *rest):
        return max(0.010, law(*shape_of(it)) / 40)
    assert _first_child(flat) and calls == ["tinylm"]


def test_the_first_childs_records_call_for_the_extension_on_the_floor_only():
    def flat(it, c, *rest):
        return max(0.010, law(*shape_of(it)) / 40)
    items = _first_child(flat)
    assert [it["key"] for it in items] == ["tinylm|bf16|16384|b8", "tinylm|bf16|16384|b16"]
    assert all(it["round"] == "extension" and it["cap"] == 0.5 for it in items)
    assert _first_child(lambda it, c: law(*shape_of(it))) == []  # the law leaves the floor


def test_extension_shapes_the_sweeps_children_measured_need_one_more_child_only():
    def flat(it, c, *rest):
        return max(0.010, law(*shape_of(it)) / 40)
    r, design, reg, w = sweep(seconds=flat)
    from tests.time_fakes import event

    early = _first_child(flat)
    reg.add([{it["key"]: event(it, c, flat(it, c)) for it in early} for c in (1, 2)])
    rounds = FakeRounds(flat)
    out, _ = _settle(r, design, reg, w, rounds)
    assert rounds.calls[0] == (["tinylm|bf16|16384|b8", "tinylm|bf16|16384|b16"], 1,
                               "extension")
    ext = [p for p in out.design_points if p.role == "extension"]
    assert [len(p.children) for p in ext] == [3, 3] and all(p.excluded_reason is None
                                                            for p in ext)
    # one record per round and child: the sweep's children 1 and 2, the round's child 3
    assert all(sorted(k.child for k in p.children) == [1, 2, 3] for p in ext)


def test_extension_shapes_measured_in_full_already_are_not_measured_again():
    """The sweep's three children measured one of the shapes settle chooses: only the other
    goes to the extension round, with three children of its own."""
    def flat(it, c, *rest):
        return max(0.010, law(*shape_of(it)) / 40)
    r, design, reg, w = sweep(seconds=flat)
    from tests.time_fakes import event

    early = _first_child(flat)
    done = early[:1]
    reg.add([{it["key"]: event(it, c, flat(it, c), "extension") for it in done}
             for c in (0, 1, 2)])
    rounds = FakeRounds(flat)
    out, _ = _settle(r, design, reg, w, rounds)
    assert rounds.calls == [([early[1]["key"]], 3, "extension")]
    ext = [p for p in out.design_points if p.role == "extension"]
    assert [len(p.children) for p in ext] == [3, 3]
    for p in ext:
        assert len({(k.round, k.child) for k in p.children}) == 3


def test_early_shapes_settle_does_not_choose_are_not_kept():
    """The first child on the floor, the others not: the early guess is measured by the
    later children, but the full fit leaves the floor, so no extension is kept or run."""
    def flat(it, c, *rest):
        return max(0.010, law(*shape_of(it)) / 40)
    r, design, reg, w = sweep()
    from tests.time_fakes import event

    reg.add([{it["key"]: event(it, c, flat(it, c)) for it in _first_child(flat)}
             for c in (1, 2)])
    rounds = FakeRounds()
    out, _ = _settle(r, design, reg, w, rounds)
    assert rounds.calls == [] and out.time.extension is None
    assert not any(p.role == "extension" for p in out.design_points)
