"""The answer first (issue 40, items 4 and 7): ``predict``, ``plan`` and ``preflight`` print
their answer, then at most three lines of what matters for it, then where each figure came
from; ``-v`` prints every warning. And the small things a newcomer met: a unit repeated
under a header that names it, "1 sessions", an empty parameters row, a negative fixed
memory shown as "- 1.18 MiB"."""

from __future__ import annotations

from rich.console import Console
from typer.testing import CliRunner

from afford.cli import app
from afford.core.provenance import module
from afford.planning import planner
from afford.planning.prediction import predict
from afford.report.plan_tables import render_plan, render_verdict, run_block
from afford.report.predict_tables import render_predict
from tests.paths import data_file
from tests.plan_helpers import make_platform, make_run
from tests.time_certs import H200_DEFAULT, h200, make_time_cert

runner = CliRunner()


def text(renderable, width=100) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def _matters(out: str, before: str) -> list[str]:
    """The ``  - `` lines between the answer and ``before``."""
    return [ln for ln in out.split(before)[0].splitlines() if ln.startswith("  - ")]


def test_predict_prints_the_answer_then_three_lines_then_the_sources():
    p = predict(h200(), batch=16, seq=4096)  # NOISY, with many certificate warnings
    assert p.time_verdict == "NOISY" and len(p.certificate_warnings) > 3
    out = text(render_predict(p))
    assert out.index("predicted at batch 16, seq 4096") < out.index("where each figure")
    lines = _matters(out, "where each figure")
    assert len(lines) <= 3
    assert lines[0].startswith("  - the certificate's step times are NOISY: scan (bf16)")
    assert "-v prints them" in lines[-1]
    assert "certificate warnings" not in out
    full = text(render_predict(p, verbose=True))
    assert "certificate warnings" in full and all(w[:40] in " ".join(full.split())
                                                  for w in p.certificate_warnings)


def test_the_cli_takes_v_and_keeps_everything_in_the_json():
    short = runner.invoke(app, ["predict", str(H200_DEFAULT), "--batch", "16", "--seq", "4096"])
    assert short.exit_code == 0 and "certificate warnings" not in short.stdout
    long = runner.invoke(app, ["predict", str(H200_DEFAULT), "--batch", "16", "--seq", "4096",
                               "-v"])
    assert long.exit_code == 0 and "certificate warnings" in long.stdout


def test_plan_puts_the_runs_figures_first_and_its_warnings_under_them():
    cert = make_time_cert(workload_verdict="NOISY", cert_verdict="NOISY",
                          reasons=["8 x 512: children disagree by 9% > 5%"],
                          warnings=[f"seq={v}: children disagree by 9% (> 5%)"
                                    for v in (256, 512)])
    out = text(render_plan(planner.plan(cert, make_platform(), make_run())), 160)
    assert out.splitlines()[1].startswith("the run's figures")
    lines = _matters(out, "chunk and margin")
    assert lines[0] == "  - the certificate's step times are NOISY: tinylm (fp32): 8 x 512: " \
        "children disagree by 9% > 5%"
    assert lines[-1].startswith("  - 2 more warning(s) and note(s): -v prints them")
    assert out.index("chunk and margin") < out.index("chunk table")


def test_preflight_shows_the_warnings_that_matter_and_counts_the_rest():
    v = planner.preflight(make_time_cert(), make_platform(), make_run(max_weeks=4))
    out = text(render_verdict(v), 160)
    assert out.startswith("GO")
    shown = _matters(out, "the run's figures")
    assert len(shown) <= 3 and len(v.warnings) > 3
    assert shown[-1] == f"  - {len(v.warnings) - len(shown) + 1} more warning(s) and note(s): " \
        "-v prints them, --json holds them"
    assert all(w[:30] in " ".join(text(render_verdict(v, True), 160).split())
               for w in v.warnings)


def test_a_unit_is_not_repeated_under_a_header_that_names_it():
    out = text(render_predict(predict(h200(), batch=16, seq=4096)), 300)
    assert "steps/h" in out and " steps/h C" not in out and " tokens/s C" not in out


def test_a_count_of_one_is_singular():
    assert str(module(1, "sessions", "x")) == "1 session [MODULE]"
    assert str(module(2, "sessions", "x")) == "2 sessions [MODULE]"
    assert str(module(1.0, "weeks", "x")) == "1 week [MODULE]"


def test_a_run_without_a_parameter_count_has_no_empty_parameters_row():
    p = planner.plan(make_time_cert(), make_platform(), make_run())
    row = next(r for r in p.rows if r.is_run)
    labels = [r[0] for r in run_block(p).table.rows]
    assert ("parameters" in labels) is (row.params is not None)
    bare = p.model_copy(update={"rows": tuple(r.model_copy(update={"params": None})
                                              if r.is_run else r for r in p.rows)})
    assert "parameters" not in [r[0] for r in run_block(bare).table.rows]


def test_a_negative_fixed_memory_reads_as_a_signed_figure():
    from afford.report.memory_tables import _signed

    assert _signed(-1.18 * 2**20) == "-1.18 MiB"
    assert _signed(190.8 * 2**20) == "190.80 MiB"
    assert _signed(-0.2) == "0 B"  # never "-0 B"


def test_levers_says_not_resolved_where_the_children_straddle_1x(tmp_path, monkeypatch):
    """The H200 run's bf16 and fused AdamW on tinylm@q3 (children 0.91x..1.16x and
    0.90x..1.20x): neither a speedup nor a slowdown; compile (1.51x..1.73x) stands."""
    import json

    import afford.certification.stage_levers as jobs
    import afford.cli.common as common
    import afford.cli.levers as cli_levers
    from afford.schema.cert import load_certificate

    cert = load_certificate(data_file("h200_sizes_levers_63bd66d.json"))
    path = tmp_path / "c.json"
    path.write_text(cert.to_json())
    monkeypatch.setattr(jobs, "lever_job", lambda *a, **k: None)
    monkeypatch.setattr(cli_levers, "_measure", lambda *a, **k: cert.levers)
    monkeypatch.setattr(common.out, "width", 400)
    r = runner.invoke(app, ["levers", str(path)])
    assert r.exit_code == 0, r.output
    said = [ln for ln in r.stdout.splitlines() if "not resolved here (load " in ln]
    assert len(said) == 3 and said[0].startswith("tinylm@q3: ")
    row = next(ln for ln in r.stdout.splitlines() if "torch.compile" in ln and "q3" in ln)
    assert "1.564 × M" in row  # a resolved lever keeps its speedup
    doc = json.loads(runner.invoke(app, ["levers", str(path), "--json"]).stdout)
    unresolved = [x for x in doc["rows"] if x["unresolved"]]
    assert {x["lever"] for x in unresolved} == {"bf16", "fused"}
    assert all(x["speedup"]["value"] for x in unresolved)  # the median kept for the JSON
