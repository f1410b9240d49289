"""The size law on fake readings: bounded by the ceilings, not flattened by the floor,
judged by leave-one-out and by the largest size held out."""

import pytest

from afford.fit.time.size_law import SizeObs, ceilings, fit_size_law
from afford.fit.time.throughput import fit_throughput
from afford.schema.sizes_section import SizeWork

RATE = 8e14  # FLOP/s, measured GEMM rate
BW = 4e12  # B/s, measured copy bandwidth
B, S = 8, 1024


def work(d, L, kernels=None):
    n = 12 * L * d * d
    return SizeWork(d=d, L=L, params=n, gemm_flops=6 * B * S * n, attn_flops=12 * B * S * S * d * L,
                    state_bytes=16 * n, kernels=kernels)


def kernels(L):
    return 130 + 50 * L


def busy_of(w, per_gemm=2.0 / RATE, per_attn=3.0 / RATE, per_byte=2.0 / BW, per_kernel=4e-6):
    return (per_gemm * w.gemm_flops + per_attn * w.attn_flops + per_byte * w.state_bytes
            + per_kernel * (w.kernels or 0))


SHAPES = [(256, 4), (512, 8), (768, 12), (1024, 8), (1024, 16)]


def profiled(issue=30e-6, gap=2e-6, shapes=SHAPES, **kw):
    """Sizes whose step is max(kernels x issue, busy + gap x kernels), profiled."""
    out = []
    for d, L in shapes:
        w = work(d, L, kernels(L))
        busy = busy_of(w, **kw)
        t = max(w.kernels * issue, busy + gap * w.kernels)
        out.append(SizeObs(label=f"d{d}L{L}", work=w, seconds=t, busy_seconds=busy,
                           gap_seconds=gap, child_seconds=(t, t, t)))
    return out


def fit(obs, **kw):
    kw.setdefault("gemm_rate", RATE)
    kw.setdefault("bandwidth", BW)
    return fit_size_law(obs, batch=B, seq=S, bytes_per_param=16, **kw)


def truth(d, L, issue=30e-6, gap=2e-6, **kw):
    w = work(d, L, kernels(L))
    return max(w.kernels * issue, busy_of(w, **kw) + gap * w.kernels)


def test_profiled_law_recovers_both_sides_and_extrapolates():
    law = fit(profiled())
    assert law.sides == "profiled"
    assert law.coefficients["gemm_flops"] == pytest.approx(2.0 / RATE, rel=1e-3)
    assert law.kernels_fixed == pytest.approx(130) and law.kernels_per_layer == pytest.approx(50)
    assert law.issue_seconds == pytest.approx(30e-6, rel=1e-6)
    assert law.gap_seconds == pytest.approx(2e-6, rel=1e-6)
    # 1B at d2048 L20, ~5x the largest size measured
    w = work(2048, 20)
    got = law.predict(w)
    assert got.seconds == pytest.approx(truth(2048, 20), rel=1e-3) and got.regime == "device"
    assert got.kernels == pytest.approx(kernels(20))
    assert law.extrapolated(w.params) and not law.extrapolated(work(768, 12).params)


def test_leave_one_out_and_largest_held_out_are_reported():
    law = fit(profiled())
    assert len(law.points) == 5 and all(abs(p.loo_rel_error) < 1e-3 for p in law.points)
    ho = law.held_out
    assert ho.label == "d1024L16" and ho.params == work(1024, 16).params
    assert ho.factor == pytest.approx(2.0)  # over d1024 L8, the largest of the others
    assert abs(ho.rel_error) < 1e-3
    # one size 20 % slow: its own leave-one-out error says so, and the held-out check moves
    obs = profiled()
    slow = obs[-1]
    obs[-1] = SizeObs(label=slow.label, work=slow.work, seconds=slow.seconds * 1.2,
                      busy_seconds=slow.busy_seconds * 1.2, gap_seconds=2e-6)
    law = fit(obs)
    assert law.points[-1].loo_rel_error == pytest.approx(-1 / 6, abs=0.02)
    assert law.held_out.rel_error == pytest.approx(-1 / 6, abs=0.02)
    assert law.loo_worst == pytest.approx(abs(law.points[-1].loo_rel_error))


def test_an_impossible_gemm_coefficient_is_refused():
    """Busy times that would need a GEMM FLOP at 2.5x the measured rate: refitted at the
    bound (no size runs above the measured GEMM rate), and the notes say so."""
    obs = profiled(per_gemm=0.4 / RATE, per_attn=0.6 / RATE, per_byte=2.0 / BW)
    law = fit(obs)
    lb = ceilings(RATE, BW)
    assert law.coefficients["gemm_flops"] == pytest.approx(lb["gemm_flops"])
    assert "gemm_flops" in law.at_bound
    assert any("GEMM FLOP" in n and "refused, refitted at the bound" in n for n in law.notes)
    for d, L in ((2048, 24), (4096, 32), (8192, 48)):
        w = work(d, L)
        assert w.gemm_flops / law.predict(w).seconds <= RATE * (1 + 1e-9)
    # without a measured rate nothing is refused, and the notes say the bound is missing
    free = fit(obs, gemm_rate=None)
    assert free.coefficients["gemm_flops"] < 0.5 / RATE
    assert any("no measured GEMM rate" in n for n in free.notes)


def test_the_bandwidth_bounds_the_state_bytes():
    obs = profiled(per_byte=0.1 / BW)
    law = fit(obs)
    assert law.coefficients["state_bytes"] >= 1 / BW * (1 - 1e-9)


def test_floor_dominated_sizes_do_not_flatten_the_extrapolation():
    """Wall times only: three small sizes on a launch floor (host 2 ms + 1.5 ms x L), two
    above it. The power law over these five flattens and predicts 5x beyond far too fast;
    the size law puts the floor sizes on the host side and extrapolates the work."""
    def step(d, L):
        return max(2e-3 + 1.5e-3 * L, busy_of(work(d, L)))

    shapes = [(128, 4), (256, 6), (384, 8), (1024, 16), (1536, 16)]
    obs = [SizeObs(label=f"d{d}L{L}", work=work(d, L), seconds=step(d, L)) for d, L in shapes]
    assert [o.seconds == 2e-3 + 1.5e-3 * L for o, (_, L) in zip(obs, shapes)][:3] == [True] * 3
    law = fit(obs)
    assert law.sides == "wall" and law.host_per_layer == pytest.approx(1.5e-3, rel=1e-3)
    target = work(3072, 24)
    want = step(3072, 24)
    assert law.predict(target).seconds == pytest.approx(want, rel=0.02)
    power = fit_throughput("params", [o.work.params for o in obs], [o.seconds for o in obs])
    flat, _ = power.predict(target.params)
    assert flat < 0.6 * want  # what the floor did to the one-axis law
    # every size's step is predicted on its own side
    assert [p.regime for p in law.points] == ["host", "host", "host", "device", "device"]


def test_no_size_off_the_floor_gives_the_ceiling_as_the_device_side():
    obs = [SizeObs(label=f"L{L}", work=work(d, L), seconds=1e-3 * L)
           for d, L in ((64, 2), (96, 3), (128, 4))]
    law = fit(obs)
    assert law.coefficients["gemm_flops"] == pytest.approx(1 / RATE)
    assert any("no size left the launch floor" in n for n in law.notes)


def test_kernels_grow_with_depth_not_width():
    law = fit(profiled())
    assert law.predict(work(4096, 8)).kernels == law.predict(work(512, 8)).kernels
    assert law.kernels_at(24) > law.kernels_at(12)


def test_host_bound_sizes_give_the_host_side_and_its_band():
    obs = profiled(issue=60e-6, shapes=[(128, 8), (256, 8), (512, 12), (2048, 8), (2048, 12)])
    law = fit(obs)
    assert law.issue_seconds == pytest.approx(60e-6, rel=1e-6)
    small = law.predict(work(128, 16))
    assert small.regime == "host" and small.seconds == pytest.approx(kernels(16) * 60e-6)
    assert small.band is not None


def test_carried_coefficients_are_kept():
    obs = profiled()
    law = fit(obs, carried={"kernels": 9e-6, "state_bytes": 5 / BW})
    assert law.coefficients["kernels"] == 9e-6 and law.coefficients["state_bytes"] == 5 / BW
    assert law.carried == ["kernels", "state_bytes"]


def test_too_few_sizes_refused_and_two_sizes_say_what_they_lack():
    with pytest.raises(ValueError, match="at least 2"):
        fit(profiled()[:1])
    law = fit(profiled()[:2])
    assert law.held_out is None and all(p.loo_rel_error is None for p in law.points)
    assert any("no leave-one-out check" in n for n in law.notes)
