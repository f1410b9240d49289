"""The memory law's pure math: exact recovery, form choice, bounds, largest batch, verdicts."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afford.fit.memory.memory_fit import (
    BATCH_CAP,
    MemoryObservation,
    batch_linearity,
    candidate_forms,
    columns,
    fit_form,
    fit_memory,
    fit_params_affine,
    judge,
    largest_batch,
)
from afford.schema.memory_section import MemoryFit, activation_features

MiB = 2**20
# a tinylm-like sweep: seq sweep at B=8 and batch sweep at s=512, d=512, L=8, H=8
SHAPES = [(8, 128), (8, 256), (8, 512), (8, 1024), (2, 512), (4, 512), (16, 512)]


def observations(c_res, c_op, fixed=0.0, params=lambda s: 25e6 + 512 * s, bpp=16.0):
    obs = []
    for B, s in SHAPES:
        states = bpp * params(s)
        x_res, x_op = activation_features(B, s, 512, 8, 8)
        obs.append(MemoryObservation(B=B, s=s, d=512, L=8, H=8, states_bytes=states,
                                     peak_bytes=states + fixed + c_res * x_res + c_op * x_op))
    return obs


def test_features_are_the_law_regressors():
    # L*B*s*d and L*B*H*s^2 at B=2, s=3, d=4, L=5, H=6
    assert activation_features(2, 3, 4, 5, 6) == (120.0, 540.0)


def test_states_measured_recovers_known_coefficients():
    fit = fit_form(observations(34.0, 5.0), "allocated", "states_measured")
    assert fit.c_res == pytest.approx(34.0, rel=1e-9)
    assert fit.c_op == pytest.approx(5.0, rel=1e-9)
    assert fit.fixed_bytes == 0.0
    assert fit.r2 == pytest.approx(1.0)
    assert max(abs(e) for e in fit.loo_rel_errors) < 1e-9
    assert len(fit.loo_rel_errors) == len(SHAPES) and fit.n_points == len(SHAPES)


def test_fixed_form_recovers_a_constant_and_is_chosen():
    # a 32 MiB workspace minus the gradients missing at the peak (-4 B/param of 25.2M)
    fixed = 32 * MiB - 4 * 25.2e6
    fit = fit_memory(observations(68.0, 0.0, fixed), "allocated")
    assert fit.form == "states_plus_fixed"
    assert fit.c_res == pytest.approx(68.0, rel=1e-9)
    assert fit.c_op == pytest.approx(0.0, abs=1e-9)
    assert fit.fixed_bytes == pytest.approx(fixed, rel=1e-7)
    # the plain law could not absorb the constant; with the s^2 term or without, the fixed
    # form is exact, and the one with fewer coefficients wins the tie
    assert fit.s2_term is False and fit.name == "states_plus_fixed, no s^2"
    assert fit.candidates["states_measured"] > 1e-3
    assert fit.candidates["states_measured, no s^2"] > 1e-3
    assert fit.candidates["states_plus_fixed"] < 1e-9


def test_exact_plain_data_keeps_the_plain_form():
    fit = fit_memory(observations(34.0, 5.0), "allocated")
    assert fit.form == "states_measured"
    assert fit.other_form_loo_max is not None and fit.other_form_loo_max < 1e-9


def test_activation_coefficients_are_bounded_at_zero():
    # peaks that shrink with s^2 would need c_op < 0: the bound holds it at 0
    fit = fit_form(observations(40.0, -0.5), "allocated", "states_measured")
    assert fit.c_op == 0.0 and fit.c_res > 0.0
    assert fit.r2 < 1.0


def test_unbounded_solution_matches_numpy_lstsq_when_interior():
    rng = np.random.default_rng(0)
    obs = observations(50.0, 2.0, 10 * MiB)
    noisy = [o.model_copy(update={"peak_bytes": o.peak_bytes * (1 + 0.01 * rng.standard_normal())})
             for o in obs]
    fit = fit_form(noisy, "allocated", "states_plus_fixed")
    a = np.array([[*activation_features(o.B, o.s, o.d, o.L, o.H), 1.0] for o in noisy])
    rhs = np.array([o.peak_bytes - o.states_bytes for o in noisy])
    ref = np.linalg.lstsq(a, rhs, rcond=None)[0]
    assert [fit.c_res, fit.c_op, fit.fixed_bytes] == pytest.approx(list(ref), rel=1e-6)
    # residuals are relative, predicted / measured - 1
    pred = [fit.predict(o.states_bytes, o.B, o.s, o.d, o.L, o.H) for o in noisy]
    assert fit.residuals == pytest.approx([p / o.peak_bytes - 1 for p, o in zip(pred, noisy)])


def test_predict_with_override_replaces_one_constant():
    fit = fit_form(observations(34.0, 5.0), "allocated", "states_measured")
    base = fit.predict(100.0, 1, 2, 3, 4, 5)
    # 100 + 4*(34*1*2*3 + 5*1*5*4) = 100 + 4*(204 + 100) = 1316
    assert base == pytest.approx(1316.0)
    assert fit.predict(100.0, 1, 2, 3, 4, 5, c_op=0.0) == pytest.approx(100 + 4 * 204)


def test_too_few_or_bad_points_are_refused():
    with pytest.raises(ValueError, match="at least 2"):
        fit_form(observations(34, 5)[:1], "allocated", "states_measured")
    bad = [o.model_copy(update={"peak_bytes": 0.0}) for o in observations(34, 5)]
    with pytest.raises(ValueError, match="positive"):
        fit_memory(bad, "allocated")
    for states in (-1.0, float("inf")):
        bad = [o.model_copy(update={"states_bytes": states}) for o in observations(34, 5)]
        with pytest.raises(ValueError, match="states bytes must be finite and >= 0"):
            fit_memory(bad, "allocated")
    # no states at rest (nothing trained, or states not counted) is a valid observation
    none = [o.model_copy(update={"states_bytes": 0.0, "peak_bytes": o.peak_bytes - o.states_bytes})
            for o in observations(34, 5)]
    assert fit_form(none, "allocated", "states_measured").c_res == pytest.approx(34.0, rel=1e-9)


def test_params_affine_in_s():
    # tinylm: 12 L d^2 + 13 L d + (256 + s) d + 2 d at d=64, L=2
    p = [12 * 2 * 64**2 + 13 * 2 * 64 + (256 + s) * 64 + 2 * 64 for s in (32, 64, 256)]
    p0, ps = fit_params_affine([32, 64, 256], p)
    assert ps == pytest.approx(64.0)
    assert p0 == pytest.approx(12 * 2 * 4096 + 26 * 64 + 256 * 64 + 128)
    assert fit_params_affine([128, 128], [10, 10]) == (10.0, 0.0)
    assert fit_params_affine([128], [7]) == (7.0, 0.0)  # one shape: constant in s
    assert fit_params_affine([64, 128], [p[0] - 32 * 64 + 64 * 64, p[0] - 32 * 64 + 128 * 64]) \
        == pytest.approx((p0, 64.0))  # two shapes determine the line
    with pytest.raises(ValueError, match="no shapes"):
        fit_params_affine([], [])


def test_batch_linearity():
    r2, worst = batch_linearity([1, 2, 4, 8], [110, 120, 140, 180])  # 100 + 10 B
    assert r2 == pytest.approx(1.0) and worst == pytest.approx(0.0, abs=1e-12)
    r2, worst = batch_linearity([1, 2, 4, 8], [1, 4, 16, 64])  # B^2 is not linear
    assert r2 < 0.97 and worst > 0.1


def test_largest_batch_worked_by_hand():
    f = lambda b: 100 + 10 * b  # noqa: E731
    assert largest_batch(f, 1000) == 90      # 100 + 900
    assert largest_batch(f, 170) == 7        # exactly on the budget fits
    assert largest_batch(f, 169.9) == 6
    assert largest_batch(f, 109) == 0        # not even one sequence
    assert largest_batch(f, 110) == 1        # one sequence exactly on the budget
    assert largest_batch(lambda b: 0.0, 0.0) == 0  # no budget: nothing fits, even a free model
    assert largest_batch(lambda b: 1.0, 2.0) == BATCH_CAP  # no per-sequence cost
    for guess in (1, 6, 7, 8, 500, BATCH_CAP):  # from any first guess, the same answer
        assert largest_batch(f, 170, guess=guess) == 7
        assert largest_batch(f, 109, guess=guess) == 0
        assert largest_batch(lambda b: 1.0, 2.0, guess=guess) == BATCH_CAP


@settings(max_examples=200, deadline=None)
@given(k0=st.floats(0, 1e12), k1=st.floats(1e-3, 1e10), b1=st.floats(1, 1e13),
       b2=st.floats(1, 1e13))
def test_largest_batch_is_monotone_in_budget_and_tight(k0, k1, b1, b2):
    f = lambda b: k0 + k1 * b  # noqa: E731
    lo, hi = sorted((b1, b2))
    n_lo, n_hi = largest_batch(f, lo), largest_batch(f, hi)
    assert n_lo <= n_hi
    for n, budget in ((n_lo, lo), (n_hi, hi)):
        if n > 0:
            assert f(n) <= budget
        if n < BATCH_CAP:
            assert f(n + 1) > budget


def _judge(default_scale, tol=0.05):
    fitted = lambda b: 1e9 + 1e8 * b  # noqa: E731
    default = lambda b: default_scale * fitted(b)  # noqa: E731
    return judge("c_res", "test default", "a citation", default_value=34.0, fitted_value=40.0,
                 fitted=fitted, default=default, budgeted=lambda b, x: x * 1.1,
                 target={"B": 8, "s": 512, "d": 512, "L": 8, "H": 8},
                 budget_bytes=1e10, tolerance=tol)


def test_verdict_optimistic_when_default_under_predicts():
    v = _judge(0.8)
    assert v.status == "WRONG" and v.direction == "optimistic"
    assert v.effect == pytest.approx(-0.2)
    # fit: 1.1*(1e9 + 1e8 b) <= 1e10 -> b <= 80.9; default x0.8 -> b <= 103.6
    assert (v.max_batch_fitted, v.max_batch_default) == (80, 103)
    assert "admits batches 81..103 that do not fit" in v.consequence


def test_verdict_pessimistic_when_default_over_predicts():
    v = _judge(1.25)
    assert v.status == "WRONG" and v.direction == "pessimistic"
    # default x1.25: 1.375*(1e9 + 1e8 b) <= 1e10 -> b <= 62.7
    assert v.max_batch_default == 62 and "leaves batches 63..80 unused" in v.consequence


def test_verdict_confirmed_within_tolerance():
    v = _judge(1.04)
    assert v.status == "CONFIRMED" and v.direction is None
    assert v.effect == pytest.approx(0.04)
    # x1.04 still changes the largest batch (80 -> 77): stated, though within tolerance
    assert v.max_batch_default == 77


def test_verdict_exactly_at_the_tolerance_is_confirmed():
    v = _judge(1.25, tol=0.25)  # 1.25 x / x - 1 = 0.25 exactly in binary
    assert v.effect == 0.25 and v.status == "CONFIRMED" and v.direction is None


def test_verdict_without_device_memory():
    v = judge("formula", "d", "c", default_value=None, fitted_value=None, fitted=lambda b: 2.0,
              default=lambda b: 1.0, budgeted=lambda b, x: x, target={"B": 1, "s": 1},
              budget_bytes=None, tolerance=0.05)
    assert v.direction == "optimistic" and v.max_batch_fitted is None
    assert "unknown" in v.consequence


# ---- the s^2 term: declared by the workload, or chosen by leave-one-out ---------------

def _obs(points, fixed=0.0, c_res=3.0, c_op=1.0):
    """L = d = H = 1: x_res = B*s, x_op = B*s^2; states 10 B."""
    return [MemoryObservation(B=B, s=s, d=1, L=1, H=1, states_bytes=10.0,
                              peak_bytes=10.0 + fixed + c_res * B * s + c_op * B * s * s)
            for B, s in points]


def test_candidate_forms_fewest_coefficients_first():
    assert candidate_forms(None) == [("states_measured", False), ("states_measured", True),
                                     ("states_plus_fixed", False), ("states_plus_fixed", True)]
    assert candidate_forms(False) == [("states_measured", False), ("states_plus_fixed", False)]
    assert columns("states_plus_fixed", False) == ("c_res", "fixed_bytes")


def test_law_without_s2_term_worked_by_hand():
    # peaks - states = 3*B*s + B*s^2 at (1, 1), (1, 2): 4, 10. Without the s^2 column the
    # least-squares slope through the origin is (1*4 + 2*10) / (1 + 4) = 4.8
    fit = fit_form(_obs([(1, 1), (1, 2)]), "allocated", "states_measured", s2_term=False)
    assert fit.c_res == pytest.approx(4.8) and fit.c_op == 0.0 and fit.s2_term is False
    # residuals: 4.8 vs 4 at s=1 (peak 14 -> 14.8), 9.6 vs 10 at s=2 (20 -> 19.6)
    assert fit.residuals == pytest.approx([0.8 / 14, -0.4 / 20])
    assert fit.describe().startswith("states + L*(4.80 B*s*d) (allocated, states_measured, no s^2")
    # 7, 9, 11 = 5 + 2*x_res: the fixed form without s^2 recovers both exactly
    fixed = fit_form(_obs([(1, 1), (1, 2), (1, 3)], fixed=5.0, c_res=2.0, c_op=0.0),
                     "allocated", "states_plus_fixed", s2_term=False)
    assert (fixed.c_res, fixed.fixed_bytes) == pytest.approx((2.0, 5.0))


def test_leave_one_out_keeps_a_real_s2_term_and_drops_a_missing_one():
    fit = fit_memory(observations(34.0, 5.0), "allocated")  # scores materialised
    assert fit.s2_term is True and fit.c_op == pytest.approx(5.0, rel=1e-9)
    assert fit.candidates["states_measured, no s^2"] > 1e-2
    fused = fit_memory(observations(68.0, 0.0), "allocated")  # no s^2 in the data
    assert fused.s2_term is False and fused.name == "states_measured, no s^2"
    assert fused.c_res == pytest.approx(68.0, rel=1e-9)


def test_declared_s2_term_restricts_the_forms():
    fit = fit_memory(observations(34.0, 5.0), "allocated", s2_term=False)
    assert fit.s2_term is False and fit.c_op == 0.0
    assert set(fit.candidates) == {"states_measured, no s^2", "states_plus_fixed, no s^2"}
    kept = fit_memory(observations(68.0, 0.0), "allocated", s2_term=True)
    assert kept.s2_term is True and set(kept.candidates) == {"states_measured",
                                                              "states_plus_fixed"}


def test_a_stored_fit_without_the_field_has_the_s2_term():
    # certificates written before the field existed: their laws all had the s^2 term
    fit = MemoryFit.model_validate({"quantity": "allocated", "form": "states_measured",
                                    "c_res": 34.0, "c_op": 5.0, "r2": 1.0, "residuals": [],
                                    "n_points": 7})
    assert fit.s2_term is True and fit.candidates == {} and "B*H*s^2" in fit.describe()


def test_as_many_shapes_as_coefficients_fit_without_a_check():
    # one shape, one coefficient (c_res, no s^2 term): an exact fit, no leave-one-out
    fit = fit_memory(observations(34, 0)[:1], "allocated", s2_term=False)
    assert fit.n_points == 1 and fit.loo_rel_errors is None
    assert fit.c_res == pytest.approx(34) and fit.residuals == pytest.approx([0.0], abs=1e-12)
    two = fit_memory(observations(34, 5)[:2], "allocated", s2_term=True)
    assert two.n_points == 2 and two.loo_rel_errors is None


def test_a_model_without_attention_heads_fits_no_operator_term():
    # H = 0 (an MLP): the L*B*H*s^2 column is all zeros; the solver must not divide by its
    # zero norm, and the law comes out with c_op = 0 and the residual coefficient exact
    obs = [MemoryObservation(B=B, s=s, d=512, L=8, H=0, states_bytes=4e8,
                             peak_bytes=4e8 + 30.0 * 8 * B * s * 512) for B, s in SHAPES]
    fit = fit_form(obs, "allocated", "states_measured", s2_term=True)
    assert fit.c_op == 0.0 and fit.c_res == pytest.approx(30.0, rel=1e-9)
    assert all(abs(r) < 1e-9 for r in fit.residuals)
