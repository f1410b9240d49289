"""Issue 32 item 5, issue 33 item 3: impossible is refused. An MFU or another share above
100 %, a negative time or size, inf or NaN is shown as a failed measurement with its cause and
the input it came from, never as a figure, in the terminal, Markdown and HTML alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afford.cli import app, common
from afford.core.provenance import SHARE, impossible, measured, module
from afford.report import html, markdown
from afford.report.model import Report, Section, Table
from afford.report.terminal import fmt, fmt_list
from afford.schema.cert import load_certificate
from tests.paths import data_file

SIZES = data_file("h200_sizes_levers_63bd66d.json")
H200 = data_file("h200_default_d89f7a2.json")
runner = CliRunner()


@pytest.mark.parametrize("value,unit,why", [
    (2.85, SHARE, "a share of 285%"),
    (-0.1, SHARE, "a share of -10%"),
    (math.inf, "s", "not a finite number (inf)"),
    (math.nan, "ratio", "not a finite number (nan)"),
    (-1.5, "s", "a negative time"),
    (-1, "B", "a negative size"),
    (-3, "steps", "a negative count"),
    (1e308, "ratio", "beyond any measurement"),  # issue 33: a held-out error shown as inf%
])
def test_what_no_measurement_can_be(value, unit, why):
    assert why in impossible(module(value, unit, "x"))


@pytest.mark.parametrize("value,unit", [(1.0, SHARE), (0.0, SHARE), (2.85, "ratio"),
                                        (-0.4, "ratio"), (0.0, "s"), (12, "B"), ("1.2x", ""),
                                        (True, ""), (None, "s")])
def test_what_can_be(value, unit):
    assert impossible(module(value, unit, "x")) is None


def test_the_renderer_refuses_an_mfu_above_100_percent_naming_its_inputs():
    mfu = module(2.85, SHARE, "1.2e9 FLOP/step / step seconds / bf16 GEMM rate (MEASURED: "
                 "GEMM bf16 1024^3, AMD EPYC, certify 2026-12-04 18:00 UTC)")
    text = fmt(mfu)
    assert text.startswith("FAILED: a share of 285%")
    assert "bf16 GEMM rate (MEASURED: GEMM bf16 1024^3" in text
    assert "285.00%" not in text and " C" not in text.split(";")[0]
    assert fmt(module(0.285, SHARE, "x")) == "28.50% C"
    assert fmt(module(2.85, "ratio", "an error")) == "285.00% C"  # an error may pass 100 %
    assert fmt_list([measured(0.1, "s", "a"), measured(-0.1, "s", "b")]).count("FAILED") == 1


def test_markdown_and_html_show_the_failure_not_the_figure():
    bad = module(float("inf"), "s", "chunk / 0 s (weekly_quota of platform p)")
    report = Report(title="t", inputs=("c.json",), sections=(Section(
        "S", tables=(Table(columns=("figure", "value"), rows=(("per kill", bad),)),)),))
    md, page = markdown.render(report), html.render(report)
    for text in (md, page):
        assert "FAILED" in text and "weekly_quota of platform p" in text
        assert "inf s" not in text and "inf C" not in text
    assert '<span class="notexec">FAILED</span>: not a finite number (inf)' in page


def test_a_plan_on_a_quota_of_1e_320_s_says_which_input_failed(tmp_path, monkeypatch):
    """weekly_quota = "1e-320s" once printed 'per kill, inf of the weekly quota' at exit 0."""
    from afford.schema.cert import save_certificate
    from tests.plan_helpers import make_cert

    monkeypatch.chdir(tmp_path)
    save_certificate(make_cert(), tmp_path / "c.json")
    (tmp_path / "p.toml").write_text(
        'name = "tiny"\nsession_cap = { value = "12h", cite = "d" }\n'
        'weekly_quota = { value = "1e-320s", cite = "the quota" }\n'
        'disk = { value = "20GB", cite = "d" }\n')
    (tmp_path / "r.toml").write_text('workload = "tinylm"\nmode = "fp32"\nvalue = 256\n'
                                     'checkpoints_kept = 1\ntarget_steps = 1000\n')
    monkeypatch.setattr(common.out, "width", 200)
    r = runner.invoke(app, ["plan", "c.json", "-p", "p.toml", "-r", "r.toml"])
    # refused where it is read (exit 2), naming the file, the field and the value, before
    # any share of it could leave the floats
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "p.toml" in text and "weekly_quota" in text and "'1e-320s'" in text
    assert " inf " not in f" {text} " and "Traceback" not in text


def _slow_gemm(cert_path: Path, rate: float):
    """The certificate with its bf16 GEMM ceiling measured at ``rate`` (a box under load)."""
    cert = load_certificate(cert_path)
    g = cert.probes.gemm["bf16"]
    probes = cert.probes.model_copy(update={"gemm": {**cert.probes.gemm, "bf16": g.model_copy(
        update={"flops_per_second": rate})}})
    return cert.model_copy(update={"probes": probes})


def test_levers_refuse_an_mfu_above_100_percent(tmp_path, monkeypatch):
    """Issue 32's case: `afford levers` printed an MFU of 285 % without a word."""
    import afford.certification.stage_levers as jobs
    import afford.cli.levers as cli_levers

    cert = _slow_gemm(SIZES, 1e12)  # 1 TFLOP/s: every measured step beats it
    path = tmp_path / "c.json"
    path.write_text(cert.to_json())
    monkeypatch.setattr(jobs, "lever_job", lambda *a, **k: None)
    monkeypatch.setattr(cli_levers, "_measure", lambda *a, **k: cert.levers)
    monkeypatch.setattr(common.out, "width", 400)
    r = runner.invoke(app, ["levers", str(path)])
    assert r.exit_code == 0, r.output
    assert "FAILED: a share of" in r.stdout and "GEMM rate" in r.stdout
    doc = json.loads(runner.invoke(app, ["levers", str(path), "--json"]).stdout)
    mfus = [x["mfu_b"]["value"] for x in doc["rows"] if x.get("mfu_b")]
    assert mfus and max(mfus) > 1  # the JSON keeps the number; the renderer refuses it
    assert not any(f"{100 * v:.2f}%" in r.stdout for v in mfus if v > 1)


def test_the_certify_summary_refuses_an_mfu_above_100_percent(tmp_path, monkeypatch):
    import afford.cli.certify as cli_certify

    cert = _slow_gemm(H200, 1e12)
    monkeypatch.setattr(cli_certify, "_measure", lambda *a, **k: cert)
    monkeypatch.setattr(common.out, "width", 400)
    r = runner.invoke(app, ["certify", "--out", str(tmp_path / "c.json")])
    text = " ".join(r.stdout.split())
    assert text.count("FAILED: a share of") == 3  # the MFU against the ceiling, per workload
    assert "measured GEMM bf16 1e+12 FLOP/s (GEMM bf16" in text  # the input that caused it
    assert "unbounded (the worst delta is 0)" in text  # a perfect gate's headroom, not inf
    assert "inf" not in text.split()


def test_a_memory_law_with_a_negative_constant_reads_as_a_term():
    from afford.schema.memory_section import MemoryFit

    fit = MemoryFit(quantity="rss_increment", form="states_plus_fixed", c_res=92.0, c_op=0.0,
                    fixed_bytes=-1.18 * 2**20, s2_term=False, r2=0.9997, residuals=[0.0],
                    n_points=7)
    assert fit.describe().startswith("states - 1.18 MiB + L*(92.00 B*s*d)")
    tiny = fit.model_copy(update={"fixed_bytes": -40.0})
    assert "+ -" not in tiny.describe() and "states - 40 B" in tiny.describe()
