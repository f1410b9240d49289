"""``-`` reads standard input where a command reads a file (issue 29, item 5): once per
command; a second ``-`` is a usage error, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.core import io
from tests.paths import DATA

CERT = DATA / "cpu_tinylm_tiny.json"


@pytest.fixture(autouse=True)
def _fresh_stdin(monkeypatch):
    monkeypatch.setattr(io, "_stdin_taken", [])


def _run(args: list[str], stdin: str):
    return CliRunner().invoke(app, args, input=stdin)


def test_a_certificate_from_stdin_plans_as_the_file_does(tmp_path):
    text = CERT.read_text()
    piped = _run(["plan", "-", "--platform", "local", "--json"], text)
    named = _run(["plan", str(CERT), "--platform", "local", "--json"], "")
    assert piped.exit_code == named.exit_code == 0, piped.output
    a, b = json.loads(piped.stdout), json.loads(named.stdout)
    assert a == b


def test_a_platform_from_stdin(tmp_path):
    preset = Path(io.__file__).parents[1] / "data" / "platforms" / "kaggle-p100.toml"
    got = _run(["plan", str(CERT), "--platform", "-", "--json"], preset.read_text())
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["platform"] == "kaggle-p100"


def test_stdin_read_twice_is_a_usage_error():
    got = _run(["compare", "-", "-", "--tol", "5%"], CERT.read_text())
    assert got.exit_code == 2
    assert "'-' given twice" in got.output and "Traceback" not in got.output


def test_garbage_on_stdin_is_a_clear_error():
    got = _run(["predict", "-", "--batch", "2", "--seq", "16"], "not json")
    assert got.exit_code == 2 and "not JSON" in got.output
