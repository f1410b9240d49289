"""Shared fixtures. ``cpu_cert`` is one real, reduced CPU certificate made once per session
(real child processes, real timing) that the tests of later stages read: docs/api.md's first
notebook cell makes it (``api_notebook``), so the notebook's test and theirs share one
certify. The cell runs in a process of its own, started as soon as the collected tests are
known, so that it measures while the tests before the first that reads it run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.paths import ROOT, TESTS


@pytest.fixture
def tests_on_pythonpath(monkeypatch):
    """The repository's root on PYTHONPATH, for a test that runs a module of the test suite
    (``tests.fake_sweep_child``) as afford's child: children start without the working
    folder on their path (``python -P``), as a user's would, and find it as a user's
    would, through PYTHONPATH."""
    given = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT)] + ([given] if given else [])))


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """afford's derived-figures cache (afford.core.cache) in a folder of the session's own,
    never the user's ~/.cache (children and CLI subprocesses inherit the variable)."""
    old = os.environ.get("AFFORD_CACHE_DIR")
    os.environ["AFFORD_CACHE_DIR"] = str(tmp_path_factory.mktemp("afford-cache"))
    yield
    if old is None:
        os.environ.pop("AFFORD_CACHE_DIR", None)
    else:
        os.environ["AFFORD_CACHE_DIR"] = old


def pytest_sessionstart(session):
    """The package and the suite's helper modules byte-compiled once, before anything runs:
    the suite starts a few hundred Python processes (certify's children, the CLI, trainers
    it kills), and where ``PYTHONDONTWRITEBYTECODE`` is set (this sandbox sets it) each of
    them would otherwise compile afford from source again (about 0.3-0.4 s a process that
    imports the CLI and certify). Only ``.pyc`` files are written, beside the sources, as
    Python's own import would; a stale one is recompiled by its source's time stamp."""
    import compileall

    for folder in (ROOT / "src", TESTS):
        compileall.compile_dir(str(folder), quiet=2, workers=0)


def _cuda_available() -> bool:
    """Only asked when a collected test is marked cuda, so pure-math runs never import torch."""
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    from tests.second_lane import lane_rank

    items.sort(key=lane_rank)  # stable: unit, answers, cli, integration, measure
    if not any("cuda" in item.keywords for item in items) or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; run on the lent GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


class Notebook(NamedTuple):
    """docs/api.md's first cell after it ran: what the later cells see (its imports and
    ``cert``), its working folder, and the certificate it wrote there (``tiny-cert.json``)."""

    ns: dict
    folder: Path
    cert_path: Path


_FIRST_CELL: list = []  # the first cell's process, started once the session's tests are known


def _start_first_cell(items) -> None:
    """Start docs/api.md's first cell (the session's CPU certify) as soon as the collected
    tests are known, if one of them needs it: it measures in a process of its own while the
    tests before the first that needs it run (the unit lane, pure Python on one core)."""
    if not _FIRST_CELL and any("api_notebook" in getattr(i, "fixturenames", ()) for i in items):
        from tests.notebook import FirstCell

        _FIRST_CELL.append(FirstCell())


_SECOND_LANE: list = []  # the second pytest process (tests/second_lane.py), when one is made
_REPORTS: list = []  # in that second process: the file its reports go to


def pytest_configure(config):
    from tests.second_lane import reports_file

    _REPORTS[:] = [p for p in [reports_file()] if p]


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    _start_first_cell(session.items)  # the tests that will run, after -k and -m
    from tests.second_lane import claim

    lane = claim(session.items, second=bool(_REPORTS))
    if lane is not None:  # its tests are reported last, once the second process is done
        _SECOND_LANE.append(lane)
        apart = set(lane.nodeids)
        session.items.sort(key=lambda i: i.nodeid in apart)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """The second lane starts at the first test after the unit lane; a test it runs is
    reported here from its reports (tests/second_lane.py) instead of run."""
    if not _SECOND_LANE:
        return None
    from tests.second_lane import lane_of, report_here

    lane = _SECOND_LANE[0]
    if lane.proc is None and lane_of(item) != "unit":
        lane.start()
    if item.nodeid in lane.nodeids:
        report_here(item, lane)
        return True
    return None


def pytest_runtest_logreport(report):
    if _REPORTS:
        from tests.second_lane import record

        record(report, _REPORTS[0])


def pytest_sessionfinish(session, exitstatus):
    for cell in _FIRST_CELL:
        cell.stop()
    for lane in _SECOND_LANE:
        lane.stop()


@pytest.fixture(scope="session")
def api_notebook() -> Notebook:
    """The session's one real CPU certificate: docs/api.md's first cell, run as written in a
    process and working folder of its own (tinylm over seq 16, 32, 64 and softmax over s 32,
    64, 128, the quick protocol, every default stage: probes, memory law, init-loss gate;
    :class:`tests.notebook.FirstCell`, started as the session began). That process checks
    that the file the cell wrote reads back as exactly the certificate the cell returned;
    the later cells then see the cell's imports and that certificate, read from its file."""
    from afford.schema.cert import load_certificate
    from tests.notebook import FirstCell, cells, imports_of, run_cells

    if not _FIRST_CELL:
        _FIRST_CELL.append(FirstCell())
    cell = _FIRST_CELL[0]
    said = cell.result()
    assert said["round_trip"], "the certificate the cell wrote is not the one it returned"
    path = cell.folder / "tiny-cert.json"
    ns = run_cells([imports_of(cells()[0])], {})
    ns["cert"] = load_certificate(path)
    assert ns["cert"].status == said["status"]
    return Notebook(ns=ns, folder=cell.folder, cert_path=path)


@pytest.fixture(scope="session")
def cpu_cert_path(api_notebook):
    """The path of the session's real CPU certificate (``api_notebook``'s)."""
    return api_notebook.cert_path


@pytest.fixture(scope="session")
def cpu_cert(cpu_cert_path):
    from afford.schema.cert import load_certificate

    return load_certificate(cpu_cert_path)


PLANT = ("import os\n"
         "open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'PLANTED-{name}'), "
         "'w').close()\n"
         "raise SystemExit('the planted {name}.py ran')\n")


@pytest.fixture(scope="session")
def planted_user_certify(tmp_path_factory):
    """One real ``afford certify`` of the suite's user workload for the tests that read it
    (the CLI's end to end, the children's path): tests/user_workload.py as the user's
    package ``mywl.wl`` in a working folder that also holds a ``numpy.py`` and a
    ``torch.py`` which write ``PLANTED-*`` and exit if anything imports them (as
    tests/measure/test_child_path.py plants them); ``--quick`` on the CPU over width=16,32, every
    default stage (probes, memory, the init-loss gate), ``--out`` and ``--json``.

    Call it with the test module's CLI invoke (``invoke(*args)``: typer's runner on its
    ``app``); the first call measures, in that folder as the working folder, and leaves
    the working folder, ``sys.path`` and ``sys.modules`` as they were; every call returns
    (the runner's result, the folder, the certificate's path)."""
    import sys

    folder = tmp_path_factory.mktemp("planted")
    out = folder / "u.json"
    made: list = []

    def certify(invoke):
        if made:
            return made[0], folder, out
        for name in ("numpy", "torch"):
            (folder / f"{name}.py").write_text(PLANT.format(name=name))
        (folder / "mywl").mkdir()
        (folder / "mywl" / "__init__.py").write_text("")
        (folder / "mywl" / "wl.py").write_text(
            (TESTS / "user_workload.py").read_text())
        here, path, modules = os.getcwd(), list(sys.path), set(sys.modules)
        os.chdir(folder)
        try:
            made.append(invoke("certify", "-w", "mywl.wl:factory", "--quick", "--device",
                               "cpu", "--sweep", "width=16,32", "--out", str(out), "--json"))
        finally:
            os.chdir(here)
            sys.path[:] = path
            for name in set(sys.modules) - modules:
                if name.split(".")[0] == "mywl":
                    del sys.modules[name]
        return made[0], folder, out

    return certify
