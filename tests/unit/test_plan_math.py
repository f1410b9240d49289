"""The cost model's pure functions on round numbers worked by hand (docs/DESIGN.md section 4)."""

import math

import pytest

from afford.core.provenance import Tag, assumed, inherited, measured
from afford.figures.memory_at import MemoryAnswer, judged_plain
from afford.planning import cadence, chunk, disk, failures, quota
from afford.planning.derive import ceil_div, floor_div
from afford.planning.result import StartupComponent
from afford.schema.memory_law import projected_reserved

GIB = 2**30


def s(v, tag="M"):
    return measured(v, "s", "test") if tag == "M" else assumed(v, "s", "test reason")


def start(total=600.0, final=0.0):
    """A startup of ``total`` seconds, ``final`` of them the final save."""
    comps = [StartupComponent(name="import", what="", seconds=s(60.0)),
             StartupComponent(name="install", what="", seconds=s(total - 60.0 - final, "A"))]
    if final:
        comps.append(StartupComponent(name="final_save", what="", seconds=s(final), final=True))
    return chunk.startup(comps)


CAP, MARGIN = inherited(43200.0, "s", "docs"), assumed(3600.0, "s", "default")


# --- chunk --------------------------------------------------------------------------------

def test_chunk_is_cap_less_margin_and_margin_covers_startup_six_times():
    c = chunk.chunk(CAP, MARGIN, start(600.0))
    assert c.chunk_seconds.value == 39600.0 and c.chunk_seconds.tag is Tag.MODULE
    assert c.startup.total_seconds.value == 600.0
    assert c.margin_covers.value == 6.0 and c.covered is True
    assert "ASSUMED" in c.chunk_seconds.source  # the margin is assumed


def test_a_margin_must_leave_some_chunk():
    # one second left is a (short) chunk; nothing left is refused
    assert chunk.chunk(CAP, assumed(43199.0, "s", "m"), start(0.5)).chunk_seconds.value == 1.0
    with pytest.raises(ValueError, match="leaves no chunk"):
        chunk.chunk(CAP, assumed(43200.0, "s", "m"), start(0.5))


def test_margin_that_does_not_cover_the_startup():
    c = chunk.chunk(CAP, MARGIN, start(3601.0))
    assert c.covered is False and c.margin_covers.value == pytest.approx(3600 / 3601)


def test_startup_exactly_equal_to_the_margin_is_covered():
    assert chunk.chunk(CAP, MARGIN, start(3600.0)).covered is True


def test_margin_covers_a_sub_second_startup_and_nothing_without_one():
    tiny = chunk.startup([StartupComponent(name="import", what="", seconds=s(0.5))])
    assert chunk.chunk(CAP, MARGIN, tiny).margin_covers.value == 7200.0  # 3600 / 0.5
    empty = chunk.chunk(CAP, MARGIN, chunk.startup([]))
    assert empty.margin_covers is None and empty.covered is True


def test_restart_excludes_the_final_save():
    st = start(600.0, final=20.0)
    assert st.total_seconds.value == 600.0 and st.restart_seconds.value == 580.0


def test_no_cap_means_no_chunk():
    c = chunk.chunk(inherited(None, "s", "own machine"), MARGIN, start())
    assert c.chunk_seconds is None and c.covered is None


@pytest.mark.parametrize("step,steps", [
    (0.5, 79200),     # 39600 / 0.5 lands exactly on a step
    (0.7, 56571),     # 56571.43: the partial step counts nothing
    (39600.0, 1),     # one step fills the chunk exactly
    (39600.5, 0),     # a step longer than the chunk
])
def test_steps_per_chunk(step, steps):
    r = chunk.steps_per_chunk(measured(39600.0, "s", "c"), measured(step, "s", "t"))
    assert r.value == steps


def test_a_budget_landing_exactly_on_a_step_despite_binary_rounding():
    assert 1.2 / 0.1 < 12  # 11.999999999999998 in binary floating point
    assert chunk.steps_per_chunk(s(1.2), s(0.1)).value == 12
    assert floor_div(1.2, 0.1) == 12 and ceil_div(1.2, 0.1) == 12
    # below 1 the tolerance is absolute (1e-9), not relative: a quotient of 1e-10 is 0
    assert ceil_div(1e-10, 1.0) == 0 and ceil_div(2e-9, 1.0) == 1
    assert floor_div(1.0 - 5e-10, 1.0) == 1 and floor_div(1.0 - 2e-9, 1.0) == 0


def test_extrapolated_step_marks_steps_per_chunk_extrapolated():
    step = measured(0.5, "s", "law").model_copy(update={"tag": Tag.FITTED, "extrapolated": True})
    assert chunk.steps_per_chunk(s(39600.0), step).extrapolated is True


def _measured_answer(reserved: int, budget) -> MemoryAnswer:
    a = MemoryAnswer(workload="w", mode="fp32", device_type="cuda", shape={"B": 1, "s": 1},
                     source="measured", why="a test", allocated=measured(reserved, "B", "a"),
                     reserved=measured(reserved, "B", "r"))
    return judged_plain(a, budget)


def test_memory_budget_and_fit():
    mem = chunk.memory_budget(inherited(16 * GIB, "B", "sheet"), assumed(0.9, "ratio", "d"))
    assert mem.budget_bytes.value == 15461882265  # floor(17179869184 x 0.9)
    ans = _measured_answer(13421772800, mem.budget_bytes)
    row = chunk.chunk_row(workload="w", mode="fp32", sweep_param="seq", value=1,
                          step=s(0.5), mem=ans, memory=mem, chunk_seconds=s(39600.0))
    assert row.projected_reserved_bytes.value == 13421772800  # the answer's figure
    assert row.budget_share.value == pytest.approx(13421772800 / 15461882265)
    assert row.fits is True and row.fits_level == "yes" and row.memory_source == "measured"
    assert row.steps_per_chunk.value == 79200 and row.steps_per_hour.value == 7200


def test_exactly_at_the_budget_fits_and_one_byte_over_does_not():
    mem = chunk.memory_budget(measured(1000, "B", "m"), assumed(0.9, "ratio", "d"))
    assert projected_reserved(600, 1.5) == 900 == mem.budget_bytes.value  # COSTS 3.2
    row = chunk.chunk_row(workload="w", mode="fp32", sweep_param="n", value=1, step=None,
                          mem=_measured_answer(900, mem.budget_bytes), memory=mem,
                          chunk_seconds=None)
    assert row.fits is True and row.steps_per_chunk is None
    over = chunk.chunk_row(workload="w", mode="fp32", sweep_param="n", value=1, step=None,
                           mem=_measured_answer(901, mem.budget_bytes), memory=mem,
                           chunk_seconds=None)
    assert over.projected_reserved_bytes.value == 901 and over.fits is False
    assert over.fits_level == "no"


def test_run_row_tokens_per_chunk():
    mem = chunk.memory_budget(measured(1000, "B", "m"), assumed(0.9, "ratio", "d"))
    row = chunk.chunk_row(workload="w", mode="fp32", sweep_param="seq", value=1024,
                          step=s(0.5), mem=None, memory=mem,
                          chunk_seconds=s(39600.0), is_run=True,
                          tokens_per_step=measured(8192, "tokens", "t"))
    assert row.tokens_per_chunk.value == 79200 * 8192 and row.fits is None


# --- weekly quota -------------------------------------------------------------------------

Q30 = inherited(108000.0, "s", "30 GPU-hours")
C39600 = measured(39600.0, "s", "chunk")


def test_weekly_quota_worked_example():
    # billed = 39600 + 600 = 40200; whole = floor(108000 / 40200) = 2; remainder 27600;
    # trainable 27000; steps = 2 x 79200 + 27000 / 0.5 = 212400
    q = quota.weekly_quota(Q30, C39600, start(600.0), s(0.5), measured(79200, "steps", "c"),
                           measured(8192, "tokens", "t"))
    assert q.naive_chunks.value == pytest.approx(108000 / 39600)  # 2.727: WRONG
    assert "WRONG" in q.naive_chunks.source
    assert q.naive_steps.value == 216000  # 2 x 79200 + 28800 / 0.5: no startup charged
    assert q.billed_seconds_per_chunk.value == 40200.0
    assert q.whole_chunks.value == 2
    assert q.remainder_seconds.value == 27600.0
    assert q.trainable_remainder_seconds.value == 27000.0
    assert q.steps_per_week.value == 212400
    assert q.tokens_per_week.value == 212400 * 8192


@pytest.mark.parametrize("seconds,remainder,trainable,steps", [
    (81000.0, 600.0, 0.0, 158400),   # remainder exactly one startup: nothing trainable
    (80700.0, 300.0, 0.0, 158400),   # remainder smaller than a startup: zero, not negative
    (80400.0, 0.0, 0.0, 158400),     # the quota is exactly two billed chunks
    (81000.5, 600.5, 0.5, 158401),   # half a second past the startup: one more 0.5 s step
])
def test_quota_remainder_edges(seconds, remainder, trainable, steps):
    q = quota.weekly_quota(inherited(seconds, "s", "q"), C39600, start(600.0), s(0.5),
                           measured(79200, "steps", "c"))
    assert q.whole_chunks.value == 2
    assert q.remainder_seconds.value == pytest.approx(remainder)
    assert q.trainable_remainder_seconds.value == pytest.approx(trainable)
    assert q.steps_per_week.value == steps


def test_quota_without_a_run_has_no_steps():
    q = quota.weekly_quota(Q30, C39600, start(600.0))
    assert q.steps_per_week is None and q.naive_steps is None and q.whole_chunks.value == 2
    # a step time without steps per chunk (or the reverse) counts no steps either
    for step, spc in ((s(1.0), None), (None, measured(39600, "steps", "c"))):
        q = quota.weekly_quota(Q30, C39600, start(600.0), step=step, steps_per_chunk=spc)
        assert q.steps_per_week is None and q.naive_steps is None


def test_target_in_tokens_rounds_steps_up():
    steps, tokens = quota.target_steps(measured(8192, "tokens", "t"),
                                       tokens=inherited(1_000_000_000, "tokens", "run"))
    assert steps.value == 122071  # ceil(122070.3125)
    steps2, tokens2 = quota.target_steps(measured(8192, "tokens", "t"),
                                         steps=inherited(1000, "steps", "run"))
    assert steps2.value == 1000 and tokens2.value == 8_192_000
    with pytest.raises(ValueError):
        quota.target_steps(measured(8192, "tokens", "t"))


def test_time_to_target_capped_under_quota():
    q = quota.weekly_quota(Q30, C39600, start(600.0), s(0.5), measured(79200, "steps", "c"))
    t = quota.time_to_target(measured(122071, "steps", "r"), measured(1e9, "tokens", "r"),
                             s(0.5), start(600.0), measured(79200, "steps", "c"), q)
    assert t.sessions.value == 2
    # one full session billed 40200 s, then startup 600 + 42871 steps x 0.5 s
    assert t.gpu_seconds.value == pytest.approx(40200 + 600 + 42871 * 0.5)
    assert t.weeks.value == pytest.approx(122071 / 212400) and t.limited_by == "weekly quota"


def test_time_to_target_without_a_cap():
    t = quota.time_to_target(measured(122071, "steps", "r"), measured(1e9, "tokens", "r"),
                             s(0.5), start(600.0))
    assert t.sessions.value == 1 and t.gpu_seconds.value == 600 + 122071 * 0.5
    assert t.weeks.value == pytest.approx((600 + 122071 * 0.5) / 604800)
    assert t.limited_by == "wall clock"


def test_target_exactly_whole_sessions():
    t = quota.time_to_target(measured(158400, "steps", "r"), measured(1, "tokens", "r"),
                             s(0.5), start(600.0), measured(79200, "steps", "c"))
    assert t.sessions.value == 2
    assert t.gpu_seconds.value == 40200 + 600 + 79200 * 0.5


def test_a_target_of_no_steps_costs_one_startup_capped_or_not():
    zero = measured(0, "steps", "r")
    capped = quota.time_to_target(zero, measured(0, "tokens", "r"), s(0.5), start(600.0),
                                  measured(79200, "steps", "c"))
    free = quota.time_to_target(zero, measured(0, "tokens", "r"), s(0.5), start(600.0))
    assert capped.sessions.value == free.sessions.value == 1
    assert capped.gpu_seconds.value == free.gpu_seconds.value == 600


# --- cadence ------------------------------------------------------------------------------

def test_save_every_worked_example():
    """write 10 s, step 1 s, 39,600 steps in 39,600 s, 1 %: the budget holds
    M = floor(0.01 x 39600 / 10) = 39 writes, so k = floor(39600 / 40) + 1 = 991 (39 writes,
    390 s = 0.985 % of the chunk); k = 990 would write 40 times, 400 s = 1.01 %."""
    c = cadence.cadence(s(10.0), s(1.0), inherited(0.01, "ratio", "run"),
                        measured(39600, "steps", "c"), s(39600.0))
    assert c.save_every.value == 991
    assert c.interval_seconds.value == 1001.0
    assert c.writes_per_chunk.value == 39  # floor(39600 / 991)
    assert c.write_seconds_per_chunk.value == 390.0
    assert c.share_of_chunk.value == pytest.approx(390 / 39600)
    assert c.overhead_share.value == c.share_of_chunk.value  # one share, the one bounded
    assert c.reaches_checkpoint is True and c.min_budget_to_reach is None
    assert 40 * 10.0 / 39600 > 0.01  # one step fewer breaks the budget


@pytest.mark.parametrize("budget,k", [(0.02, 500), (0.5, 20), (0.9, 12), (0.99, 11)])
def test_save_every_for_other_budgets(budget, k):
    # without a chunk: k = ceil(write / (budget x step))
    assert cadence.save_every(10.0, 1.0, budget) == k


def test_save_every_is_at_least_one_step():
    assert cadence.save_every(0.0, 1.0, 0.01) == 1
    assert cadence.save_every(0.0, 1.0, 0.01, 100, 100.0) == 1


def test_save_every_needs_a_step_that_takes_time():
    for step in (0.0, -1.0):
        with pytest.raises(ValueError, match="step seconds must be positive"):
            cadence.save_every(10.0, step, 0.01)


def test_cadence_without_a_chunk_still_says_how_often_to_save():
    # write 10 s, step 2 s, 5 %: k = ceil(10 / (0.05 x 2)) = 100; interval 100 x 2 + 10
    c = cadence.cadence(s(10.0), s(2.0), inherited(0.05, "ratio", "run"))
    assert c.save_every.value == 100 and c.interval_seconds.value == 210.0
    assert c.overhead_share.value == pytest.approx(0.05)  # write / (k x step)
    assert c.writes_per_chunk is None and c.share_of_chunk is None


def test_bad_budget_is_refused():
    with pytest.raises(ValueError):
        cadence.save_every(10.0, 1.0, 1.0)


def test_the_share_printed_never_exceeds_the_budget_at_the_costs_inputs():
    """Issue 30, item 3: afford printed "share of the chunk 1.01 %" beside "overhead budget
    1.00 %" (its old k = 202 wrote 655 times, 398.9 s). Solved for the share of the chunk,
    COSTS's inputs give its save_every 204, 395.2 s, 0.998 %."""
    c = cadence.cadence(s(0.609), s(0.299025), inherited(0.01, "ratio", "COSTS 3.4"),
                        measured(132430, "steps", "COSTS 3.2"), s(39600.0))
    assert c.save_every.value == 204
    assert c.writes_per_chunk.value == 649
    assert c.write_seconds_per_chunk.value == pytest.approx(649 * 0.609)  # 395.2 s
    assert c.share_of_chunk.value == pytest.approx(0.00998, rel=1e-3)
    assert c.share_of_chunk.value <= 0.01
    assert c.overhead_share.value <= c.overhead_budget.value


def test_chunk_that_cannot_reach_one_checkpoint_and_the_budget_that_would():
    # 10 s writes in a 500 s chunk at 1 %: 5 s of budget holds no write; 2 % holds one
    c = cadence.cadence(s(10.0), s(1.0), inherited(0.01, "ratio", "run"),
                        measured(500, "steps", "c"), s(500.0))
    assert c.reaches_checkpoint is False and c.writes_per_chunk.value == 0
    assert c.save_every.value == 501
    need = c.min_budget_to_reach.value
    assert need == pytest.approx(10 / 500)
    exact = cadence.cadence(s(10.0), s(1.0), inherited(need, "ratio", "run"),
                            measured(500, "steps", "c"), s(500.0))
    assert exact.reaches_checkpoint is True and exact.min_budget_to_reach is None
    assert exact.save_every.value == 251 and exact.writes_per_chunk.value == 1  # 500 // 2 + 1
    # one step a chunk (a slow step in a short session): the budget that saves every step
    one = cadence.cadence(s(10.0), s(30.0), inherited(0.01, "ratio", "run"),
                          measured(1, "steps", "c"), s(30.0))
    assert one.reaches_checkpoint is False and one.save_every.value == 2
    assert one.min_budget_to_reach.value == pytest.approx(10 / 30)
    # at that budget (or any above it) the one step is followed by a save
    every = cadence.cadence(s(10.0), s(30.0), inherited(0.5, "ratio", "run"),
                            measured(1, "steps", "c"), s(30.0))
    assert every.save_every.value == 1 and every.reaches_checkpoint is True
    assert every.writes_per_chunk.value == 1 and every.min_budget_to_reach is None
    # no whole step in the chunk: no budget reaches a checkpoint
    none = cadence.cadence(s(10.0), s(30.0), inherited(0.01, "ratio", "run"),
                           measured(0, "steps", "c"), s(20.0))
    assert none.reaches_checkpoint is False and none.min_budget_to_reach is None


# --- failures -----------------------------------------------------------------------------

@pytest.mark.parametrize("m_minutes,published", [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_reproduces_published_optima(m_minutes, published):
    """Daly 2006: d = 5 min, R = 10 min give optima of about 117, 57 and 9.1 min."""
    d, r, m = 5.0, 10.0, float(m_minutes)
    tau = failures.daly_interval(d, m)
    digits = 0 if published > 10 else 1
    assert round(tau, digits) == published
    # the full model's own minimum agrees within 1 %
    grid = [tau * (0.5 + i / 1000) for i in range(1001)]
    best = min(grid, key=lambda t: failures.daly_wall_time(t, d, r, m))
    assert best == pytest.approx(tau, rel=0.01)


def test_young_and_daly_limits():
    assert failures.young_interval(5.0, 1440.0) == 120.0  # sqrt(2 x 5 x 1440)
    assert failures.daly_interval(10.0, 4.0) == 4.0       # d >= 2M: the interval is M


def test_loss_per_failure_is_about_half_the_interval_plus_restart():
    lost = failures.loss_per_failure(100.0, 0.0, 30.0, 1e9)
    assert lost == pytest.approx(50.0 + 30.0, rel=1e-6)


def test_kill_ledger_worked_example():
    # R = 300, write 10, step 1, 39600 steps, save_every 990: interval 1000 s; restart apart
    rows = failures.kill_ledger(s(300.0), s(10.0), s(1.0), measured(39600, "steps", "c"),
                                measured(990, "steps", "k"))
    by = {r.point: r for r in rows}
    assert by["warm-up"].worst_without.value == by["warm-up"].worst_with.value == 300.0
    assert by["warm-up"].expected_with.value == 150.0 and by["warm-up"].restart is None
    assert by["mid-chunk"].worst_without.value == 39600
    assert by["mid-chunk"].worst_with.value == 990
    assert by["mid-chunk"].worst_ratio.value == pytest.approx(39600 / 990)
    assert by["mid-chunk"].expected_without.value == 39600 / 2
    assert by["mid-chunk"].expected_with.value == 1000 / 2
    assert by["mid-chunk"].expected_ratio.value == pytest.approx(19800 / 500)
    assert by["mid-chunk"].restart.value == 300.0
    assert by["checkpoint write"].worst_without.value == 39600  # no periodic write: mid-chunk
    assert by["checkpoint write"].worst_with.value == 1000
    assert by["checkpoint write"].expected_with.value == 995
    # worst: a whole interval; expected: the projected 990 steps since step 38610, half a write
    assert by["final save"].worst_without.value == 39600 + 10
    assert by["final save"].worst_with.value == 1000
    assert by["final save"].expected_with.value == 990 + 5
    w = failures.worth(rows, Q30)
    assert w.saved_seconds.value == 39600 - 990
    assert w.saved_share_of_quota.value == pytest.approx(38610 / 108000)


def test_kill_ledger_final_save_soon_after_a_periodic_one():
    rows = failures.kill_ledger(s(300.0), s(10.0), s(1.0), measured(1000, "steps", "c"),
                                measured(990, "steps", "k"))
    final = next(r for r in rows if r.point == "final save")
    assert final.expected_with.value == 10 + 5 and final.worst_with.value == 1000
    assert failures.worth(rows).saved_share_of_quota is None


def test_kill_ledger_of_a_one_step_chunk_saving_every_step():
    # n = k = 1 (a 2 s step): the last periodic save follows step 1, so the final save's
    # expected loss is that one step + half the write
    rows = failures.kill_ledger(s(300.0), s(10.0), s(2.0), measured(1, "steps", "c"),
                                measured(1, "steps", "k"))
    by = {r.point: r for r in rows}
    assert by["final save"].expected_with.value == 2 + 5
    assert by["final save"].worst_with.value == 2 + 10
    # saving after every step is periodic checkpointing: a mid-chunk kill expects half an
    # interval, (2 + 10) / 2, and a kill during the write loses the step and the write
    assert by["mid-chunk"].expected_with.value == 6 and by["mid-chunk"].worst_with.value == 2
    assert by["checkpoint write"].worst_with.value == 12


def test_kill_ledger_when_no_periodic_checkpoint_fits_in_the_chunk():
    rows = failures.kill_ledger(s(300.0), s(10.0), s(1.0), measured(500, "steps", "c"),
                                measured(990, "steps", "k"))
    by = {r.point: r for r in rows}
    assert by["mid-chunk"].worst_with.value == by["mid-chunk"].worst_without.value == 500.0
    assert by["mid-chunk"].expected_with.value == 250.0
    assert by["checkpoint write"].worst_with is None
    assert by["final save"].worst_with.value == by["final save"].worst_without.value == 510.0
    assert failures.worth(rows).ratio.value == 1.0


def test_kill_ledger_reproduces_the_costs_file():
    """COSTS 3.4 (the lab's cost file), fed its own inputs: step 0.299025 s (3.2), 132,430
    steps in the 11 h chunk (3.2), write 0.609 s (3.1), save_every 204 (3.4, COSTS's
    definition: write / (k x step) <= 1 %), startup 2.74 + 0 + 0.609 + 0.299 + 180 + 300 s
    (3.1), 30 GPU-h a week. COSTS prints 8.06 / 1.02 / 1.03 / 1.03 GPU-min with, 8.06 / 660 /
    660 / 660 without, 647x, 659 GPU-min, 36.6 %; each within 0.5 %."""
    startup = s(2.74 + 0.0 + 0.609 + 0.299 + 180.0 + 300.0)
    rows = failures.kill_ledger(startup, s(0.609), s(0.299025),
                                measured(132430, "steps", "COSTS 3.2"),
                                measured(204, "steps", "COSTS 3.4"))
    by = {r.point: r for r in rows}
    costs = {"warm-up": (8.06, 8.06), "mid-chunk": (1.02, 660.0),
             "checkpoint write": (1.03, 660.0), "final save": (1.03, 660.0)}
    for point, (with_min, without_min) in costs.items():
        r = by[point]
        assert r.worst_with.value / 60 == pytest.approx(with_min, rel=5e-3), point
        assert r.worst_without.value / 60 == pytest.approx(without_min, rel=5e-3), point
    assert by["mid-chunk"].worst_with.value == pytest.approx(204 * 0.299025)  # 61.0 s
    w = failures.worth(rows, inherited(30 * 3600.0, "s", "COSTS 3: 30 GPU-h/week"))
    assert w.ratio.value == pytest.approx(647, rel=5e-3)  # 649.2: COSTS divides rounded 1.02
    assert w.saved_seconds.value / 60 == pytest.approx(659, rel=5e-3)
    assert w.saved_share_of_quota.value == pytest.approx(0.366, rel=5e-3)


def test_kill_ledger_at_a_step_other_than_one_second():
    # R = 300, write 10, step 0.299 s (the COSTS file's LM row), 1000 steps, save_every 300:
    # interval 300 x 0.299 + 10 = 99.7 s; periodic saves at 300, 600, 900: 100 steps of tail
    # expected losses exclude the restart (300 s), which each row shows apart
    rows = failures.kill_ledger(s(300.0), s(10.0), s(0.299), measured(1000, "steps", "c"),
                                measured(300, "steps", "k"))
    by = {r.point: r for r in rows}
    assert by["mid-chunk"].restart.value == pytest.approx(300)
    assert by["mid-chunk"].expected_without.value == pytest.approx(299 / 2)     # 149.5
    assert by["mid-chunk"].expected_with.value == pytest.approx(99.7 / 2)       # 49.85
    assert by["mid-chunk"].expected_ratio.value == pytest.approx(149.5 / 49.85)
    assert by["mid-chunk"].worst_with.value == pytest.approx(300 * 0.299)       # 89.7
    # the interval + half the write; the chunk + half (304); the tail + half (34.9)
    assert by["checkpoint write"].expected_with.value == pytest.approx(300 * 0.299 + 10 / 2)
    assert by["final save"].expected_without.value == pytest.approx(299 + 10 / 2)
    assert by["final save"].expected_with.value == pytest.approx(100 * 0.299 + 10 / 2)


def test_daly_budget_interval_at_a_step_other_than_one_second():
    # tau_b = 497 x 0.299 = 148.603 s; M 6 h, d 1.5 s, R 328.5 s
    d = failures.daly(inherited(21600.0, "s", "6 h"), s(1.5), s(328.5), s(0.299),
                      measured(497, "steps", "k"))
    tau = 497 * 0.299
    assert d.budget_interval_seconds.value == pytest.approx(tau)
    assert d.budget_waste.value == pytest.approx(
        math.exp(328.5 / 21600) * 21600 * math.expm1((tau + 1.5) / 21600) / tau - 1)
    assert d.budget_loss_per_failure_seconds.value == pytest.approx(
        21600 - (tau + 1.5) / math.expm1((tau + 1.5) / 21600) + 328.5)
    assert d.young_interval_seconds.value == pytest.approx(math.sqrt(2 * 1.5 * 21600))
    assert d.daly_waste.value <= d.budget_waste.value  # Daly minimizes the waste


def test_daly_section_beside_the_budget_interval():
    d = failures.daly(inherited(21600.0, "s", "6 h"), s(300.0), s(600.0), s(1.0),
                      measured(3000, "steps", "k"))
    assert d.daly_interval_seconds.value == pytest.approx(56.712963 * 60, rel=1e-6)
    assert d.budget_interval_seconds.value == 3000.0
    # Daly's interval wastes no more than any other, the budget's included
    assert d.daly_waste.value <= d.budget_waste.value
    assert d.daly_waste.value == pytest.approx(
        math.exp(600 / 21600) * 21600 * math.expm1((d.daly_interval_seconds.value + 300) / 21600)
        / d.daly_interval_seconds.value - 1)


# --- disk ---------------------------------------------------------------------------------

DISK = inherited(20_000_000_000, "B", "20 GB")


def test_disk_worked_example():
    d = disk.disk_plan(DISK, measured(3_000_000_000, "B", "ckpt"),
                       inherited(2, "copies", "run"))
    assert d.copies_fit.value == 6
    assert d.steady_share.value == pytest.approx(0.3)
    assert d.peak_share.value == pytest.approx(0.45)
    assert d.fits is True


@pytest.mark.parametrize("live,fits", [(3, True), (4, False)])
def test_disk_edge_live_plus_one_exactly_fills_it(live, fits):
    # 5 GB checkpoints on 20 GB: 4 fit; 3 live + 1 being written = exactly 20 GB
    d = disk.disk_plan(DISK, measured(5_000_000_000, "B", "c"), inherited(live, "copies", "r"))
    assert d.copies_fit.value == 4 and d.fits is fits


def test_disk_unknown():
    d = disk.disk_plan(assumed(None, "B", "not published"), measured(1, "B", "c"),
                       inherited(2, "copies", "r"))
    assert d.fits is None and d.copies_fit is None


def test_floor_and_ceil_div_snap_float_error_only():
    from afford.planning.derive import ceil_div, floor_div

    assert floor_div(0.3, 0.1) == 3 and ceil_div(0.3, 0.1) == 3  # 2.9999999999999996
    assert floor_div(10.0, 3.0) == 3 and ceil_div(10.0, 3.0) == 4
    # a huge quotient is not moved by whole units (1e-9 x 5e12 = 5263 of them)
    assert floor_div(9999999999999.998, 1.9) in (5263157894736, 5263157894737)
    assert floor_div(1e13 - 1e4, 1.0) == 9999999990000
    # the snap is relative: 3e9 - 1e-6 is float error at 3e9 (3e-16 of it), so 3e9
    assert floor_div(3e9 - 1e-6, 1.0) == 3_000_000_000 and ceil_div(3e9 + 1e-6, 1.0) == 3 * 10**9
    for div in (floor_div, ceil_div):
        with pytest.raises(ValueError, match="divisor must be positive, got 0"):
            div(1.0, 0.0)
