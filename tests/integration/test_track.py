"""afford.track, the loop guard, on a fake clock: it stops before the cap with the final save
inside it (20 trials of random step and write times), saves every save_every steps, keeps
the first step and the warm-up apart from warm steps, warns on drift, writes a resume marker
the next session resumes from, and appends readings with step indices to the ledger."""

import json
import logging
import random
import subprocess
import sys

import pytest

from afford.core.errors import InputError
from afford.schema import ledger
from afford.track import Budget, Session, budget_from_plan, load_plan, summary
from afford.track.session import AFTER_SAVE, FIRST, WARM, WARMUP
from tests.paths import data_file


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run_session(budget, clock, step_time, write_time, marker=None, ledger_path=None,
                max_steps=10**6, **kw):
    """The adoption loop, on the fake clock. Returns (guard, end time - start, saves)."""
    start = clock.t
    kw.setdefault("elapsed_seconds", 0.0)  # the fake clock's session starts at the guard
    guard = Session(budget=budget, clock=clock, marker=marker, ledger=ledger_path, **kw)
    saves = []
    step = guard.resume_step
    while step < guard.resume_step + max_steps:
        clock.t += step_time(step)
        guard.step(step)
        if guard.should_save(step):
            clock.t += write_time()
            saves.append(step)
        if guard.should_stop():
            clock.t += write_time()
            saves.append(step)
            break
        step += 1
    guard.close()
    return guard, clock.t - start, saves


def test_stops_before_the_cap_in_20_random_trials():
    """Step times jitter +-50 % around a random base, step 0 is 20x; the plan's step is off
    by up to 30 % either way; writes take 70-120 % of the planned write. The final save
    must end within the chunk every time, and not absurdly early."""
    for trial in range(20):
        rng = random.Random(trial)
        base = rng.uniform(0.01, 2.0)
        write = rng.uniform(0.2, 20.0)
        chunk = rng.uniform(200, 5000) * base + 10 * write
        budget = Budget(chunk_seconds=chunk, save_every=rng.randint(5, 200),
                        write_seconds=write, step_seconds=base * rng.uniform(0.7, 1.3))

        first = [True]

        def step_time(i, rng=rng, base=base, first=first):
            if first[0]:
                first[0] = False
                return 20 * base
            return base * rng.uniform(0.5, 1.5)

        guard, end, saves = run_session(budget, FakeClock(), step_time,
                                        lambda write=write, rng=rng: write * rng.uniform(0.7, 1.2))
        assert end <= chunk, f"trial {trial}: ended at {end:.2f} s, chunk {chunk:.2f} s"
        assert end >= chunk - (4 * 1.5 * base + 3 * 1.2 * write), f"trial {trial}: stopped early"
        assert guard.stopped_at is not None and saves[-1] == guard.indices[-1]
        assert guard.last_saved == guard.indices[-1]  # the final save confirmed at close


def test_save_cadence_marker_and_resume(tmp_path):
    marker = tmp_path / "resume.json"
    budget = Budget(chunk_seconds=100.0, save_every=5, write_seconds=1.0, step_seconds=1.0,
                    run="tiny")
    guard, end, saves = run_session(budget, FakeClock(), lambda i: 1.0, lambda: 1.0,
                                    marker=marker)
    assert saves[:-1] == [4, 9, 14, 19, 24, 29, 34, 39, 44, 49, 54, 59, 64, 69, 74, 79]
    last = guard.indices[-1]
    assert end <= 100.0 and saves[-1] == last
    doc = json.loads(marker.read_text())
    assert doc["schema"] == "afford.resume/2" and doc["run"] == "tiny"
    assert (doc["last_saved_step"], doc["resume_step"]) == (last, last + 1)
    nxt = Session(budget=budget, clock=FakeClock(), marker=marker, elapsed_seconds=0.0)
    assert nxt.resume_step == last + 1
    nxt.close()
    # the next session counts save_every from the global step index
    assert nxt.should_save(last + 5 - (last + 1) % 5) is True


def test_a_save_is_confirmed_only_when_done(tmp_path):
    marker = tmp_path / "m.json"
    clock = FakeClock()
    g = Session(budget=Budget(chunk_seconds=None, save_every=3, write_seconds=1.0,
                              step_seconds=None), clock=clock, marker=marker, elapsed_seconds=0.0)
    start = json.loads(marker.read_text())  # the session marks itself running at once
    assert (start["state"], start["last_saved_step"], start["resume_step"]) == ("running", None, 0)
    for i in range(3):
        clock.t += 1
        g.step(i)
    assert g.should_save(2)
    assert json.loads(marker.read_text())["last_saved_step"] is None  # asked, not written yet
    clock.t += 1
    g.step(3)  # the step after the save: it completed
    assert json.loads(marker.read_text())["last_saved_step"] == 2
    assert g.should_save(5) is True
    g.saved(5, checkpoint=tmp_path / "ckpt-5.pt")  # an explicit confirmation, with its path
    doc = json.loads(marker.read_text())
    assert (doc["last_saved_step"], doc["checkpoint"]) == (5, str(tmp_path / "ckpt-5.pt"))
    g.should_save(8)
    g._crashed = True  # an exception in flight: the save of step 8 is not confirmed
    g.close()
    doc = json.loads(marker.read_text())
    assert (doc["last_saved_step"], doc["state"]) == (5, "crashed")
    nxt = Session(budget=g.budget, marker=marker, elapsed_seconds=0.0)
    assert nxt.resume_step == 6 and nxt.resume_checkpoint == str(tmp_path / "ckpt-5.pt")
    nxt.close()


def test_ledger_readings_per_save_interval_carry_step_indices(tmp_path):
    """Each confirmed save appends the readings of the steps since the save before, so the
    ledger holds one warm median per save interval, over that interval's warm steps."""
    path = tmp_path / "history.tsv"
    budget = Budget(chunk_seconds=60.0, save_every=10, write_seconds=1.0, step_seconds=0.5,
                    run="tiny run")
    guard, _, saves = run_session(budget, FakeClock(), lambda i: 0.5, lambda: 1.0,
                                  ledger_path=path, command="test")
    rows = ledger.load(path)
    first = [r for r in rows if r.quantity == "track/tiny_run/first_step_seconds"]
    assert len(first) == 1 and first[0].step_indices == "0" and first[0].tag.value == "MEASURED"
    warm = [r for r in rows if r.quantity == "track/tiny_run/warm_step_seconds"]
    assert len(warm) == len(saves)  # one per save interval (the last one ends at the stop)
    assert all(r.value == 0.5 and r.unit == "s" for r in warm)
    spans = [ledger.parse_step_indices(r.step_indices)[""] for r in warm]
    bounds = [-1] + saves
    for idx, lo, hi in zip(spans, bounds, bounds[1:]):
        assert lo < min(idx) and max(idx) <= hi  # within its interval
    flat = sorted(i for idx in spans for i in idx)
    assert flat == [i for i, k in zip(guard.indices, guard.kinds) if k == WARM]
    assert 0 not in flat and 1 not in flat and 2 not in flat  # first step and warm-up
    assert 10 not in flat and 11 in flat  # step 10 carried the save after step 9
    drift = [r for r in rows if r.quantity == "track/tiny_run/drift"]
    assert len(drift) == len(warm) and all(r.value == pytest.approx(0.0) for r in drift)
    stop = [r for r in rows if r.quantity == "track/tiny_run/stop_elapsed_seconds"]
    assert len(stop) == 1 and stop[0].tag.value == "MEASURED"
    assert any(r.quantity.endswith("peak_rss_bytes") for r in rows)
    assert guard.flushed_step == guard.indices[-1]


def test_first_step_and_warmup_kept_apart_and_drift_warned(caplog):
    clock = FakeClock()
    budget = Budget(chunk_seconds=None, save_every=10, write_seconds=0.5, step_seconds=1.0)
    g = Session(budget=budget, clock=clock, marker=None, warmup_steps=2, elapsed_seconds=0.0)
    times = [30.0, 2.0, 1.5] + [1.3] * 30
    with caplog.at_level(logging.WARNING, logger="afford.track"):
        for i, t in enumerate(times):
            clock.t += t
            g.step(100 + i)
            if g.should_save(100 + i):
                clock.t += 0.5
    kinds = list(g.kinds)
    assert kinds[:3] == [FIRST, WARMUP, WARMUP]
    assert list(g.indices[:3]) == [100, 101, 102] and g.seconds[0] == 30.0
    # saves after 109, 119, 129: the steps after them carry the write and are kept apart
    assert [g.indices[k] for k, x in enumerate(kinds) if x == AFTER_SAVE] == [110, 120, 130]
    assert g.write_observed == pytest.approx([0.5, 0.5, 0.5])
    assert all(k == WARM for i, k in zip(g.indices, kinds) if i > 102 and i % 10)
    assert g.warm_median == pytest.approx(1.3) and g.drift == pytest.approx(0.3)
    assert len(g.warnings) == 1 and "30.0% slower" in g.warnings[0]
    assert "30.0% slower" in caplog.text
    s = summary(g)
    assert (s["first_index"], s["first_seconds"]) == (100, 30.0)
    assert s["warm_median_seconds"] == pytest.approx(1.3)
    g.close()


@pytest.mark.parametrize("rate", [1.27, 0.28])
def test_drift_is_warned_when_the_figures_are_read_every_step(rate, caplog):
    """A loop that logs every step (``readings()`` after each ``step``) and drifts +27 % or
    -72 %: warned once, on the list and the logger. Reading the figures once reset the
    counter that gated the drift check, and no warning ever came."""
    clock = FakeClock()
    g = Session(budget=Budget(chunk_seconds=None, save_every=None, write_seconds=0.0,
                              step_seconds=1.0), clock=clock, marker=None, elapsed_seconds=0.0)
    logged = []
    with caplog.at_level(logging.WARNING, logger="afford.track"):
        for i in range(60):
            clock.t += rate
            g.step(i)
            logged.append({m.name: m.value for m in g.readings()})
    word = "slower" if rate > 1 else "faster"
    assert g.drift == pytest.approx(rate - 1)
    assert len(g.warnings) == 1 and f"{abs(rate - 1):.1%} {word}" in g.warnings[0]
    assert f"{abs(rate - 1):.1%} {word}" in caplog.text
    # judged at the first warm step past MIN_DRIFT_STEPS: step 2 + 10 (after the first step
    # and two warm-up steps), not some refresh later
    assert g.warnings[0].startswith("step 12:")
    assert logged[-1]["afford/drift"] == pytest.approx(rate - 1)


def test_the_live_window_keeps_the_last_steps_in_order():
    from afford.track.warm_window import WarmWindow

    w = WarmWindow(3)
    assert (w.median, w.slowest, len(w)) == (None, 0.0, 0)
    for x, med, slow in [(5.0, 5.0, 5.0), (1.0, 3.0, 5.0), (3.0, 3.0, 5.0), (4.0, 3.0, 4.0),
                         (4.0, 4.0, 4.0), (0.5, 4.0, 4.0), (0.5, 0.5, 4.0)]:
        w.add(x)
        assert (w.median, w.slowest) == (med, slow), x
    assert len(w) == 3
    with pytest.raises(ValueError):
        WarmWindow(0)


def test_no_drift_warning_within_tolerance():
    clock = FakeClock()
    g = Session(budget=Budget(chunk_seconds=None, save_every=None, write_seconds=0.0,
                              step_seconds=1.0), clock=clock, marker=None, drift_tol=0.10)
    for i in range(40):
        clock.t += 1.08
        g.step(i)
    assert g.drift == pytest.approx(0.08) and g.warnings == []
    assert g.should_save(9) is False  # no cadence: no periodic saves
    g.close()


def test_plan_files_give_the_budget():
    b = load_plan(data_file("plan_16gib_12h.json"))
    assert (b.chunk_seconds, b.save_every, b.run) == (39600.0, 2676, "tinylm-seq2048")
    assert b.write_seconds == pytest.approx(0.48337, rel=1e-4)
    assert b.step_seconds == pytest.approx(0.017883, rel=1e-4)
    local = load_plan(data_file("plan_local.json"))
    assert local.chunk_seconds is None and "no session cap" in local.notes[0]
    doc = json.loads((data_file("plan_16gib_12h.json")).read_text())
    assert budget_from_plan({"schema": "afford.preflight/1", "plan": doc}) == b


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(schema="afford.cert/1"), "not an afford plan"),
    (lambda d: d.pop("chunk"), "'chunk' section"),
    (lambda d: d.pop("rows"), "'rows'"),
    (lambda d: d["cadence"]["save_every"].update(value=0), "not a step count"),
    (lambda d: d["chunk"]["chunk_seconds"].update(value="11h"), "not a number"),
    (lambda d: d["chunk"]["chunk_seconds"].pop("value"), "without a value")])
def test_malformed_plans_are_input_errors(edit, match):
    doc = json.loads((data_file("plan_16gib_12h.json")).read_text())
    edit(doc)
    with pytest.raises(InputError, match=match):
        budget_from_plan(doc)


def test_bad_inputs_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such plan"):
        Session(plan=tmp_path / "missing.json")
    with pytest.raises(InputError, match="one of"):
        Session()
    with pytest.raises(InputError, match="platform= and run="):
        Session(cert="c.json")
    bad = tmp_path / "m.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="not an afford.resume/2"):
        Session(budget=Budget(None, None, 0.0, None), marker=bad)
    bad.write_text(json.dumps({"schema": "afford.resume/1", "run": "other",
                               "last_saved_step": 3}))
    with pytest.raises(InputError, match="run 'other'"):
        Session(budget=Budget(None, None, 0.0, None, run="mine"), marker=bad)


def test_cert_platform_run_make_the_plan(tmp_path):
    from afford.schema.cert import save_certificate
    from tests.plan_helpers import make_cert

    cert = tmp_path / "c.json"
    save_certificate(make_cert(), cert)
    plat = tmp_path / "p.toml"
    plat.write_text('name = "p"\nsession_cap = { value = "2h", cite = "test" }\n'
                    'margin = { value = "10m", cite = "test" }\n'
                    'weekly_quota = { value = "30h", cite = "test" }\n'
                    'disk = { value = "20GB", cite = "test" }\n')
    run = tmp_path / "r.toml"
    run.write_text('name = "r512"\nworkload = "tinylm"\nmode = "fp32"\nvalue = 512\n'
                   'target_tokens = "1B"\ncheckpoints_kept = 2\n')
    g = Session(cert=cert, platform=plat, run=run, marker=None)
    assert (g.budget.chunk_seconds, g.budget.step_seconds, g.budget.run) == (6600.0, 1.0, "r512")
    assert g.budget.save_every >= 1
    g.close()


def test_importing_the_guard_imports_no_torch():
    code = "import sys, afford.track, afford.track.hf, afford.track.lightning; " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
