"""Shared fixtures. ``cpu_cert`` is one real, reduced CPU certificate made once per session
(real child processes, real timing) that the tests of later stages read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.fixture
def tests_on_pythonpath(monkeypatch):
    """The repository's root on PYTHONPATH, for a test that runs a module of the test suite
    (``tests.fake_sweep_child``) as afford's child: children start without the working
    folder on their path (``python -P``), as a user's would, and find it as a user's
    would, through PYTHONPATH."""
    given = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT)] + ([given] if given else [])))


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
    from afford.certify import certify
    from afford.certify.request import CertifyRequest
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
