"""``afford size --measure`` (issue 37 item 2): the asked shape measured in one memory child
on this machine and kept in the certificate, which then answers there as measured; another
device's certificate is refused before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.schema.cert import load_certificate, save_certificate
from tests.paths import DATA

TINY = DATA / "cpu_tinylm_tiny.json"


def _here(tmp_path) -> Path:
    """The tiny CPU certificate, made this machine's (its device name is the CPU model)."""
    import platform

    from afford.measure.env import cpu_model

    cert = load_certificate(TINY)
    env = cert.environment.model_copy(update={
        "device_name": cpu_model() or platform.machine() or "cpu"})
    path = tmp_path / "cert.json"
    save_certificate(cert.model_copy(update={"environment": env}), path)
    return path


def test_another_devices_certificate_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "cert.json"
    shutil.copy(TINY, path)
    cert = load_certificate(path)
    env = cert.environment.model_copy(update={"device_name": "NVIDIA H200",
                                              "device_type": "cuda"})
    save_certificate(cert.model_copy(update={"environment": env}), path, overwrite=True)
    before = path.read_bytes()
    got = CliRunner().invoke(app, ["size", str(path), "--seq", "48", "--batch", "3",
                                   "--measure"])
    assert got.exit_code == 2 and "afford never pools devices" in got.output
    assert path.read_bytes() == before


def test_measure_needs_a_batch_and_a_file(tmp_path):
    path = _here(tmp_path)
    got = CliRunner().invoke(app, ["size", str(path), "--seq", "48", "--measure"])
    assert got.exit_code == 2 and "--measure needs --batch" in got.output


@pytest.mark.slow
def test_the_reading_is_kept_and_answers_there(tmp_path):
    path = _here(tmp_path)
    got = CliRunner().invoke(app, ["size", str(path), "--seq", "48", "--batch", "3",
                                   "--measure", "--json"])
    assert got.exit_code == 0, got.output
    doc = json.loads(got.stdout)
    assert doc["memory"]["source"] == "measured" and not doc["memory"]["extrapolated"]
    kept = load_certificate(path)
    asked = [s for s in kept.memory.laws[0].shapes if s.role == "asked"]
    assert len(asked) == 1 and asked[0].dims["B"] == 3 and asked[0].dims["s"] == 48
    again = CliRunner().invoke(app, ["size", str(path), "--seq", "48", "--batch", "3",
                                     "--json"])
    assert json.loads(again.stdout)["peak_allocated"] == doc["peak_allocated"]
