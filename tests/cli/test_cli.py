"""The command line through typer's runner: exit codes and messages."""

import json

import pytest
import torch
from typer.testing import CliRunner

from afford.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("args,match", [
    (["certify", "--workload", "nope"], "unknown workload"),
    (["certify", "--sweep", "n=abc"], "positive integers"),
    (["certify", "--sweep", "seq"], "NAME=V1,V2"),
    (["certify", "--sweep", "zz=1,2", "--workload", "tinylm"], "no selected workload"),
    (["certify", "--children", "2"], "at least 3"),
    (["certify", "--quick", "--full"], "contradict"),
    (["certify", "--mode", "int4"], "unknown mode"),
    (["certify", "--out", "/no/such/folder/c.json"], "does not exist"),
    (["certify", "--device", "tpu"], "--device"),
    (["certify", "--device", "cuda:7"] if not torch.cuda.is_available() else
     ["certify", "--device", "meta"], "--device"),
])
def test_certify_bad_input_exits_2_without_traceback(args, match):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert match in r.output
    assert "Traceback" not in r.output


def test_certify_refuses_to_overwrite(tmp_path):
    out = tmp_path / "c.json"
    out.write_text("mine")
    r = run("certify", "--out", str(out))
    assert r.exit_code == 2 and "already exists" in r.output
    assert out.read_text() == "mine"


def test_schema_cert():
    r = run("schema", "cert")
    assert r.exit_code == 0
    assert "workloads" in json.loads(r.stdout)["properties"]
    assert run("schema", "nope").exit_code == 2


# Not marked slow: the default run's one real certify end to end (--quick, CPU, two points,
# ~20 s), so `-m "not slow"` cannot pass with certify broken. The run is conftest's
# planted_user_certify: tests/user_workload.py as the user's package mywl.wl, in a working
# folder that tests/measure/test_child_path.py checks as well (one certify for both).
def test_certify_user_workload_end_to_end(planted_user_certify):
    r, _, out = planted_user_certify(run)
    doc = json.loads(r.stdout)
    # 0 whatever the verdicts (a busy CPU makes it NOISY): the verdicts are the last lines
    assert r.exit_code == 0, r.output
    assert [v["stage"] for v in doc["verdicts"]] == ["time", "memory", "gates"]
    assert doc["verdicts"][0]["label"] == doc["time_verdict"]["label"]
    assert doc["certificate"] == str(out) and doc["workloads"][0]["resident"] == "2/2"
    assert doc["time"][0]["form"] is not None and doc["time"][0]["held_out"] == []
    cert = json.loads(out.read_text())
    assert cert["workloads"][0]["source"] == "mywl.wl:factory"
    assert doc["stage_seconds"] == cert["environment"]["stage_seconds"]
    assert {"setup", "sweep"} <= set(doc["stage_seconds"])


@pytest.mark.slow
def test_workload_without_backward_is_refused_not_timed(tmp_path):
    out = tmp_path / "r.json"
    r = run("certify", "--quick", "--device", "cpu", "--workload",
            "tests.user_workload:no_backward", "--sweep", "width=16", "--out", str(out))
    assert r.exit_code == 2
    assert "received no gradient" in r.output
    cert = json.loads(out.read_text())
    point = cert["workloads"][0]["points"][0]
    assert point["median_seconds"] is None
    assert all(k["timed_seconds"] == [] and k["refused"] for k in point["children"])
