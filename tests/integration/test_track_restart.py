"""The loop guard across sessions and under failure: the next session reports how the last
one ended (clean stop, or killed after its save at step k: N steps lost, readings kept), the
session cap counts from the process's start, the marker's interrupted temp files are swept,
a marker or ledger write that fails (a full disk) is a warning and never an exception in the
loop, and the figures a logger gets after each step (``readings()``)."""

from __future__ import annotations

import atexit
import errno
import json
import os
import subprocess
import sys

import pytest

from afford.core.errors import InputError
from afford.schema import ledger
from afford.track import Budget, Session
from afford.track.marker import StepLog, previous_of, step_log_path

BUDGET = Budget(chunk_seconds=None, save_every=5, write_seconds=0.5, step_seconds=1.0,
                run="r", tokens_per_step=1000)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _session(tmp_path, clock=None, **kw) -> Session:
    kw.setdefault("budget", BUDGET)
    kw.setdefault("elapsed_seconds", 0.0)
    return Session(clock=clock or Clock(), marker=tmp_path / "resume.json", **kw)


def _train(g: Session, steps, clock=None, save=True) -> None:
    for i in steps:
        if clock is not None:
            clock.t += 1.0
        g.step(i)
        if g.should_save(i) and save and clock is not None:
            clock.t += 0.5


def _abandon(g: Session) -> None:
    """What a SIGKILL leaves: no close, no exit handler (the step log's page stays)."""
    atexit.unregister(g._at_exit)
    g._closed = True


# ---------------------------------------------------------------- the previous session


def test_a_killed_session_is_reported_with_its_steps_lost_and_readings_kept(tmp_path):
    clock = Clock()
    g = _session(tmp_path, clock, ledger=tmp_path / "h.tsv")
    _train(g, range(0, 23), clock)  # saves after 4, 9, 14, 19 (confirmed by the next step)
    _abandon(g)
    nxt = _session(tmp_path, ledger=tmp_path / "h.tsv")
    p = nxt.previous
    assert (p.session, p.how, p.last_saved_step, p.last_step, p.steps_lost) == \
        (1, "killed", 19, 22, 3)
    assert p.flushed_step == 19  # its readings up to its last save reached the ledger
    assert nxt.resume_step == 20 and nxt.session_number == 2
    line = p.line()
    assert line.startswith("the previous session (1) was killed (it ended without closing) "
                           "after the save at step 19; 3 steps lost (steps 20-22); its "
                           "readings up to step 19 are in the ledger")
    assert line.endswith("resuming at step 20")
    warm = [r for r in ledger.load(tmp_path / "h.tsv") if r.quantity.endswith("warm_step_seconds")]
    assert max(max(ledger.parse_step_indices(r.step_indices)[""]) for r in warm) == 19
    nxt.close()


def test_killed_before_its_first_save_and_with_an_earlier_sessions_save(tmp_path):
    g = _session(tmp_path)
    _train(g, range(0, 3))
    _abandon(g)
    p = _session(tmp_path).previous
    assert (p.how, p.last_saved_step, p.steps_lost) == ("killed", None, 3)
    assert "before any save; 3 steps lost (steps 0-2)" in p.line()
    # a session that resumed after step 9 (another session's save) and died at step 12
    clock = Clock()
    (tmp_path / "b").mkdir()
    g = _session(tmp_path / "b", clock)
    _train(g, range(0, 10), clock)
    g.close()
    g2 = _session(tmp_path / "b", clock)
    _train(g2, range(10, 13), clock)
    _abandon(g2)
    p = _session(tmp_path / "b").previous
    assert (p.session, p.last_saved_step, p.saved_session, p.steps_lost) == (2, 9, 1, 3)
    assert "after the save at step 9 (session 1's)" in p.line()


def test_clean_ends_are_reported_as_such(tmp_path):
    clock = Clock()
    g = _session(tmp_path, clock, budget=Budget(chunk_seconds=30.0, save_every=5,
                                                write_seconds=0.5, step_seconds=1.0, run="r"))
    step = 0
    while True:
        clock.t += 1.0
        g.step(step)
        if g.should_save(step):
            clock.t += 0.5
        if g.should_stop():
            g.saved(step)
            break
        step += 1
    g.close()
    p = _session(tmp_path, budget=g.budget).previous
    assert (p.how, p.steps_lost, p.clean) == ("stopped", 0, True)
    assert p.line() == (f"the previous session (1) stopped before the session cap at step "
                        f"{step}, its final save confirmed; resuming at step {step + 1}")


def test_a_finished_session_says_what_its_last_save_left(tmp_path):
    g = _session(tmp_path)
    _train(g, range(0, 12))
    g.close()  # no stop asked: the loop ran out of data; steps 10 and 11 were not saved
    p = _session(tmp_path).previous
    assert (p.how, p.last_saved_step, p.steps_lost) == ("finished", 9, 2)
    assert "ended without a stop request after the save at step 9; 2 steps lost" in p.line()


def test_a_crash_is_recorded_with_its_exception(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with _session(tmp_path) as g:
            _train(g, range(0, 7))
            raise ZeroDivisionError("division by zero")
    doc = json.loads((tmp_path / "resume.json").read_text())
    assert (doc["state"], doc["last_step"], doc["error"]) == \
        ("crashed", 6, "ZeroDivisionError: division by zero")
    p = _session(tmp_path).previous
    assert p.how == "crashed" and p.steps_lost == 2
    assert "ended by an exception (ZeroDivisionError: division by zero)" in p.line()


def test_an_older_marker_is_upgraded(tmp_path):
    (tmp_path / "resume.json").write_text(json.dumps(
        {"schema": "afford.resume/1", "run": "r", "last_saved_step": 41, "resume_step": 42,
         "sessions": 3}))
    g = _session(tmp_path)
    assert (g.resume_step, g.session_number, g.previous.how) == (42, 4, "unknown")
    assert "does not say how it ended" in g.previous.line()
    assert json.loads((tmp_path / "resume.json").read_text())["schema"] == "afford.resume/2"


def test_a_torn_or_foreign_step_log_is_not_believed(tmp_path):
    path = tmp_path / ".m.steps"
    log = StepLog(path, session=7)
    log.record(12, 13, 9, 4.5)
    log.close()
    rec = StepLog.read(path)
    assert (rec.session, rec.last_step, rec.steps, rec.flushed_step) == (7, 12, 13, 9)
    raw = bytearray(path.read_bytes())
    raw[24:32] = (99).to_bytes(8, "little")  # the first copy of the step, as a torn store
    path.write_bytes(bytes(raw))
    assert StepLog.read(path) is None
    doc = {"state": "running", "session": 8, "pid": os.getpid(), "last_saved_step": 4}
    assert previous_of(doc, rec).last_step is None  # session 7's log is not session 8's


def test_a_concurrent_session_on_one_marker_is_named(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "resume.json").write_text(json.dumps(
            {"schema": "afford.resume/2", "run": "r", "state": "running", "session": 1,
             "last_saved_step": None, "pid": sleeper.pid}))
        g = _session(tmp_path)
        assert any("is still running" in w for w in g.warnings)
        g.close()
    finally:
        sleeper.kill()
        sleeper.wait()


# ---------------------------------------------------------------- the session cap


def test_the_cap_counts_from_the_process_start():
    code = ("import time; time.sleep(1.0)\n"
            "from afford.track import Budget, Session\n"
            "g = Session(budget=Budget(None, None, 0.0, None), marker=None)\n"
            "h = Session(budget=Budget(None, None, 0.0, None), marker=None, elapsed_seconds=5)\n"
            "print(g.elapsed(), h.elapsed())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert float(out[0]) >= 1.0  # the sleep before Session() counts
    assert 5.0 <= float(out[1]) < 5.0 + 1.0


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), "10s", True])
def test_a_bad_elapsed_seconds_is_an_input_error(bad):
    with pytest.raises(InputError, match="elapsed_seconds"):
        Session(budget=BUDGET, marker=None, elapsed_seconds=bad)


def test_a_missing_marker_folder_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        Session(budget=BUDGET, marker=tmp_path / "no" / "m.json")


# ---------------------------------------------------------------- bookkeeping never raises


def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_under_the_marker_is_a_warning_and_the_loop_goes_on(tmp_path, monkeypatch):
    clock = Clock()
    g = _session(tmp_path, clock, ledger=tmp_path / "h.tsv")
    _train(g, range(0, 6), clock)  # the save of step 4 is in the marker
    monkeypatch.setattr(os, "write", _enospc)  # every write of the disk fails from here
    _train(g, range(6, 12), clock)  # the save of 9: marker and ledger writes fail
    assert g.should_stop() is False
    monkeypatch.undo()
    assert g.resume_saved is False and g.last_saved == 9
    assert any("could not be written" in w and "the resume point is not saved" in w
               for w in g.warnings)
    assert any("were not appended to the ledger" in w for w in g.warnings)
    assert json.loads((tmp_path / "resume.json").read_text())["last_saved_step"] == 4
    _train(g, range(12, 16), clock)  # the disk has room again: the save of 14 lands
    assert g.resume_saved is True
    assert json.loads((tmp_path / "resume.json").read_text())["last_saved_step"] == 14
    warm = [r for r in ledger.load(tmp_path / "h.tsv") if r.quantity.endswith("warm_step_seconds")]
    covered = sorted(i for r in warm for i in ledger.parse_step_indices(r.step_indices)[""])
    assert 6 in covered and 11 in covered  # the failed flush's steps came with the next one
    g.close()


def test_a_broken_ledger_is_a_warning(tmp_path):
    (tmp_path / "h.tsv").write_text("not a ledger\n")
    clock = Clock()
    g = _session(tmp_path, clock, ledger=tmp_path / "h.tsv")
    _train(g, range(0, 12), clock)
    g.close()
    assert any("not an afford.history/1 ledger" in w for w in g.warnings)
    assert json.loads((tmp_path / "resume.json").read_text())["state"] == "finished"


def test_the_next_session_sweeps_the_markers_interrupted_writes(tmp_path):
    g = _session(tmp_path)
    g.close()
    debris = [tmp_path / ".resume.json.afford-abcd1234.tmp",
              tmp_path / ".resume.json.afford-zz99_x0q.tmp"]
    other = tmp_path / ".other.json.afford-abcd1234.tmp"
    for p in (*debris, other):
        p.write_text('{"half": ')
    _session(tmp_path).close()
    assert not any(p.exists() for p in debris) and other.exists()


def test_the_step_log_sits_beside_the_marker(tmp_path):
    g = _session(tmp_path)
    _train(g, range(0, 3))
    rec = StepLog.read(step_log_path(tmp_path / "resume.json"))
    assert (rec.pid, rec.session, rec.last_step, rec.steps) == (os.getpid(), 1, 2, 3)
    g.close()


# ---------------------------------------------------------------- explicit confirmation


def test_explicit_confirmation_waits_for_saved(tmp_path):
    clock = Clock()
    g = _session(tmp_path, clock, confirm="explicit",
                 budget=Budget(chunk_seconds=40.0, save_every=5, write_seconds=0.5,
                               step_seconds=1.0, run="r"))
    _train(g, range(0, 5), clock, save=False)  # the cadence asked for a save at step 4
    assert g._pending == 4 and g.should_stop() is False
    _train(g, range(5, 7), clock, save=False)
    assert g.last_saved is None  # neither should_stop nor the next steps confirmed it
    clock.t += 0.7
    g.saved(4, "ckpt/4")
    assert g.last_saved == 4 and g.write_observed[-1] >= 0.7
    g.should_save(9)
    g.close()  # a save asked and never reported written stays unconfirmed
    assert json.loads((tmp_path / "resume.json").read_text())["last_saved_step"] == 4


def test_an_unwritten_save_counts_against_the_chunk(tmp_path):
    """A framework saves after the guard's answer: a save asked and not written yet is
    charged once more in the stop rule."""
    budget = Budget(chunk_seconds=19.5, save_every=5, write_seconds=2.0, step_seconds=1.0)
    ask, call = Clock(), Clock()
    a = Session(budget=budget, clock=ask, marker=None, elapsed_seconds=0.0, confirm="explicit",
                safety_seconds=0.0)
    c = Session(budget=budget, clock=call, marker=None, elapsed_seconds=0.0, safety_seconds=0.0)
    for g, clock in ((a, ask), (c, call)):
        for i in range(14):
            clock.t += 1.0
            g.step(i)
            if g.should_save(i):
                g.saved(i)
    # at step 14, 15 s in, a save is due: one more step (1 s) and the final save (2 s) end at
    # 18 s when that save is written, at 20 s (past 19.5) while it is still to write
    ask.t += 1.0
    call.t += 1.0
    for g in (a, c):
        g.step(14)
        assert g.should_save(14)
    c.saved(14)
    assert a.should_stop() is True and c.should_stop() is False


# ---------------------------------------------------------------- readings()


def test_readings_give_each_figure_with_unit_and_tag(tmp_path):
    clock = Clock()
    g = _session(tmp_path, clock, budget=Budget(chunk_seconds=100.0, save_every=5,
                                                write_seconds=0.5, step_seconds=1.0, run="r",
                                                step_tag="FITTED", tokens_per_step=2000))
    assert list(g.readings()) == []
    for i in range(20):
        clock.t += 1.25
        g.step(i)
        if g.should_save(i):
            clock.t += 0.5
        g.should_stop()
    got = {m.name: m for m in g.readings()}
    assert got["afford/step"].value == 19 and got["afford/step_seconds"].value == 1.25
    assert got["afford/warm_median_seconds"].value == pytest.approx(1.25)
    assert got["afford/drift"] == ("afford/drift", pytest.approx(0.25), "ratio", "MODULE")
    assert got["afford/predicted_step_seconds"].tag == "FITTED"
    assert got["afford/tokens_per_second"].value == pytest.approx(1600.0)
    assert got["afford/session_seconds"].value == pytest.approx(clock.t - 100.0)
    assert got["afford/chunk_seconds_left"].value == pytest.approx(100.0 - (clock.t - 100.0))
    assert got["afford/next_save_step"].value == 24 and got["afford/last_saved_step"].value == 19
    assert got["afford/stop"].value == 0
    assert all(m.tag in ("MEASURED", "FITTED", "MODULE") for m in got.values())
    g.close()


def test_readings_leave_out_what_the_session_cannot_give(tmp_path):
    g = _session(tmp_path, budget=Budget(None, None, 0.0, None))
    g.step(0)
    names = {m.name for m in g.readings()}
    assert names == {"afford/step", "afford/step_seconds", "afford/session_seconds",
                     "afford/stop"}
    g.close()
