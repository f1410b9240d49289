"""fit/step_forms' closed-form pieces, worked by hand (the fits polish from them, so an error
here hides behind the polish in the end-to-end tests of test_step_time.py): the weighted
floor level, the forms' normalised values, the work side, the weights and the design."""

import numpy as np
import pytest

from afford.fit.time import step_forms as sf
from afford.schema.time_law import evaluate_form


def test_floor_level_is_the_weighted_least_squares_floor():
    # argmin_F (F/1 - 1)^2 + (F/2 - 1)^2: 2 (F - 1) + (F/2 - 1) = 0, F = 6/5
    assert sf._floor_level(np.array([1.0, 2.0]), np.array([1.0, 1.0])) == pytest.approx(1.2)
    # weight 1/2 on the second point: 2 (F - 1) + (F/2 - 1)/4 = 0, F = 18/17
    assert sf._floor_level(np.array([1.0, 2.0]), np.array([1.0, 0.5])) == \
        pytest.approx(18 / 17)
    assert sf._floor_level(np.array([3.0, 3.0, 3.0]), np.ones(3)) == pytest.approx(3.0)


@pytest.mark.parametrize("form,k,want", [("max", None, 4.0), ("sum", None, 7.0),
                                         ("smooth_max", 2.0, 5.0),   # (3^2 + 4^2)^(1/2)
                                         ("smooth_max", 1.0, 7.0),   # k = 1 is the sum
                                         ("smooth_max", 3.0, 91 ** (1 / 3))])
def test_forms_by_hand_and_as_the_stored_model_evaluates_them(form, k, want):
    # F = 3, work = 2 x 1.5 + 0.5 x 2 = 4
    X = np.array([[1.5, 2.0]])
    theta = np.array([3.0, 2.0, 0.5] + ([k] if k else []))
    assert sf.predict_norm(form, theta, X)[0] == pytest.approx(want)
    params = {"F": 3.0, "w_gemm": 2.0, "w_attn": 0.5, **({"k": k} if k else {})}
    assert evaluate_form(form, params, {"gemm_flops": 1.5, "attn_flops": 2.0}) == \
        pytest.approx(want)


def test_work_side_counts_the_points_whose_work_reaches_the_floor():
    d = sf._Design(["tokens"], np.array([[1.0], [2.0], [3.0], [4.0]]), np.ones(1),
                   np.ones(4), 1.0, np.ones(4), np.zeros(1), np.zeros((0, 1)))
    theta = np.array([2.0, 1.0])  # F = 2, W = 1 x tokens: 2, 3, 4 reach it
    assert sf.work_side("max", theta, d) == 3
    assert sf.work_side("sum", theta, d) == 3
    assert sf.work_side("max", np.array([2.0 * (1 + 1e-12), 1.0]), d) == 3  # within 1e-9
    assert sf.work_side("sum", np.array([2.0 * (1 + 1e-12), 1.0]), d) == 2  # exact for sum


def test_a_start_the_solver_refuses_comes_back_as_it_was():
    # least_squares raises ValueError on a start whose residuals are not finite (a NaN from
    # a degenerate earlier fit): the polish keeps that start, the caller's cost ranks it last
    d = sf._Design(["tokens"], np.array([[1.0], [2.0], [3.0], [4.0]]), np.ones(1),
                   np.ones(4), 1.0, np.ones(4), np.zeros(1), np.zeros((0, 1)))
    got = sf._polish("max", np.array([np.nan, 1.0]), d)
    assert got is not None and np.isnan(got[0]) and got[1] == 1.0
    # a finite start is polished to the exact law: F = 0.5, W = 0.25 x tokens
    d.y[:] = [0.5, 0.5, 0.75, 1.0]
    assert sf._polish("max", np.array([0.4, 0.3]), d) == pytest.approx([0.5, 0.25], abs=1e-6)


def test_weights_floor_the_uncertainty_at_one_percent():
    got = sf.weights(np.array([0.005, 0.01, 0.04, np.nan]))
    assert got == pytest.approx([1.0, 1.0, 0.25, 1.0])


def test_design_normalises_and_drops_a_proportional_column():
    rows = [{"gemm_flops": 10.0 * t, "tokens": float(t)} for t in (1, 2, 4)]
    d = sf.design(rows, np.array([0.5, 1.0, 2.0]), np.full(3, np.nan), gemm_rate=100.0)
    assert d.columns == ["const", "gemm_flops"] and d.dropped == ["tokens"]
    assert d.ys == 2.0 and d.y == pytest.approx([0.25, 0.5, 1.0])
    assert d.col_scale == pytest.approx([1.0, 40.0])
    assert d.X[:, 1] == pytest.approx([0.25, 0.5, 1.0])
    # w_gemm >= 1 / gemm_rate: normalised, 40 FLOP / 100 FLOP/s / 2 s
    assert d.lb == pytest.approx([0.0, 0.2])


def test_nnls_rel_recovers_an_exact_non_negative_solution():
    # y = 2 x1 + 3 x2 at three points; relative residuals, no prior: c = (2, 3)
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = X @ np.array([2.0, 3.0])
    c = sf._nnls_rel(X, y, np.ones(3), np.zeros(2), np.zeros((0, 2)))
    assert c == pytest.approx([2.0, 3.0], rel=1e-6)
    # a lower bound below the truth changes nothing; one above it holds: c1 >= 2.5
    c = sf._nnls_rel(X, y, np.ones(3), np.array([1.0, 0.0]), np.zeros((0, 2)))
    assert c == pytest.approx([2.0, 3.0], rel=1e-6)
    c = sf._nnls_rel(X, y, np.ones(3), np.array([2.5, 0.0]), np.zeros((0, 2)))
    assert c[0] >= 2.5 - 1e-12


def test_fit_forms_count_their_parameters_and_zero_what_they_do_not_fit():
    """Work in GEMM FLOPs only (no attention counted): t = max(F, w0 + w_gemm x FLOPs)."""
    rows = [{"gemm_flops": g, "tokens": 1.0} for g in (1e9, 2e9, 4e9, 8e9, 16e9)]
    y = np.array([max(0.01, 0.001 + 2e-12 * r["gemm_flops"]) for r in rows])
    out = sf.fit_forms(("max", "sum", "smooth_max"), rows, y, np.full(5, np.nan), None)
    # columns: const, gemm_flops (tokens is constant: proportional to const, dropped)
    assert out["max"][1] == 3 and out["sum"][1] == 2 and out["smooth_max"][1] == 4
    for form, (params, _, _) in out.items():
        assert params["w_attn"] == 0.0 and params["w_seq_tokens"] == 0.0, form
        assert params["w_tokens"] == 0.0, form
    assert out["max"][0]["w_gemm"] == pytest.approx(2e-12, rel=1e-4)
    assert out["max"][0]["F"] == pytest.approx(0.01, rel=1e-4)
    assert "w0" not in out["sum"][0] and "k" in out["smooth_max"][0]


def test_fit_sum_solves_the_exact_sum_in_closed_form():
    """t = 0.004 + 2e-9 x tokens at 1k..8k tokens: the closed-form fit, before any polish,
    is the law (normalised by the largest step and the column's scale)."""
    rows = [{"tokens": float(n)} for n in (1000, 2000, 4000, 8000)]
    y = np.array([0.004 + 2e-9 * r["tokens"] for r in rows])
    d = sf.design(rows, y, np.full(4, np.nan), None).without_const()
    assert d.columns == ["tokens"]
    theta = sf._fit_sum(d)
    assert theta * d.ys / np.array([1.0, *d.col_scale]) == pytest.approx([0.004, 2e-9],
                                                                         rel=1e-6)


def test_with_counted_flops_an_unidentified_split_puts_no_work_on_tokens():
    """Tokens not proportional to GEMM FLOPs (FLOPs per token grow with the shape), one point
    on the work side: the data cannot split its 20 ms between const, FLOPs and tokens. With
    FLOPs counted the prior gives tokens nothing (the FLOPs are the better measure of work),
    so all the work is w_gemm x FLOPs: 2e-12 s/FLOP; the note says the split is a prior."""
    rows = [{"gemm_flops": g, "tokens": t} for g, t in ((1e9, 1e3), (3e9, 2e3), (1e10, 4e3))]
    y = np.array([0.010, 0.010, 0.020])
    params, n, notes = sf.fit_forms(("max",), rows, y, np.full(3, np.nan), None)["max"]
    assert n == 4  # F, w0, w_gemm, w_tokens: tokens is kept as a column
    assert params["F"] == pytest.approx(0.010, rel=1e-6)
    assert params["w_gemm"] == pytest.approx(2e-12, rel=1e-4)
    assert params["w_tokens"] * 4e3 < 1e-4 * 0.020  # under 0.01 % of the step
    assert params["w0"] < 1e-4 * 0.020
    assert "not identified" in notes[0]


def test_an_exact_smooth_max_law_is_recovered_with_its_k():
    """t = (F^2 + W^2)^(1/2): neither the max (k -> 50) nor the sum (k = 1) describes it;
    the smooth max finds k = 2 and the law's F and seconds per FLOP."""
    rows = [{"gemm_flops": g} for g in (1e9, 2e9, 4e9, 8e9, 16e9, 32e9)]
    y = np.array([np.hypot(0.010, 1e-12 * r["gemm_flops"]) for r in rows])
    params, n, _ = sf.fit_forms(("smooth_max",), rows, y, np.full(6, np.nan),
                                None)["smooth_max"]
    assert n == 4  # F, w0, w_gemm, k
    assert params["k"] == pytest.approx(2.0, rel=1e-3)
    assert params["F"] == pytest.approx(0.010, rel=1e-3)
    assert params["w_gemm"] == pytest.approx(1e-12, rel=1e-3)


def test_the_smooth_max_stops_at_the_sum_when_the_steps_want_more():
    """t = (F^(1/2) + W^(1/2))^2 is longer than F + W (a k of 1/2): the smooth max is bounded
    at k >= 1 (k = 1 is the sum, the most a floor and work that overlap nowhere can cost),
    so it stops at k = 1 and equals the sum fit: its F + w0 the sum's F, the same w_gemm."""
    rows = [{"gemm_flops": g} for g in (1e9, 2e9, 4e9, 8e9, 16e9, 32e9)]
    y = np.array([(0.1 + np.sqrt(1e-12 * r["gemm_flops"])) ** 2 for r in rows])
    out = sf.fit_forms(("smooth_max", "sum"), rows, y, np.full(6, np.nan), None)
    smooth, total = out["smooth_max"][0], out["sum"][0]
    assert smooth["k"] == pytest.approx(1.0, abs=1e-6)
    assert smooth["F"] + smooth["w0"] == pytest.approx(total["F"], rel=1e-6)
    assert smooth["w_gemm"] == pytest.approx(total["w_gemm"], rel=1e-6)


def test_the_sums_design_keeps_the_attention_prior_and_drops_the_const_one():
    """GEMM FLOPs 10 x tokens (tokens dropped as proportional) and attention FLOPs tokens^2:
    columns const, gemm_flops, attn_flops; the prior asks for no constant work and for a FLOP
    of attention to cost what a GEMM FLOP costs. The sum has no const column, so its design
    keeps only the second row, over the normalised columns: (ref / 40, -ref / 16), ref = 40."""
    rows = [{"gemm_flops": 10.0 * t, "attn_flops": float(t * t), "tokens": float(t)}
            for t in (1, 2, 4)]
    full = sf.design(rows, np.array([0.5, 1.0, 2.0]), np.full(3, np.nan), None)
    assert full.columns == ["const", "gemm_flops", "attn_flops"] and full.dropped == ["tokens"]
    d = full.without_const()
    assert d.columns == ["gemm_flops", "attn_flops"]
    assert d.penalty == pytest.approx(np.array([[1.0, -40.0 / 16.0]]))
