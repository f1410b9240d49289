"""Issue 14, hangs: a sweep child that stops (SIGSTOP) or dies is stopped by the watchdog,
reported as such, and its unfinished points are measured once more in a fresh child; the
memory child's watchdog says it timed out instead of "exited with code -9".

The children here are tests/fake_sweep_child.py (no torch): the protocol and the parent's
handling are what is under test, not the timing."""

from __future__ import annotations

import os
import time

import pytest

from afford.core.errors import InputError
from afford.measure import children as ch
from afford.measure.children import Spawned, child_timeout, failure_text, run_children
from afford.measure.memory_sweep import run_memory_child
from afford.measure.timing import rule_for

pytestmark = pytest.mark.usefixtures("tests_on_pythonpath")


class _Fake(Spawned):
    def __init__(self, prewarm=None, overlapped=False, **_):
        self.prewarm = prewarm
        super().__init__("tests.fake_sweep_child", overlapped=overlapped)


@pytest.fixture
def fake_children(monkeypatch):
    monkeypatch.setattr(ch, "_Child", _Fake)
    monkeypatch.setattr(ch, "_EARLY", [])


ITEMS = [{"key": f"w|fp32|{v}", "workload": "w", "mode": "fp32", "value": v} for v in (1, 2, 3)]


def _run(children=3):
    t0 = time.monotonic()
    out = run_children(ITEMS, children=children, device="cpu", device_class="cpu",
                       rule=rule_for("quick"), seed=0)
    return out, time.monotonic() - t0


def test_a_stopped_child_is_stopped_by_the_watchdog_and_its_points_remeasured(
        fake_children, monkeypatch, tmp_path):
    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", "1.5")
    monkeypatch.setenv("FAKE_HANG_KEY", "w|fp32|2")
    monkeypatch.setenv("FAKE_ONCE", str(tmp_path / "hung"))
    out, took = _run()
    assert took < 30, took  # not forever: one watchdog period and a fresh child
    assert (tmp_path / "hung").exists()  # the fault did happen
    recs = [c[it["key"]]["record"] for c in out for it in ITEMS]
    assert all(r.get("median_seconds") for r in recs), recs  # every point measured in the end
    again = [r for r in recs if r.get("round") == "remeasure"]
    assert again, "the stopped child's unfinished points were not measured again"
    assert all(r.get("error") is None for r in again)
    # each says whose record it replaced and why: the certificate names the stopped child
    assert all("was stopped by the watchdog after 1.5 s" in r["replaced"] for r in again)
    from types import SimpleNamespace

    from afford.certification.partial import sweep_failures
    from afford.certification.sweep import assemble_point, fit_workload

    points = [assemble_point(it["value"], [c[it["key"]] for c in out], None) for it in ITEMS]
    result = fit_workload("w", SimpleNamespace(sweep_param="n"), "fp32", points)
    (line,) = sweep_failures([result])
    assert line.startswith("workload w (fp32): child ") and "watchdog after 1.5 s" in line
    assert line.endswith("its unfinished points were measured again in a fresh child")


def test_a_child_that_hangs_every_time_is_reported_as_timed_out(fake_children, monkeypatch):
    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", "1")
    monkeypatch.setenv("FAKE_HANG_KEY", "w|fp32|3")
    out, took = _run(children=1)
    assert took < 30, took
    rec = out[0]["w|fp32|3"]["record"]
    assert rec["round"] == "remeasure"  # measured twice, failed twice: the error stays
    assert "watchdog" in rec["error"] and "AFFORD_CHILD_TIMEOUT" in rec["error"], rec
    assert "code -9" not in rec["error"]
    assert out[0]["w|fp32|1"]["record"]["median_seconds"]  # the points it finished are kept


def test_a_dead_child_is_remeasured_once(fake_children, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_DIE_KEY", "w|fp32|1")
    monkeypatch.setenv("FAKE_ONCE", str(tmp_path / "died"))
    out, _ = _run()
    recs = [c[it["key"]]["record"] for c in out for it in ITEMS]
    assert all(r.get("median_seconds") for r in recs), recs
    assert any(r.get("round") == "remeasure" for r in recs)


def test_a_point_that_fails_by_itself_is_not_remeasured():
    results = {"k": {"event": "point", "key": "k", "record": {"child": 0, "order_position": 0,
                                                            "oom": True, "error": "OOM"}}}
    ch.remeasure(results, [{"key": "k", "value": 1}], 0, device="cpu", device_class="cpu",
                 rule=rule_for("quick"), seed=0, on_event=lambda e: None)
    assert results["k"]["record"].get("round") is None  # no child was started for it


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon", "1e99"])
def test_a_bad_child_timeout_is_refused(monkeypatch, value):
    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", value)
    with pytest.raises(InputError, match="AFFORD_CHILD_TIMEOUT"):
        child_timeout()


def test_the_child_timeout_default_and_override(monkeypatch):
    monkeypatch.delenv("AFFORD_CHILD_TIMEOUT", raising=False)
    assert child_timeout() == ch.CHILD_TIMEOUT_SECONDS
    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", "12.5")
    assert child_timeout() == 12.5


def test_the_memory_child_killed_by_its_watchdog_says_it_timed_out(monkeypatch):
    monkeypatch.setenv("FAKE_HANG_KEY", "m")
    kid = Spawned("tests.fake_sweep_child")
    t0 = time.monotonic()
    recs = run_memory_child([{"key": "m", "value": 1}], device="cpu", device_class="cpu",
                            seed=0, timeout=1.0, spawned=kid)
    assert time.monotonic() - t0 < 30
    why = recs["m"]["error"]
    assert "watchdog after 1 s" in why and "exited with code" not in why, why


def test_the_memory_child_honours_afford_child_timeout(monkeypatch):
    """Not a fixed 600 s (issue 33): the one setting every child honours, and the way it
    ended is handed back for the certificate's failures."""
    monkeypatch.setenv("FAKE_HANG_KEY", "m")
    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", "1")
    ended: list[str] = []
    t0 = time.monotonic()
    run_memory_child([{"key": "m", "value": 1}], device="cpu", device_class="cpu", seed=0,
                     spawned=Spawned("tests.fake_sweep_child"), failures=ended)
    assert time.monotonic() - t0 < 30
    assert len(ended) == 1 and "the memory child was stopped by the watchdog after 1 s" in \
        ended[0]


@pytest.mark.parametrize("kind", ["startup", "audit"])
def test_the_startup_and_audit_children_take_afford_child_timeout(monkeypatch, kind):
    """They run under a subprocess timeout and a timer: the same one setting."""
    import subprocess
    import threading
    from types import SimpleNamespace

    class Stop(Exception):
        pass

    seen: list[float] = []

    def record(timeout):
        seen.append(timeout)
        raise Stop

    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", "7")
    monkeypatch.setattr(subprocess, "run", lambda *a, timeout=None, **k: record(timeout))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: SimpleNamespace(kill=None))
    monkeypatch.setattr(threading, "Timer", lambda timeout, fn: record(timeout))
    with pytest.raises(Stop):
        if kind == "startup":
            from afford.measure.probes.startup import run_one
            run_one(None)
        else:
            from afford.measure.determinism import run_child
            run_child({"deterministic": False})
    assert seen == [7.0]


def test_failure_text_names_the_exit_code_otherwise():
    assert failure_text("child 2", 9, "boom", False, 5.0) == "child 2 exited with code 9: boom"


def test_a_killed_probes_folders_are_swept_where_the_probe_child_starts(tmp_path):
    from afford.measure.probes.runner import run_probe_child

    stale = tmp_path / ".afford-probe-abcd1234"
    fresh = tmp_path / ".afford-probe-efgh5678"
    other = tmp_path / ".afford-probe-keep"  # not afford's pattern: never touched
    for d in (stale, fresh, other):
        d.mkdir()
        (d / "afford-probe-checkpoint.pt").write_bytes(b"x")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    kid = Spawned("tests.fake_sweep_child")  # a job without items: it exits at once
    _, why = run_probe_child({"device": "cpu", "checkpoint_dir": str(tmp_path)}, spawned=kid,
                             timeout=30)
    assert why is not None  # the stand-in is no probe child
    assert not stale.exists() and fresh.exists() and other.exists()


def test_a_remeasured_point_says_so():
    from afford.certification.sweep import assemble_point

    rec = {"order_position": 0, "median_seconds": 0.01, "timed_seconds": [0.01],
           "timed_step_indices": [3]}
    events = [{"record": {**rec, "child": 0}},
              {"record": {**rec, "child": 1, "round": "remeasure"}}]
    assert assemble_point(8, events, None).remeasured
    assert not assemble_point(8, events[:1], None).remeasured
