"""A pytest plugin for tools/mutation.py: which functions of the pure modules each test calls.

Loaded with ``-p mutation_calls`` (tools/ on the path) and ``AFFORD_MUT_CALLS=FILE``: every
Python-level call into a file under ``AFFORD_MUT_PKG`` (src/afford) is recorded, through
``sys.setprofile``, as (path relative to it, top-level name of the called code: ``f`` for
``f``, ``f.<locals>.g`` and ``f.<lambda>``; ``C`` for ``C.method``). A test is credited with
its own calls, with those of every fixture it uses (including a module- or session-scoped
fixture set up once for an earlier test) and with those its test file made when it was
imported (module-level data built by afford's functions). At the end of the session FILE
holds ``{node id: [[path, name], ...]}`` for the tests that passed (a test that fails on the
unmutated tree would "kill" every mutant it is given: it is left out, and named under the
key ``""``), and each test's seconds (setup, call and teardown, under the profiler) under the
key ``"#seconds"``, from which a mutant's time-out is set.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

PKG = str(Path(os.environ.get("AFFORD_MUT_PKG", "src/afford")).resolve()) + os.sep
_current: set[tuple[str, str]] = set()
_fixtures: dict[int, set[tuple[str, str]]] = {}
_imports: dict[str, set[tuple[str, str]]] = {}
_tests: dict[str, list[list[str]]] = {}
_failed: list[str] = []
_seconds: dict[str, float] = {}


def _profile(frame, event, arg):  # noqa: ARG001 (the profile-function signature)
    if event == "call":
        name = frame.f_code.co_filename
        if name.startswith(PKG):
            _current.add((name[len(PKG):], frame.f_code.co_qualname.split(".")[0]))


def _swap(new: set[tuple[str, str]]) -> set[tuple[str, str]]:
    global _current
    old, _current = _current, new
    return old


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    if not isinstance(collector, pytest.Module):
        yield
        return
    outer = _swap(set())
    sys.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        _imports[collector.nodeid] = _swap(outer)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):  # noqa: ARG001
    outer = _swap(set())
    try:
        yield
    finally:
        mine = _swap(outer)
        _fixtures[id(fixturedef)] = mine
        _current.update(mine)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001
    _swap(set())
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        calls = set(_current) | _imports.get(item.nodeid.split("::")[0], set())
        for defs in item._fixtureinfo.name2fixturedefs.values():
            for d in defs:
                calls |= _fixtures.get(id(d), set())
        _tests[item.nodeid] = sorted([p, n] for p, n in calls)


def pytest_runtest_logreport(report):
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration
    if report.failed and report.nodeid not in _failed:
        _failed.append(report.nodeid)


def pytest_sessionfinish(session):  # noqa: ARG001
    out = os.environ.get("AFFORD_MUT_CALLS")
    if out:
        kept = {k: v for k, v in _tests.items() if k not in _failed}
        Path(out).write_text(json.dumps({**kept, "": _failed, "#seconds": _seconds}))
