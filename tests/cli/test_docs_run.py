"""Every README and MANUAL example runs as written (issue 40, item 3), on the suite's CPU
certificate (conftest's ``cpu_cert_path``, made as ``afford certify`` makes one on a CPU):
the README's first session line by line, each exiting 0 with its answer first; its plan
written by ``-o`` and read by the loop guard's snippet; its Python snippet, printing a
figure a person reads; the MANUAL's size and certify examples. ``afford certify`` itself
runs for real (its flags checked, the certificate written, its verdicts printed, exit 0)
with the measuring replaced by that certificate: measuring is
tests/measure/test_certify_cpu.py's, and a first look takes a minute.

The blocks are read from the documents, so an example edited into something that does not
run fails here."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.schema.cert import load_certificate
from tests.paths import ROOT

runner = CliRunner()
#: what each command of the first session prints first: its answer
ANSWER = {"predict": r"afford predict: .*\npredicted at batch 16, seq 2048",
          "size": r"tinylm fp32 on .*: batch \d+ x seq 4096",
          "plan": r"afford plan: .* on platform local\nthe run's figures",
          "preflight": r"(GO|NO-GO)  tinylm-cpu-seq256 on local",
          "ladder": r"scale ladder on "}


def _block(doc: str, after: str, lang: str) -> str:
    """The first ``lang`` fenced block after the heading (or line) ``after``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    return re.search(rf"```{lang}\n(.*?)```", text.split(after, 1)[1], flags=re.S).group(1)


def _lines(block: str) -> list[list[str]]:
    """Each command of a bash block as its arguments, its trailing comment dropped."""
    return [shlex.split(line, comments=True) for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture
def here(tmp_path, monkeypatch, cpu_cert_path):
    """A fresh working folder holding the repository's examples, where ``afford certify``
    returns the suite's CPU certificate instead of measuring."""
    import afford.cli.certify as cli_certify

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    cert = load_certificate(cpu_cert_path)
    monkeypatch.setattr(cli_certify, "_measure", lambda req, show: cert)
    return tmp_path


def _afford(args: list[str]):
    assert args[0] == "afford", args
    return runner.invoke(app, args[1:])


@pytest.mark.slow
def test_the_readme_first_session_runs_as_written_on_a_cpu_certificate(here):
    lines = _lines(_block("README.md", "## A first session", "bash"))
    assert [a[1] for a in lines] == ["certify", "predict", "size", "plan", "preflight",
                                     "ladder"]
    for args in lines:
        r = _afford(args)
        assert r.exit_code == 0, (args, r.stdout[:3000], r.stderr[-2000:])
        if args[1] == "certify":
            assert (here / "cert.json").is_file()
            assert r.stdout.rstrip().splitlines()[-1].startswith("gates verdict:")
            continue
        assert re.match(ANSWER[args[1]], r.stdout), (args, r.stdout[:600])
    plan = here / "plan.json"
    assert plan.read_text().startswith('{\n "schema": "afford.plan/1"')


@pytest.mark.slow
def test_the_readme_loop_guard_reads_the_plan_the_session_wrote(here):
    """The guard snippet, its names (``loader``, ``train_step``, ``model``, ``opt``,
    ``save``) given as the prose says: yours."""
    for args in _lines(_block("README.md", "## A first session", "bash"))[:4]:
        assert _afford(args).exit_code == 0
    saved = []
    ns = {"loader": range(5), "model": None, "opt": None,
          "train_step": lambda model, opt, batch: 2.5, "save": saved.append}
    exec(compile(_block("README.md", "## A first session", "python"), "README guard",  # noqa: S102
                 "exec"), ns)
    guard = ns["guard"]
    guard.close()  # here, not at exit: the ledger and marker are relative to this folder
    assert guard.resume_step == 0 and {"afford/step", "afford/next_save_step"} <= {
        m.name for m in guard.readings()}
    assert (here / "history.tsv").is_file() and (here / "afford-resume.json").is_file()


@pytest.mark.slow
def test_the_readme_python_snippet_prints_a_figure_a_person_reads(here, cpu_cert_path,
                                                                   monkeypatch, capsys):
    import afford.certification as certify_pkg

    cert = load_certificate(cpu_cert_path)
    monkeypatch.setattr(certify_pkg, "certify", lambda req, on_event, on_plan: cert)
    exec(compile(_block("README.md", "## Python", "python"), "README Python", "exec"), {})  # noqa: S102
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"time verdict: {cert.time_verdict.label}"
    assert re.fullmatch(r"step at 8 x 512: \d+\.\d\d (ms|s)( \([\d.]+\.\.[\d.]+ m?s\))? "
                        r"\[(MEASURED|FITTED)(, extrapolated)?\]", out[1]), out
    assert (here / "cert-api.json").is_file()


@pytest.mark.slow
def test_the_manual_size_examples_run_on_the_first_sessions_certificate(here):
    assert _afford(["afford", "certify", "-o", "cert.json"]).exit_code == 0
    lines = _lines(_block("docs/MANUAL.md", "## Will it fit?", "bash"))
    assert len(lines) == 3 and all(a[:3] == ["afford", "size", "cert.json"] for a in lines)
    for args in lines:
        r = _afford(args)
        fits = "--batch" in args  # exit 1 where the asked batch does not fit, as it says
        assert r.exit_code in ((0, 1) if fits else (0,)), (args, r.output)
        assert r.stdout.strip(), args


@pytest.mark.slow
def test_the_manual_hf_certify_examples_pass_certifys_checks(here):
    """Each ``afford certify -w hf:...`` line, its flags and workload checked and the
    certificate written (the measuring replaced); ``path/to/config.json`` is a user's
    config, so a small GPT-2 one is put there."""
    config = here / "path" / "to" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, '
                      '"vocab_size": 256, "n_positions": 256}')
    lines = _lines(_block("docs/MANUAL.md", "## Your own model and loop", ""))
    assert len(lines) == 5 and all(a[:3] == ["afford", "certify", "-w"] for a in lines)
    for args in lines:
        r = _afford(args + ["-o", "hf.json", "--force"])
        assert r.exit_code == 0, (args, r.output)
