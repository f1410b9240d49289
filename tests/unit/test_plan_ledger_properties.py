"""Properties of the failure ledger, the disk plan and preflight that must hold for any numbers
(hypothesis): never negative, bounded, monotone, and periodic checkpoints never lose more."""

import math

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from afford.core.provenance import inherited, measured
from afford.planning import disk, failures, planner
from tests.plan_helpers import make_cert, make_platform, make_run

restart = st.floats(min_value=0.0, max_value=1e4)
write = st.floats(min_value=0.0, max_value=1e3)
step = st.floats(min_value=1e-3, max_value=100.0)
count = st.integers(min_value=1, max_value=200_000)


def s(v):
    return measured(v, "s", "t")


def ledger(r, w, t, n, k):
    rows = failures.kill_ledger(s(r), s(w), s(t), measured(n, "steps", "c"),
                                measured(k, "steps", "k"))
    return {row.point: row for row in rows}


def _values(row):
    return [v for v in (row.worst_without, row.worst_with, row.expected_without,
                        row.expected_with, row.restart) if v is not None]


@given(restart, write, step, count, count)
def test_no_kill_loses_a_negative_or_non_finite_amount(r, w, t, n, k):
    for row in ledger(r, w, t, n, k).values():
        for v in _values(row):
            assert math.isfinite(v.value) and v.value >= 0


@given(restart, write, step, count, count)
@example(100.0, 10.0, 1.0, 1000, 50)  # a save every 50 steps of 1 s: at most 60 s lost
def test_with_periodic_checkpoints_a_mid_chunk_kill_loses_at_most_one_interval(r, w, t, n, k):
    assume(k <= n)  # a save interval longer than the chunk is no periodic checkpoint
    row = ledger(r, w, t, n, k)["mid-chunk"]
    assert row.worst_with is not None
    assert row.worst_with.value <= k * t + w + 1e-9 * (k * t + w + 1)


@given(restart, write, step, step, count, count)
def test_a_slower_step_never_loses_less(r, w, t1, t2, n, k):
    lo, hi = sorted((t1, t2))
    a, b = ledger(r, w, lo, n, k)["mid-chunk"], ledger(r, w, hi, n, k)["mid-chunk"]
    assert b.worst_without.value >= a.worst_without.value * (1 - 1e-12)


@given(st.floats(min_value=1e-3, max_value=1e3), st.floats(min_value=60.0, max_value=1e7),
       st.floats(min_value=0.0, max_value=1e3))
def test_young_daly_and_the_loss_per_failure_are_bounded(d, m, r):
    assert failures.young_interval(d, m) ** 2 == pytest.approx(2 * d * m)
    tau = failures.daly_interval(d, m)
    assert 0 < tau <= max(m, failures.young_interval(d, m) * 2)
    x = tau + d
    lost = failures.loss_per_failure(tau, d, r, m)
    # (u / 2) coth(u / 2) >= 1: the expected loss is at most half the interval, and at most M
    assert r - 1e-9 * m <= lost <= r + min(x / 2, m) + 1e-9 * m
    assert failures.waste(tau, d, r, m) > 0


@given(st.floats(min_value=1.0, max_value=100.0), st.floats(min_value=3600.0, max_value=1e7),
       st.floats(min_value=0.0, max_value=600.0))
def test_dalys_interval_wastes_no_more_than_half_or_twice_it(d, m, r):
    tau = failures.daly_interval(d, m)
    best = failures.waste(tau, d, r, m)
    assert best <= failures.waste(tau / 2, d, r, m)
    assert best <= failures.waste(tau * 2, d, r, m)


# --- disk -----------------------------------------------------------------------------------

size = st.floats(min_value=1.0, max_value=1e13)


@given(size, size, st.integers(min_value=0, max_value=50))
def test_copies_that_fit_and_the_shares(dsk, b, k):
    d = disk.disk_plan(inherited(dsk, "B", "d"), measured(b, "B", "c"),
                       inherited(k, "copies", "run"))
    fit = d.copies_fit.value
    assert fit >= 0
    assert fit * b <= dsk * (1 + 1e-9) and (fit + 1) * b > dsk * (1 - 1e-9)
    assert d.steady_share.value == pytest.approx(k * b / dsk)
    assert d.peak_share.value == pytest.approx(d.steady_share.value + b / dsk)
    assert d.fits is (k + 1 <= fit)
    if d.fits:
        assert d.peak_share.value <= 1 + 1e-9


@given(size, size, size, st.integers(min_value=0, max_value=50))
def test_more_disk_never_fits_fewer_copies(d1, d2, b, k):
    lo, hi = sorted((d1, d2))
    a = disk.disk_plan(inherited(lo, "B", "d"), measured(b, "B", "c"), inherited(k, "c", "r"))
    z = disk.disk_plan(inherited(hi, "B", "d"), measured(b, "B", "c"), inherited(k, "c", "r"))
    assert a.copies_fit.value <= z.copies_fit.value
    assert not (a.fits and not z.fits)


@given(st.one_of(st.none(), st.just(0.0)))
def test_an_unknown_or_empty_checkpoint_checks_nothing(b):
    d = disk.disk_plan(inherited(1e9, "B", "d"), None if b is None else measured(b, "B", "c"),
                       inherited(2, "copies", "run"))
    assert d.fits is None and d.copies_fit is None and d.peak_share is None


# --- preflight ------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(gb=st.floats(min_value=0.1, max_value=100.0), more=st.floats(min_value=0.0, max_value=50.0),
       kept=st.integers(min_value=1, max_value=40))
def test_more_disk_never_turns_go_into_no_go(gb, more, kept):
    def go(g):
        v = planner.preflight(make_cert(step_512=0.299),
                              make_platform(disk={"value": f"{g:.3f}GB", "cite": "t"}),
                              make_run(checkpoints_kept=kept, max_weeks=100))
        disk_reason = any("do not fit on the disk" in x for x in v.reasons)
        assert v.go is (not v.reasons)
        assert disk_reason is (v.plan.disk.fits is False)
        return v.go
    assert not (go(gb) and not go(gb + more))


@settings(max_examples=25, deadline=None)
@given(w1=st.floats(min_value=0.01, max_value=20.0), w2=st.floats(min_value=0.01, max_value=20.0),
       t=st.floats(min_value=0.01, max_value=5.0))
def test_more_weeks_allowed_never_turns_go_into_no_go(w1, w2, t):
    lo, hi = sorted((w1, w2))
    vl, vh = (planner.preflight(make_cert(step_512=t), make_platform(), make_run(max_weeks=w))
              for w in (lo, hi))
    assert not (vl.go and not vh.go)
    weeks = vl.plan.target.weeks.value
    assert any("max_weeks" in x for x in vl.reasons) is (weeks > lo)
    assume(math.isfinite(weeks))


@settings(max_examples=15, deadline=None)
@given(t=st.floats(min_value=39600.5, max_value=1e6))
def test_a_step_longer_than_the_chunk_is_no_go(t):
    v = planner.preflight(make_cert(step_512=t), make_platform(), make_run(max_weeks=5200))
    assert v.go is False and any("longer than the chunk" in x for x in v.reasons)
