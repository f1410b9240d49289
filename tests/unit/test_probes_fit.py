"""Pure probe logic on synthetic traces: utilisation statistics, the ladder's fixed share,
MFU, the launch/compute/memory verdict, and step 0 against warm. Values worked by hand."""

import math

import pytest

from afford.fit.time.verdicts import (
    arithmetic_share,
    bound_verdict,
    ladder_fit,
    mfu,
    utilisation_stats,
)
from afford.fit.time.warmup import combine_profiles, steps_until_warm, warmup_profile
from afford.schema.probes_section import COMPUTE_SHARE, LAUNCH_FIXED_SHARE


def test_utilisation_stats_drop_the_settle_window_and_count_idle_samples():
    # 10 Hz for 1 s; the first two samples (t < 0.2 s) describe what ran before the sampler
    t = [round(0.1 * i, 1) for i in range(11)]
    gpu = [0.9, 0.9, 0.10, 0.20, 0.00, 0.05, 0.30, 0.10, 0.15, 0.05, 0.20]
    s = utilisation_stats(t, gpu, settle_seconds=0.2, low=0.05)
    kept = gpu[2:]                         # 9 samples
    assert s.kept == 9
    assert s.mean == pytest.approx(sum(kept) / 9)   # 1.15 / 9 = 0.12778
    assert s.mean == pytest.approx(1.15 / 9)
    assert s.low_share == pytest.approx(3 / 9)      # 0.00, 0.05, 0.05 are at or under 5 %


def test_utilisation_stats_without_samples_is_none_not_zero():
    s = utilisation_stats([0.0, 0.1], [0.5, 0.5], settle_seconds=0.2)
    assert s.kept == 0 and s.mean is None and s.low_share is None
    with pytest.raises(ValueError):
        utilisation_stats([0.0], [0.1, 0.2], settle_seconds=0.0)


def test_ladder_fit_recovers_an_exact_floor():
    # t = 6 ms + 1e-7 s per token at batch x1, x2, x4 of 1024 tokens
    tokens = [1024, 2048, 4096]
    secs = [0.006 + 1e-7 * n for n in tokens]      # 6.1024, 6.2048, 6.4096 ms
    law, fixed, share = ladder_fit(tokens, secs)
    assert fixed == pytest.approx(0.006, rel=1e-9)
    assert law.params["c"] == pytest.approx(1e-7, rel=1e-7)
    assert share == pytest.approx(0.006 / 0.0061024, rel=1e-9)  # 0.98322
    assert law.r2 == pytest.approx(1.0)


def test_ladder_fit_of_a_proportional_step_has_no_floor():
    law, fixed, share = ladder_fit([1000, 2000, 4000], [0.01, 0.02, 0.04])
    assert fixed == pytest.approx(0.0, abs=1e-12) and share == pytest.approx(0.0, abs=1e-9)


def test_mfu_and_arithmetic_share():
    # 6.4e11 FLOPs in 15 ms is 42.67 TFLOP/s: 5.6 % of 762 TFLOP/s, 4.31 % of 989
    assert mfu(6.4e11, 0.015, 762e12) == pytest.approx(6.4e11 / 0.015 / 762e12)
    assert mfu(6.4e11, 0.015, 989e12) == pytest.approx(0.043142, rel=1e-4)
    assert arithmetic_share(6.4e11, 762e12, 0.015) == pytest.approx(0.055993, rel=1e-4)
    with pytest.raises(ValueError):
        mfu(1.0, 0.0, 1.0)


def test_tiny_model_trace_is_launch_bound():
    # docs/REFERENCES.md: the d=64, L=2 GPT-2 shape at 4 x 256 ran 6.7 ms/step at 15 % utilisation
    v = bound_verdict(fixed_share=0.93, utilisation_mean=0.15, utilisation_low_share=0.4,
                      arithmetic=0.004)
    assert v.label == "launch-bound"
    assert any("93%" in r and "launch" in r for r in v.reasons)
    assert any("15%" in r and "waits for the host" in r for r in v.reasons)


def test_utilisation_alone_can_say_launch_bound():
    v = bound_verdict(fixed_share=0.2, utilisation_mean=0.3, arithmetic=0.6)
    assert v.label == "launch-bound"


def test_fixed_share_alone_can_say_launch_bound_on_a_cpu():
    v = bound_verdict(fixed_share=LAUNCH_FIXED_SHARE, arithmetic=0.01)
    assert v.label == "launch-bound" and v.utilisation_mean is None
    # the reason says which side of the threshold the share is on: exactly on it is launch
    assert v.reasons[0].startswith(f"fixed share F/t {LAUNCH_FIXED_SHARE:.0%} >= ")
    assert v.reasons[0].endswith("(launch)")


def test_arithmetic_exactly_at_the_compute_share_is_compute_bound():
    assert bound_verdict(fixed_share=0.0, arithmetic=COMPUTE_SHARE).label == "compute-bound"
    assert bound_verdict(fixed_share=0.0, arithmetic=COMPUTE_SHARE * 0.99).label == \
        "memory-bound"


def test_busy_device_with_matmul_arithmetic_is_compute_bound():
    v = bound_verdict(fixed_share=0.05, utilisation_mean=0.98, utilisation_low_share=0.0,
                      arithmetic=0.72)
    assert v.label == "compute-bound"
    assert any("72.0%" in r for r in v.reasons)


def test_busy_device_without_matmul_arithmetic_is_memory_bound_by_elimination():
    v = bound_verdict(fixed_share=0.08, utilisation_mean=0.97, arithmetic=0.06)
    assert v.label == "memory-bound"
    assert "elimination" in v.reasons[-1] and "the device is busy" in v.reasons[-1]
    cpu = bound_verdict(fixed_share=0.08, arithmetic=0.06)
    assert cpu.label == "memory-bound" and "not measured" in cpu.reasons[-1]


def test_missing_figures_are_undetermined_never_a_guess():
    assert bound_verdict().label == "undetermined"
    assert bound_verdict(fixed_share=0.1).label == "undetermined"   # no arithmetic share
    assert bound_verdict(arithmetic=0.9).label == "compute-bound"
    assert bound_verdict(fixed_share=math.nan, arithmetic=0.1).label == "undetermined"


def test_warmup_profile_worked_by_hand():
    # step 0 = 2 s; warm-up 0.5, 0.12, 0.102; timed 0.1, 0.1, 0.098, 0.104 at steps 4..7
    p = warmup_profile(2.0, [0.5, 0.12, 0.102], [0.1, 0.1, 0.098, 0.104], [4, 5, 6, 7])
    assert p.warm_seconds == pytest.approx(0.1)          # median of the four timed steps
    assert p.step0_over_warm == pytest.approx(20.0)
    assert p.first_seconds == [2.0, 0.5, 0.12, 0.102]
    assert p.steps_until_warm == 3                       # 0.102 is 2 % off; 0.12 is 20 %
    with pytest.raises(ValueError, match="timed steps with their indices"):
        warmup_profile(2.0, [0.5], [], [])
    with pytest.raises(ValueError, match="timed steps with their indices"):
        warmup_profile(2.0, [0.5], [0.1, 0.1], [4])
    with pytest.raises(ValueError, match="warm median must be positive"):  # a broken clock
        warmup_profile(2.0, [0.5], [0.0, 0.0], [2, 3])


def test_steps_until_warm_searches_timed_steps_by_their_indices():
    assert steps_until_warm(1.0, [0.5], [0.2, 0.101], [2, 3], warm=0.1) == 3
    assert steps_until_warm(1.0, [0.5], [0.08, 0.12], [2, 3], warm=0.1) is None
    # exactly at the tolerance counts as warm, in the early steps and in the timed ones
    assert steps_until_warm(1.25, [], [], [], warm=1.0, tol=0.25) == 0
    assert steps_until_warm(4.0, [2.0], [1.25], [5], warm=1.0, tol=0.25) == 5


def test_combine_takes_medians_and_the_median_count():
    a = warmup_profile(2.0, [0.5, 0.1], [0.1] * 4, [3, 4, 5, 6])          # warm at 2
    b = warmup_profile(3.0, [0.4, 0.2, 0.1], [0.1] * 4, [4, 5, 6, 7])     # warm at 3
    c = warmup_profile(4.0, [0.3], [0.08, 0.12, 0.08, 0.12], [2, 3, 4, 5])  # never
    m = combine_profiles([a, b, c], warm_seconds=0.1)
    assert m.step0_seconds == 3.0 and m.step0_over_warm == pytest.approx(30.0)
    # medians of (2,3,4) (.5,.4,.3) (.1,.2) (.1)
    assert m.first_seconds == pytest.approx([3.0, 0.4, 0.15, 0.1])
    assert m.steps_until_warm == 3                   # median of 2, 3, never
    assert combine_profiles([c, c, a], 0.1).steps_until_warm is None


def test_each_reason_says_which_side_of_its_threshold():
    hi = bound_verdict(fixed_share=0.05, utilisation_mean=0.98, arithmetic=0.72).reasons
    assert any("(matmul FLOPs explain the step)" in r for r in hi)
    assert any("(the device is busy)" in r for r in hi)
    assert any("(the step grows with the batch)" in r for r in hi)
    lo = bound_verdict(fixed_share=0.93, utilisation_mean=0.15, arithmetic=0.004).reasons
    assert any("(matmul FLOPs explain little)" in r for r in lo)
    assert any("(the device waits for the host)" in r for r in lo)
    assert any("(launch)" in r for r in lo)


def test_a_fixed_share_above_the_step_is_a_failed_fit_never_a_figure():
    """Issue 30, item 2 (the ladder note: "do not quote it as a measured fixed cost"): on a
    CPU (utilisation NOT EXECUTABLE) a 1-child ladder gave F / t = 120 % and the verdict
    cited it as launch-bound evidence. Now the fit is reported failed and the verdict rests
    on the rungs: here 4x the tokens cost 3.6x the time, so the step grows with the batch."""
    from afford.fit.time.verdicts import ladder_growth

    grows = ladder_growth([512, 2048], [0.10, 0.36], [[0.1, 0.1, 0.1, 0.11, 0.1],
                                                      [0.36, 0.35, 0.37, 0.36, 0.36]])
    v = bound_verdict(fixed_share=1.2, arithmetic=0.02, growth=grows)
    assert v.fixed_share is None and v.failed_fixed_share == 1.2
    assert v.label == "memory-bound" and "120%" not in " ".join(v.reasons[1:])
    assert v.reasons[0].startswith("the ladder fit failed: F / t = 120% > 100%")
    assert "4x the tokens cost 3.60x the time" in v.reasons[1]
    assert "the step grows with the batch" in v.reasons[1]
    flat = ladder_growth([512, 2048], [0.10, 0.096], [[0.1] * 5, [0.095, 0.096, 0.097] * 2])
    launch = bound_verdict(fixed_share=1.02, arithmetic=0.003, growth=flat)
    assert launch.label == "launch-bound" and "(launch)" in launch.reasons[1]
    assert launch.ladder_time_ratio == pytest.approx(0.96)
    # a wide spread leaves the rungs inconclusive: they decide nothing
    wide = ladder_growth([512, 2048], [0.10, 0.20], [[0.05, 0.1, 0.15, 0.2], [0.1, 0.2, 0.3]])
    unsure = bound_verdict(fixed_share=1.3, growth=wide)
    assert unsure.label == "undetermined" and "inconclusive" in unsure.reasons[1]
    # a share of at most 100 % is a share, and decides as before
    assert bound_verdict(fixed_share=1.0, arithmetic=0.01).fixed_share == 1.0


def test_the_probes_table_shows_a_failed_fixed_share_as_a_failed_measurement():
    from afford.core.provenance import NotExecutable
    from afford.figures.probes_figures import _fixed_share
    from afford.schema.probes_section import Ladder, Rung

    law, fixed, share = ladder_fit([512, 1024, 2048], [0.05, 0.1, 0.05])  # F / t = 117 %
    lad = Ladder(batch_key="batch", rungs=[Rung(multiplier=1, shape={})], law=law,
                 fixed_seconds=fixed, fixed_share=share)
    assert share > 1
    cell = _fixed_share(lad)
    assert isinstance(cell, NotExecutable) and cell.failed and "failed fit" in cell.reason


def test_the_levers_batch_line_never_quotes_a_failed_fixed_share():
    from types import SimpleNamespace

    from afford.report.ladder_tables import batch_lines

    law, _, share = ladder_fit([512, 1024, 2048], [0.05, 0.1, 0.05])
    ok_law, _, ok_share = ladder_fit([512, 1024, 2048], [0.06, 0.08, 0.12])
    runs = [SimpleNamespace(workload="w", batch_law=law, fixed_share=share),
            SimpleNamespace(workload="v", batch_law=ok_law, fixed_share=ok_share)]
    bad, good = batch_lines(SimpleNamespace(runs=runs))
    assert "failed" in bad and "%" not in bad.split("(")[0] and f"{share:.0%}" not in bad
    assert f"{ok_share:.2%} C" in good
