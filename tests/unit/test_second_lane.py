"""The suite's second lane (tests/second_lane.py): the lanes' order, the reports the second
process writes read back as the main session's own, and a test it never reported failing
with its log."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from tests import second_lane
from tests.paths import TESTS
from tests.second_lane import SecondLane, claim, lane_rank, record, report_here


class Hooks:
    """What the main session's hooks were given, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def pytest_runtest_logstart(self, nodeid, location):
        self.calls.append(("start", nodeid))

    def pytest_runtest_logreport(self, report):
        self.calls.append(("report", report))

    def pytest_runtest_logfinish(self, nodeid, location):
        self.calls.append(("finish", nodeid))

    def reports(self):
        return [r for what, r in self.calls if what == "report"]


def item(nodeid: str, lane: str = "integration", marked: bool = False):
    return SimpleNamespace(nodeid=nodeid, location=("x.py", 1, "t"), keywords={"t": 1},
                           ihook=Hooks(), path=TESTS / lane / "test_x.py",
                           get_closest_marker=lambda name: object() if marked and
                           name == "apart" else None)


def finished_lane(nodeids) -> SecondLane:
    lane = SecondLane(nodeids)
    lane.proc = subprocess.Popen([sys.executable, "-c", "pass"])
    return lane


def test_the_lanes_run_unit_then_answers_then_the_rest():
    lanes = ["measure", "answers", "cli", "unit", "integration"]
    order = sorted((item(f"tests/{x}/test_x.py::t", x) for x in lanes), key=lane_rank)
    assert [second_lane.lane_of(i) for i in order] == \
        ["unit", "answers", "cli", "integration", "measure"]


def test_a_second_lane_only_beside_the_answers_lane():
    apart = item("tests/integration/test_x.py::k", marked=True)
    assert claim([apart, item("tests/unit/test_u.py::u", "unit")]) is None
    lane = claim([apart, item("tests/answers/test_a.py::a", "answers")])
    assert lane is not None and lane.nodeids == [apart.nodeid]
    lane.stop()
    assert claim([item("tests/answers/test_a.py::a", "answers")]) is None
    # the second process hands none on
    assert claim([apart, item("tests/answers/test_a.py::a", "answers")], second=True) is None


def test_the_second_processs_reports_are_reported_here_as_made():
    lane = finished_lane(["a::ok", "a::bad", "a::skip"])
    path = str(lane.folder / "reports.jsonl")

    def rep(nodeid, when, outcome, longrepr=None):
        return SimpleNamespace(nodeid=nodeid, when=when, outcome=outcome, longrepr=longrepr,
                               duration=1.5, sections=[("Captured stdout call", "hi")],
                               skipped=outcome == "skipped")

    for r in (rep("a::ok", "setup", "passed"), rep("a::ok", "call", "passed"),
              rep("a::ok", "teardown", "passed"),
              rep("a::bad", "setup", "passed"),
              rep("a::bad", "call", "failed", "AssertionError: assert 1 == 2"),
              rep("a::bad", "teardown", "passed"),
              rep("a::skip", "setup", "skipped", ("t.py", 3, "Skipped: needs Lightning")),
              rep("a::skip", "teardown", "passed")):
        record(r, path)
    try:
        seen = {}
        for nodeid in lane.nodeids:
            it = item(nodeid)
            report_here(it, lane)
            calls = it.ihook.calls
            assert calls[0] == ("start", nodeid) and calls[-1] == ("finish", nodeid)
            seen[nodeid] = it.ihook.reports()
        assert [(r.when, r.outcome) for r in seen["a::ok"]] == \
            [("setup", "passed"), ("call", "passed"), ("teardown", "passed")]
        bad = [r for r in seen["a::bad"] if r.when == "call"][0]
        assert bad.failed and "assert 1 == 2" in str(bad.longrepr) and bad.duration == 1.5
        assert bad.longrepr.reprcrash.message == "AssertionError: assert 1 == 2"
        assert bad.sections == [("Captured stdout call", "hi")]
        skip = seen["a::skip"][0]
        assert skip.skipped and skip.longrepr == ("t.py", 3, "Skipped: needs Lightning")
    finally:
        lane.stop()


def test_a_test_the_second_process_never_reported_fails_with_its_log():
    """A real second pytest over a node id that names no test: it exits 4 and reports
    nothing, and the main session's report says so with the log's tail."""
    lane = SecondLane(["tests/unit/test_no_such_file.py::test_nothing"])
    try:
        it = item(lane.nodeids[0])
        report_here(it, lane)
        (only,) = it.ihook.reports()
        assert only.failed and only.when == "call"
        text = str(only.longrepr)
        assert "did not report this test" in text and "exited with code 4" in text
        assert "test_no_such_file.py" in text  # pytest's own words, from the log
    finally:
        lane.stop()
