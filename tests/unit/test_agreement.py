"""The agreement rule: children after the second skip the points the first two settled
(medians within the protocol's 1 %, off the floor), and such a point is assembled from the
two medians and is not profiled (fake records, no processes)."""

from __future__ import annotations

import pytest

from afford.certification import agreement_applies
from afford.certification.request import Plan
from afford.certification.stage_time import AGREEMENT, settled_by_two
from afford.certification.sweep import assemble_point
from afford.fit.stats import median


def _ev(key: str, child: int, m: float | None) -> dict:
    rec = {"child": child, "order_position": 0}
    if m is not None:
        rec.update(median_seconds=m, timed_seconds=[m] * 8, timed_step_indices=list(range(3, 11)))
    return {"event": "point", "key": key, "child": child, "record": rec}


def _item(key: str, workload: str = "w") -> dict:
    return {"key": key, "workload": workload, "mode": "bf16", "value": 1}


def test_only_points_off_the_floor_that_agree_within_the_tolerance_are_settled():
    # floor: 10 ms (the workload's smallest median over both children)
    meds = {"floor": (0.010, 0.012), "near": (0.019, 0.019), "work": (0.050, 0.0504),
            "apart": (0.050, 0.0506), "other": (0.030, 0.0301), "lost": (0.050, None)}
    items = [_item(k) for k in meds if k != "other"] + [_item("other", "v")]
    first = {k: _ev(k, 0, a) for k, (a, _) in meds.items()}
    second = {k: _ev(k, 1, b) for k, (_, b) in meds.items()}
    keep, skip = settled_by_two(first, second, items, 0.01)
    assert [it["key"] for it in keep] == ["floor", "near", "apart", "lost", "other"]
    assert [it["key"] for it in skip] == ["work"]
    assert skip[0]["skipped"].startswith("settled by children 0 and 1 (medians 0.80% apart, "
                                         "5.0x the workload's smallest step)")
    # "other" is its own workload: it is its own floor, so never settled
    assert all("skipped" not in it for it in keep)


def test_a_child_without_a_record_leaves_the_point_to_the_third():
    items = [_item("a"), _item("b")]
    first = {"a": _ev("a", 0, 0.01), "b": _ev("b", 0, 0.05)}
    keep, skip = settled_by_two(first, {"a": _ev("a", 1, 0.01)}, items, 0.01)
    assert [it["key"] for it in keep] == ["a", "b"] and skip == []


def test_a_settled_point_is_the_median_of_two_and_is_not_profiled():
    third = {"event": "point", "key": "k", "child": 2,
             "record": {"child": 2, "order_position": 5, "skipped": "settled"}}
    p = assemble_point(512, [_ev("k", 0, 0.050), _ev("k", 1, 0.0504), third], None)
    assert p.median_seconds == pytest.approx(median([0.050, 0.0504]))
    assert p.child_medians == [0.050, 0.0504] and p.excluded_reason is None
    # its busy time is read off its wall by the fit (step_sides.derive_busy)
    assert p.device_busy_seconds is None and p.kernels_per_step is None
    assert [k.skipped for k in p.children] == [None, None, "settled"]
    # whatever a third child had read, the median of three lies within the two's range
    for c in (0.01, 0.0502, 0.09):
        assert 0.050 <= median([0.050, 0.0504, c]) <= 0.0504


@pytest.mark.parametrize("device,children,precision,designs,applies", [
    ("cuda", 3, "adaptive", True, True), ("cuda", 3, "quick", True, True),
    ("cuda", 3, "full", True, False), ("cuda", 2, "adaptive", True, False),
    ("cpu", 3, "adaptive", True, False), ("cuda", 3, "adaptive", False, False)])
def test_the_rule_applies_on_cuda_with_a_design_and_never_under_full(
        device, children, precision, designs, applies):
    plan = Plan(device=device, device_class="large-gpu", workloads=[],
                designs=[object()] if designs else [], precision=precision)
    assert agreement_applies(plan, children, device == "cuda") is applies


def test_the_protocol_states_the_rule_with_its_numbers():
    text = AGREEMENT.format(tol=0.01, w=2.0)
    assert "within 1%" in text and "2x its workload's smallest step" in text
    assert "at most half their difference" in text
    assert "not profiled" in text
