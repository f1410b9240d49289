"""``afford size`` with the allocator replay, on the memory section the H200 measured for a
Llama-shaped transformers model (an H200 run of 2026-12-03; its two laws in
tests/data/h200_memory_section_llama.json.gz): on a 16 GiB what-if budget the replay's
largest batch ran there and one more did not, while the law admitted one that runs out of
memory; the expandable-segments answer and the breakdown beside it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from afford.certification.stage_memory import refit_law
from afford.cli import app
from afford.figures import memory_figures
from afford.fit.memory import sizing
from afford.report.memory_tables import replay_tables
from afford.schema.cert import save_certificate
from afford.schema.memory_section import MemorySection
from tests.paths import DATA, data_file
from tests.synthetic_cert import certificate

SECTION = data_file("h200_memory_section_llama.json")
H200 = 150109880320  # total_memory of the lent H200
FRACTION = 16 * 2**30 / H200


@pytest.fixture(scope="module")
def cert():
    sec = MemorySection.model_validate_json(SECTION.read_text())
    law = next(x for x in sec.laws if x.workload == "hf_models:llama" and x.mode == "fp32")
    law = refit_law(law, H200)  # the replay rebuilt from the raw histories by this afford
    sec = sec.model_copy(update={"laws": [law]})
    return certificate(device_memory_bytes=H200).model_copy(update={"memory": sec})


@pytest.fixture(scope="module")
def cert_path(cert, tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "cert.json"
    save_certificate(cert, path)
    return path


def test_the_replay_answers_and_its_batch_ran_under_the_cap(cert):
    r = memory_figures.size(cert, "hf_models:llama", 1024, None, "fp32", FRACTION, "run")
    assert r.replay is not None and r.replay.used
    # measured under set_per_process_memory_fraction(16 GiB): 8 ran, 9 ran out of memory
    budget = json.loads((DATA / "h200_memory_budget_16gib_llama_fp32.json").read_text())
    row = next(x for x in budget["results"]
               if x["workload"] == "hf_models:llama" and x["mode"] == "fp32")
    assert row["largest_ok"] == 8
    assert int(r.max_batch.value) == 8 == r.memory.shape["B"]
    law = cert.memory.laws[0]  # the law's own largest batch would not run
    assert int(sizing.max_batch(law, {"seq": 1024}, FRACTION * H200, "run").value) > \
        row["largest_ok"]
    assert r.fits is True
    assert r.replay.breakdown is not None and r.replay.breakdown.B == 8


def test_a_batch_that_needs_more_than_the_budget_does_not_fit(cert):
    r = memory_figures.size(cert, "hf_models:llama", 1024, 9, "fp32", FRACTION, "run")
    assert r.fits is False and r.replay.fits_native is False


def test_expandable_segments_is_an_input(cert):
    nat = memory_figures.size(cert, "hf_models:llama", 1024, 8, "fp32", FRACTION, "run")
    exp = memory_figures.size(cert, "hf_models:llama", 1024, 8, "fp32", FRACTION, "run",
                              alloc_conf="expandable_segments:True")
    assert exp.replay.expandable and not nat.replay.expandable
    assert exp.replay.reserved.value == nat.replay.reserved_expandable.value
    assert exp.replay.reserved.value != nat.replay.reserved_native.value


@pytest.mark.slow
def test_size_cli_prints_the_replay_and_its_json(cert_path, monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    run = CliRunner().invoke(app, ["size", str(cert_path), "-w", "hf_models:llama", "--mode",
                                   "fp32", "--seq", "1024", "--memory-fraction",
                                   f"{FRACTION:.6f}", "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    rp = doc["replay"]
    assert rp["used"] and rp["alloc_conf"] == "" and rp["max_batch_native"]["value"] == 8
    assert rp["peak_reserved_native"]["tag"] == "FITTED"
    assert set(rp["breakdown"]) >= {"activations_bytes", "slack_bytes"}
    text = CliRunner().invoke(app, ["size", str(cert_path), "-w", "hf_models:llama", "--mode",
                                    "fp32", "--seq", "1024", "--batch", "8",
                                    "--alloc-conf", "expandable_segments:True"])
    assert text.exit_code == 0, text.output
    assert "allocator replay" in text.stdout and "where the memory goes" in text.stdout


@pytest.mark.slow
def test_replay_tables_tag_every_number(cert):
    from rich.console import Console

    r = memory_figures.size(cert, "hf_models:llama", 1024, 4, "fp32", FRACTION, "run")
    console = Console(record=True, width=200)
    for t in replay_tables(r):
        console.print(t)
    text = console.export_text()
    assert "activations saved for backward" in text and "GiB F" in text


@pytest.mark.slow
def test_html_report_draws_the_breakdown_as_a_stacked_bar(cert_path, tmp_path):
    pytest.importorskip("matplotlib")
    html = tmp_path / "r.html"
    run = CliRunner().invoke(app, ["report", str(cert_path), "--out", str(html),
                                   "--plots-dir", str(tmp_path / "plots")])
    assert run.exit_code == 0, run.output
    text = html.read_text()
    assert "Where the memory goes at the peak" in text and "<svg" in text
    assert "activations" in text and "replay reserved" in text
    assert any(p.name.endswith("memory-breakdown.png") for p in (tmp_path / "plots").iterdir())


def test_plans_largest_batch_reads_the_replay(cert):
    from afford import figures

    got = figures.max_batch(cert, "hf_models:llama", {"seq": 1024}, 16 * 2**30, "fp32")
    assert got.value == 8 and "memory answer (replay)" in got.source


@pytest.mark.slow
def test_expandable_segments_changing_the_fit_is_a_lever():
    from afford.figures import replay_figures as fr

    sec = MemorySection.model_validate_json(SECTION.read_text())
    law = refit_law(next(x for x in sec.laws if x.workload == "hf_models:llama"
                         and x.mode == "bf16"), H200)
    # measured under the 16 GiB cap: 16 ran with the native allocator; the replay gives
    # expandable segments a little more reserved at 16 (15 fits)
    ans = fr.answer(law, 1024, 16, 16 * 2**30, "", "run")
    assert ans.fits_native is True and ans.fits_expandable is False
    assert ans.lever is not None and "expandable_segments:True" in ans.lever
    assert int(ans.max_batch_native.value) == 16 and int(ans.max_batch_expandable.value) == 15
