"""The launch floor's band (:func:`afford.fit.stats.prediction_band`): the prediction
interval of a log-normal population over a few processes' readings, never narrower than
their range, checked against scipy.stats and by simulation."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from afford.fit.stats import PROCESS_BAND_LEVEL, prediction_band


def test_three_readings_give_the_t_interval_of_their_logs():
    from scipy import stats

    lo, hi = prediction_band([math.exp(-1), 1.0, math.exp(1)])
    h = stats.t.ppf(0.95, 2) * 1.0 * math.sqrt(1 + 1 / 3)  # mean 0, sd 1 of the logs
    assert (lo, hi) == pytest.approx((math.exp(-h), math.exp(h)), rel=1e-9)
    assert PROCESS_BAND_LEVEL == 0.90


def test_fewer_than_three_readings_are_their_range():
    assert prediction_band([2.0]) == (2.0, 2.0)
    assert prediction_band([3.0, 2.0]) == (2.0, 3.0)


def test_identical_readings_are_a_point():
    assert prediction_band([5e-6] * 6) == pytest.approx((5e-6, 5e-6))


@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=20),
       st.floats(0.5, 0.99))
def test_the_band_holds_every_reading_it_was_made_from(xs, level):
    lo, hi = prediction_band(xs, level)
    assert lo <= min(xs) and hi >= max(xs) and lo > 0


def test_a_fresh_process_lands_in_it_at_its_level_where_the_range_holds_fewer():
    # 4,000 draws of 6 readings (3 children x 2 host-bound points) from a log-normal
    # population with a 15 % spread, and one reading more: the band holds it ~90 % of the
    # time, the readings' range (n - 1) / (n + 1) = 71 % of the time
    rng = random.Random(7)
    trials, band_hits, range_hits = 4000, 0, 0
    for _ in range(trials):
        xs = [math.exp(rng.gauss(math.log(30e-6), 0.15)) for _ in range(6)]
        new = math.exp(rng.gauss(math.log(30e-6), 0.15))
        lo, hi = prediction_band(xs)
        band_hits += lo <= new <= hi
        range_hits += min(xs) <= new <= max(xs)
    assert 0.88 <= band_hits / trials <= 0.93
    assert 0.68 <= range_hits / trials <= 0.74


@pytest.mark.parametrize("bad", [[], [1.0, 0.0, 2.0], [1.0, -1.0, 2.0], [1.0, math.nan, 2.0],
                                 [1.0, math.inf, 2.0]])
def test_readings_that_are_not_positive_durations_are_refused(bad):
    with pytest.raises(ValueError, match="positive"):
        prediction_band(bad)


def test_a_level_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="level"):
        prediction_band([1.0, 2.0, 3.0], level=1.0)
