"""Reports: the Markdown golden, the untagged-number refusal, generic sections, empty slots,
the self-contained HTML with its plots, exports, and the CLI."""

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from afford.cli import app
from afford.core.provenance import NotExecutable, Tagged, measured
from afford.report import html, markdown, plots
from afford.report.build import Inputs, build_report
from afford.report.generic import generic_section
from afford.report.model import Report, Section, Table
from afford.schema.cert import Certificate
from tests.goldens import check_text
from tests.paths import DATA, GOLDEN, data_file
from tests.synthetic import make_cert, report_inputs

REPORT_GOLDEN = GOLDEN / "report.md"
runner = CliRunner()
needs_matplotlib = pytest.mark.skipif(not plots.available(),
                                      reason="matplotlib is not installed (afford[plots])")


def test_markdown_golden():
    """Regenerate after an intended change with AFFORD_UPDATE_GOLDEN=1."""
    text = markdown.render(build_report(report_inputs()))
    check_text(REPORT_GOLDEN.name, text)


def test_markdown_order_is_the_lab_notebook():
    text = markdown.render(build_report(report_inputs()))
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == ["## Data", "## Device: Synthetic GPU 80GB",
                     "## Device: Tesla T4 (no certificate yet)",
                     "## Device: Tesla P100-PCIE-16GB (no certificate yet)",
                     "## Cost model: plan-kaggle.json", "## History"]
    subs = re.findall(r"^### (.+)$", text, re.M)
    assert subs[:10] == ["Environment", "Protocol", "Throughput laws", "Step-time model",
                         "Sweep points", "Memory", "Residency", "Probes", "Determinism",
                         "Gates"]


@pytest.mark.parametrize("bad", [0.5, 3, float("nan")])
def test_the_renderers_refuse_an_untagged_number(bad):
    report = Report(title="t", inputs=(), sections=(
        Section("s", tables=(Table(columns=("a", "b"), rows=(("label", bad),)),)),))
    with pytest.raises(TypeError, match="untagged number"):
        markdown.render(report)
    with pytest.raises(TypeError, match="untagged number"):
        html.render(report)


def test_tagged_text_none_and_not_executable_cells_render():
    report = Report(title="t", inputs=(), sections=(Section("s", tables=(Table(
        columns=("a", "b", "c", "d"),
        rows=((measured(0.0123, "s", "run"), "text", None,
               NotExecutable(what="nvml", reason="no NVML here")),)),)),))
    md = markdown.render(report)
    assert "| 12.30 ms M | text | -   | NOT EXECUTABLE: no NVML here |" in md
    page = html.render(report)
    assert 'class="tag tag-M" title="MEASURED: run"' in page
    assert "NOT EXECUTABLE</span>: no NVML here" in page


class FakeRow(BaseModel):
    name: str
    delta: Tagged
    tol: float


class FakeGates(BaseModel):
    verdict: str
    rows: list[FakeRow]
    raw_samples: list[float]
    nvml: NotExecutable


def fake_gates():
    row = FakeRow(name="init loss", delta=measured(0.01, "ratio", "gate run"), tol=0.05)
    return FakeGates(verdict="PASS", rows=[row], raw_samples=[1.0, 2.0],
                     nvml=NotExecutable(what="nvml", reason="no NVML"))


def test_generic_section_shows_tagged_figures_and_names_the_bare_ones():
    s = generic_section("Gates", fake_gates())
    rows = dict(s.tables[0].rows)
    assert rows["verdict"] == "PASS" and rows["nvml"].reason == "no NVML"
    assert s.tables[1].columns == ("name", "delta") and s.tables[1].rows[0][0] == "init loss"
    assert s.notes == ("Not shown, because they carry no provenance tag: rows[0].tol, "
                       "raw_samples[2 values].",)


def test_a_later_stage_section_appears_when_present():
    class LaterCert(Certificate):
        later_stage: FakeGates | None = None

    cert = LaterCert(**dict(make_cert()), later_stage=fake_gates())
    text = markdown.render(build_report(Inputs(certs=(("c.json", cert),))))
    gates = text[text.index("### Later stage"):]
    assert "| verdict | PASS" in gates and "1.00% M" in gates
    assert "Not run" not in gates.split("###")[1]


def test_empty_slot_shows_no_other_device_number():
    report = build_report(Inputs(certs=(("c.json", make_cert()),), expect=("Tesla T4",)))
    slot = next(s for s in report.sections if "Tesla T4" in s.title)
    assert slot.command == "afford certify --out afford-cert-tesla-t4.json"
    cells = [c for t in slot.tables for row in t.rows for c in row[1:]]
    assert cells and all(c == "" for c in cells)
    # a device that has its certificate gets no slot
    again = build_report(Inputs(certs=(("c.json", make_cert()),), expect=("synthetic gpu",)))
    assert not any("no certificate" in s.title for s in again.sections)


def test_unpinned_data_marks_plan_figures_provisional():
    report = build_report(report_inputs())
    plan = next(s for s in report.sections if s.title.startswith("Cost model"))
    tagged = [c for t in plan.tables for row in t.rows for c in row if isinstance(c, Tagged)]
    assert tagged and all(c.provisional for c in tagged)
    pinned = Inputs(plans=(("p.json", {"run": {"data_sources": ["enwik8"]},
                                       "x": {"value": 1, "unit": "", "tag": "MODULE",
                                             "source": "f"}}),),
                    manifest=report_inputs().manifest)
    plan = next(s for s in build_report(pinned).sections if s.title.startswith("Cost"))
    assert not plan.tables[0].rows[-1][1].provisional


def test_history_rows_are_struck_with_their_reason():
    text = markdown.render(build_report(report_inputs()))
    assert "~~811.1 us M~~ (withdrawn: re-measured under the --full protocol; superseded " \
           "by r" in text
    assert "Another box" not in text and "left out (1)" in text


def self_contained(page: str) -> None:
    assert not re.search(r"<(script|link|img|iframe)\b", page, re.I)
    assert not re.search(r"""\b(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "@import" not in page and not re.search(r"url\((?!#)", page)  # only url(#id)


@needs_matplotlib
def test_html_is_self_contained_with_inline_plots():
    report = build_report(report_inputs())
    page = html.render(report, draw=plots.svg)
    self_contained(page)
    kinds = re.findall(r'<figure id="plot-[^"]+" data-kind="(\w+)"><svg', page)
    assert sorted(kinds) == ["ladder", "memory", "memory", "residency", "throughput",
                             "throughput"]
    assert page.count("<table") == len([t for s in _all(report.sections) for t in s.tables])
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "inline SVGs must not share element ids"


def _all(sections):
    for s in sections:
        yield s
        yield from _all(s.subsections)


def test_html_without_matplotlib_still_renders_with_a_note(monkeypatch):
    monkeypatch.setattr(plots, "available", lambda: False)
    page = html.render(build_report(report_inputs()), draw=None,
                       plots_note=plots.MISSING_NOTE)
    self_contained(page)
    assert "<svg" not in page and "matplotlib is not installed" in page
    assert page.count("<figure") == 6


@needs_matplotlib
def test_plot_export_is_reproducible(tmp_path):
    report = build_report(report_inputs())
    written = plots.export(report.plots, tmp_path / "p")
    assert len(written) == 2 * len(report.plots) == 12
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written if p.suffix == ".png")
    one = report.plots[0]
    plots._save.cache_clear()
    assert plots.svg(one) == (tmp_path / "p" / f"{one.id}.svg").read_text()  # drawn anew
    from afford.core.errors import InputError

    with pytest.raises(InputError, match="already exists"):
        plots.export(report.plots, tmp_path / "p")


def _section(report: Report, title: str) -> Section:
    device = next(s for s in report.sections if s.title.startswith("Device: "))
    return next(s for s in device.subsections if s.title == title)


def test_memory_section_shows_the_laws_and_every_held_out_shape():
    """On the committed H200 certificate: one row a law, one row a held-out shape, with
    measured (M), predicted (F, starred beyond the sweep) and the error (C)."""
    from afford.schema.cert import load_certificate

    path = data_file("h200_default_d89f7a2.json")
    cert = load_certificate(path)
    laws, held = _section(build_report(Inputs(certs=((path.name, cert),))), "Memory").tables
    assert [r[:2] for r in laws.rows] == [(law.workload, law.mode) for law in cert.memory.laws]
    assert "law of peak reserved" in laws.columns
    tiny = {r[1]: r[-1] for r in laws.rows if r[0] == "tinylm"}
    assert tiny == {"fp32": "yes", "bf16": "yes"}
    assert len(held.rows) == sum(len(law.heldout) for law in cert.memory.laws)
    row = next(r for r in held.rows if r[:3] == ("tinylm", "bf16", "seq"))
    cols = dict(zip(held.columns, row))
    h = next(h for h in cert.memory.laws[1].heldout if h.role == "heldout-seq")
    assert cols["measured"].value == h.measured_bytes and cols["measured"].tag.value == "MEASURED"
    assert cols["afford"].value == h.predicted_bytes and cols["afford"].extrapolated
    assert cols["error reserved"].value == h.reserved_error


# ---------------------------------------------------------------- CLI


def run(*args):
    return runner.invoke(app, ["report", *args])


@pytest.fixture
def cert_file(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(make_cert().to_json())
    return p


def test_cli_writes_markdown_and_html(cert_file, tmp_path):
    md = tmp_path / "r.md"
    r = run(str(cert_file), "-o", str(md), "--expect", "Tesla T4")
    assert r.exit_code == 0, r.output
    assert "## Device: Tesla T4 (no certificate yet)" in md.read_text()
    page = tmp_path / "r.html"
    assert run(str(cert_file), "-o", str(page)).exit_code == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    r = run(str(cert_file), "-o", str(page))
    assert r.exit_code == 2 and "already exists" in r.output
    assert run(str(cert_file), "-o", str(page), "--force").exit_code == 0


@needs_matplotlib
def test_cli_markdown_links_exported_plots(cert_file, tmp_path):
    md = tmp_path / "r.md"
    r = run(str(cert_file), "-o", str(md), "--plots-dir", str(tmp_path / "plots"))
    assert r.exit_code == 0, r.output
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md.read_text())
    assert links and all((tmp_path / link).is_file() for link in links)


@pytest.mark.parametrize("args,match", [
    (["c.json"], "say where to write"),
    (["c.json", "-o", "r.pdf"], "Markdown (.md) or HTML"),
    (["-o", "r.md"], "nothing to report"),
    (["missing.json", "-o", "r.md"], "no such file"),
    (["c.json", "-o", "r.md", "--plan", "nope.json"], "no such file"),
    (["c.json", "-o", "r.md", "--history", "nope.tsv"], "no such ledger"),
    (["c.json", "-o", "r.md", "--manifest", "nope.json"], "no such file"),
])
def test_cli_bad_input_exits_2(args, match, cert_file, monkeypatch):
    monkeypatch.chdir(cert_file.parent)
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


def test_a_real_plan_is_shown_as_the_terminals_tables():
    """issue 16: a plan document is rendered as the blocks ``afford plan`` prints (chunk,
    quota with its WRONG naive rows, cadence, failure ledger, ...), not as a key dump, and
    no figure is dropped for want of a tag."""
    import json

    from afford.planning import planner
    from afford.report import markdown
    from afford.report.plan_tables import plan_blocks
    from tests.plan_helpers import make_cert, make_platform, make_run

    plan = planner.plan(make_cert(), make_platform(), make_run())
    doc = json.loads(plan.to_json())
    report = build_report(Inputs(plans=(("plan.json", doc),)))
    sec = next(s for s in report.sections if s.title.startswith("Cost model"))
    titles = [s.title for s in sec.subsections]
    assert titles == [b.title for b in plan_blocks(plan)]
    assert "weekly quota (startup charged per chunk)" in titles
    assert not any("provenance tag" in n for n in sec.notes)
    quota = next(s for s in sec.subsections if s.title.startswith("weekly quota"))
    naive = quota.tables[0].rows[1]
    assert "WRONG" in naive[0] and naive[1].value == pytest.approx(108000 / 39600)
    text = markdown.render(report)
    assert "naive: quota / chunk (WRONG: charges nothing for startup)" in text
    assert "### failure ledger" in text and "quota.naive_chunks" not in text


def test_plan_quota_rows_show_gpu_hours():
    from afford.planning import planner
    from afford.report.cells import cell_text
    from afford.report.plan_tables import quota_block
    from tests.plan_helpers import make_cert, make_platform, make_run

    rows = quota_block(planner.plan(make_cert(), make_platform(), make_run())).table.rows
    assert cell_text(rows[0][1], "quota") == "30 GPU-h I"


def test_empty_slot_lists_every_field_of_the_certificate_schema():
    """issue 16: the slot shows the schema's fields (two levels), empty, beside its command."""
    from afford.schema.cert import Certificate

    slot = build_report(Inputs(expect=("Tesla T4",))).sections[1]
    fields = {row[0] for t in slot.tables[1:] for row in t.rows}
    assert {"environment.device_name", "environment.torch_version", "protocol.children",
            "memory.budget_fraction", "probes.gemm", "workloads.name"} <= fields
    sections = [n for n, f in Certificate.model_fields.items() if n != "schema_id"]
    scalars = {row[0] for t in slot.tables[1:] if t.caption == "certificate" for row in t.rows}
    assert {t.caption for t in slot.tables[1:]} | scalars >= set(sections) - {"warnings"}
    assert {"status", "failures"} <= scalars
    assert all(row[1] == "" for t in slot.tables[1:] for row in t.rows)
    assert slot.command.startswith("afford certify --out")


def test_report_and_plan_mark_the_same_figures_provisional(tmp_path):
    """Issue 30, item 4: `afford plan` marks only what depends on the unpinned data (the
    target); `afford report --plan` marked everything, the session cap and the steps-per-hour
    table included. One rule now (afford.planning.planner.on_unpinned), in both."""
    from afford.planning import planner
    from tests.plan_helpers import make_cert as plan_cert
    from tests.plan_helpers import make_platform, make_run

    def marks(sections):
        out = {}
        for sec in sections:
            for sub in (sec, *sec.subsections):
                for t in sub.tables:
                    for row in t.rows:
                        for c in row:
                            if isinstance(c, Tagged):
                                out.setdefault(sub.title, set()).add(c.provisional)
        return out

    run = make_run(data_sources=["enwik8"])
    unpinned = planner.plan(plan_cert(), make_platform(), run)           # nothing pinned
    pinned = planner.plan(plan_cert(), make_platform(), run, pins={"enwik8": True})
    assert unpinned.target.target_steps.provisional and not pinned.target.weeks.provisional
    assert not unpinned.chunk.chunk_seconds.provisional
    assert not any(r.steps_per_hour.provisional for r in unpinned.rows if r.steps_per_hour)
    from afford.schema import manifest as mf

    none_pinned = ("m.json", mf.Manifest())  # the report's manifest pins nothing
    seen = {}
    for name, plan in (("unpinned", unpinned), ("pinned then", pinned)):
        doc = json.loads(plan.model_dump_json(by_alias=True))
        rep = build_report(Inputs(plans=(("p.json", doc),), manifest=none_pinned))
        (sec,) = [s for s in rep.sections if s.title.startswith("Cost model")]
        seen[name] = marks([sec])
    for got in seen.values():
        target = next(v for k, v in got.items() if k.startswith("to the target"))
        assert target == {True}
        for title, flags in got.items():
            if not title.startswith("to the target"):
                assert flags == {False}, title  # chunk, cap, steps per hour, quota, cadence
    assert seen["unpinned"] == seen["pinned then"]


# ---------------------------------------------------------------- issue 32, item 3

CPU_TINY = DATA / "cpu_tinylm_tiny.json"


def _report_of(*paths: Path) -> Report:
    from afford.schema.cert import load_certificate

    return build_report(Inputs(certs=tuple((p.name, load_certificate(p)) for p in paths)))


def test_every_stage_of_real_certificates_is_a_designed_table_never_a_dump():
    report = _report_of(data_file("h200_default_d89f7a2.json"),
                        data_file("h200_sizes_levers_63bd66d.json"),
                        data_file("h200_distributed_ws1_63bd66d.json"), CPU_TINY)
    text = markdown.render(report)
    assert "Not shown" not in text and "no provenance tag" not in text
    for dump in ("gemm.fp32.dtype", "ladder.batch_key", "readings.init_loss", "load_average",
                 "protocol.gemm_n"):
        assert dump not in text, dump
    probes = _section(report, "Probes")
    assert [t.columns[0] for t in probes.tables] == ["figure", "workload", "workload",
                                                     "workload", "process", "setting"]
    assert "MFU ceiling" in probes.tables[1].columns
    gates = _section(report, "Gates")
    assert gates.tables[1].columns[:3] == ("gate", "row", "delta")
    for table in (t for s in _all(report.sections) for t in s.tables):
        for row in table.rows:  # every shown number tagged: no bare number reaches a cell
            assert not any(isinstance(c, (int, float)) for c in row), (table.columns, row)


def test_the_host_load_stands_beside_a_noisy_verdict():
    from afford.schema.cert import load_certificate

    cert = load_certificate(CPU_TINY)
    assert cert.time_verdict.label == "NOISY"
    report = _report_of(CPU_TINY)
    step = _section(report, "Step-time model")
    verdict = next(i for i, n in enumerate(step.notes) if n.startswith("Time verdict: NOISY"))
    assert step.notes[verdict + 1].startswith("Host load: host load average 7.7 before, "
                                              "6.0 after measuring, on 2 core(s): other work")
    load = step.tables[0]
    assert load.columns[:5] == ("when", "load, 1 min", "5 min", "15 min", "cores")
    before = dict(zip(load.columns, load.rows[0]))
    assert before["load, 1 min"].value == pytest.approx(7.708, abs=1e-3)
    assert before["load, 1 min"].tag.value == "MEASURED" and before["busy"] == "yes"
    assert before["1 min load / cores"].value == pytest.approx(7.708 / 2, abs=1e-3)
    assert _section(report, "Host load").tables[0] == load


def test_law_coefficients_are_shown_as_coefficients_with_their_units():
    """t = F + c s^b showed c as '0.0 us F': a time unit on a coefficient, rounded to 0."""
    laws = _section(build_report(report_inputs()), "Throughput laws").tables[0]
    rows = {(r[0], r[1]): dict(zip(laws.columns, r)) for r in laws.rows}
    c = rows[("tinylm (bf16)", "t = F + c seq^b")]["exp(a) or c"]
    assert (c.value, c.unit) == (pytest.approx(2e-6), "s/seq^1.2")
    text = markdown.render(build_report(report_inputs()))
    assert "| 2e-06 s/seq^1.2 F " in text and "0.0 us" not in text and " 2.0 us F" not in text


def test_the_memory_plot_draws_the_figures_of_the_memory_tables():
    """On a CPU the plot drew the law (baseline + RSS increment of the memory child) 12-20 %
    below every sweep point (the sweep children's whole RSS): other quantities, another
    process. Now each plotted point is a memory-stage shape, measured and the law there."""
    from afford.report import plotdata
    from afford.schema.cert import load_certificate

    for path in (CPU_TINY, data_file("h200_default_d89f7a2.json")):
        cert = load_certificate(path)
        plots_ = plotdata.certificate_plots(cert)["memory"]
        for law in cert.memory.laws:
            plot = next(p for p in plots_ if p.id.endswith(f"{law.workload}-{law.mode}-memory"))
            scale = 2**30 if plot.y_label == "GiB" else 2**20
            q = law.allocated.quantity
            held = next(s for s in plot.series if s.label == f"{q}, measured (held out)")
            drawn = next(s for s in plot.series if s.label == f"{q}, memory law at each shape")
            at: dict[float, list[float]] = {}
            for x, y in zip(drawn.x, drawn.y):  # shapes of equal tokens share an x
                at.setdefault(x, []).append(y * scale)
            for h, x, y in zip(sorted(law.heldout, key=lambda h: h.dims["B"] * h.dims["s"]),
                               held.x, held.y):
                assert x == h.dims["B"] * h.dims["s"]
                assert y * scale == pytest.approx(h.measured_bytes)
                assert h.predicted_bytes == pytest.approx(min(
                    at[x], key=lambda v: abs(v - h.predicted_bytes)))  # the table's afford
            fitted = next(s for s in plot.series if s.label == f"{q}, measured (fitted)")
            worst = max(abs(r) for r in law.allocated.residuals)
            for x, y in zip(fitted.x, fitted.y):  # within the law's own residuals
                assert min(abs(v / (y * scale) - 1) for v in at[x]) <= worst + 1e-9


def test_the_protocol_table_states_the_agreement_rule_where_a_certify_applied_it():
    """A certificate whose later children skipped settled points says how in its protocol
    table (the 'order' row alone would claim every child timed every point)."""
    from afford.report.certificate import protocol

    cert = make_cert()
    assert "agreement" not in [r[0] for r in protocol(cert).rows]
    rule = "children after the second time a point only where the first two did not settle it"
    agreed = cert.model_copy(update={"protocol": cert.protocol.model_copy(
        update={"agreement": rule})})
    assert ("agreement", rule) in protocol(agreed).rows
