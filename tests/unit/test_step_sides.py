"""The two-sided GPU step model on synthetic readings with round numbers:
device busy = 4 ms + 2e-15 s x GEMM FLOP + 1.5e-15 s x attention FLOP, 1,000 kernels a
step, 1 us of device gap per kernel boundary, the host issuing a kernel in 40 us
(children 36-44 us). So the host floor is 40 ms, the device side busy + 1 ms; its band is the
95 % prediction interval over the host-bound points' children and the recorded sessions'
spread (:func:`issue_band`)."""

from __future__ import annotations

import pytest

from afford.fit.time.step_features import fit_scaling
from afford.fit.time.step_forms import StepPoint
from afford.fit.time.step_sides import SidePoint, bound_notes, derive_busy, fit_sides, launch_gap
from afford.fit.time.time_fit import fit_step_time
from afford.schema.time_law import predict_at

GEMM_PER_TOKEN = 6 * 100e6  # 100M parameters: 6 N FLOPs a token
ATTN_PER_BS2 = 12 * 768 * 12  # 12 L d per (B s^2)
K = 1000.0
GAP = 1e-6
ISSUE = 40e-6


def busy(b: int, s: int) -> float:
    return 4e-3 + 2e-15 * GEMM_PER_TOKEN * b * s + 1.5e-15 * ATTN_PER_BS2 * b * s * s


def wall(b: int, s: int, issue: float = ISSUE) -> float:
    return max(K * issue, busy(b, s) + K * GAP)


def point(b: int, s: int, *, trace_gap: float | None = GAP) -> SidePoint:
    kids = tuple(wall(b, s, c) for c in (36e-6, 40e-6, 44e-6))
    return SidePoint(batch=b, seq=s, tokens=b * s, gemm_flops=GEMM_PER_TOKEN * b * s,
                     attn_flops=ATTN_PER_BS2 * b * s * s, seconds=wall(b, s),
                     busy_seconds=busy(b, s), kernels=K, gap_seconds=trace_gap,
                     child_seconds=kids, label=f"{b} x {s}")


DESIGN = [(8, 256), (8, 512), (8, 1024), (2, 512), (32, 256), (16, 512), (1, 2048)]


def issue_band(host_bound: int) -> tuple[float, float]:
    """The band's issue cost per kernel, computed here with scipy.stats: the children's
    36, 40 and 44 us at each of ``host_bound`` points; their variance between processes
    (each point's own, pooled: 2 degrees of freedom a point) moderated by the shipped prior
    (data/process_spread.toml, read here directly), a log-normal t interval at 95 %."""
    from pathlib import Path

    import numpy as np
    from scipy import stats

    import afford
    from afford.core.io import tomllib

    prior = tomllib.loads((Path(afford.__file__).parent / "data" / "process_spread.toml")
                          .read_text(encoding="utf-8"))["prior"]
    one = np.log([36e-6, 40e-6, 44e-6])
    d = 2 * host_bound
    s2 = (prior["dof"] * prior["sd"] ** 2 + d * one.var(ddof=1)) / (prior["dof"] + d)
    # the next process's session and the certificate's: the session's variance twice
    h = stats.t.ppf(0.975, prior["dof"] + d) * np.sqrt(
        s2 * (1 + 1 / 3) + 2 * prior["session_sd"] ** 2)
    return float(np.exp(one.mean() - h)), float(np.exp(one.mean() + h))


def _model(shapes=DESIGN, trace_gap=GAP, **kw):
    pts = [point(b, s, trace_gap=trace_gap) for b, s in shapes]
    return fit_sides(pts, fit_scaling(pts), **kw), pts


def _at(m, b, s):
    p = point(b, s)
    feats = {"gemm_flops": p.gemm_flops, "attn_flops": p.attn_flops, "tokens": p.tokens,
             "seq_tokens": float(b * s * s)}
    return m.predict(feats, p.tokens, p.seq)


def test_the_device_side_seen_under_the_floor_predicts_the_work_regime():
    m, pts = _model()
    assert all(p.seconds == pytest.approx(40e-3) for p in pts[:2])  # on the host floor
    for b, s in [(32, 1024), (16, 2048), (4, 8192), (64, 512)]:  # 4x tokens, 4x seq
        sp = _at(m, b, s)
        assert sp.regime == "device"
        assert sp.seconds == pytest.approx(wall(b, s), rel=0.01)
        assert sp.device_busy == pytest.approx(busy(b, s), rel=0.01)
    assert m.host.issue_seconds == pytest.approx(ISSUE)
    hb = len(m.host.points)
    assert hb == len(DESIGN)  # every design shape sits on the host floor
    assert m.host.issue_range == pytest.approx(issue_band(hb)) and m.host.band_level == 0.95
    lo, hi = m.host.issue_range
    assert lo < 36e-6 and hi > 44e-6  # wider than the three children's range


def test_a_host_bound_shape_is_a_band_across_processes():
    m, _ = _model()
    sp = _at(m, 4, 256)
    assert sp.regime == "host" and sp.seconds == pytest.approx(40e-3)
    assert sp.band == pytest.approx(tuple(K * c for c in issue_band(len(m.host.points))))
    assert _at(m, 64, 2048).band is None  # deep in the device regime: no band


def test_the_gap_comes_from_device_bound_points_when_there_are_any():
    m, _ = _model(DESIGN + [(32, 1024)], trace_gap=1.5e-6)  # 32 x 1024 is device-bound
    assert m.gap_seconds == pytest.approx(GAP) and "device-bound" in m.gap_source
    m2, _ = _model(trace_gap=1.5e-6)  # none is: the trace's queued gap (1.5 us) stands in
    assert m2.gap_seconds == pytest.approx(1.5e-6) and "trace" in m2.gap_source


def test_without_a_host_bound_point_the_host_side_is_not_invented():
    m, _ = _model([(32, 1024), (16, 2048), (64, 512), (8, 4096)])
    assert m.host is None and "never seen" in m.notes[0]
    assert _at(m, 64, 1024).regime == "device"


def test_an_impossible_coefficient_is_refused_and_refitted_at_the_bound():
    # a ceiling of 1e14 FLOP/s: a GEMM FLOP costs at least 1e-14 s, 5x the synthetic 2e-15
    m, _ = _model(gemm_rate=1e14)
    assert any("GEMM FLOP to cost" in b and "refused" in b for b in m.device.bounds)
    assert m.device.params["w_gemm"] >= 1e-14 * (1 - 1e-6)
    assert bound_notes({"w_gemm": 2e-15, "w_attn": 3e-14}, 1e14) == [
        n for n in bound_notes({"w_gemm": 2e-15}, 1e14)]  # attention at 3e-14 is possible
    ok, _ = _model(gemm_rate=1e15)  # the data are possible under a 1e15 ceiling
    assert ok.device.bounds and not any("refused" in b for b in ok.device.bounds)


def test_leave_one_out_on_the_wall_and_bad_readings():
    m, pts = _model()
    assert len(m.loo_rel_errors) == len(pts)
    assert max(abs(e) for e in m.loo_rel_errors) < 0.02
    with pytest.raises(ValueError, match="at least 3"):
        fit_sides(pts[:2], fit_scaling(pts))
    bad = pts[:2] + [pts[2].model_copy(update={"busy_seconds": 0.0})]
    with pytest.raises(ValueError, match="positive"):
        fit_sides(bad, fit_scaling(pts))


def test_the_step_time_model_uses_the_sides_and_judges_held_out_on_the_device():
    pts = [point(b, s) for b, s in DESIGN]
    scaling = fit_scaling(pts)
    held = [point(4, 256), point(16, 2048)]  # one on the floor, one device-bound
    sides = fit_sides(pts, scaling)
    m = fit_step_time(pts, held_out=held, scaling=scaling, sides=sides)
    assert m.used == "sides" and m.floor_left and m.reason.startswith("sides:")
    floor, work = m.held_out
    assert floor.regime == "host" and floor.band == pytest.approx(
        tuple(K * c for c in issue_band(len(sides.host.points))))
    assert floor.device_rel_error == pytest.approx(0.0, abs=0.01)
    assert work.regime == "device" and work.rel_error == pytest.approx(0.0, abs=0.01)
    assert predict_at(m, batch=16, seq=2048).seconds == pytest.approx(wall(16, 2048), rel=0.01)
    assert "max(host, device + gap)" in m.describe()


def _unprofiled(b: int, s: int) -> StepPoint:
    p = point(b, s)
    return StepPoint(**{k: v for k, v in p.model_dump().items()
                        if k in StepPoint.model_fields})


def test_an_unprofiled_work_point_has_its_busy_time_read_off_its_wall():
    # the profiled points: on the host's floor, and one device-bound (the gap: 1 us)
    shapes = [(8, 256), (8, 512), (2, 512), (8, 1024), (8, 4096)]
    profiled = [point(b, s) for b, s in shapes]
    plain = [_unprofiled(32, 1024), _unprofiled(2, 256), _unprofiled(16, 2048)]
    work = [True] * len(profiled) + [True, False, True]
    out = derive_busy([*profiled, *plain], work)
    assert out[:len(profiled)] == profiled  # profiled points as they were
    big, floor, long = out[len(profiled):]
    assert isinstance(big, SidePoint) and big.busy_derived
    assert big.kernels == K and big.busy_seconds == pytest.approx(wall(32, 1024) - K * GAP)
    assert big.busy_seconds == pytest.approx(busy(32, 1024))
    assert isinstance(long, SidePoint) and long.busy_seconds == pytest.approx(busy(16, 2048))
    assert type(floor) is StepPoint  # on the floor: the wall says nothing of the device
    # nothing is read off a derived point: the gap stays the profiled points'
    assert launch_gap([*profiled, big, long])[0] == pytest.approx(launch_gap(profiled)[0])
    # nothing profiled, or everything: unchanged
    assert derive_busy(plain, [True] * 3) == plain
    assert derive_busy(profiled, [True] * len(profiled)) == profiled


def test_a_model_with_derived_work_points_predicts_and_never_judges_their_busy_time():
    floor_pts = [point(b, s) for b, s in [(8, 256), (2, 512), (8, 512), (8, 1024)]]
    work_pts = [_unprofiled(b, s) for b, s in [(32, 1024), (8, 4096), (4, 8192)]]
    fitted = derive_busy([*floor_pts, *work_pts], [True] * 7)
    held = derive_busy([*floor_pts, _unprofiled(16, 2048)], [True] * 5)[-1:]
    scaling = fit_scaling(fitted)
    sides = fit_sides(fitted, scaling)
    m = fit_step_time(fitted, held_out=held, scaling=scaling, sides=sides, refit_held_out=False)
    assert m.used == "sides"
    assert m.held_out[0].rel_error == pytest.approx(0.0, abs=0.01)
    # a derived busy time is no measurement: the held-out shape is judged on its wall only
    assert m.held_out[0].device_measured_seconds is None
    assert m.held_out[0].device_rel_error is None
    assert [k.tokens for k in sides.kernels] == [p.tokens for p in floor_pts]


def test_one_profiled_point_is_enough_and_its_leave_one_out_borrows_the_derived_counts():
    # softmax on an H100 (2026-12-06): every point but the smallest settled in the work
    # regime, so one point is profiled; the wall's leave-one-out fit without it still has
    # the kernels and the gap its derived neighbours carry
    work = [(32, 1024), (8, 4096), (4, 8192), (16, 2048)]
    pts = derive_busy([point(8, 256), *[_unprofiled(b, s) for b, s in work]], [True] * 5)
    assert sum(p.busy_derived for p in pts) == 4
    m = fit_sides(pts, fit_scaling(pts))
    assert len(m.loo_rel_errors) == 5 and m.gap_seconds == pytest.approx(GAP)
    assert [k.tokens for k in m.kernels] == [8 * 256]
    assert _at(m, 8, 8192).seconds == pytest.approx(wall(8, 8192), rel=0.02)
