"""The Python API (issue 29 item 4): ``afford.certify / plan / preflight / predict / size``
return the typed results the CLI renders, from the same library calls (the JSON of
``afford plan --json`` equals the API's result); ``import afford`` imports no torch and none of
the library; ``afford.certify`` and ``afford.plan`` are plain functions whichever module is
imported first; bad input is an InputError; the notebook in docs/api.md runs.

tests/data/cpu_tinylm_tiny.json is a real certificate of this project's CPU box (2 cores,
AMD EPYC, load about 8 while it measured, hence NOISY), made by docs/api.md's first cell as it
stood then (tinylm alone over seq 32, 64, 128, no probes and no gates). The cell now makes the
session's CPU certificate (conftest's ``api_notebook``), which the notebook's whole run reads."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import afford
from afford import api
from afford.cli import app
from afford.core.errors import InputError
from tests.notebook import cells, run_cells
from tests.paths import DATA

CERT = DATA / "cpu_tinylm_tiny.json"
RUN = ('name = "tiny"\nworkload = "tinylm"\nmode = "fp32"\nvalue = 64\n'
       'target_tokens = "1M"\ncheckpoints_kept = 2\n')


def _fresh(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_import_afford_loads_neither_torch_nor_the_library():
    out = _fresh("import sys, afford\n"
                 "print(sorted(m for m in sys.modules if m.startswith(('afford', 'torch'))))")
    assert out == "['afford', 'afford.core', 'afford.core.version']"


def test_the_functions_load_on_first_use_without_torch():
    out = _fresh("import sys, afford\nf = afford.preflight, afford.predict, afford.size, "
                 "afford.plan\nprint('torch' in sys.modules, all(map(callable, f)))")
    assert out == "False True"


@pytest.mark.parametrize("first", ["import afford.planning.planner",
                                   "import afford.certification.request", "pass"])
def test_certify_and_plan_are_functions_whichever_is_imported_first(first):
    out = _fresh(f"{first}\nimport afford, inspect\n"
                 "print(inspect.isfunction(afford.plan), inspect.isfunction(afford.certify), "
                 "list(inspect.signature(afford.plan).parameters))")
    assert out.startswith("True True")
    assert "['cert', 'platform', 'run', 'manifest']" in out


def test_the_functions_stand_beside_the_packages():
    import afford.planning.planner as planner

    assert afford.planning.planner is planner and inspect.isfunction(afford.plan)
    assert inspect.signature(afford.plan) == inspect.signature(api.plan)
    assert "precision" in inspect.signature(afford.certify).parameters
    assert set(afford.__all__) >= {"certify", "plan", "preflight", "predict", "size"}
    assert {"certify", "plan", "size"} <= set(dir(afford))
    with pytest.raises(AttributeError):
        afford.no_such_thing  # noqa: B018


def _cli_json(*argv: str) -> dict:
    r = CliRunner().invoke(app, [*argv, "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def test_plan_and_preflight_are_what_the_commands_print(tmp_path):
    run = tmp_path / "run.toml"
    run.write_text(RUN)
    p = afford.plan(str(CERT), "local", run)
    assert type(p).__name__ == "PlanResult"
    assert p.model_dump(mode="json", by_alias=True) == \
        _cli_json("plan", str(CERT), "--platform", "local", "--run", str(run))
    v = afford.preflight(CERT, "local", run)
    cli = _cli_json("preflight", str(CERT), "--platform", "local", "--run", str(run))
    assert type(v).__name__ == "Verdict" and v.go is cli["go"]
    assert list(v.reasons) == cli["reasons"] and list(v.warnings) == cli["warnings"]
    # NOISY (load 8): GO where the slow end of the children's spread cannot flip it
    assert v.go is True and "the decision holds across their measured spread" in v.warnings[0]
    assert afford.preflight(CERT, "local", run, accept_noisy=True).go is True


def test_loaded_objects_are_taken_as_given(tmp_path):
    from afford.schema.cert import load_certificate
    from afford.schema.platform import load_platform
    from afford.schema.run import load_run

    run = tmp_path / "run.toml"
    run.write_text(RUN)
    a = afford.plan(CERT, "local", run)
    b = afford.plan(load_certificate(CERT), load_platform("local"), load_run(run))
    assert a == b


def test_predict_and_size_are_what_the_commands_print():
    pr = afford.predict(CERT, batch=4, seq="96")
    assert type(pr).__name__ == "PredictResult"
    assert pr.model_dump(mode="json", by_alias=True) == \
        _cli_json("predict", str(CERT), "--batch", "4", "--seq", "96")
    s = afford.size(CERT, seq=128, batch=4)
    cli = _cli_json("size", str(CERT), "--seq", "128", "--batch", "4")
    assert s.fits is cli["fits"] is True
    assert s.memory.allocated.value == cli["peak_allocated"]["value"]
    assert s.memory.fits == cli["fits_level"]
    assert s.model_dump(mode="json")["memory"] == cli["memory"]


@pytest.mark.parametrize("call, match", [
    (lambda: afford.predict(CERT, batch=0, seq=64), "batch 0"),
    (lambda: afford.predict(CERT, batch=2.5, seq=64), "whole number"),
    (lambda: afford.predict(CERT, batch=4, seq="lots"), "seq 'lots'"),
    (lambda: afford.predict(CERT, batch=4, seq=64, mode="fp8"), "unknown mode"),
    (lambda: afford.size(CERT, seq=64, memory_fraction=2), "memory_fraction 2"),
    (lambda: afford.size(CERT, seq=64, memory_fraction="ninety"), "memory_fraction"),
    (lambda: afford.plan(123, "local"), "cert: give a path"),
    (lambda: afford.plan(CERT, "no-such-platform"), "no-such-platform"),
    (lambda: afford.preflight(CERT, "local", None), "needs a run"),
    (lambda: afford.plan(CERT.parent / "missing.json", "local"), "missing.json"),
])
def test_bad_input_is_an_input_error(call, match):
    with pytest.raises(InputError, match=match):
        call()


@pytest.mark.parametrize("kw, match", [
    (dict(precision="fast"), "precision 'fast'"),
    (dict(sweeps={"seq": [0]}), "positive integers"),
    (dict(sweeps=["seq=64,64"]), "appears twice"),
    (dict(checkpoint_dir="/no/such/folder"), "no such folder"),
    (dict(children=True), "whole number"),
    (dict(workloads=["no-such-workload"]), "no-such-workload"),
])
def test_certify_refuses_bad_input_before_measuring(kw, match, tmp_path):
    with pytest.raises(InputError, match=match):
        afford.certify(**{"workloads": ["tinylm"], **kw})


def test_certify_refuses_to_overwrite_before_measuring(tmp_path):
    out = tmp_path / "c.json"
    out.write_text("{}")
    with pytest.raises(InputError):
        afford.certify(["tinylm"], out=out)
    assert out.read_text() == "{}"


def test_the_progress_adapter_types_events():
    from afford.certification import Progress, _progress_of

    got: list[Progress] = []
    on_event, on_plan = _progress_of(got.append, children=3)

    class Plan:
        items = [1, 2]

    on_plan(Plan())
    on_event({"event": "begin", "key": "tinylm/seq=32", "child": 0})
    on_event({"event": "point", "key": "tinylm/seq=32", "child": 0})
    assert [(p.event, p.key, p.child, p.done, p.total) for p in got] == [
        ("plan", "", "", 0, 6), ("begin", "tinylm/seq=32", "0", 0, 6),
        ("point", "tinylm/seq=32", "0", 1, 6)]


# ---------------------------------------------------------------- the notebook


def _check_notebook(ns: dict) -> None:
    assert ns["plan"].cadence.save_every.value >= 1
    assert ns["run_row"].step_seconds.tag.value == "MEASURED"
    assert isinstance(ns["verdict"].go, bool)
    assert ns["sized"].fits is True
    names = {m.name for m in ns["guard"].readings()}
    assert {"afford/step", "afford/drift", "afford/chunk_seconds_left"} <= names


def test_the_notebook_after_its_certify_cell(tmp_path, monkeypatch, capsys):
    """Every cell but the first, on the stored certificate the first cell made on this box
    (as the cell stood then: tinylm alone over seq 32, 64, 128, no probes, no gates)."""
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec("import afford\nfrom afford.schema.cert import load_certificate\n"  # noqa: S102
         f"cert = load_certificate({str(CERT)!r})", ns)
    _check_notebook(run_cells(cells()[1:], ns, first=2))
    assert "largest batch" in capsys.readouterr().out


@pytest.mark.slow  # a real certify on this CPU (the session's, conftest's api_notebook)
def test_the_notebook_whole(api_notebook, tmp_path, monkeypatch):
    """The first cell ran for real (conftest's ``api_notebook``, which measured in a folder
    of its own: the session's CPU certificate); the others run here on its namespace."""
    monkeypatch.chdir(tmp_path)
    ns = run_cells(cells()[1:], dict(api_notebook.ns), first=2)
    assert ns["cert"].status == "complete"
    assert (api_notebook.folder / "tiny-cert.json").is_file()
    _check_notebook(ns)
