"""Shared fixtures. ``cpu_cert`` is one real, reduced CPU certificate made once per session
(real child processes, real timing) that the tests of later stages read."""

from __future__ import annotations

import os

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


def _cuda_available() -> bool:
    """Only asked when a collected test is marked cuda, so pure-math runs never import torch."""
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if not any("cuda" in item.keywords for item in items) or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; run on the lent GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_cert_path(tmp_path_factory):
    from afford.certification import certify
    from afford.certification.request import CertifyRequest
    from afford.schema.cert import save_certificate

    req = CertifyRequest(workloads=["tinylm", "softmax"], sweeps={"seq": [16, 32, 64],
                                                                  "s": [32, 64, 128]},
                         precision="quick", device="cpu", command="afford certify (test)")
    cert = certify(req)
    path = tmp_path_factory.mktemp("cert") / "cpu.json"
    save_certificate(cert, path)
    return path


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
