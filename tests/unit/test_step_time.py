"""The step-time model's pure parts (issue 19): features and their scaling laws, the forms
and their non-negative fits, the choice by leave-one-out error, the 2-D design, the sweep
that leaves the floor, the noise verdict; every expected number worked by hand. Last, the
recorded H200 grid (tests/data/h200_grid.jsonl.gz): the rebuilt fit over the
design certify measures, held-out errors within a stated bound."""

import numpy as np
import pydantic
import pytest

from afford.fit.time.step_features import CountedShape, fit_scaling, op_class, split_flops
from afford.fit.time.step_forms import FLOOR_WEIGHT
from afford.fit.time.time_design import (
    DesignLimits,
    DesignShape,
    design_from_ladder,
    extension_shapes,
    ladder_shape,
    plan_time_design,
    run_ladder,
    static_design,
)
from afford.fit.time.time_design import growth as time_growth
from afford.fit.time.time_fit import (
    CandidateFit,
    StepPoint,
    choose_form,
    evaluate_held_out,
    fit_step_time,
    top_growth_per_doubling,
    work_regime,
)
from afford.fit.time.time_noise import disagreement, noisy_points, time_verdict
from afford.schema.time_law import evaluate_form, predict_at
from tests.time_certs import h200_grid

G, A = 151781376.0, 57344.0  # tinylm q3's counted FLOPs per token and per B*s^2 (H200)


def point(b, s, seconds, counted=True, sigma=None, label=None):
    return StepPoint(batch=b, seq=s, tokens=b * s, seconds=seconds, rel_sigma=sigma,
                     gemm_flops=G * b * s if counted else None,
                     attn_flops=A * b * s * s if counted else None, label=label)


def max_law(b, s, F=0.010, w0=0.002, wg=4e-15, wa=1e-15):
    return max(F, w0 + wg * G * b * s + wa * A * b * s * s)


DESIGN = [(8, 1024), (8, 2048), (8, 4096), (8, 8192), (2, 4096), (32, 1024), (16, 2048)]
HELD = [(8, 6144), (2, 16384), (64, 1024)]


# ---- features ------------------------------------------------------------------------------


def test_op_classes_and_split():
    assert [op_class(o) for o in ("aten.mm", "aten.addmm.default", "matmul", "aten.bmm",
                                  "_scaled_dot_product_cudnn_attention_backward",
                                  "aten._scaled_dot_product_flash_attention_for_cpu",
                                  "aten.convolution", "aten.add")] == [
        "gemm", "gemm", "gemm", "attn", "attn", "attn", "gemm", "other"]
    assert split_flops({"aten.mm": 6.0, "aten.addmm": 4.0, "aten.bmm": 3.0,
                        "aten.cumsum": 1.0}) == {"gemm": 10.0, "attn": 3.0, "other": 1.0}


def test_feature_scaling_reproduces_the_h200_counts_exactly():
    # three of the H200 grid's counted tinylm shapes (gemm, attn as FlopCounterMode gave them)
    shapes = [CountedShape(batch=8, seq=512, tokens=4096, gemm_flops=621696516096,
                           attn_flops=120259084288),
              CountedShape(batch=2, seq=2048, tokens=4096, gemm_flops=621696516096,
                           attn_flops=481036337152),
              CountedShape(batch=32, seq=2048, tokens=65536, gemm_flops=9947144257536,
                           attn_flops=7696581394432)]
    scaling = fit_scaling(shapes)
    gemm, attn = scaling.laws["gemm_flops"], scaling.laws["attn_flops"]
    # 621696516096 / (8 * 512) = 151781376 per token; 120259084288 / (8 * 512^2) = 57344
    assert gemm.terms == ["B*s"] and gemm.coefs == pytest.approx([151781376.0], rel=1e-12)
    assert attn.terms == ["B*s^2"] and attn.coefs == pytest.approx([57344.0], rel=1e-12)
    assert gemm.max_rel_error < 1e-9 and sorted(gemm.varied) == ["batch", "seq"]
    f = scaling.features(batch=64, seq=1024)
    assert f["gemm_flops"] == pytest.approx(9947144257536.0)  # the grid's count at 64 x 1024
    assert f["attn_flops"] == pytest.approx(3848290697216.0)
    assert f["tokens"] == 65536 and f["seq_tokens"] == 64 * 1024 ** 2


def test_feature_scaling_two_axes_with_a_constant():
    shapes = [CountedShape(batch=b, seq=s, tokens=b * s, gemm_flops=100.0 * b * s + 7.0,
                           attn_flops=0.0) for b, s in [(1, 8), (2, 8), (2, 32), (4, 16)]]
    scaling = fit_scaling(shapes)
    law = scaling.laws["gemm_flops"]
    assert law.terms == ["B*s", "1"] and law.coefs == pytest.approx([100.0, 7.0])
    assert law.warnings == []
    assert scaling.laws["attn_flops"].terms == []  # counted zero: the empty law
    empty = scaling.laws["attn_flops"]
    assert empty.coefs == [] and empty.max_rel_error == 0.0 and empty.n_counted == 4
    assert scaling.features(batch=3, seq=10)["gemm_flops"] == pytest.approx(3007.0)


def test_feature_scaling_one_axis():
    shapes = [CountedShape(n=n, tokens=16 * n, gemm_flops=3.0 * n, attn_flops=2.0 * n * n + n)
              for n in (1, 2, 4, 8)]
    scaling = fit_scaling(shapes)
    assert scaling.axes == "n"
    assert scaling.laws["attn_flops"].terms == ["n^2", "n"]
    assert scaling.features(n=10) == pytest.approx({"tokens": 160.0, "gemm_flops": 30.0,
                                                    "attn_flops": 210.0})


def test_a_feature_counted_as_zero_at_one_shape_is_fitted_relative_to_the_others():
    # 2 n - 2 is 0 at n = 1: the relative weights and errors treat that point in absolute
    shapes = [CountedShape(n=n, tokens=n, gemm_flops=2.0 * n - 2.0) for n in (1, 2, 4)]
    law = fit_scaling(shapes).laws["gemm_flops"]
    assert law.terms == ["n", "1"] and law.coefs == pytest.approx([2.0, -2.0])
    assert law.max_rel_error < 1e-9


def test_feature_laws_weigh_relative_errors_across_a_wide_range():
    """100 n counted 0.9e-6 high at n = 1 and 0.9e-6 low at n = 1e6: relative least squares
    meets both within EXACT_REL (1e-6); absolute least squares would let the large count win
    and miss the small one by 1.8e-6."""
    e = {1: 0.9e-6, 1000: 0.0, 10**6: -0.9e-6}
    shapes = [CountedShape(n=n, tokens=n, gemm_flops=100.0 * n * (1 + e[n])) for n in e]
    law = fit_scaling(shapes).laws["gemm_flops"]
    assert law.terms == ["n"] and law.coefs == pytest.approx([100.0], rel=1e-9)
    assert law.max_rel_error < 1e-6


def test_feature_scaling_refuses_what_it_cannot_reproduce():
    not_a_polynomial = [CountedShape(n=n, tokens=n, gemm_flops=n ** 1.5) for n in (1, 4, 9, 16)]
    with pytest.raises(ValueError, match="gemm_flops"):
        fit_scaling(not_a_polynomial)
    unchecked = [CountedShape(batch=8, seq=512, tokens=4096, gemm_flops=1.0e9),
                 CountedShape(batch=8, seq=1024, tokens=8192)]
    with pytest.raises(ValueError, match="one counted shape more"):
        fit_scaling(unchecked)
    with pytest.raises(ValueError, match="batch and seq, or n"):
        fit_scaling([CountedShape(batch=1, seq=2, tokens=2), CountedShape(n=3, tokens=3)])


def test_a_law_needs_one_counted_shape_more_than_its_terms_and_no_more():
    # two shapes decide a one-term law: tokens = n x 16 (the gemm count is held back)
    two = [CountedShape(n=n, tokens=16.0 * n) for n in (2, 5)]
    law = fit_scaling(two).laws["tokens"]
    assert law.terms == ["n"] and law.coefs == pytest.approx([16.0])
    # ... but not a two-term one: 3 n + 1 at two shapes is refused, at three it is found
    plus_one = [CountedShape(n=n, tokens=n, gemm_flops=3.0 * n + 1) for n in (2, 5, 7)]
    with pytest.raises(ValueError, match="gemm_flops: no law"):
        fit_scaling(plus_one[:2])
    law = fit_scaling(plus_one).laws["gemm_flops"]
    assert law.terms == ["n", "1"] and law.coefs == pytest.approx([3.0, 1.0])


def test_batch_held_fixed_is_warned():
    shapes = [CountedShape(batch=8, seq=s, tokens=8 * s, gemm_flops=5.0 * 8 * s)
              for s in (16, 32, 64)]
    assert "did not vary" in fit_scaling(shapes).laws["gemm_flops"].warnings[0]


# ---- forms: exact recovery, bounds, the prior ----------------------------------------------


def test_an_exact_max_law_is_recovered_and_predicts_held_out_shapes():
    pts = [point(b, s, max_law(b, s)) for b, s in DESIGN]
    held = [point(b, s, max_law(b, s), counted=False) for b, s in HELD]
    m = fit_step_time(pts, held_out=held)
    assert m.form == "max" and m.floor_left
    assert m.params["F"] == pytest.approx(0.010, rel=1e-4)
    assert m.params["w0"] == pytest.approx(0.002, rel=1e-3)
    assert m.params["w_gemm"] == pytest.approx(4e-15, rel=1e-4)
    assert m.params["w_attn"] == pytest.approx(1e-15, rel=1e-4)
    assert max(abs(h.rel_error) for h in m.held_out) < 1e-4
    assert [h.extrapolated for h in m.held_out] == [False, True, True]
    assert m.describe().startswith("t = max(0.01 s, ")
    # the largest point (8 x 8192): work 0.002 + 4e-15 G 65536 + 1e-15 A 8 8192^2 = 72.57 ms
    assert "the model's work is 7.26x its floor at the largest point" in m.floor_note
    # five work points (more than the three work terms) decide the split: no prior, no note
    assert "not identified" not in (m.chosen.note or "") and m.warnings == []
    # the stored model evaluates without the fit: the schema's own evaluation
    f = m.scaling.features(batch=8, seq=6144)
    assert evaluate_form("max", m.params, f) == pytest.approx(max_law(8, 6144), rel=1e-4)


def test_the_floor_note_reads_the_work_at_the_point_with_the_most_tokens():
    """Heavy attention (w_attn = 1e-14): 1 x 8192 (8192 tokens) takes 45 ms, longer than
    16 x 1024 (16384 tokens, 21.6 ms). The largest point is the one with the most tokens:
    work 0.002 + 4e-15 G 16384 + 1e-14 A 16 1024^2 = 21.57 ms, 2.16x the 10 ms floor (not
    the 4.55x of the slower, smaller shape). Of two shapes with the most tokens the slower
    (more work) one is read, in whatever order the points come: 4 x 4096, 50.4 ms, 5.04x."""
    law = lambda b, s: max_law(b, s, wa=1e-14)  # noqa: E731
    shapes = [(8, 256), (8, 512), (8, 1024), (2, 2048), (1, 4096), (1, 8192), (16, 1024)]
    for order in (shapes, shapes[::-1]):
        m = fit_step_time([point(b, s, law(b, s)) for b, s in order], forms=("max",))
        assert "the model's work is 2.16x its floor at the largest point" in m.floor_note
        assert m.floor_left  # 2.16x >= 2x, though the step fell at the top (0.75x)
    tied = shapes + [(4, 4096)]
    for order in (tied, tied[::-1]):
        m = fit_step_time([point(b, s, law(b, s)) for b, s in order], forms=("max",))
        assert "the model's work is 5.04x its floor at the largest point" in m.floor_note


def test_each_fitted_point_carries_the_models_own_prediction_and_its_error():
    """Steps 1-4 % off the max law (no form fits them exactly): each fitted point's
    predicted seconds is what the stored model predicts at that shape, and its rel_error
    predicted / measured - 1, so the table of points and a later prediction agree."""
    noise = [1.03, 0.97, 1.02, 0.99, 1.04, 0.96, 1.01]
    m = fit_step_time([point(b, s, max_law(b, s) * e) for (b, s), e in zip(DESIGN, noise)])
    assert max(abs(p.rel_error) for p in m.points) > 0.01  # the fit is not exact
    for p in m.points:
        assert p.predicted_seconds == pytest.approx(
            predict_at(m, batch=p.batch, seq=p.seq).seconds, rel=1e-9)
        assert p.rel_error == pytest.approx(p.predicted_seconds / p.measured_seconds - 1,
                                            abs=1e-12)


def test_an_exact_sum_law_is_recovered():
    law = lambda b, s: 0.004 + 3e-15 * G * b * s + 2e-15 * A * b * s * s  # noqa: E731
    m = fit_step_time([point(b, s, law(b, s)) for b, s in DESIGN])
    assert m.form == "sum" and "w0" not in m.params
    assert (m.params["F"], m.params["w_gemm"], m.params["w_attn"]) == pytest.approx(
        (0.004, 3e-15, 2e-15), rel=1e-4)
    assert max(abs(e) for e in m.chosen.loo_rel_errors) < 1e-4


def test_coefficients_are_never_negative():
    """Steps that fall as attention grows (what no device does): the fit pins w_attn at 0
    rather than go negative."""
    pts = [point(b, s, 0.02 + 1e-14 * G * b * s - 1e-16 * A * b * s * s) for b, s in DESIGN]
    m = fit_step_time(pts, forms=("max", "sum", "smooth_max"))
    for c in m.candidates:
        assert all(v >= 0 for k, v in c.params.items() if k != "k"), c


def test_a_gemm_ceiling_bounds_the_seconds_per_flop_from_below():
    pts = [point(b, s, max_law(b, s, wg=4e-15)) for b, s in DESIGN]
    m = fit_step_time(pts, forms=("max",), gemm_rate=1 / 6e-15)
    assert m.params["w_gemm"] >= 6e-15 * (1 - 1e-9)


def test_without_counts_the_shape_stands_in():
    """tokens and B*s^2 (seq_tokens) are the work columns; the max law in them is exact."""
    law = lambda b, s: max(0.008, 1e-6 * b * s + 2e-10 * b * s * s)  # noqa: E731
    pts = [point(b, s, law(b, s), counted=False) for b, s in DESIGN]
    m = fit_step_time(pts, held_out=[point(b, s, law(b, s), counted=False) for b, s in HELD])
    assert set(m.scaling.laws) == {"tokens"}
    assert m.params["w_tokens"] == pytest.approx(1e-6, rel=1e-4)
    assert m.params["w_seq_tokens"] == pytest.approx(2e-10, rel=1e-4)
    assert max(abs(h.rel_error) for h in m.held_out) < 1e-4


def test_an_unidentified_split_follows_the_prior_and_says_so():
    """One work point cannot split its step between const, GEMM and attention: the prior
    (no constant, an attention FLOP costs a GEMM FLOP) does, and the note says so."""
    pts = [point(8, 64, 0.010), point(8, 128, 0.010), point(2, 128, 0.010),
           point(8, 2048, 0.030)]  # the prior's work at the three small shapes: < 1.2 ms
    m = fit_step_time(pts, forms=("max",))
    p = m.params
    assert p["w0"] == pytest.approx(0.0, abs=1e-6)
    assert p["w_gemm"] == pytest.approx(p["w_attn"], rel=1e-3)
    flops = G * 8 * 2048 + A * 8 * 2048 ** 2
    assert p["w_gemm"] * flops == pytest.approx(0.030, rel=1e-3)
    assert "not identified" in m.chosen.note and m.warnings[0] == m.chosen.note


def test_held_out_seconds_never_move_their_own_judgement():
    """The held-out shapes are predicted by the model fitted without them (their errors, the
    verdict's, cannot depend on their seconds); only then is the model refitted over them
    (``fitted_with_held_out``), so its predictions rest on every measured shape."""
    pts = [point(b, s, max_law(b, s)) for b, s in DESIGN]
    a = fit_step_time(pts, held_out=[point(64, 1024, 1.0, counted=False)])
    b = fit_step_time(pts, held_out=[point(64, 1024, 3.0, counted=False)])
    assert a.form == b.form
    assert a.held_out[0].predicted_seconds == b.held_out[0].predicted_seconds
    assert b.held_out[0].rel_error == pytest.approx(a.held_out[0].predicted_seconds / 3 - 1)
    assert a.fitted_with_held_out and a.params != b.params  # the refit reads them
    judged = fit_step_time(pts, held_out=[point(64, 1024, 3.0, counted=False)],
                           refit_held_out=False)
    assert not judged.fitted_with_held_out and judged.params == fit_step_time(pts).params
    again = evaluate_held_out(judged, [point(64, 1024, 2.0, counted=False)])
    assert again[0].predicted_seconds == a.held_out[0].predicted_seconds


def test_refitted_over_an_exact_held_out_shape_the_model_keeps_the_law():
    """Points and a held-out shape on one max law: the refit over all of them keeps it (its
    prediction at a shape of neither within 1e-3), and the fitted points carry the refitted
    model's own predictions."""
    pts = [point(b, s, max_law(b, s)) for b, s in DESIGN]
    m = fit_step_time(pts, held_out=[point(64, 1024, max_law(64, 1024), counted=False)])
    assert m.fitted_with_held_out and "refitted over the 1 held-out shape(s)" in m.reason
    assert predict_at(m, batch=8, seq=6144).seconds == pytest.approx(max_law(8, 6144), rel=1e-3)
    for p in m.points:
        assert p.predicted_seconds == pytest.approx(
            predict_at(m, batch=p.batch, seq=p.seq).seconds, rel=1e-12)


def test_too_few_points_or_bad_seconds_are_refused():
    with pytest.raises(ValueError, match="at least 2"):
        fit_step_time([point(8, 1024, 0.01)])
    with pytest.raises(ValueError, match="positive and finite"):
        fit_step_time([point(8, 1024, 0.01), point(8, 2048, -1.0)])


# ---- the choice ----------------------------------------------------------------------------


def cand(form, loo, n_params=3):
    return CandidateFit(form=form, params={}, n_params=n_params, r2_log=0.9,
                        residuals=[0.0] * len(loo or [0, 0]), loo_rel_errors=loo)


def test_choice_by_the_worst_leave_one_out_error_never_by_r2():
    got, why = choose_form([cand("max", [0.01, -0.045]), cand("sum", [0.02, 0.03]),
                            cand("smooth_max", [0.2, 0.1], 4)])
    assert got == "sum" and why.startswith("sum: LOO worst 3.0% vs max 4.5%, smooth_max 20.0%")


def test_ties_go_to_max_the_asynchronous_steps_physics():
    got, why = choose_form([cand("sum", [0.030, 0.01]), cand("max", [0.038, 0.0])])
    assert got == "max" and "tied within 1.0% with sum" in why


def test_floor_points_count_a_tenth():
    """Points 0 and 1 lie on the floor (0.010 s against 0.011 s: under 2x the smallest):
    sum's 40 % miss there counts 4 %, more than max's worst work-regime miss of 3 %."""
    seconds = [0.010, 0.011, 0.030, 0.060, 0.120]
    judged = work_regime(seconds)
    assert judged == [False, False, True, True, True]
    # "at least 2x" the smallest step, or a floor given: exactly 2x is work
    assert work_regime([0.5, 1.0, 0.99]) == [False, True, False]
    assert work_regime([0.5, 1.0, 3.0], floor=1.5) == [False, False, True]
    mx = cand("max", [0.15, -0.10, 0.01, 0.03, -0.02])
    sm = cand("sum", [-0.40, -0.30, 0.01, 0.01, 0.01])
    got, why = choose_form([sm, mx], judged)
    assert got == "max" and "over the 3 work-regime points" in why
    assert FLOOR_WEIGHT == 0.1
    # fewer than three work-regime points: every point counts in full
    got, _ = choose_form([sm, mx], [False, False, False, True, True])
    assert got == "max"  # 15 % against 40 %


def test_without_leave_one_out_the_first_form_and_why():
    got, why = choose_form([cand("max", None), cand("sum", None)])
    assert got == "max" and "no leave-one-out check" in why


def test_one_token_count_reads_the_floor_off_the_model_alone():
    """One axis n at a fixed token count: no growth per doubling of tokens to read, so
    whether the step left the floor is the model's work against its floor."""
    pts = [StepPoint(n=n, tokens=16, seconds=0.01 * n) for n in (1, 2, 4)]
    m = fit_step_time(pts, forms=("sum",))
    assert "grew" not in m.floor_note and "the model" in m.floor_note


def test_growth_of_exactly_one_and_a_half_per_doubling_is_the_work_regime():
    pts = [StepPoint(n=1, tokens=16, seconds=1.0), StepPoint(n=2, tokens=32, seconds=1.5),
           StepPoint(n=4, tokens=64, seconds=2.25)]
    m = fit_step_time(pts, forms=("max",))
    assert m.floor_left and "grew 1.50x per doubling" in m.floor_note
    assert "grew 1.49x per doubling" in fit_step_time(
        [*pts[:2], StepPoint(n=4, tokens=64, seconds=1.5 * 1.49)], forms=("max",)).floor_note


def test_growth_per_doubling_and_the_floor():
    # 4096 tokens: median of 0.010 and 0.014 = 0.012; 16384 tokens: 0.048 -> 4x over two
    # doublings = 2x per doubling
    assert top_growth_per_doubling([1024, 4096, 4096, 16384], [0.01, 0.010, 0.014, 0.048]) \
        == pytest.approx(2.0)
    assert top_growth_per_doubling([8, 8], [1.0, 2.0]) is None
    flat = [point(b, s, 0.010 + 1e-6 * b * s / 65536) for b, s in DESIGN]
    m = fit_step_time(flat)
    assert not m.floor_left and "unsupported" in m.warnings[-1]
    assert "grew 1.00x per doubling" in m.floor_note


# ---- the design ------------------------------------------------------------------------------


def test_the_static_design_by_hand():
    d = static_design(8, [1024, 2048, 4096, 8192])
    # across: (8/4, 4096), (4*8, 1024), (2*8, 2048); held out: (8, (4096+8192)/2),
    # (8/4, 2*8192), (2*32, 65536/64)
    assert [(p.batch, p.seq) for p in d.across] == [(2, 4096), (32, 1024), (16, 2048)]
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [
        ("held_out_interpolated", 8, 6144), ("held_out_seq", 2, 16384),
        ("held_out_batch", 64, 1024)]
    cpu = static_design(4, [16, 32, 64])
    assert [(p.batch, p.seq) for p in cpu.across + cpu.held_out] == [
        (1, 32), (16, 16), (8, 32), (4, 48), (1, 128), (32, 8)]


def test_a_base_batch_not_a_multiple_of_four_rounds_its_quarter_down():
    d = static_design(6, [256, 512, 1024])
    # across: (6 // 4 = 1, 512), (4 x 6, 256), (2 x 6, 512), each within 6 x 1024 tokens and
    # B*s^2 <= 6 x 1024^2; held out: (6, 768), (1, 2 x 1024), (2 x 24, 6144 / 48)
    assert [(p.batch, p.seq) for p in d.across] == [(1, 512), (24, 256), (12, 512)]
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [
        ("held_out_interpolated", 6, 768), ("held_out_seq", 1, 2048),
        ("held_out_batch", 48, 128)]


def test_the_held_out_batch_stays_within_the_tokens_budget():
    """A ladder measured past a 3000-token budget (2 x 2048): the held-out batch shape,
    twice the largest batch, takes the budget's tokens, 4 x round8(3000 / 4) = 4 x 744."""
    ladder = [DesignShape(batch=2, seq=1024, role="ladder", seconds=0.01),
              DesignShape(batch=2, seq=2048, role="ladder", seconds=0.02)]
    d = design_from_ladder(ladder, "work regime reached", DesignLimits(max_tokens=3000))
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [("held_out_batch", 4, 744)]
    assert "held_out_interpolated 2 x 1536: 2 x 1536: 3072 tokens > 3000; not planned" in d.notes


def test_a_sequence_only_design_has_no_across_shapes():
    ladder = [DesignShape(batch=1, seq=v, role="ladder", seconds=0.01 * v / 256)
              for v in (256, 512, 1024)]
    d = design_from_ladder(ladder, "work regime reached", DesignLimits(vary="seq"))
    assert d.across == [] and d.work_reached
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [
        ("held_out_interpolated", 1, 768), ("held_out_seq", 1, 2048)]


def test_a_design_without_a_ladder_is_empty_and_says_why():
    why = "2 x 1024 could not be measured; the ladder stops below it"
    d = design_from_ladder([], why, DesignLimits())
    assert (d.ladder, d.across, d.held_out, d.work_reached) == ([], [], [], False)
    assert d.stop_reason == why and d.notes == [why]
    assert plan_time_design((2, 1024), DesignLimits(), lambda b, s: None).notes == [why]


def test_a_base_batch_below_four_holds_out_one_sequence_at_twice_the_length():
    """B0 = 2 at seqs 256, 512 (envelope: 1024 tokens, B*s^2 <= 2 x 512^2): across, the
    quarter batch rounds up to 1 (1 x 256); no quarter batch for held_out_seq, so 1 x 1024,
    whose B*s^2 = 1024^2 is exactly 2x the sweep's largest, the most allowed. B0 = 1: 4x."""
    d = static_design(2, [256, 512])
    assert [(p.batch, p.seq) for p in d.across] == [(1, 256)]
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [
        ("held_out_interpolated", 2, 384), ("held_out_seq", 1, 1024),
        ("held_out_batch", 4, 256)]
    assert any(n.startswith("held_out_seq 1 x 1024: its B*s^2 is 2x") for n in d.notes)
    one = static_design(1, [256, 512])
    assert [p.role for p in one.held_out] == ["held_out_interpolated", "held_out_batch"]
    assert "held_out_seq: a base batch of 1 has no quarter batch for 2x the sequence; " \
        "not planned" in one.notes


def test_a_static_design_needs_a_base_batch_and_a_sequence():
    """Either missing is refused with the same clear message: a batch below 1 is no shape
    (its envelope would hold no tokens), and without a sequence there is no ladder."""
    for base, seqs in ((0, [256, 512]), (-2, [256]), (4, []), (0, [])):
        with pytest.raises(ValueError, match="needs a base batch and at least one sequence"):
            static_design(base, seqs)


def test_shapes_beyond_the_envelope_are_not_planned_and_said_so():
    d = static_design(16, [256, 512])  # 4 x 16 x 256 = 16384 tokens > 16 x 512
    assert [(p.batch, p.seq) for p in d.across] == [(4, 256)]
    assert any(n.startswith("across 64 x 256: beyond the sweep's memory envelope")
               for n in d.notes)


def test_growth_per_doubling_between_two_design_shapes():
    lo = DesignShape(batch=2, seq=1024, role="ladder", seconds=1.0)
    # 4x the seconds over 4x the tokens (two doublings): 2x per doubling
    assert time_growth(lo, DesignShape(batch=2, seq=4096, role="ladder", seconds=4.0)) == \
        pytest.approx(2.0)
    assert time_growth(lo, DesignShape(batch=4, seq=1024, role="ladder", seconds=1.5)) == \
        pytest.approx(1.5)
    assert time_growth(lo, DesignShape(batch=2, seq=4096, role="ladder")) is None  # not timed
    assert time_growth(lo, lo) is None  # no more tokens


def test_ladder_shapes_double_seq_then_batch():
    assert [ladder_shape((8, 1024), r, "batch_seq") for r in range(4)] == [
        (8, 1024), (8, 2048), (16, 2048), (16, 4096)]
    assert ladder_shape((1, 100), 3, "seq") == (1, 800)


def test_the_ladder_keeps_doubling_until_the_step_grows():
    """A floor of 10 ms and work of 1 us a token: 10, 10, 10 ms at 2048-8192 tokens, then
    16.4 ms at 16384: 1.64x per doubling, the work regime (>= 1.5x)."""
    step = lambda b, s: max(0.010, 1e-6 * b * s)  # noqa: E731
    rungs, why = run_ladder((2, 1024), DesignLimits(), step)
    assert [(r.batch, r.seq) for r in rungs] == [(2, 1024), (2, 2048), (4, 2048), (4, 4096)]
    assert why.startswith("work regime reached at 4 x 4096: the step grew 1.64x")
    design = plan_time_design((2, 1024), DesignLimits(), step)
    assert design.work_reached and len(design.held_out) == 3
    # a step that doubles with its tokens is in the work regime from the first doubling
    rungs, why = run_ladder((2, 1024), DesignLimits(), lambda b, s: 1e-6 * b * s)
    assert [(r.batch, r.seq) for r in rungs] == [(2, 1024), (2, 2048)]
    assert why.startswith("work regime reached at 2 x 2048: the step grew 2.00x")


def test_a_one_token_sequence_is_a_shape_and_an_empty_one_is_not():
    """Seq 1 (a workload whose sample is one token) is the smallest shape: the ladder starts
    there, 4 x 1 then 4 x 2 (2x the seconds: the work regime). A batch or sequence of 0
    is no shape: the ladder stops before it and says why."""
    step = lambda b, s: 1e-3 * b * s  # noqa: E731
    rungs, why = run_ladder((4, 1), DesignLimits(), step)
    assert [(r.batch, r.seq) for r in rungs] == [(4, 1), (4, 2)]
    assert why.startswith("work regime reached at 4 x 2")
    for base in ((4, 0), (0, 8)):
        rungs, why = run_ladder(base, DesignLimits(), step)
        assert rungs == [] and f"{base[0]} x {base[1]} is not a shape" in why


def test_two_sequences_ask_for_all_three_across_shapes_and_say_which_do_not_fit():
    """Rule 2 at B0 = 4, seqs 256, 512 (envelope: 2048 tokens): (1, 256) is planned;
    (16, 256) and (8, 512) hold 4096 tokens, beyond the envelope: not planned, and the notes
    name both (the design accounts for every rule-2 shape)."""
    d = static_design(4, [256, 512])
    assert [(p.batch, p.seq) for p in d.across] == [(1, 256)]
    for shape in ("16 x 256", "8 x 512"):
        assert f"across {shape}: beyond the sweep's memory envelope ({shape}: 4096 tokens " \
            "> 2048); not planned" in d.notes


def test_the_ladder_says_when_a_budget_stops_it():
    step = lambda b, s: 0.010  # noqa: E731  (never leaves the floor)
    rungs, why = run_ladder((2, 1024), DesignLimits(), step, fits=lambda b, s: b * s <= 8192)
    assert len(rungs) == 3 and "4 x 4096 does not fit the memory budget" in why
    assert "unsupported" in why
    slow = lambda b, s: 0.1 * b * s / 2048  # noqa: E731  (0.1 s at 2 x 1024)
    rungs, why = run_ladder((2, 1024), DesignLimits(point_seconds=3.0), slow)
    # rung 1 (2 x 2048) is estimated at 0.1 x 2 x 2 = 0.4 s a step x 15 > 3 s
    assert len(rungs) == 1 and "point budget of 3 s" in why
    # out of rungs before the step grew
    rungs, why = run_ladder((2, 1024), DesignLimits(max_rungs=1), step)
    assert len(rungs) == 2 and why.startswith("1 doublings without reaching the work regime")
    # the model's longest sequence stops the ladder before the rung that would pass it
    rungs, why = run_ladder((2, 1024), DesignLimits(max_seq=2048), step)
    assert [(r.batch, r.seq) for r in rungs] == [(2, 1024), (2, 2048), (4, 2048)]
    assert why.startswith("stopped before 4 x 4096: seq 4096 > the model's 2048")
    d = plan_time_design((2, 1024), DesignLimits(point_seconds=3.0), slow)
    assert not d.work_reached


def test_extension_shapes_continue_the_ladder_within_the_budgets():
    top = DesignShape(batch=8, seq=8192, role="ladder", seconds=0.010)
    shapes, notes = extension_shapes(top, DesignLimits(), rungs=2)
    assert [(p.batch, p.seq) for p in shapes] == [(8, 16384), (16, 16384)] and notes == []
    shapes, notes = extension_shapes(top.model_copy(update={"seconds": 0.074}), DesignLimits())
    assert shapes == [] and "point budget of 3 s" in notes[0]


# ---- the noise verdict -----------------------------------------------------------------------


def test_a_point_is_noisy_only_past_the_tolerance():
    # (1.1 - 1.0) / 1.05 = 0.0952...: noisy at 0.05, not at 0.1; one child shows nothing
    meds = [[1.0, 1.05, 1.1], [1.0, 1.0, 1.0], [2.0]]
    assert noisy_points(meds, 0.05) == [0]
    assert noisy_points(meds, 0.1) == []
    exact = [[1.0, 1.5, 2.0]]  # (2 - 1) / 1.5 = 2/3 exactly as the tolerance: not past it
    assert noisy_points(exact, disagreement(exact[0])) == []


def test_the_one_axis_power_laws_are_not_forms_of_the_step_time_model():
    """The sweep's throughput law keeps them (the last fallback); the model fits the forms
    over counted work only, and refuses to be asked for another."""
    pts = [StepPoint(n=n, tokens=16 * n, seconds=0.001 + 0.01 * n) for n in (1, 2, 4, 8)]
    m = fit_step_time(pts)
    assert [c.form for c in m.candidates] == ["max", "sum", "smooth_max"]
    with pytest.raises(pydantic.ValidationError):
        m.model_copy(update={"form": "power"}).model_validate(
            {**m.model_dump(), "form": "power"})


def test_noise_verdict_by_hand():
    assert disagreement([1.0, 1.3, 1.0]) == pytest.approx(0.3)
    assert disagreement([1.0, 1.3, 1.0, 1.0]) == pytest.approx(0.0)  # outvoted
    assert noisy_points([[1.0, 1.04], [1.0, 1.2], [1.0]], 0.05) == [1]
    v = time_verdict([[1.0, 1.2, 1.0], [2.0, 2.0, 2.0]], [0.02, -0.08],
                     labels=["8 x 1024", "8 x 2048"], held_out_labels=["a", "b"],
                     child_tolerance=0.05, held_out_tolerance=0.05)
    assert v.label == "REMEASURE" and v.noisy_points == [0] and v.failed_held_out == [1]
    assert v.reasons == ["8 x 1024: children disagree by 20.0% > 5.0%",
                         "b: error -8.0% beyond 5.0%"]
    assert v.held_out_worst == pytest.approx(0.08) and v.held_out_median == pytest.approx(0.05)
    again = time_verdict([[1.0, 1.2, 1.0]], [], remeasured=True, child_tolerance=0.05)
    assert again.label == "NOISY"
    floor = time_verdict([[1.0, 1.4, 1.0]], [0.3], work=[False], held_out_work=[False])
    # nothing judged (the one held-out shape is on the floor): never OK
    assert floor.label == "UNJUDGED" and floor.held_out_worst is None and floor.judged == 0
    none = time_verdict([[1.0, 1.0, 1.0]], [])  # no held-out shape at all
    assert none.label == "UNJUDGED" and none.judged == 0


# ---- the recorded H200 grid --------------------------------------------------------------------




@pytest.mark.parametrize("name,b0,seqs,median_bound,worst_bound", [
    ("tinylm", 8, [1024, 2048, 4096, 8192], 0.03, 0.06),
    ("softmax", 16, [1024, 2048, 4096, 8192], 0.03, 0.05),
    ("gpt2", 4, [256, 512, 1024, 2048], 0.03, 0.05),
    # scan's 2 x 2048 is 10 % slower than 8 x 1024 at the same FLOPs (a small batch leaves
    # the device under-occupied; FLOPs cannot see it): its bound is 10 %
    ("scan", 8, [256, 512, 1024, 2048], 0.05, 0.10)])
def test_the_h200_grid_fitted_over_certifys_design(name, b0, seqs, median_bound, worst_bound):
    """The design certify measures (static_design), fitted on the H200 grid's medians with
    their repeats' spread; every other grid shape held out. Work-regime held-out errors
    (2x the smallest fitted step or more) within the stated bounds; a max-type form chosen."""
    by, flops = h200_grid(name)
    design = static_design(b0, seqs)
    fit = [(p.batch, p.seq) for p in design.fit_shapes if (p.batch, p.seq) in by]
    assert len(fit) >= 6

    def sp(b, s, counted):
        v = by[(b, s)]
        sigma = (max(v) - min(v)) / np.median(v) / 2 if len(v) > 1 else None
        f = flops[(b, s)] if counted else {"gemm": None, "attn": None}
        return StepPoint(batch=b, seq=s, tokens=b * s, seconds=float(np.median(v)),
                         rel_sigma=sigma, gemm_flops=f["gemm"], attn_flops=f["attn"],
                         label=f"{b} x {s}")

    pts = [sp(b, s, True) for b, s in fit]
    held = [sp(b, s, False) for b, s in sorted(by) if (b, s) not in fit]
    m = fit_step_time(pts, held_out=held)
    assert m.form in ("max", "smooth_max") and m.floor_left
    floor = min(p.seconds for p in pts)
    work = [abs(h.rel_error) for h in m.held_out if h.measured_seconds >= 2 * floor]
    assert len(work) >= 3
    assert np.median(work) <= median_bound and max(work) <= worst_bound, (m.reason, [
        (h.label, round(h.rel_error, 3)) for h in m.held_out])


def test_near_the_floor_the_childrens_tolerance_widens():
    from afford.fit.time.time_noise import tolerance_at

    # 5 % + 45 % x (1/2)^2 = 16.25 % at twice the floor; 5 % + 45 % / 25 = 6.8 % at 5x
    assert tolerance_at(0.5, 0.05, 0.5) == pytest.approx(0.1625)
    assert tolerance_at(0.2, 0.05, 0.5) == pytest.approx(0.068)
    assert tolerance_at(None, 0.05) == 0.05
    # GPT-2's 8 x 1024 on the H200: 60 ms over a 27 ms floor, children 5.5 % apart: OK
    v = time_verdict([[0.0600, 0.0633, 0.0605]], [], child_tolerance=0.05,
                     floor_shares=[0.027 / 0.0605])
    assert v.label == "UNJUDGED" and v.noisy_points == []  # not noisy; no held-out shape
    assert time_verdict([[0.0600, 0.0633, 0.0605]], [], child_tolerance=0.05).label == \
        "REMEASURE"


def test_a_reproduced_held_out_miss_is_the_models_error_not_noise_and_not_ok():
    from afford.fit.time.time_noise import time_verdict

    # two fitted points and one held-out shape whose children agree (1 % apart), missed by 8 %
    meds = [[0.10, 0.101, 0.1005], [0.20, 0.201, 0.2005], [0.40, 0.404, 0.402]]
    first = time_verdict(meds, [0.08], held_out_tolerance=0.05)
    assert first.label == "REMEASURE" and first.model_misses == []
    after = time_verdict(meds, [0.08], held_out_tolerance=0.05, remeasured=True,
                         held_out_labels=["8 x 4096 (held_out_seq)"])
    # not noise, not OK either: MISSED, the reason naming the shape and its error
    assert after.label == "MISSED" and after.failed_held_out == [0]
    assert after.reasons == after.model_misses
    assert len(after.reasons) == 1 and after.reasons[0].startswith(
        "8 x 4096 (held_out_seq): error +8.0% beyond 5.0%")
    # the same miss with children 30 % apart stays noise
    noisy = [*meds[:2], [0.40, 0.52, 0.45]]
    still = time_verdict(noisy, [0.08], held_out_tolerance=0.05, remeasured=True)
    assert still.label == "NOISY" and still.model_misses == []
    assert any("+8.0%" in r for r in still.reasons)


def test_a_growth_of_exactly_the_threshold_stops_the_ladder_at_the_first_doubling():
    """1/64 s at 2 x 1024, 1.5/64 s at 2 x 2048 (exact in binary): 1.5x per doubling,
    exactly GROWTH_WORK; the threshold is inclusive (>= 1.5x is the work regime), so the
    ladder stops there."""
    step = lambda b, s: (1.0 if b * s <= 2048 else 1.5) / 64  # noqa: E731
    rungs, why = run_ladder((2, 1024), DesignLimits(), step)
    assert [(r.batch, r.seq) for r in rungs] == [(2, 1024), (2, 2048)]
    assert why.startswith("work regime reached at 2 x 2048: the step grew 1.50x")


def test_a_measured_design_keeps_within_the_callers_memory_budget():
    """Around a ladder 2 x 1024, 2 x 2048, the held-out batch shape is 4 x 1024 (twice the
    largest batch). A memory budget that allows only batches up to 2 refuses it, on top of
    the sweep's envelope: both limits apply, and the notes say which refused what."""
    ladder = [DesignShape(batch=2, seq=1024, role="ladder", seconds=0.01),
              DesignShape(batch=2, seq=2048, role="ladder", seconds=0.02)]
    free = design_from_ladder(ladder, "work regime reached", DesignLimits())
    assert ("held_out_batch", 4, 1024) in [(p.role, p.batch, p.seq) for p in free.held_out]
    d = design_from_ladder(ladder, "work regime reached", DesignLimits(),
                           fits=lambda b, s: b <= 2)
    assert [(p.role, p.batch, p.seq) for p in d.across + d.held_out] == [
        ("across", 1, 1024), ("held_out_interpolated", 2, 1536)]
    assert "held_out_batch 4 x 1024: 4 x 1024 does not fit the memory budget; not planned" \
        in d.notes
    assert any(n.startswith("across 8 x 1024: beyond the sweep's memory envelope")
               for n in d.notes)


def test_a_one_sequence_sweep_below_four_holds_out_in_the_rules_order():
    """B0 = 2 at one sequence, 512: no interpolated shape (one length only); the sequence
    held out at twice the length (1 x 1024) comes first, then the batch one (4 x 256): the
    held-out shapes keep the order of the rules (interpolated, sequence, batch)."""
    d = static_design(2, [512])
    assert [(p.role, p.batch, p.seq) for p in d.held_out] == [
        ("held_out_seq", 1, 1024), ("held_out_batch", 4, 256)]


def test_a_model_without_a_floor_has_left_it():
    """A new form whose floor F was fitted to 0: the step is all work, so whatever the growth
    between the two token counts (1.2x here, below GROWTH_WORK), it has left the floor; there
    is no work-over-floor ratio to state (it would divide by 0)."""
    from afford.fit.time.time_fit import _floor_state

    params = {"F": 0.0, "w_tokens": 1e-3, "w_gemm": 0.0, "w_attn": 0.0, "w_seq_tokens": 0.0}
    rows = [{"tokens": 1000.0}, {"tokens": 2000.0}]
    left, note = _floor_state(params, rows, [1000, 2000], np.array([1.0, 1.2]))
    assert left
    assert note.startswith("the step grew 1.20x per doubling")
    assert note.endswith("; the model has no floor")


def test_work_of_exactly_twice_the_floor_has_left_it():
    """A sum form with floor F = 0.5 s and 2^-11 s a token: at the largest point, 2048 tokens,
    the work is 1.0 s, exactly WORK_OVER_FLOOR x the floor (exact in binary). The threshold
    is inclusive, so the step has left the floor although it grew only 1.2x per doubling."""
    from afford.fit.time.time_fit import _floor_state

    params = {"F": 0.5, "w_tokens": 2.0 ** -11, "w_gemm": 0.0, "w_attn": 0.0,
              "w_seq_tokens": 0.0}
    rows = [{"tokens": 1024.0}, {"tokens": 2048.0}]
    left, note = _floor_state(params, rows, [1024, 2048], np.array([1.0, 1.2]))
    assert left
    assert "the model's work is 2.00x its floor at the largest point" in note
