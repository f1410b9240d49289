"""``afford schema run`` and ``afford schema platform``: the JSON Schemas of the files users
write by hand, checked with a JSON Schema validator (what an editor runs) against the shipped
presets and examples, and against files with the mistakes people make."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema  # the test extra: what an editor runs on the schemas
import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.core.io import read_toml
from afford.schema.platform import load_platform
from afford.schema.run import load_run
from tests.paths import ROOT


def _schema(kind: str) -> dict:
    r = CliRunner().invoke(app, ["schema", kind])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def _errors(schema: dict, doc: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


def _files(*globs: str) -> list[Path]:
    return sorted(p for g in globs for p in ROOT.glob(g))


@pytest.mark.parametrize("path", _files("src/afford/data/platforms/*.toml",
                                        "examples/platforms/*.toml"), ids=lambda p: p.name)
def test_every_shipped_platform_file_meets_the_platform_schema(path):
    load_platform(str(path))  # afford reads it
    assert _errors(_schema("platform"), read_toml(path, "platform")) == []


@pytest.mark.parametrize("path", _files("examples/runs/*.toml"), ids=lambda p: p.name)
def test_every_example_run_file_meets_the_run_schema(path):
    load_run(path)
    assert _errors(_schema("run"), read_toml(path, "run")) == []


def test_the_schemas_refuse_what_afford_refuses(tmp_path):
    run = read_toml(ROOT / "examples/runs/example.toml", "run")
    schema = _schema("run")
    typo = {**run, "checkpoint_kept": 2}  # checkpoints_kept misspelled
    assert any("checkpoint_kept" in e for e in _errors(schema, typo))
    assert _errors(schema, {**run, "mode": "int4"})
    no_workload = {k: v for k, v in run.items() if k != "workload"}
    assert any("workload" in e for e in _errors(schema, no_workload))
    platform = _schema("platform")
    preset = read_toml(ROOT / "src/afford/data/platforms/local.toml", "platform")
    assert _errors(platform, {**preset, "session_cap": "12h"})  # a figure is a table
    assert _errors(platform, {**preset, "schema": "afford.platform/2"})


def test_an_unknown_kind_names_the_kinds():
    r = CliRunner().invoke(app, ["schema", "nope"])
    assert r.exit_code == 2 and "platform" in r.output and "run" in r.output
    assert "Traceback" not in r.output
