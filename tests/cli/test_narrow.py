"""Issue 32, item 2: every command's output read in a pipe at 80 columns breaks no cell inside
a word. Each command is rendered twice through the real CLI, at 80 columns and at 1000 (where
every table fits whole); every word of the wide output must come out whole in the narrow one
(a word wrapped letter by letter, or a header split as ``measure d``, leaves fragments that
are no word of the wide output, and loses the word's count). Below the width a table needs it
is drawn as records, ``header: value`` lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from afford.cli import app, common
from afford.report.rich_table import Table
from afford.schema.cert import load_certificate
from tests.paths import DATA, ROOT, data_file

H200 = data_file("h200_default_d89f7a2.json")
SIZES = data_file("h200_sizes_levers_63bd66d.json")
CPU = DATA / "cpu_tinylm_tiny.json"
TIME = data_file("h200_time_default_2026-12-02.json")
PLATFORM = ROOT / "examples" / "platforms" / "16gib-12h.toml"
RUN = ROOT / "examples" / "runs" / "example.toml"
BOX = re.compile("[\u2500-\u257f]")  # box drawing
runner = CliRunner()


def words(text: str) -> Counter:
    """Whitespace-separated words, table borders removed, a record's ``key:`` as ``key``,
    digits as 9 (a timing differs between the two runs; its shape does not)."""
    return Counter(re.sub(r"\d", "9", w.rstrip(":")) for w in BOX.sub(" ", text).split()
                   if re.search(r"\w", w))  # "-", an empty cell, is no word


def broken_words(narrow: str, wide: str, width: int = 80) -> tuple[set, set]:
    """(words of the wide output not whole in the narrow one, narrow fragments that are no
    word of the wide output). A word longer than a line cannot be whole and is left out; so
    is a header (a record leaves out a column empty in its row, header and all)."""
    n, w = words(narrow), words(wide)
    long = [t for t in w if len(t) >= width - 4]
    heads = words("\n".join(line for line in wide.splitlines() if "┃" in line))
    lost = {t for t, k in w.items() if t not in heads and t not in long and n[t] < k}
    fragments = {t for t in n if t not in w and not any(t in x for x in long)}
    return lost, fragments


def render(args: list[str], width: int, monkeypatch) -> str:
    monkeypatch.setattr(common.out, "width", width)
    r = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code in (0, 1), r.output
    return r.stdout


def check(args, monkeypatch) -> str:
    narrow, wide = render(args, 80, monkeypatch), render(args, 1000, monkeypatch)
    lost, fragments = broken_words(narrow, wide)
    assert not lost and not fragments, (sorted(lost)[:20], sorted(fragments)[:20], narrow)
    return narrow


@pytest.fixture()
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: nothing longer than a line
    return tmp_path


def _measured(cert_path):
    cert = load_certificate(cert_path)
    return lambda *a, **k: cert


def _bars_files(here: Path):
    (here / "data.txt").write_bytes(b"the quick brown fox jumps over the lazy dog. " * 400)
    return ["bars", "data.txt", "--heldout", "last:2KB", "--manifest", "none.json"]


def _milestones_files(here: Path):
    from tests.answers.test_milestones import LADDER, W, _log, bars_file

    (here / "bars.json").write_text(bars_file({"kneser-ney:1": 5.170,
                                               "kneser-ney:5": 2.572}).to_json())
    (here / "ladder.toml").write_text(LADDER)
    _log(here / "run.tsv", [(100, 51_200, 6.49, W), (3000, 1_536_000, 4.997, W)])
    return ["milestones", "ladder.toml", "--log", "7.5M=run.tsv"]


COMMANDS = {
    "plan": lambda h: ["plan", H200, "-p", PLATFORM, "--run", RUN],
    "plan-cpu": lambda h: ["plan", CPU, "-p", "local"],
    "preflight": lambda h: ["preflight", H200, "-p", PLATFORM, "--run", RUN],
    "predict": lambda h: ["predict", TIME, "--batch", "8", "--seq", "2048", "-p", "local"],
    "size": lambda h: ["size", H200, "--seq", "2048", "-w", "tinylm", "--mode", "bf16"],
    "ladder": lambda h: ["ladder", SIZES, "--params", "7.5M,124M:d768L12,1B"],
    "compare": lambda h: ["compare", H200, TIME, "--tol", "5%"],
    "history": lambda h: ["history", "show", "-f", DATA / "ledger_excerpt.tsv"],
    "pin": lambda h: (h.joinpath("a.txt").write_text("x"), ["pin", "a.txt"])[1],
    "bars": _bars_files,
    "milestones": _milestones_files,
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_at_80_columns_breaks_no_word(name, here, monkeypatch):
    check(COMMANDS[name](here), monkeypatch)


@pytest.mark.parametrize("cert", [H200, CPU, TIME], ids=["h200", "cpu", "time"])
def test_the_certify_summary_at_80_columns_breaks_no_word(cert, here, monkeypatch):
    import afford.cli.certify as cli_certify

    monkeypatch.setattr(cli_certify, "_measure", _measured(cert))
    text = check(["certify", "--out", "c.json", "--force"], monkeypatch)
    assert "workload: tinylm" in text  # the summary as records at 80 columns


def test_levers_and_gate_at_80_columns_break_no_word(here, monkeypatch):
    import afford.certification.stage_levers as jobs
    import afford.cli.gate as cli_gate
    import afford.cli.levers as cli_levers
    from afford.certification.stage_gates import GateOutcome
    from tests.unit.test_gates import _cmp, _run, _section

    levers = load_certificate(SIZES).levers
    monkeypatch.setattr(jobs, "lever_job", lambda *a, **k: None)
    monkeypatch.setattr(cli_levers, "_measure", lambda *a, **k: levers)
    check(["levers", SIZES], monkeypatch)
    det = _section([_run(False, [_cmp("forward output"), _cmp("loss"),
                                 _cmp("gradients", False, 3, 1.5e-7, "fc.weight")],
                         median=0.01, name="tinylm"),
                    _run(True, [_cmp("forward output")], median=0.02, name="tinylm")])
    gates = load_certificate(CPU).gates or load_certificate(H200).gates
    monkeypatch.setattr(cli_gate, "_run", lambda *a, **k: GateOutcome(det, gates))
    check(["gate", "--no-audit"], monkeypatch)


def test_a_table_too_wide_is_drawn_as_records_and_one_that_fits_as_a_table():
    t = Table(title="chunk table")
    for col in ("workload", "mode", "step", "from"):
        t.add_column(col, overflow="fold")
    t.add_row("tinylm (run)", "bf16", "17.88 ms M", "median of 3 child medians, NVIDIA H200, "
              "certify 2026-12-02 16:35 UTC")
    t.add_row("softmax", "bf16", "2.43 ms M", "")
    narrow, wide = Console(width=40, record=True), Console(width=120, record=True)
    narrow.print(t)
    wide.print(t)
    records = narrow.export_text()
    assert records.splitlines()[:4] == ["chunk table", "workload: tinylm (run)", "mode: bf16",
                                        "step: 17.88 ms M"]
    assert "from: median of 3 child medians," in records  # prose wraps at words ...
    assert "\n  certify 2026-12-02" in records or "\n  NVIDIA" in records  # ... indented
    assert "workload: softmax" in records and records.count("from:") == 1  # empty cells left
    assert "┃ workload" in wide.export_text()


def test_a_table_that_needs_less_than_its_widest_keeps_every_word_whole():
    """Between the need and the widest: prose wraps at words, short cells stay whole (rich
    alone split headers as ``measure d`` and folded the widest column's words)."""
    t = Table()
    for col in ("measured", "predicted", "reason"):
        t.add_column(col, overflow="fold")
    t.add_row("12.30 ms M", "12.41 ms F", "the step sits on the host's launch floor " * 3)
    c = Console(width=70, record=True)
    c.print(t)
    text = c.export_text()
    assert "measured" in text and "predicted" in text and "12.30 ms M" in text
    lost, fragments = broken_words(text, " ".join(["measured predicted reason 12.30 ms M "
                                                   "12.41 ms F", "the step sits on the host's "
                                                   "launch floor " * 3]), 70)
    assert not lost and not fragments and "┃" in text


def test_a_plan_in_a_real_pipe_has_its_chunk_table_as_records():
    """The shell's case: no COLUMNS, stdout a pipe (rich's default of 80 columns)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run([sys.executable, "-m", "afford", "plan", str(H200), "-p",
                           str(PLATFORM), "--run", str(RUN)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "workload: tinylm (run)" in text and "value: seq=2048" in text
    assert "┃ workload" not in text
