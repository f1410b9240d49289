"""The launch floor's band (:func:`afford.fit.stats.process_band`): the prediction interval
of a log-normal population over a few processes' readings, their spread between processes
moderated by a prior (Smyth 2004's empirical Bayes, :func:`afford.fit.stats.spread_prior`),
never narrower than their range; checked against scipy.stats and by simulation."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from afford.fit.stats import (
    PROCESS_BAND_LEVEL,
    SpreadPrior,
    between_log_variance,
    pooled_log_variance,
    process_band,
    spread_prior,
)


def test_one_group_of_three_readings_gives_the_t_interval_of_their_logs():
    from scipy import stats

    lo, hi = process_band([[math.exp(-1), 1.0, math.exp(1)]], level=0.9)
    h = stats.t.ppf(0.95, 2) * 1.0 * math.sqrt(1 + 1 / 3)  # mean 0, sd 1 of the logs
    assert (lo, hi) == pytest.approx((math.exp(-h), math.exp(h)), rel=1e-9)
    assert PROCESS_BAND_LEVEL == 0.95


def test_the_spread_is_between_processes_within_each_shape():
    # two shapes 10x apart, each read by three processes at -10 %, 0, +10 %: the shapes'
    # own levels are no spread between processes
    a, b = [0.9, 1.0, 1.1], [9.0, 10.0, 11.0]
    var, dof = pooled_log_variance([a, b])
    one, _ = pooled_log_variance([a])
    assert dof == 4 and var == pytest.approx(one)


def test_a_prior_moderates_the_processes_own_spread():
    from scipy import stats

    prior = SpreadPrior(sd=0.10, dof=4.0)
    xs = [[0.99, 1.0, 1.01]]  # three processes that happen to agree within 1 %
    lo, hi = process_band(xs, 0.95, prior)
    own = pooled_log_variance(xs)[0]
    s2 = (4.0 * 0.10 ** 2 + 2 * own) / (4.0 + 2)
    h = stats.t.ppf(0.975, 6) * math.sqrt(s2) * math.sqrt(1 + 1 / 3)
    m = sum(math.log(x) for x in xs[0]) / 3
    assert (lo, hi) == pytest.approx((math.exp(m - h), math.exp(m + h)), rel=1e-9)
    assert hi / lo > 1.3  # the prior's 10 %, not the readings' 1 %
    narrow = process_band(xs, 0.95)
    assert narrow[1] / narrow[0] < hi / lo


def test_the_sessions_spread_enters_twice_beside_the_processes():
    """The readings' mean carries their session's offset, the next process its own."""
    from scipy import stats

    xs = [[0.9, 1.0, 1.1], [0.95, 1.0, 1.05]]  # two shapes, scaled to one level
    plain = process_band(xs, 0.95, SpreadPrior(sd=0.08, dof=3.0))
    lo, hi = process_band(xs, 0.95, SpreadPrior(sd=0.08, dof=3.0, session_sd=0.05))
    own = pooled_log_variance(xs)[0]
    s2 = (3.0 * 0.08 ** 2 + 4 * own) / (3.0 + 4)
    h = stats.t.ppf(0.975, 7) * math.sqrt(s2 * (1 + 1 / 3) + 2 * 0.05 ** 2)
    m = sum(math.log(x) for g in xs for x in g) / 6
    assert (lo, hi) == pytest.approx((math.exp(m - h), math.exp(m + h)), rel=1e-9)
    assert hi / lo > plain[1] / plain[0]
    assert "5.0% between certificates minutes apart" in SpreadPrior(
        sd=0.08, dof=3.0, session_sd=0.05).words()
    assert "minutes apart" not in SpreadPrior(sd=0.08, dof=3.0).words()


def test_a_prior_of_infinite_weight_is_a_normal_interval_on_its_sd():
    lo, hi = process_band([[1.0, 1.0, 1.0]], 0.95, SpreadPrior(sd=0.1, dof=math.inf))
    h = 1.959963984540054 * 0.1 * math.sqrt(1 + 1 / 3)
    assert (lo, hi) == pytest.approx((math.exp(-h), math.exp(h)), rel=1e-9)


def test_too_few_readings_without_a_prior_are_their_range():
    assert process_band([[2.0]]) == (2.0, 2.0)
    assert process_band([[3.0, 2.0]]) == (2.0, 3.0)
    assert process_band([[5e-6] * 6]) == pytest.approx((5e-6, 5e-6))


@given(st.lists(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=4), min_size=1,
                max_size=6),
       st.floats(0.5, 0.99), st.booleans())
def test_the_band_holds_every_reading_it_was_made_from(groups, level, with_prior):
    prior = SpreadPrior(sd=0.08, dof=3.2) if with_prior else None
    lo, hi = process_band(groups, level, prior)
    flat = [x for g in groups for x in g]
    assert 0 < lo <= min(flat) and hi >= max(flat)


def test_a_fresh_process_lands_in_it_at_its_level_where_the_range_holds_fewer():
    # 4,000 certificates, each three children at two host-bound shapes, from a log-normal
    # population whose spread between processes differs from machine to machine as the
    # prior says (scaled inverse chi-square: sd 8 %, 4 degrees of freedom), and one process
    # more: the moderated band holds it ~95 % of the time, the range of the three half
    rng = random.Random(7)
    prior = SpreadPrior(sd=0.08, dof=4.0)
    trials, band_hits, range_hits = 4000, 0, 0
    for _ in range(trials):
        sd = math.sqrt(4.0 * 0.08 ** 2 / rng.gammavariate(2.0, 2.0))  # chi2(4) = gamma(2, 2)
        procs = [rng.gauss(0.0, sd) for _ in range(4)]
        levels = (math.log(30e-6), math.log(45e-6))
        groups = [[math.exp(lv + p + rng.gauss(0.0, 0.01)) for p in procs[:3]] for lv in levels]
        new = math.exp(levels[0] + procs[3] + rng.gauss(0.0, 0.01))
        lo, hi = process_band([[x / (45 / 30) if i else x for x in g]
                               for i, g in enumerate(groups)], 0.95, prior)
        band_hits += lo <= new <= hi
        range_hits += min(groups[0]) <= new <= max(groups[0])
    assert 0.93 <= band_hits / trials <= 0.975
    assert 0.45 <= range_hits / trials <= 0.55


def test_spread_prior_recovers_the_prior_its_groups_were_drawn_under():
    # 400 groups of 6 degrees of freedom, each group's variance drawn from a scaled inverse
    # chi-square of sd0 10 %, d0 5, its sample variance then from chi2(6)
    rng = random.Random(11)
    groups = []
    for _ in range(400):
        var = 5 * 0.10 ** 2 / rng.gammavariate(2.5, 2.0)
        groups.append((var * rng.gammavariate(3.0, 2.0) / 6, 6))
    sd0, d0 = spread_prior(groups)
    assert sd0 == pytest.approx(0.10, rel=0.12)
    assert 3.0 < d0 < 9.0


def test_spread_prior_of_one_shared_variance_weighs_it_infinitely():
    rng = random.Random(3)
    groups = [(0.01 * rng.gammavariate(5.0, 2.0) / 10, 10) for _ in range(2000)]
    sd0, d0 = spread_prior(groups)
    assert sd0 == pytest.approx(0.1, rel=0.05)
    assert d0 > 50  # inf, or a weight far above any certificate's own


def test_spread_prior_needs_three_groups():
    with pytest.raises(ValueError, match="3 groups"):
        spread_prior([(0.01, 2), (0.02, 2)])


@pytest.mark.parametrize("bad", [[], [[]], [[1.0, 0.0, 2.0]], [[1.0, -1.0, 2.0]],
                                 [[1.0, math.nan, 2.0]], [[1.0, math.inf, 2.0]]])
def test_readings_that_are_not_positive_durations_are_refused(bad):
    with pytest.raises(ValueError, match="positive"):
        process_band(bad)


def test_a_level_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="level"):
        process_band([[1.0, 2.0, 3.0]], level=1.0)


def test_the_between_group_component_by_hand_and_by_simulation():
    # one set, two groups at exp(+-0.1) with readings exp(+-0.05) around each: the means'
    # log variance 0.02, the within variance 0.005 (n = 2): 0.02 - 0.005 / 2 = 0.0175
    e = math.exp
    one = [[e(0.1 - 0.05), e(0.1 + 0.05)], [e(-0.1 - 0.05), e(-0.1 + 0.05)]]
    var, dof = between_log_variance([one])
    assert dof == 1 and var == pytest.approx(0.0175, rel=1e-9)
    # no component beyond the readings' spread: pooled, it comes out near 0; a set of one
    # group, or groups of one reading, add nothing
    rng = random.Random(3)
    sets = [[[e(rng.gauss(0, 0.1)) for _ in range(3)] for _ in range(4)] for _ in range(300)]
    var0, dof0 = between_log_variance(sets + [[[1.0, 1.1]], [[1.0], [2.0]]])
    assert dof0 == 900 and var0 < 0.1 ** 2 / 10
    # a real session component of 0.05 between groups is found
    shifted = [[[e(s + rng.gauss(0, 0.1)) for _ in range(3)]
                for s in [rng.gauss(0, 0.05) for _ in range(4)]] for _ in range(300)]
    assert math.sqrt(between_log_variance(shifted)[0]) == pytest.approx(0.05, rel=0.2)
