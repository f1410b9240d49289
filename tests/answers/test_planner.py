"""certificate + platform + run -> plan -> verdict, on a synthetic certificate with round
numbers (tests/plan_helpers.py), worked by hand."""

from datetime import timedelta

import pytest

from afford.core.errors import InputError
from afford.core.provenance import Tag
from afford.planning import planner
from tests.plan_helpers import GIB, STARTED, make_cert, make_platform, make_run


@pytest.fixture(scope="module")
def p():
    return planner.plan(make_cert(), make_platform(), make_run())


def test_memory_budget_uses_the_measured_card(p):
    assert p.device_matches is True
    assert p.memory.device_memory_bytes.tag is Tag.MEASURED
    assert p.memory.device_memory_bytes.value == 16 * GIB
    assert p.memory.budget_bytes.value == 15461882265
    assert p.memory.reserved_ratio is None  # no ratio across shapes or workloads (issue 37)


def test_startup_components_and_chunk(p):
    comps = {c.name: c.seconds for c in p.chunk.startup.components}
    assert comps["import"].tag is Tag.ASSUMED and comps["import"].value == 20.0
    assert comps["preflight"].tag is Tag.ASSUMED and comps["preflight"].value == 10.0
    assert comps["first_step"].tag is Tag.MEASURED and comps["first_step"].value == 10.0
    assert comps["package_install"].value == 170.0 and comps["data_attach"].value == 118.5
    # 25 M params x 12 B = 3e8 B at an assumed 200 MB/s
    assert comps["final_save"].value == 1.5 and comps["final_save"].tag is Tag.ASSUMED
    assert p.chunk.startup.total_seconds.value == 330.0
    assert p.chunk.startup.restart_seconds.value == 328.5
    assert p.chunk.chunk_seconds.value == 39600.0
    assert p.chunk.margin_covers.value == pytest.approx(3600 / 330)


def test_chunk_table_rows(p):
    run = p.rows[0]
    assert run.is_run and run.value == 512 and run.step_seconds.value == 1.0
    assert run.steps_per_chunk.value == 39600
    assert run.projected_reserved_bytes.value == 12 * GIB  # measured there
    assert run.memory_source == "measured" and run.fits_level == "yes"
    assert run.budget_share.value == pytest.approx(12 * GIB / 15461882265)
    assert run.fits is True
    assert run.tokens_per_step.value == 4096 and run.tokens_per_chunk.value == 39600 * 4096
    assert run.params.value == 25_000_000
    by_value = {r.value: r for r in p.rows[1:]}
    assert by_value[256].steps_per_chunk.value == 79200
    assert by_value[256].projected_reserved_bytes.value == 9 * GIB  # measured, not 8 x 1.2
    oom = by_value[1024]
    assert oom.excluded.startswith("not resident") and oom.fits is None
    assert oom.step_seconds.tag is Tag.FITTED and oom.step_seconds.extrapolated


def test_quota_and_target(p):
    q = p.quota
    assert q.billed_seconds_per_chunk.value == 39930.0
    assert q.whole_chunks.value == 2 and q.remainder_seconds.value == 28140.0
    assert q.trainable_remainder_seconds.value == 27810.0
    assert q.steps_per_week.value == 2 * 39600 + 27810
    t = p.target
    assert t.target_steps.value == 244141  # ceil(1e9 / 4096)
    assert t.sessions.value == 7
    assert t.gpu_seconds.value == 6 * 39930 + 330 + (244141 - 6 * 39600) * 1.0
    assert t.weeks.value == pytest.approx(244141 / 107010)


def test_cadence_failures_disk(p):
    c = p.cadence
    assert c.overhead_budget.tag is Tag.ASSUMED and c.overhead_budget.value == 0.01
    # the budget holds floor(0.01 x 39600 / 1.5) = 264 writes: k = floor(39600 / 265) + 1
    assert c.save_every.value == 150
    assert c.writes_per_chunk.value == 264 and c.write_seconds_per_chunk.value == 396.0
    assert c.share_of_chunk.value == pytest.approx(0.01)
    by = {r.point: r for r in p.failures.rows}
    assert by["mid-chunk"].expected_without.value == 19800
    assert by["mid-chunk"].restart.value == 328.5
    assert by["mid-chunk"].expected_with.value == pytest.approx(151.5 / 2)
    assert by["mid-chunk"].worst_with.value == 150
    assert by["final save"].expected_with.value == pytest.approx(150 + 0.75)  # 39600 - 150 x 263
    assert p.failures.worth.saved_share_of_quota.value == pytest.approx((39600 - 150) / 108000)
    assert p.failures.daly is None
    d = p.disk
    assert d.copies_fit.value == 66 and d.fits is True
    assert d.peak_share.value == pytest.approx(9e8 / 2e10)


def test_plan_at_a_step_of_0_299_seconds():
    """The same plan with seq 512 at 0.299 s a step (the COSTS file's LM row), worked by
    hand: startup 330 s (step 0 stays 10 s), chunk 39600 s."""
    p = planner.plan(make_cert(step_512=0.299), make_platform(), make_run())
    run = p.rows[0]
    assert run.steps_per_chunk.value == 132441                 # floor(39600 / 0.299)
    assert run.steps_per_hour.value == pytest.approx(3600 / 0.299, abs=1)
    c = p.cadence
    assert c.save_every.value == 500                           # floor(132441 / 265) + 1
    assert c.interval_seconds.value == pytest.approx(500 * 0.299 + 1.5)
    assert c.writes_per_chunk.value == 264                     # floor(132441 / 500)
    by = {r.point: r for r in p.failures.rows}
    assert by["mid-chunk"].expected_without.value == pytest.approx(132441 * 0.299 / 2)
    assert by["mid-chunk"].expected_with.value == pytest.approx((500 * 0.299 + 1.5) / 2)
    assert by["mid-chunk"].restart.value == pytest.approx(328.5)
    # last periodic save at 264 x 500 = 132000: 441 steps before the final save
    # the tail + half the write
    assert by["final save"].expected_with.value == pytest.approx(441 * 0.299 + 1.5 / 2)
    assert by["final save"].expected_without.value == pytest.approx(132441 * 0.299 + 1.5 / 2)
    q = p.quota
    assert q.steps_per_week.value == 2 * 132441 + 93010       # floor(27810 / 0.299)
    t = p.target
    assert t.sessions.value == 2                                # ceil(244141 / 132441)
    # each session bills its startup and the steps it trains (not the whole cap: the first
    # session ends 0.141 s short of it)
    assert t.gpu_seconds.value == pytest.approx(2 * 330 + 244141 * 0.299)
    assert t.weeks.value == pytest.approx(244141 / (2 * 132441 + 93010))


def test_assumptions_are_listed(p):
    text = " ".join(p.assumptions)
    assert "checkpoint write time of tinylm not measured" in text
    assert "run afford certify with probes" in text


def test_go_with_warnings_for_age_and_torch():
    v = planner.preflight(make_cert(), make_platform(), make_run(max_weeks=3),
                          now=STARTED + timedelta(days=40), here_torch="2.13.0")
    assert v.go is True and v.reasons == ()
    w = " ".join(v.warnings)
    assert "40 days old" in w and "torch 2.11.0" in w and "2.13.0" in w
    assert "assumed: checkpoint write time" in w
    # older than 30 days warns; exactly 30 days does not (nor the same torch)
    at_30 = planner.preflight(make_cert(), make_platform(), make_run(max_weeks=3),
                              now=STARTED + timedelta(days=30), here_torch="2.11.0")
    assert not any("days old" in x or "measured with torch" in x for x in at_30.warnings)
    past = planner.preflight(make_cert(), make_platform(), make_run(max_weeks=3),
                             now=STARTED + timedelta(days=30, hours=1))
    assert any("is 30 days old (> 30)" in x for x in past.warnings)


def test_every_reason_is_listed_not_just_the_first():
    cert = make_cert(device="Tesla T4")
    plat = make_platform(disk={"value": "500MB", "cite": "x"},
                         margin={"value": "5m", "assumed": "tight"})
    run = make_run(max_weeks=2, checkpoint_overhead="0.001%")
    v = planner.preflight(cert, plat, run)
    assert v.go is False
    text = "\n".join(v.reasons)
    assert "never pools devices" in text and "afford compare" in text
    assert "does not cover the startup" in text
    assert "cannot reach one checkpoint" in text
    assert "do not fit on the disk" in text
    assert "more than the run's max_weeks 2" in text
    assert len(v.reasons) == 5


def test_device_mismatch_uses_the_platform_memory():
    p = planner.plan(make_cert(device="Tesla T4"), make_platform(), make_run())
    assert p.device_matches is False
    assert p.memory.device_memory_bytes.tag is Tag.INHERITED
    assert any("not the platform's" in n for n in p.notes)


def test_not_resident_is_no_go():
    v = planner.preflight(make_cert(alloc_512=13 * GIB, reserved_512=15 * GIB),
                          make_platform(), make_run())
    assert v.go is False
    assert any(r.startswith("not resident") for r in v.reasons)


def test_run_at_an_excluded_shape_is_no_go_with_its_reason():
    v = planner.preflight(make_cert(), make_platform(), make_run(value=1024))
    text = "\n".join(v.reasons)
    assert "did not use seq=1024: not resident: ran out of memory" in text
    assert "no memory figure" in text
    assert any("extrapolated" in w for w in v.warnings)


def test_unpinned_data_is_provisional_until_a_manifest_pins_it():
    run = make_run(data_sources=["fineweb"])
    v = planner.preflight(make_cert(), make_platform(), run)
    assert any("not pinned (fineweb)" in w for w in v.warnings)
    assert v.plan.target.target_steps.provisional and v.plan.target.weeks.provisional
    pinned = planner.preflight(make_cert(), make_platform(), run, pins={"fineweb": True})
    assert not any("not pinned" in w for w in pinned.warnings)
    assert not pinned.plan.target.weeks.provisional


def test_run_shape_given_in_full():
    run = make_run(value=None, shape={"batch": 8, "seq": 256, "d": 512, "L": 8, "H": 8})
    p = planner.plan(make_cert(), make_platform(), run)
    assert p.run.value == 256 and p.rows[0].step_seconds.value == 0.5


def test_run_shape_outside_the_family_is_bad_input():
    run = make_run(value=None, shape={"batch": 8, "seq": 256, "d": 768, "L": 8, "H": 8})
    with pytest.raises(InputError, match="differs from the certificate.s tinylm in d 768 vs 512 "
                                         ".run vs certificate.*no memory law"):
        planner.plan(make_cert(), make_platform(), run)


def test_run_mode_not_in_the_certificate_is_bad_input():
    with pytest.raises(InputError, match="no workload 'tinylm' in mode bf16"):
        planner.plan(make_cert(), make_platform(), make_run(mode="bf16"))


def test_no_cap_treats_the_run_as_one_session():
    plat = make_platform(name="own", device=None, session_cap={"value": "none", "assumed": "own"},
                         weekly_quota={"value": "none", "assumed": "own"},
                         disk={"value": "unknown", "assumed": "not looked at"})
    p = planner.plan(make_cert(), plat, make_run(target_steps=10_000, target_tokens=None))
    assert p.device_matches is None and p.quota is None
    assert p.chunk.chunk_seconds is None and p.rows[0].steps_per_chunk is None
    assert p.target.limited_by == "wall clock" and p.target.gpu_seconds.value == 330 + 10_000
    assert p.cadence.save_every.value == 150  # floor(10000 / 67) + 1: 66 writes of 1.5 s
    assert p.cadence.writes_per_chunk.value == 10_000 // 150
    assert p.failures.rows[1].expected_without.value == 5000  # half the run
    assert p.disk.fits is None
    v = planner.preflight(make_cert(), plat, make_run(target_steps=10_000, target_tokens=None))
    assert v.go is True and any("names no device" in w for w in v.warnings)
    assert any("platform's disk is unknown" in w for w in v.warnings)


def test_mtbf_adds_young_and_daly():
    plat = make_platform(mtbf={"value": "6h", "assumed": "observed"})
    d = planner.plan(make_cert(), plat, make_run()).failures.daly
    assert d.mtbf_seconds.value == 21600.0 and d.restart_seconds.value == 328.5
    assert d.young_interval_seconds.value == pytest.approx((2 * 1.5 * 21600) ** 0.5)


def test_plan_without_a_run():
    p = planner.plan(make_cert(), make_platform())
    assert p.run is None and p.target is None and p.cadence is None and p.disk is None
    assert len(p.rows) == 3 and not any(r.is_run for r in p.rows)
    comps = {c.name: c.seconds.value for c in p.chunk.startup.components}
    assert comps["first_step"] == 10.0  # the slowest measured step 0
    assert comps["final_save"] == 1.5
    assert p.quota.whole_chunks.value == 2 and p.quota.steps_per_week is None
    assert any("--run" in n for n in p.notes)


def _cert_without_law():
    c = make_cert()
    return c.model_copy(update={"workloads": [c.workloads[0].model_copy(update={"law": None})]})


def test_no_step_time_at_an_excluded_point_says_why_the_models_cannot():
    v = planner.preflight(_cert_without_law(), make_platform(), make_run(value=1024))
    assert v.go is False
    assert "no step time at tinylm seq=1024: tinylm fp32: the certificate has no step-time " \
        "model (it predates it); no throughput law either; certify that shape" in v.reasons


def test_a_certificate_without_reserved_figures():
    """On a CPU the peak RSS is what the process holds; a CUDA point without its reserved
    peak (an older certificate) takes allocated x the cited H200 worst ratio, ASSUMED."""
    c = make_cert()
    pts = [pt.model_copy(update={"peak_reserved_bytes": None}) for pt in c.workloads[0].points]
    cpu = c.model_copy(update={
        "environment": c.environment.model_copy(update={"device_type": "cpu"}),
        "workloads": [c.workloads[0].model_copy(update={"points": pts})]})
    p = planner.plan(cpu, make_platform(device=None), make_run())
    assert p.rows[0].projected_reserved_bytes.value == 10 * GIB  # the peak itself
    cuda = cpu.model_copy(update={"environment": c.environment})
    row = planner.plan(cuda, make_platform(), make_run()).rows[0]
    assert row.projected_reserved_bytes.value == pytest.approx(10 * GIB * 1.12, abs=1)
    assert row.projected_reserved_bytes.tag is Tag.ASSUMED


