"""The suite's second lane: tests marked ``apart`` run in a second pytest process, beside the
pure-Python lanes, and the main session reports them as their own.

The suite runs on a 2-core box. The answers lane is pure Python on one core, while the tests
marked ``apart`` (the loop guard's kill campaigns of one process a session, its DDP ranks,
the gloo ranks: real processes trained, killed and restarted, about 85 s on an idle box)
spend most of their time in processes of their own; run one after the other, the second
core idles through both.
So when a session collects tests of the answers lane and tests marked ``apart``, those
marked are handed to a second ``python -m pytest`` (:class:`SecondLane`), started as the
main session reaches the first test after the unit lane (the unit lane overlaps the first
cell's certify, :class:`tests.notebook.FirstCell`, instead), and each is reported in the main
session at its place at the end of the run: the second process's own setup, call and
teardown reports (outcome, failure text, skip reason, duration), read back from the file
it writes them to (:func:`record`). A test the second process never reported (it crashed,
or the watchdog stopped it) fails with the tail of its log.

Only tests that measure no timing on this machine are marked ``apart``: they run beside
other work. A session that collects no answers test (``pytest tests/integration``, one
file, ``-k``) runs every test in the main process as before. In the second process
:data:`ENV` names the file its reports go to; it hands nothing on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.beside import Beside
from tests.paths import LANES, ROOT, TESTS

MARK = "apart"
ENV = "AFFORD_TESTS_APART_REPORTS"  # set in the second process: where its reports go
TIMEOUT_SECONDS = 1800.0  # the second process's whole run, after which it is stopped


def lane_of(item) -> str:
    """The lane (``tests/LANE/``) an item's file sits in; ``""`` for one outside them."""
    try:
        return Path(item.path).relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return ""


def lane_rank(item) -> int:
    """The lanes in the order the session runs them: unit first (the first cell's
    certify measures beside it), answers next (the second lane runs beside it)."""
    lane = lane_of(item)
    return LANES.index(lane) if lane in LANES else len(LANES)


def reports_file() -> str | None:
    """In the second process, the file its reports go to (:data:`ENV`); None in the main
    session. Read once, as the session is configured."""
    return os.environ.get(ENV) or None


def record(report, path: str) -> None:
    """In the second process: append one report (setup, call or teardown) to ``path``, as a
    JSON line the main session turns back into a report."""
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple):
        shown: object = [str(longrepr[0]), longrepr[1], str(longrepr[2])]
    else:
        shown = None if longrepr is None else str(longrepr)
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    line = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
            "longrepr": shown, "crash": crash, "duration": report.duration,
            "sections": [list(s) for s in report.sections]}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


class SecondLane(Beside):
    """The second pytest process over ``nodeids``, in a folder of its own (its reports, its
    log, its ``--basetemp``); :meth:`start` starts it, :meth:`reports` waits for it."""

    def __init__(self, nodeids: list[str]) -> None:
        super().__init__("afford-second-lane-", "second-lane.log")
        self.nodeids = list(nodeids)
        self._reports: dict[str, list[dict]] | None = None
        self._why = ""

    def start(self) -> None:
        self.spawn([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       f"--basetemp={self.folder / 'tmp'}", *self.nodeids],
                      env={**os.environ, ENV: str(self.folder / "reports.jsonl")}, cwd=ROOT)

    def reports(self, timeout: float = TIMEOUT_SECONDS) -> dict[str, list[dict]]:
        """Each node id's reports in the order the second process made them (empty for one
        it never reported, :meth:`why` then says what became of the process)."""
        if self._reports is not None:
            return self._reports
        self.start()
        rc = self.wait(timeout)
        self._why = f"the second lane's pytest was stopped after {timeout:g} s" if rc is None \
            else f"the second lane's pytest exited with code {rc}"
        got: dict[str, list[dict]] = {}
        path = self.folder / "reports.jsonl"
        if path.is_file():
            for text in path.read_text().splitlines():
                try:
                    rec = json.loads(text)
                except ValueError:  # a line cut short by a crash
                    continue
                got.setdefault(rec["nodeid"], []).append(rec)
        self._reports = got
        return got

    def why(self) -> str:
        return f"{self._why}; its log ends:\n{self.tail()}"


class Failure:
    """A failure's text as the second process wrote it, shown as pytest shows its own: the
    whole text under FAILURES, its crash message in the short summary."""

    def __init__(self, text: str, crash: str | None) -> None:
        self.text = text
        last = text.strip().splitlines()[-1] if text.strip() else ""
        self.reprcrash = SimpleNamespace(message=crash or last or "failed in the second lane")

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


def claim(items, second: bool = False) -> SecondLane | None:
    """The second lane for the session's ``items`` (after ``-k`` and ``-m``): the items
    marked ``apart``, when the session also runs answers tests for them to run beside;
    else None (every test runs in the main process). ``second``: this session is itself
    the second process, which hands nothing on."""
    if second:
        return None
    apart = [i.nodeid for i in items if i.get_closest_marker(MARK) is not None]
    if not apart or not any(lane_of(i) == "answers" for i in items):
        return None
    return SecondLane(apart)


def report_here(item, lane: SecondLane) -> None:
    """Report in the main session what the second process reported of ``item``: its
    setup, call and teardown, as it made them; a failed call with the log's tail if it made
    none."""
    from _pytest.reports import TestReport

    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    recs = lane.reports().get(item.nodeid, [])
    if not any(r["when"] == "call" or r["outcome"] != "passed" for r in recs):
        recs = [{"when": "call", "outcome": "failed", "duration": 0.0, "sections": [],
                 "longrepr": f"the second lane did not report this test: {lane.why()}"}]
    keywords = {k: 1 for k in item.keywords}
    for rec in recs:
        longrepr = rec["longrepr"]
        if rec["outcome"] == "skipped" and isinstance(longrepr, list):
            longrepr = tuple(longrepr)
        elif rec["outcome"] == "failed" and isinstance(longrepr, str):
            longrepr = Failure(longrepr, rec.get("crash"))
        ihook.pytest_runtest_logreport(report=TestReport(
            item.nodeid, item.location, keywords, rec["outcome"], longrepr, rec["when"],
            sections=[tuple(s) for s in rec.get("sections", [])],
            duration=rec["duration"], user_properties=[]))
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
