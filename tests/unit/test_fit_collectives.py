"""Collective bandwidths (nccl-tests' definitions), the alpha-beta fit, the ring model and
the world-size law: exact values worked by hand, and properties."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afford.fit.nodes.collectives_fit import (
    algbw,
    busbw,
    busbw_factor,
    fit_alpha_beta,
    ring_allreduce_seconds,
    ring_parameters,
)
from afford.fit.nodes.dp_scaling import (
    efficiency,
    exposed_comm_share,
    fit_world_size_law,
    throughput_multiplier,
)
from afford.schema.distributed_section import ring_term

GiB = 2**30


# nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; reduce-scatter, all-gather,
# all-to-all (n-1)/n; broadcast, reduce 1.
@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 1, 0.0), ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5),
    ("all_reduce", 8, 1.75),
    ("all_gather", 1, 0.0), ("all_gather", 2, 0.5), ("all_gather", 8, 0.875),
    ("reduce_scatter", 4, 0.75), ("reduce_scatter", 8, 0.875),
    ("all_to_all", 8, 0.875),
    ("broadcast", 1, 1.0), ("broadcast", 8, 1.0), ("reduce", 8, 1.0),
])
def test_busbw_factor_is_nccl_tests_definition(op, n, factor):
    assert busbw_factor(op, n) == factor


def test_busbw_worked_example():
    # 1 GiB all-reduce in 10 ms on 8 ranks: algbw = 2^30 / 0.01 = 107.374 GB/s,
    # busbw = algbw * 14/8 = 187.904 GB/s
    assert algbw(GiB, 0.01) == pytest.approx(107.3741824e9)
    assert busbw("all_reduce", 8, GiB, 0.01) == pytest.approx(187.9048192e9)
    assert busbw("all_gather", 8, GiB, 0.01) == pytest.approx(93.9524096e9)


def test_busbw_rejects_nonsense():
    with pytest.raises(ValueError):
        busbw_factor("all_reduce", 0)
    with pytest.raises(ValueError):
        busbw_factor("gossip", 4)
    with pytest.raises(ValueError):
        algbw(1024, 0.0)


def test_alpha_beta_recovers_synthetic_line():
    alpha, beta = 25e-6, 150e9
    sizes = [2**20 * 4**k for k in range(6)]  # 1 MiB .. 1 GiB
    secs = [alpha + s / beta for s in sizes]
    fit = fit_alpha_beta("all_reduce", 8, sizes, secs)
    assert fit.alpha_seconds == pytest.approx(alpha, rel=1e-6)
    assert fit.beta_bytes_per_second == pytest.approx(beta, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.warnings == []
    assert fit.predict(2**31) == pytest.approx(alpha + 2**31 / beta)
    assert max(abs(r) for r in fit.residuals) < 1e-6


def test_alpha_beta_two_points_worked_by_hand():
    # t(1000) = 2 ms, t(3000) = 4 ms  ->  slope 1e-6 s/B (beta 1 MB/s), alpha 1 ms
    fit = fit_alpha_beta("all_gather", 2, [1000, 3000], [0.002, 0.004])
    assert fit.alpha_seconds == pytest.approx(0.001)
    assert fit.beta_bytes_per_second == pytest.approx(1e6)


def test_alpha_beta_flags_flat_and_negative():
    flat = fit_alpha_beta("all_reduce", 2, [1, 2, 3], [0.3, 0.2, 0.1])
    assert flat.beta_bytes_per_second is None
    assert any("does not grow" in w for w in flat.warnings)
    neg = fit_alpha_beta("all_reduce", 2, [1000, 2000, 3000], [0.001, 0.003, 0.005])
    assert neg.alpha_seconds == pytest.approx(-0.001) and any("negative" in w for w in neg.warnings)
    with pytest.raises(ValueError):
        fit_alpha_beta("all_reduce", 2, [1000, 1000], [0.1, 0.2])


def test_alpha_beta_noisy_r2_below_one():
    sizes = [1e6, 4e6, 16e6, 64e6]
    secs = [(1e-4 + s / 1e10) * f for s, f in zip(sizes, (1.05, 0.95, 1.04, 0.97))]
    fit = fit_alpha_beta("all_reduce", 4, sizes, secs)
    assert 0.98 < fit.r2 < 1.0
    assert fit.beta_bytes_per_second == pytest.approx(1e10, rel=0.1)


@settings(max_examples=50, deadline=None)
@given(alpha=st.floats(1e-7, 1e-2), beta=st.floats(1e6, 1e12))
def test_alpha_beta_property_exact_on_noise_free_data(alpha, beta):
    sizes = [2**12 * 4**k for k in range(5)]
    fit = fit_alpha_beta("all_reduce", 4, sizes, [alpha + s / beta for s in sizes])
    assert fit.beta_bytes_per_second == pytest.approx(beta, rel=1e-5)
    for s in sizes:
        assert fit.predict(s) == pytest.approx(alpha + s / beta, rel=1e-6)


def test_ring_allreduce_worked_by_hand():
    # n=8, S=1 GiB, a=5 us, B=100 GB/s: 2*7*5e-6 + 2*(7/8)*2^30/1e11
    t = ring_allreduce_seconds(8, GiB, 5e-6, 100e9)
    assert t == pytest.approx(7e-5 + 1.75 * GiB / 1e11)
    assert ring_allreduce_seconds(1, GiB, 5e-6, 100e9) == 0.0


def test_ring_allreduce_refuses_no_ranks_and_no_bandwidth():
    """Zero ranks is no ring and a bandwidth of 0 (or less) moves nothing: both refused with
    a clear ValueError (not a division by zero). Any positive bandwidth is a bandwidth, even
    a slow link's 0.5 B/s: 2 ranks, 1 B, no latency: 2 (1/2) 1 B / 0.5 B/s = 2 s."""
    for n, bw in ((0, 100e9), (-1, 100e9), (8, 0.0), (8, -1e9)):
        with pytest.raises(ValueError, match="n >= 1 and a positive bandwidth"):
            ring_allreduce_seconds(n, GiB, 5e-6, bw)
    assert ring_allreduce_seconds(2, 1.0, 0.0, 0.5) == pytest.approx(2.0)


def test_ring_parameters_invert_a_fitted_ring():
    n, a, B = 8, 4e-6, 200e9
    sizes = [2**20 * 4**k for k in range(6)]
    fit = fit_alpha_beta("all_reduce", n, sizes,
                         [ring_allreduce_seconds(n, s, a, B) for s in sizes])
    hop, bw = ring_parameters(fit)
    assert hop == pytest.approx(a, rel=1e-6) and bw == pytest.approx(B, rel=1e-9)
    one = fit_alpha_beta("all_reduce", 1, sizes, [1e-5 + s / 1e12 for s in sizes])
    assert ring_parameters(one) is None  # no ring at one rank
    # two ranks: one hop each way, a = alpha / 2, B = beta x 2 (1/2) = beta
    two = fit_alpha_beta("all_reduce", 2, sizes,
                         [ring_allreduce_seconds(2, s, a, B) for s in sizes])
    hop, bw = ring_parameters(two)
    assert hop == pytest.approx(a, rel=1e-6) and bw == pytest.approx(B, rel=1e-9)
    gather = fit_alpha_beta("all_gather", n, sizes, [1e-5 + s / 1e12 for s in sizes])
    assert ring_parameters(gather) is None  # only an all-reduce is read as this ring


def test_world_size_law_recovers_and_predicts():
    A, B = 0.100, 0.020
    ws = [1, 2, 3, 4, 8]
    law = fit_world_size_law(ws, [A + B * 2 * (w - 1) / w for w in ws])
    assert law.A_seconds == pytest.approx(A) and law.B_seconds == pytest.approx(B)
    assert law.r2 == pytest.approx(1.0) and not law.exact
    assert law.predict(6) == pytest.approx(A + B * 10 / 6)
    two = fit_world_size_law([1, 2], [0.1, 0.12])
    assert two.exact and two.B_seconds == pytest.approx(0.02)
    assert any("exactly" in w for w in two.warnings)
    with pytest.raises(ValueError):
        fit_world_size_law([1], [0.1])


def test_scaling_figures_by_hand():
    assert ring_term(1) == 0.0 and ring_term(4) == 1.5
    assert efficiency(0.10, 0.125) == pytest.approx(0.8)
    assert throughput_multiplier(4, 0.10, 0.125) == pytest.approx(3.2)
    assert exposed_comm_share(0.125, 0.100) == pytest.approx(0.2)
    for bad in (0.0, -0.1):  # no step time: no share, a clear error (not a ZeroDivisionError)
        with pytest.raises(ValueError, match="positive"):
            exposed_comm_share(bad, 0.1)
    assert exposed_comm_share(0.100, 0.110) == pytest.approx(-0.1)  # noise kept, not clipped
    for t1, tw in ((0.0, 0.1), (0.1, 0.0), (-0.1, 0.1), (0.1, -0.1)):
        with pytest.raises(ValueError, match="must be positive"):
            efficiency(t1, tw)
    assert math.isclose(ring_term(2), 1.0)


def test_world_size_law_residuals_and_r2_worked_by_hand():
    # w = 1, 2, 4: x = 2(w-1)/w = 0, 1, 1.5; t = 1.0, 1.5, 1.6 s. Sxx = 7/6, Sxt = 29/60,
    # Stt = 31/150: B = 29/70, A = 41/30 - B x 5/6 = 429/420, R^2 = Sxt^2 / (Sxx Stt) = 841/868;
    # predictions 429/420, 603/420, 690/420 s
    law = fit_world_size_law([1, 2, 4], [1.0, 1.5, 1.6])
    assert law.B_seconds == pytest.approx(29 / 70) and law.A_seconds == pytest.approx(429 / 420)
    assert law.r2 == pytest.approx(841 / 868, rel=1e-12)
    assert law.residuals == pytest.approx([429 / 420 - 1, 603 / 630 - 1, 690 / 672 - 1])
    assert not law.exact and law.warnings == []


def test_world_size_law_that_gets_faster_is_flagged():
    law = fit_world_size_law([1, 2, 4], [1.0, 0.9, 0.8])
    assert law.B_seconds < 0 and any("B < 0" in w for w in law.warnings)
    flat = fit_world_size_law([1, 2], [1.0, 1.0])
    assert flat.r2 == 1.0 and flat.B_seconds == pytest.approx(0.0, abs=1e-12)


def test_flat_timings_fit_no_bandwidth_even_when_lstsq_leaves_a_roundoff_slope():
    """Equal times at sizes 0 and 1: lstsq's slope is about +5e-17, not 0; reading it as
    a bandwidth of 2e16 B/s would be a fabricated figure."""
    from afford.fit.nodes.collectives_fit import fit_alpha_beta

    fit = fit_alpha_beta("all_reduce", 2, [0, 1], [0.3, 0.3])
    assert fit.beta_bytes_per_second is None
    assert any("does not grow" in w for w in fit.warnings)
    real = fit_alpha_beta("all_reduce", 2, [1e6, 2e6, 4e6], [1e-4 + 1e-3, 1e-4 + 2e-3,
                                                             1e-4 + 4e-3])
    assert real.beta_bytes_per_second == pytest.approx(1e9) and not real.warnings


def test_growth_is_judged_over_the_span_of_the_sizes_not_where_they_sit():
    """1 ms at 1 MiB and 2 MiB: a rise of 6e-10 of the time across that span is round-off
    level (below FLAT_RELATIVE = 1e-9): no bandwidth. The same 1 MiB span at 100-101 MiB
    says the same (where the sizes sit does not make a rise larger). A rise of 2e-9 is
    growth: beta = 1 MiB / 2e-12 s."""
    from afford.fit.nodes.collectives_fit import fit_alpha_beta

    M = 2 ** 20
    for lo in (M, 100 * M):
        flat = fit_alpha_beta("all_reduce", 2, [lo, lo + M], [1e-3, 1e-3 * (1 + 6e-10)])
        assert flat.beta_bytes_per_second is None, lo
        assert any("does not grow" in w for w in flat.warnings)
    grows = fit_alpha_beta("all_reduce", 2, [M, 2 * M], [1e-3, 1e-3 * (1 + 2e-9)])
    assert grows.beta_bytes_per_second == pytest.approx(M / 2e-12, rel=1e-4)
