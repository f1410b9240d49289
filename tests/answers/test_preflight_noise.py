"""Decisions robust to the measured noise are decisions (issue 40, item 2): preflight on a
NOISY certificate plans the run again at the slow end of the step's measured spread and
says NO-GO only where that flips the decision; otherwise GO, the spread stated.
``--accept-noisy`` stays for the cases that flip.

The certificate is :mod:`tests.time_certs`' synthetic P100 one made NOISY, its seq-512
point's children at 0.95, 1.0 and 1.3 s (median 1.0 s, the slow end 1.3x), so every figure
can be checked by hand: 1B tokens at 4096 tokens a step is 244,141 steps; 30 GPU-hours a
week of 11 h chunks (330 s of startup each) hold 107,046 one-second steps a week (2.281
weeks) and 82,341 steps of 1.3 s (2.965 weeks)."""

from __future__ import annotations

import pytest

from afford import figures
from afford.core.provenance import Tag, fitted, measured
from afford.planning import planner
from afford.planning.go_no_go import slow_step
from tests.plan_helpers import make_platform, make_run
from tests.time_certs import make_time_cert

REASON = "8 x 512: children disagree by 35% > 5%"


def noisy_cert(children=(0.95, 1.0, 1.3)):
    cert = make_time_cert(workload_verdict="NOISY", cert_verdict="NOISY", reasons=[REASON])
    r = cert.workloads[0]
    pts = [p.model_copy(update={"child_medians": list(children)}) if p.value == 512 else p
           for p in r.points]
    return cert.model_copy(update={"workloads": [r.model_copy(update={"points": pts})]})


def test_the_children_slow_end_is_read_at_the_runs_point_else_the_typical_one():
    """At seq 512 its own children (1.3x); at a shape no point measured the median of the
    points' factors (seq 256 and the design point 16 x 256 agree exactly: 1.0x, 1.0x and
    1.3x), so that one wide point does not speak for every shape."""
    cert = noisy_cert()
    at = figures.children_slow_end(cert, "tinylm", 512, "fp32")
    assert at.value == pytest.approx(1.3) and at.tag is Tag.MODULE
    assert "seq=512: the slowest of 3 child medians over their median" in at.source
    typical = figures.children_slow_end(cert, "tinylm", None, "fp32")  # a shape not measured
    assert typical.value == pytest.approx(1.0)
    assert "(the median of its 3 points' factors)" in typical.source
    one = noisy_cert(children=(1.0,))
    assert figures.children_slow_end(one, "tinylm", 512, "fp32") is not None  # seq 256's 3
    lone = one.model_copy(update={"workloads": [one.workloads[0].model_copy(update={
        "points": [p.model_copy(update={"child_medians": p.child_medians[:1]})
                   for p in one.workloads[0].points], "design_points": []})]})
    assert figures.children_slow_end(lone, "tinylm", 512, "fp32") is None


def test_slow_step_is_the_step_times_the_children_factor_never_faster():
    step = fitted(2.0, "s", "the model", extrapolated=True)
    slow = slow_step(step, measured(1.25, "x", "children"))
    assert slow.value == pytest.approx(2.5) and slow.tag is Tag.MODULE and slow.extrapolated
    assert "slow end of the measured spread" in slow.source
    assert slow_step(step, measured(0.9, "x", "children")).value == pytest.approx(2.0)
    assert slow_step(step, None) is None


def test_a_decision_the_spread_cannot_flip_is_go_with_the_spread_stated():
    v = planner.preflight(noisy_cert(), make_platform(), make_run(max_weeks=4))
    assert v.go, v.reasons
    said = next(w for w in v.warnings if "NOISY" in w)
    assert f"tinylm (fp32): {REASON}" in said and "the decision holds" in said
    assert "the step 1.00 s to 1.30 s at its slow end (1.30x: the step x the slowest " in said
    assert v.plan.rows[0].step_seconds.value == pytest.approx(1.0)  # plans stay on the median


def test_a_decision_the_spread_flips_is_no_go_unless_accepted():
    """max_weeks 2.5 lies between the median's 2.281 weeks and the slow end's 2.965."""
    v = planner.preflight(noisy_cert(), make_platform(), make_run(max_weeks=2.5))
    assert not v.go and len(v.reasons) == 1
    why = v.reasons[0]
    assert "the decision flips inside their measured spread: at the slow end, the target of " \
        "244141 steps takes 2.97 weeks (weekly quota), more than the run's max_weeks 2.5" in why
    assert why.endswith("pass --accept-noisy to go on the step as measured")
    ok = planner.preflight(noisy_cert(), make_platform(), make_run(max_weeks=2.5),
                           accept_noisy=True)
    assert ok.go and any("flips" in w and "accepted with --accept-noisy" in w
                         for w in ok.warnings)


def test_a_check_that_fails_at_the_median_is_not_a_flip():
    """max_weeks 2 fails at the median already: NO-GO for the target alone, and the NOISY
    spread, which cannot change that, is stated among the warnings."""
    v = planner.preflight(noisy_cert(), make_platform(), make_run(max_weeks=2))
    assert not v.go and len(v.reasons) == 1 and v.reasons[0].startswith("the target of")
    assert any("the decision holds" in w for w in v.warnings)


def test_without_a_known_spread_a_noisy_certificate_is_no_go_unless_accepted():
    cert = noisy_cert(children=(1.0,))
    r = cert.workloads[0]
    lone = cert.model_copy(update={"workloads": [r.model_copy(update={
        "points": [p.model_copy(update={"child_medians": p.child_medians[:1]})
                   for p in r.points], "design_points": []})]})
    v = planner.preflight(lone, make_platform(), make_run())
    assert not v.go and "No slow end of the spread is known" in v.reasons[0]
    assert planner.preflight(lone, make_platform(), make_run(), accept_noisy=True).go


def test_a_quiet_certificate_is_planned_once():
    quiet = make_time_cert()
    v = planner.preflight(quiet, make_platform(), make_run(max_weeks=2.5))
    assert v.go and not any("NOISY" in w for w in v.warnings)


def test_slow_step_is_the_high_end_of_the_steps_band_where_it_has_one():
    """A host-bound step carries a band (the floor differs from process to process): its
    high end is the slow end, whatever the children's factor."""
    step = fitted(0.010, "s", "the model").with_band(0.008, 0.013)
    slow = slow_step(step, measured(1.05, "x", "children"))
    assert slow.value == pytest.approx(0.013) and "the high end of the step's band" in slow.source
    assert slow_step(step, None).value == pytest.approx(0.013)


def test_an_outlier_child_the_others_outvote_is_not_the_slow_end():
    """Issue 40's 9487 % case: one child at 0.557 s against three at 5-6.6 ms. The others
    outvote it (timing's outlier_children), so the slow end is theirs, 6.6 / 6.0 ms."""
    from afford.schema.point import ChildPoint

    cert = noisy_cert()
    r = cert.workloads[0]
    kids = [ChildPoint(child=i, order_position=0, median_seconds=m)
            for i, m in enumerate((0.0050, 0.0060, 0.0066, 0.557))]
    pts = [p.model_copy(update={"children": kids, "child_medians": [0.005, 0.006, 0.0066,
                                                                    0.557],
                                "median_seconds": 0.006, "outlier_children": [3]})
           if p.value == 512 else p for p in r.points]
    cert = cert.model_copy(update={"workloads": [r.model_copy(update={"points": pts})]})
    at = figures.children_slow_end(cert, "tinylm", 512, "fp32")
    assert at.value == pytest.approx(0.0066 / 0.006) and "slowest of 3 child medians" in at.source
