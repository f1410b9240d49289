"""Properties of the cost model that must hold for any numbers (hypothesis)."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from afford.core.provenance import inherited, measured
from afford.planning import cadence, chunk, planner, quota
from afford.planning.derive import REL_TOL
from afford.planning.result import StartupComponent
from tests.plan_helpers import GIB, make_cert, make_platform, make_run

seconds = st.floats(min_value=1.0, max_value=1e7, allow_nan=False)
steps = st.floats(min_value=1e-4, max_value=1e4, allow_nan=False)


@given(seconds, steps)
def test_steps_per_chunk_never_exceed_the_chunk(c, t):
    n = chunk.steps_per_chunk(measured(c, "s", "c"), measured(t, "s", "t")).value
    assert n >= 0
    assert n * t <= c * (1 + REL_TOL)
    assert (n + 1) * t > c * (1 - REL_TOL)  # and no whole step is left out


@given(st.floats(min_value=0.0, max_value=1e4), steps,
       st.floats(min_value=1e-4, max_value=0.999), st.floats(min_value=1e-4, max_value=0.999))
def test_more_overhead_budget_never_increases_save_every(w, t, b1, b2):
    lo, hi = sorted((b1, b2))
    k_lo, k_hi = cadence.save_every(w, t, lo), cadence.save_every(w, t, hi)
    assert k_hi <= k_lo
    if w > 0:
        assert w / (k_lo * t) <= lo * (1 + 1e-6)


@given(st.floats(min_value=1e-3, max_value=1e3), steps, st.floats(min_value=1e-4, max_value=0.5),
       st.integers(min_value=1, max_value=10**6))
def test_save_every_is_the_smallest_k_whose_writes_stay_within_the_chunk_budget(w, t, b, n):
    """COSTS 3.4's share, write seconds over the chunk: at the solved k it is within the
    budget, at k - 1 it is not; never more than the interval rule's k."""
    c = n * t  # a chunk the steps fill
    k = cadence.save_every(w, t, b, n, c)
    assert 1 <= k <= n + 1
    assert (n // k) * w <= b * c * (1 + 1e-9)
    if k > 1:
        assert (n // (k - 1)) * w > b * c * (1 - 1e-9)
    assert k <= cadence.save_every(w, t, b) or k == n + 1


@given(st.floats(min_value=3600.0, max_value=1e6), st.floats(min_value=600.0, max_value=1e5),
       st.floats(min_value=0.0, max_value=3000.0), st.floats(min_value=1e-3, max_value=100.0))
def test_a_week_never_trains_more_than_its_quota_less_startups(q, c, s, t):
    start = chunk.startup([StartupComponent(name="s", what="", seconds=measured(s, "s", "s"))])
    spc = chunk.steps_per_chunk(measured(c, "s", "c"), measured(t, "s", "t"))
    r = quota.weekly_quota(inherited(q, "s", "q"), measured(c, "s", "c"), start,
                           measured(t, "s", "t"), spc)
    whole = r.whole_chunks.value
    startups = whole + (1 if r.trainable_remainder_seconds.value > 0 else 0)
    assert r.steps_per_week.value * t + startups * s <= q * (1 + 1e-6)
    assert r.steps_per_week.value <= r.naive_steps.value


@settings(max_examples=60, deadline=None)
@given(alloc=st.floats(min_value=0.1, max_value=60.0),
       ratio=st.floats(min_value=1.0, max_value=1.6),
       memory=st.floats(min_value=1.0, max_value=80.0),
       fraction=st.floats(min_value=0.5, max_value=1.0))
@example(alloc=60.0, ratio=1.6, memory=1.0, fraction=0.5)  # does not fit: NO-GO asserted
@example(alloc=0.1, ratio=1.0, memory=80.0, fraction=1.0)  # fits: GO, and why, asserted
def test_preflight_never_says_go_when_the_run_does_not_fit(alloc, ratio, memory, fraction):
    a = int(alloc * GIB)
    cert = make_cert(alloc_512=a, reserved_512=int(a * ratio), memory=int(memory * GIB))
    plat = make_platform(budget_fraction={"value": fraction, "assumed": "test"},
                         device={"name": "P100"})
    v = planner.preflight(cert, plat, make_run())
    row = v.plan.rows[0]
    budget = v.plan.memory.budget_bytes.value
    if row.projected_reserved_bytes.value > budget:
        assert v.go is False and row.fits is False
    if v.go:
        assert row.fits is True and row.projected_reserved_bytes.value <= budget
        assert int(a * ratio) <= budget  # the measured reserved figure fits too
