"""Gates as pure functions: readings in, rows, gates and the verdict out (values by hand)."""

import json
import math

import pytest
from pydantic import ValidationError

from afford.core.errors import InputError
from afford.core.provenance import NotExecutable, Tagged
from afford.figures.gates_figures import determinism_lines, gate_lines, noise_lines
from afford.fit.gates import (
    TOLERANCE_REASONS,
    GateNotExecutable,
    GateResult,
    GateSettings,
    determinism_gate,
    evaluate,
    headroom,
    init_loss_gate,
    matched_params_gate,
    noise_floor_gate,
    parity_gate,
    parse_line,
    parse_tolerances,
    ratio,
    row,
    user_gate,
    verdict,
    worst_row,
)
from afford.measure.determinism import missing_kernel_op
from afford.schema.determinism_section import (
    AuditRun,
    Comparison,
    DeterminismSection,
    Gate,
    GateReadings,
    GateRow,
    GatesSection,
    InitLossReading,
    NoiseFloorReading,
    ParamCountReading,
    ParityReading,
    StepTiming,
)

LN256 = math.log(256)
S = GateSettings()


def test_row_passes_at_the_tolerance_and_nan_fails():
    assert row("a", 0.02, 0.02).status == "PASS"
    assert row("a", 0.0200001, 0.02).status == "FAIL"
    assert row("a", math.nan, 1.0).status == "FAIL"


def test_row_status_cannot_lie():
    with pytest.raises(ValidationError, match="gives FAIL"):
        GateRow(label="x", delta=0.5, tolerance=0.1, status="PASS")
    with pytest.raises(ValidationError, match="no delta"):
        GateRow(label="x", tolerance=0.1, status="NOT EXECUTABLE")


def test_gate_status_and_verdict_cannot_lie():
    g = init_loss_gate([_init(LN256 * 0.9)], S)
    with pytest.raises(ValidationError, match="rows give FAIL"):
        Gate.model_validate({**g.model_dump(), "status": "PASS"})
    with pytest.raises(ValidationError, match="gates give HALT"):
        GatesSection.model_validate({**_gates_section([g]).model_dump(), "verdict": "GO"})


def test_ratio_and_headroom_by_hand():
    r = row("a", 0.005, 0.02)
    assert ratio(r) == pytest.approx(0.25) and headroom(r) == pytest.approx(4.0)
    assert headroom(row("a", 0.0, 0.02)) == math.inf
    zero_tol = row("a", 0.0, 0.0)
    assert ratio(zero_tol) == 0.0 and zero_tol.status == "PASS"
    assert ratio(row("a", 1e-9, 0.0)) == math.inf


def _init(loss, value=32, seed=0, vocab=256, name="lm"):
    return InitLossReading(workload=name, value=value, seed=seed, mode="fp32", vocab=vocab,
                           loss=loss)


def test_init_loss_gate_catches_a_loss_below_chance():
    readings = [_init(LN256 * 1.001, seed=0), _init(LN256 * 0.99, seed=1),
                _init(LN256 * 0.97, value=64, seed=2)]
    g = init_loss_gate(readings, S)
    assert [r.status for r in g.rows] == ["PASS", "PASS", "FAIL"]
    assert g.rows[0].delta == 0.0  # above chance: no shortfall
    assert g.rows[1].delta == pytest.approx(0.01)
    assert g.rows[2].delta == pytest.approx(0.03)
    assert g.status == "FAIL" and verdict([g]) == "HALT"
    assert worst_row(g).label == "lm 64 seed 2"
    assert any("worst margin -0.0100" in n and "lm 64 seed 2" in n for n in g.notes)


def test_init_loss_gate_skips_workloads_without_a_vocabulary():
    readings = [InitLossReading(workload="softmax", value=64, seed=0, mode="fp32"),
                _init(LN256)]
    g = init_loss_gate(readings, S)
    assert [r.label for r in g.rows] == ["lm 32 seed 0"] and g.status == "PASS"
    assert any("softmax" in n and "does not apply" in n for n in g.notes)
    only = evaluate(GateReadings(init_loss=readings[:1]), S)
    assert only == []  # no applicable reading: no init-loss gate


def test_init_loss_notes_a_loss_far_above_chance_without_failing():
    g = init_loss_gate([_init(LN256 * 1.5)], S)
    assert g.status == "PASS" and any("above chance" in n for n in g.notes)


def test_parity_gate_not_executable_without_cuda_does_not_halt():
    ne = NotExecutable(what="CPU/CUDA parity", reason="no CUDA device here")
    g = parity_gate([], S, ne)
    assert g.status == "NOT EXECUTABLE" and verdict([g]) == "GO"
    assert g.rows[0].not_executable.reason == "no CUDA device here"


def test_parity_gate_uses_the_dtype_tolerance():
    rd = [ParityReading(workload="w", value=8, mode="fp32", quantity="gradients",
                        max_abs_delta=2e-6, rel_delta=5e-5, worst_tensor="fc.weight"),
          ParityReading(workload="w", value=8, mode="bf16", quantity="loss",
                        max_abs_delta=0.1, rel_delta=0.06)]
    g = parity_gate(rd, S, None)
    assert [(r.tolerance, r.status) for r in g.rows] == [(1e-4, "PASS"), (5e-2, "FAIL")]
    assert "fc.weight" in g.rows[0].detail


def _noise(a, a2, b, bitwise=False):
    return NoiseFloorReading(workload="w", value=8, mode="fp32", steps=3, seed_a=0, seed_b=1,
                             losses_a=[2.0, 1.5, a], losses_a_again=[2.0, 1.5, a2],
                             losses_b=[2.1, 1.6, b], params_bitwise_equal=bitwise)


def test_noise_floor_gate_by_hand():
    g = noise_floor_gate([_noise(1.0, 1.0005, 1.01)], S)
    r = g.rows[0]
    assert r.delta == pytest.approx(0.0005) and r.tolerance == pytest.approx(0.001)
    assert r.status == "PASS" and headroom(r) == pytest.approx(2.0)
    assert "not bitwise" in r.detail
    bad = noise_floor_gate([_noise(1.0, 1.002, 1.01)], S)
    assert bad.status == "FAIL"
    same = noise_floor_gate([_noise(1.0, 1.0, 1.01, bitwise=True)], S)
    assert same.rows[0].delta == 0.0 and "bitwise equal" in same.rows[0].detail


def _cmp(q, equal=True, n=0, d=0.0, first=None):
    return Comparison(quantity=q, bitwise_equal=equal, repeats_differing=n, max_abs_delta=d,
                      first_differing=first)


def _run(det, comparisons=(), ne=None, op=None, median=None, name="w"):
    timing = StepTiming(step0_seconds=0.1, timed_seconds=[median] * 3,
                        timed_step_indices=[3, 4, 5], median_seconds=median,
                        clock="host") if median else None
    return AuditRun(workload=name, value=64, mode="fp32", deterministic=det, repeats=8,
                    comparisons=list(comparisons), not_executable=ne, op=op,
                    stage="forward" if ne else None, timing=timing)


def _section(runs):
    return DeterminismSection(device="cpu", device_name="box", torch_version="2.x", repeats=8,
                              seed=0, runs=runs)


def test_determinism_gate_fails_a_difference_under_the_flag():
    ok = [_cmp("forward output"), _cmp("loss")]
    diff = [_cmp("forward output"), _cmp("gradients", False, 3, 1.5e-7, "fc.weight")]
    ne = NotExecutable(what="x on", reason="RuntimeError: put_ does not have ...")
    sec = _section([_run(False, diff), _run(True, ok), _run(True, diff, name="v"),
                    _run(True, ne=ne, op="put_", name="u")])
    g = determinism_gate(sec)
    assert [r.status for r in g.rows] == ["PASS", "FAIL", "NOT EXECUTABLE"]
    assert g.rows[1].delta == pytest.approx(1.5e-7) and g.rows[1].tolerance == 0.0
    assert "gradients in 3/7 repeats (first: fc.weight)" in g.rows[1].detail
    assert any("flag off" in n and "gradients" in n for n in g.notes)


def test_determinism_lines_cost_is_on_over_off():
    sec = _section([_run(False, [_cmp("loss")], median=0.010),
                    _run(True, [_cmp("loss")], median=0.013)])
    lines = determinism_lines(sec)
    assert lines[0].cost is None and lines[1].cost.value == pytest.approx(1.3)
    assert lines[1].median_step.tag.value == "MEASURED" and lines[1].cost.tag.value == "MODULE"
    assert lines[1].cells["loss"].bitwise


def test_matched_params_gate_by_hand():
    counts = [ParamCountReading(workload="a", value=8, params=100),
              ParamCountReading(workload="b", value=8, params=99),
              ParamCountReading(workload="c", value=8, params=98),
              ParamCountReading(workload="d", value=8, error="boom")]
    g = matched_params_gate([("a", "b"), ("a", "c"), ("a", "d")], counts, S)
    assert [r.status for r in g.rows] == ["PASS", "FAIL", "NOT EXECUTABLE"]
    assert g.rows[0].delta == pytest.approx(0.01) and g.rows[1].delta == pytest.approx(0.02)


def test_user_gate_outcomes():
    ok = user_gate("mine", "ep", GateResult(name="mine", delta=0.1, tolerance=0.5))
    assert ok.status == "PASS" and ok.rows[0].delta == 0.1 and ok.source == "ep"
    as_dict = user_gate("d", "ep", {"name": "d", "delta": 2, "tolerance": 1, "unit": "s"})
    assert as_dict.status == "FAIL" and as_dict.unit == "s"
    rows = user_gate("r", "ep", {"name": "r", "delta": 0, "tolerance": 1,
                                 "rows": [{"label": "x", "delta": 0.5},
                                          {"label": "y", "delta": 3, "tolerance": 5}]})
    assert [(r.label, r.tolerance, r.status) for r in rows.rows] == \
        [("r: x", 1.0, "PASS"), ("r: y", 5.0, "PASS")]
    ne = user_gate("n", "ep", GateNotExecutable("needs a dataset"))
    assert ne.status == "NOT EXECUTABLE" and verdict([ne]) == "GO"
    raised = user_gate("e", "ep", ValueError("broken"))
    assert raised.status == "FAIL" and "ValueError: broken" in raised.rows[0].detail
    junk = user_gate("j", "ep", {"name": "j", "delta": None, "tolerance": 1})
    assert junk.status == "FAIL" and "not a number" in junk.rows[0].detail
    neg = user_gate("k", "ep", {"delta": 0, "tolerance": -1})
    assert neg.status == "FAIL"


def test_parse_tolerances():
    s = parse_tolerances(["init-loss=0.05", "parity-fp32=1e-3"])
    assert s.init_loss == 0.05 and s.parity("fp32") == 1e-3 and s.parity("bf16") == 5e-2
    g = init_loss_gate([_init(LN256 * 0.96)], s)
    assert g.status == "PASS" and "--tol init-loss=0.05" in g.tolerance_source
    for bad in ["init-loss", "nope=1", "init-loss=x", "init-loss=-1", "init-loss=inf"]:
        with pytest.raises(InputError):
            parse_tolerances([bad])


@pytest.mark.parametrize("message,op", [
    ("put_ does not have a deterministic implementation, but you set "
     "'torch.use_deterministic_algorithms(True)'. You can turn off determinism ...", "put_"),
    ("index_add_cuda_ does not have a deterministic implementation, but you set ...",
     "index_add_cuda_"),
    ("Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)`"
     " or `at::Context::setDeterministicAlgorithms(true)`, but this operation is not "
     "deterministic because it uses CuBLAS and you have CUDA >= 10.2.", "CuBLAS"),
    ("CUDA out of memory", None),
])
def test_missing_kernel_op_is_parsed_from_the_message(message, op):
    assert missing_kernel_op(message) == op


def _gates_section(gates, readings=GateReadings()):
    return GatesSection(device="cpu", device_name="box", torch_version="2.x",
                        deterministic_algorithms=False, readings=readings, gates=gates,
                        verdict=verdict(gates))


def test_section_round_trips_nan_and_every_printed_number_is_tagged():
    readings = GateReadings(noise_floor=[_noise(1.0, 1.0005, 1.01)])
    gates = evaluate(readings, S) + [user_gate("e", "ep", RuntimeError("x"))]
    sec = _gates_section(gates, readings)
    back = GatesSection.model_validate(json.loads(sec.model_dump_json()))
    assert math.isnan(back.gates[1].rows[0].delta) and back.verdict == "HALT"
    for ln in gate_lines(back):
        for v in (ln.checked, ln.delta, ln.tolerance, ln.delta_over_tol, ln.headroom):
            assert v is None or isinstance(v, Tagged)
    (nl,) = noise_lines(back)
    assert nl.same_seed.value == pytest.approx(0.0005) and not nl.bitwise


def test_gate_table_renders_worst_row_and_verdict():
    from rich.console import Console

    from afford.report.gates_tables import gate_table

    g = init_loss_gate([_init(LN256 * 0.995), _init(LN256 * 0.99, seed=1)], S)
    con = Console(width=200, record=True)
    con.print(gate_table(gate_lines(_gates_section([g])), "gates", "GO"))
    text = con.export_text()
    assert "lm 32 seed 1" in text and "0.01 C" in text and "0.02 A" in text
    assert "2, 2, 2 C" in text  # cells, reachable, passing
    assert "50.00% C" in text and "50.00% A" in text and "1.0x C" in text  # at the line
    assert "0.5 tolerances C" in text and "PASS" in text and "verdict: GO" in text
    assert "above the line" not in text


def test_the_line_is_a_gate_parameter_and_headroom_is_taken_against_it():
    """COSTS 1.4: worst delta/tol 8.58 %, the line 50 %, headroom 50 / 8.58 = 5.83x; against
    the tolerance (100 %) the same row would claim 11.7x."""
    r = row("e3_t8 / predict_the_mean", 0.0858, 1.0)
    assert headroom(r, 0.5) == pytest.approx(5.8275, rel=1e-4)
    assert headroom(r) == pytest.approx(11.655, rel=1e-4)
    g = evaluate(GateReadings(init_loss=[_init(LN256 * 0.995)]), S)[0]
    assert g.line == 0.5 and "COSTS" in g.line_source
    (ln,) = gate_lines(_gates_section([g]))
    assert ln.line.value == 0.5 and ln.line.tag.value == "ASSUMED"
    assert ln.delta_over_tol.value == pytest.approx(0.25)  # 0.005 / 0.02
    assert ln.headroom.value == pytest.approx(2.0) and ln.clears is True  # 0.5 / 0.25
    strict = evaluate(GateReadings(init_loss=[_init(LN256 * 0.995)]),
                      parse_line("20%", S))[0]
    (st,) = gate_lines(_gates_section([strict]))
    assert st.headroom.value == pytest.approx(0.8) and st.clears is False
    assert st.status == "PASS" and "--line 0.2" in strict.line_source
    for bad in ("0", "150%", "x", "nan"):
        with pytest.raises(InputError, match="--line"):
            parse_line(bad, S)


def test_init_loss_counts_cells_and_quotes_the_worst_margin_in_tolerances():
    """COSTS 1.5: 30 cells, 30 reachable, 30 pass; worst margin above the 1 - GATE_TOL line
    1.957e-3, i.e. 1.96x the tolerance (a loss above chance has delta 0, so the margin is
    loss / ln V - (1 - tol), not tolerance - delta)."""
    tight = parse_tolerances(["init-loss=1e-3"])
    cells = [_init(LN256 * (1 + 0.000957 + 0.001 * k), value=v, seed=k, name=n)
             for n in ("a", "b") for v in (1, 2, 3, 4, 5) for k in range(3)]
    g = init_loss_gate(cells, tight)
    (ln,) = gate_lines(_gates_section([g]))
    assert (ln.cells.value, ln.checked.value, ln.passing.value) == (30, 30, 30)
    assert ln.margin.value == pytest.approx(1.957, rel=1e-6) and ln.margin_row == "a 1 seed 0"
    failed = init_loss_gate([_init(LN256 * 0.9), _init(LN256),
                             InitLossReading(workload="c", value=1, seed=0, mode="fp32",
                                             vocab=256, error="OOM")], S)
    (lf,) = gate_lines(_gates_section([failed]))
    assert (lf.cells.value, lf.checked.value, lf.passing.value) == (3, 2, 1)
    assert lf.margin.value == pytest.approx((0.9 - 0.98) / 0.02)  # -4: 4 tolerances past it


def test_default_init_loss_tolerance_against_the_costs_files_1e3():
    """The 0.997 of ln V measured at CPU widths passes the 0.02 default and would fail the
    COSTS file's GATE_TOL = 1e-3 (a healthy model, 3e-3 below chance); 1.017-1.020 (the H200
    at d512) passes either, since only the low side fails."""
    healthy = [_init(LN256 * 0.997), _init(LN256 * 1.020, seed=1)]
    assert init_loss_gate(healthy, S).status == "PASS"
    tight = parse_tolerances(["init-loss=1e-3"])
    assert [r.status for r in init_loss_gate(healthy, tight).rows] == ["FAIL", "PASS"]
    assert "1e-3" in TOLERANCE_REASONS["init_loss"]


def test_the_report_prints_the_gate_deltas_tagged():
    """Issue 30, item 11: the Markdown report listed the gate deltas under "not shown, no
    provenance tag"; its Gates section now opens with the tagged gate table."""
    from afford.report import markdown
    from afford.report.certificate import certificate_section
    from afford.report.model import Report
    from tests.synthetic import make_cert

    g = init_loss_gate([_init(LN256 * 0.995), _init(LN256 * 0.99, seed=1)], S)
    cert = make_cert().model_copy(update={"gates": _gates_section([g])})
    sec = certificate_section(cert, "c.json", {})
    (gates,) = [s for s in sec.subsections if s.title == "Gates"]
    table = gates.tables[0]
    assert table.columns[:4] == ("gate", "cells", "reachable", "passing")
    (line,) = table.rows
    assert all(isinstance(c, (str, Tagged)) for c in line)
    delta = line[table.columns.index("delta")]
    assert isinstance(delta, Tagged) and delta.value == pytest.approx(0.01)
    text = markdown.render(Report(title="t", inputs=("c.json",), sections=(sec,)))
    assert "| init-loss " in text and "0.01 C" in text and "50.00% A" in text


def test_the_determinism_table_shows_each_quantity_that_ran():
    """COSTS 1.6's table: forward bitwise beside a gradient NOT EXECUTABLE, on one line."""
    from rich.console import Console

    from afford.report.gates_tables import determinism_table

    ne = NotExecutable(what="w on: gradients, parameters after step (backward)",
                       reason="RuntimeError: cumsum_cuda_kernel does not have a deterministic "
                       "implementation")
    run = _run(True, [_cmp("forward output"), _cmp("loss")], ne=ne, op="cumsum_cuda_kernel")
    con = Console(width=200, record=True)
    con.print(determinism_table(determinism_lines(_section([run])), "audit"))
    text = con.export_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("│ w"))
    assert row.count("bitwise") == 2 and row.count("NOT EXECUTABLE") == 2
    assert "cumsum_cuda_kernel" in text
