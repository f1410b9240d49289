"""The scale ladder: arithmetic worked by hand, extrapolation tags, two columns never pooled."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from afford import figures
from afford.cli import app
from afford.core.errors import InputError
from afford.core.provenance import Tag, Tagged, inherited, measured
from afford.core.published_constants import load_scaling
from afford.plan import scale_ladder as ladder_mod
from afford.plan.scale_ladder import Entry, LadderRow, build_ladder, parse_entries
from afford.report.ladder_tables import ladder_notes, ladder_table
from afford.schema.cert import save_certificate
from tests.synthetic_cert import certificate, linear_sizes, sizes_section

WEEK = 7 * 86400.0
RATE = 5e14  # FLOP/s, a measured bf16 GEMM rate for the tests


@pytest.fixture
def with_rate(monkeypatch):
    """A certificate whose probes measured a bf16 GEMM rate of 5e14 FLOP/s."""
    monkeypatch.setattr(figures, "gemm_rate",
                        lambda cert, dtype: measured(RATE, "FLOP/s", f"{dtype} 8192^3 matmul"))


def lad(cert, params="124M", **kw):
    kw.setdefault("budget_seconds", WEEK)
    return build_ladder(cert, parse_entries(params), constants=load_scaling(), **kw)


def test_tokens_flops_and_both_wall_clocks_by_hand(with_rate):
    row = lad(certificate(linear_sizes()), "124M:d768L12").rows[0]
    assert row.tokens.value == pytest.approx(2.48e9)                  # 20 x 124M
    assert row.flops_6nd.value == pytest.approx(1.84512e18)           # 6 x 124e6 x 2.48e9
    # 12 L d T per token = 12 x 12 x 768 x 1024 = 113,246,208; x D
    assert row.flops_attention.value == pytest.approx(113_246_208 * 2.48e9)
    assert row.flops.value == pytest.approx(1.84512e18 + 2.8085059584e17)
    # (a): 2.48e9 / 8192 = 302,734.375 steps x (1e-9 x 124e6 = 0.124 s) = 37,539.0625 s
    assert row.wall_a.value == pytest.approx(37_539.0625, rel=1e-9)
    assert row.wall_a.tag is Tag.FITTED and row.wall_a.extrapolated  # 124M > 100M measured
    # (b): FLOPs / 5e14 FLOP/s
    assert row.wall_b.value == pytest.approx((1.84512e18 + 2.8085059584e17) / RATE)
    assert row.wall_b.tag is Tag.MODULE and not row.wall_b.extrapolated
    # memory: states only, 16 B/param, assumed with the reason
    assert row.memory.value == pytest.approx(124e6 * 16) and row.memory.tag is Tag.ASSUMED
    assert "activations not counted" in row.memory.source
    assert "16 B/param (Rajbhandari et al. 2020 (ZeRO), section 3.1)" in row.memory.source
    assert row.affordable.value is True and "(a)" in row.reason
    # Besiroglu et al. 2024: 1.8172 + 482.01/N^0.3478 + 2085.43/D^0.3658
    assert row.loss.value == pytest.approx(3.3187003618, rel=1e-9)


def test_a_sizes_section_without_a_law_says_so_in_place_of_wall_clock_a():
    sizes = linear_sizes().model_copy(update={"law": None, "warnings": ["two sizes only"]})
    row = lad(certificate(sizes), "124M").rows[0]
    assert row.wall_a is None
    assert row.wall_a_note == "the sizes section has no law (two sizes only)"


def test_in_range_row_is_not_extrapolated_and_one_billion_is_not_affordable():
    in_range = lad(certificate(linear_sizes()), "20M")
    assert not any("extrapolated" in w for w in in_range.warnings)
    rows = lad(certificate(linear_sizes()), "20M,1B").rows
    # 20M: 4e8 tokens / 8192 = 48,828.125 steps x 0.02 s = 976.5625 s
    assert rows[0].wall_a.value == pytest.approx(976.5625) and not rows[0].wall_a.extrapolated
    # 1B: 2e10 / 8192 = 2,441,406.25 steps x 1.0 s > one week
    assert rows[1].wall_a.value == pytest.approx(2_441_406.25) and rows[1].wall_a.extrapolated
    assert rows[1].affordable.value is False
    assert "by the measured law (a) (extrapolated)" in rows[1].reason
    assert rows[1].loss.value == pytest.approx(2.5300503237, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1e3, max_value=1e12, allow_nan=False))
def test_every_row_outside_the_measured_sizes_is_tagged_extrapolated(n):
    row = lad(certificate(linear_sizes()), f"{n:.6g}").rows[0]
    inside = 1e6 <= float(f"{n:.6g}") <= 1e8
    assert row.wall_a.extrapolated is (not inside)


def test_extrapolated_rows_are_starred_in_the_table():
    from rich.console import Console

    table = ladder_table(lad(certificate(linear_sizes()), "20M,1B"))
    console = Console(width=200, record=True)
    console.print(table)
    lines = [line for line in console.export_text().splitlines() if "│" in line]
    assert any(line.lstrip("│ ").startswith("20M") and " F " in line + " " and "F*" not in line
               for line in lines)
    assert any(line.lstrip("│ ").startswith("1B") and "F*" in line for line in lines)


def _seconds_fields(row: LadderRow) -> dict[str, Tagged]:
    return {k: v for k, v in row if isinstance(v, Tagged) and v.unit == "s"}


def test_the_two_wall_clocks_are_never_pooled(with_rate, monkeypatch):
    cert = certificate(linear_sizes())
    row = lad(cert).rows[0]
    # the only durations in a row are (a) and (b): no third, combined one
    assert set(_seconds_fields(row)) == {"wall_a", "wall_b"}
    assert row.wall_a.tag is Tag.FITTED and row.wall_b.tag is Tag.MODULE
    # each column moves only with its own input
    monkeypatch.setattr(figures, "gemm_rate",
                        lambda cert, dtype: measured(2 * RATE, "FLOP/s", "faster"))
    faster = lad(cert).rows[0]
    assert faster.wall_a == row.wall_a and faster.wall_b.value == pytest.approx(
        row.wall_b.value / 2)
    slower_law = certificate(sizes_section([10**6, 10**7, 10**8], [2e-3, 2e-2, 2e-1]))
    slow = lad(slower_law).rows[0]
    assert slow.wall_b == faster.wall_b and slow.wall_a.value == pytest.approx(
        2 * row.wall_a.value)
    assert set(json.loads(faster.model_dump_json())) == set(LadderRow.model_fields)


def test_no_measured_rate_leaves_b_empty_with_the_reason():
    row = lad(certificate(linear_sizes())).rows[0]
    assert row.wall_b is None and "never taken from a datasheet" in row.wall_b_note
    assert row.wall_a is not None


def test_a_datasheet_rate_is_not_used_for_the_floor(monkeypatch):
    monkeypatch.setattr(figures, "gemm_rate",
                        lambda cert, dtype: inherited(989e12, "FLOP/s", "datasheet"))
    row = lad(certificate(linear_sizes())).rows[0]
    assert row.wall_b is None and "INHERITED, not measured" in row.wall_b_note


def test_without_sizes_the_floor_can_only_rule_out(with_rate):
    cert = certificate(None)
    small, big = lad(cert, "1M,3B").rows
    assert small.wall_a is None and "afford certify --sizes" in small.wall_a_note
    # 1M: 6 x 1e6 x 2e7 / 5e14 = 0.24 s, fits: undecided, said so
    assert small.wall_b.value == pytest.approx(0.24)
    assert small.affordable is None and "lower bound" in small.reason
    # 3B: 6 x 3e9 x 6e10 / 5e14 = 2.16e6 s > a week: ruled out by (b)
    assert big.wall_b.value == pytest.approx(2.16e6)
    assert big.affordable.value is False and "floor (b)" in big.reason


def test_without_sizes_the_attention_term_is_omitted_and_said_why(with_rate):
    row = lad(certificate(None), "1M:d64L2").rows[0]
    assert row.flops_attention is None
    assert row.flops.value == pytest.approx(6 * 1e6 * 2e7)  # 6 N D alone
    assert "attention term omitted: no sizes section: the sequence length T is unknown" in \
        row.flops.source


def test_a_failed_premise_is_a_warning():
    sizes = linear_sizes().model_copy(update={"premise": "fails"})
    assert any("grows with N here" in w for w in lad(certificate(sizes)).warnings)
    assert not any("grows with N here" in w for w in lad(certificate(linear_sizes())).warnings)


def test_measured_levers_are_listed_with_their_spread():
    from afford.schema.levers_section import Lever, LeverRun, LeversSection
    lv = Lever(name="compile", description="torch.compile", a="a", b="b",
               metric="step_seconds", per_child=[1.2, 1.3, 1.4], speedup=1.3, speedup_min=1.2,
               speedup_max=1.4)
    unmeasured = lv.model_copy(update={"name": "graphs", "speedup": None})
    sec = LeversSection(device_name="NVIDIA H200", torch_version="2.11.0",
                        started_at=certificate().environment.started_at, command="afford levers",
                        precision="quick", children=3, clock="fake",
                        runs=[LeverRun(workload="tinylm", value=1024, mode="bf16", variants=[],
                                       levers=[lv, unmeasured])])
    cert = certificate().model_copy(update={"levers": sec})
    figs = ladder_mod.lever_figures(cert)
    assert [(f.workload, f.lever) for f in figs] == [("tinylm", "compile")]  # measured only
    f = figs[0]
    assert (f.speedup.value, f.speedup_min.value, f.speedup_max.value) == (1.3, 1.2, 1.4)
    assert f.speedup.tag is Tag.MEASURED and f.speedup_min.source.startswith("min, tinylm ")
    assert f.speedup_max.source.startswith("max, tinylm torch.compile: median over 3 children")
    assert ladder_mod.lever_figures(certificate()) == []


def test_a_floor_exactly_at_the_budget_does_not_rule_out(with_rate):
    # 1M: 6 x 1e6 x 2e7 / 5e14 = 0.24 s against a budget of 0.24 s: within, still undecided
    row = lad(certificate(None), "1M", budget_seconds=0.24).rows[0]
    assert row.wall_b.value == 0.24 and row.affordable is None and "lower bound" in row.reason


def test_sizes_in_another_mode_are_not_used():
    row = lad(certificate(linear_sizes(mode="bf16")), mode="fp32").rows[0]
    assert row.wall_a is None and "measured in bf16, not fp32" in row.wall_a_note


def test_memory_law_when_present_and_not_resident(monkeypatch):
    seen = {}

    def predicted(cert, name, shape, mode=None):
        seen.update(shape, name=name, mode=mode)
        return (measured(90e9, "B", "law alloc"), Tagged(value=120e9, unit="B", tag=Tag.FITTED,
                                                        source="memory law, reserved"))

    monkeypatch.setattr(figures, "predicted_memory", predicted)
    row = lad(certificate(linear_sizes()), "1B:d2048L20H16").rows[0]
    assert seen == {"batch": 8, "seq": 1024, "d": 2048, "L": 20, "H": 16, "name": "tinylm",
                    "mode": "bf16"}
    assert row.memory.value == 120e9 and row.memory.tag is Tag.FITTED
    assert row.resident.value is False  # 120e9 > 0.9 x 100 GiB
    assert row.affordable.value is False and row.reason.startswith("not resident")


def test_states_alone_over_the_budget_are_not_resident():
    row = lad(certificate(linear_sizes()), "10B").rows[0]  # 160e9 B > 0.9 x 100 GiB
    assert row.resident.value is False and row.resident.tag is Tag.ASSUMED
    assert row.affordable.value is False and "not resident" in row.reason


def test_tf32_runs_use_the_tf32_rate(monkeypatch):
    asked = []
    monkeypatch.setattr(figures, "gemm_rate", lambda cert, dtype: asked.append(dtype))
    lad(certificate(linear_sizes(mode="fp32"), tf32_matmul=True))
    lad(certificate(linear_sizes(mode="fp32"), tf32_matmul=False))
    assert asked == ["tf32", "fp32"]


def test_ratio_changes_tokens_and_notes_say_each_reason_once():
    lad_ = lad(certificate(linear_sizes()), "7.5M,20M", ratio=10)
    assert [r.tokens.value for r in lad_.rows] == [7.5e7, 2e8]
    # any positive ratio is a ratio: one token per parameter, or half of one
    assert lad(certificate(linear_sizes()), "7.5M", ratio=1).rows[0].tokens.value == 7.5e6
    assert lad(certificate(linear_sizes()), "7.5M", ratio=0.5).rows[0].tokens.value == 3.75e6
    notes = ladder_notes(lad_)
    assert sum("(b):" in n for n in notes) == 1


@pytest.mark.parametrize("text,match", [
    ("", "at least one"), ("abc", "cannot read"), ("0", r"out of range \[1"),
    ("1e30", r"out of range \[1"),
    ("124M:d768", "N:d<width>L<layers>"), ("124M:L12d768", "N:d<width>L<layers>"),
    ("124M:d0L12", "N:d<width>L<layers>"), ("124M:d768L0", "N:d<width>L<layers>"),
    ("124M:d768L12H0", "N:d<width>L<layers>"),
])
def test_bad_params(text, match):
    with pytest.raises(InputError, match=match):
        parse_entries(text)


def test_entries():
    assert parse_entries("7.5M, 124M:d768L12H12,1B") == [
        Entry(7.5e6), Entry(124e6, 768, 12, 12), Entry(1e9)]
    assert parse_entries("1M:d1L1H1") == [Entry(1e6, 1, 1, 1)]  # the smallest shape


def test_bad_budget_ratio_fraction():
    cert = certificate(linear_sizes())
    for kw in ({"budget_seconds": 0}, {"ratio": -1.0}, {"ratio": 0.0},
               {"memory_fraction": 1.5}):
        with pytest.raises(InputError):
            build_ladder(cert, [Entry(1e6)], constants=load_scaling(),
                         **{"budget_seconds": WEEK, **kw})


runner = CliRunner()


@pytest.fixture
def cert_file(tmp_path):
    path = tmp_path / "c.json"
    save_certificate(certificate(linear_sizes()), path)
    return path


def test_cli_ladder_json(cert_file):
    r = runner.invoke(app, ["ladder", str(cert_file), "--params", "20M,1B", "--budget", "7d",
                            "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "afford.ladder/1" and len(doc["rows"]) == 2
    assert doc["rows"][1]["wall_a"]["extrapolated"] is True
    assert doc["rows"][0]["wall_b"] is None


def test_cli_ladder_table(cert_file):
    r = runner.invoke(app, ["ladder", str(cert_file)])
    assert r.exit_code == 0, r.output
    assert "(b): no measured bf16 GEMM rate" in r.stdout
    assert "(a) law: t = 1e-09 params^1.000" in r.stdout
    assert "1B: needs 28d 06h by the measured law (a) (extrapolated)" in r.stdout


@pytest.mark.parametrize("args,match", [
    (["--budget", "soon"], "cannot read"), (["--params", "x"], "cannot read"),
    (["--mode", "int8"], "choose one of"), (["--ratio", "0"], "--ratio"),
])
def test_cli_ladder_bad_input_exits_2(cert_file, args, match):
    r = runner.invoke(app, ["ladder", str(cert_file), *args])
    assert r.exit_code == 2 and match in r.output and "Traceback" not in r.output


def test_cli_ladder_missing_file(tmp_path):
    r = runner.invoke(app, ["ladder", str(tmp_path / "none.json")])
    assert r.exit_code == 2 and "no such file" in r.output


def test_ladder_module_has_no_device_work():
    src = open(ladder_mod.__file__).read()
    assert "import torch" not in src and "print(" not in src


def test_mfu_implied_by_a_against_both_peaks(with_rate, monkeypatch):
    monkeypatch.setattr(figures, "datasheet_peak",
                        lambda cert, dtype: inherited(1e15, "FLOP/s", "datasheet (secondary)"))
    lad_ = lad(certificate(linear_sizes()), "20M")
    row = lad_.rows[0]
    # 6 x 20e6 x 4e8 = 4.8e16 FLOPs over 976.5625 s = 4.9152e13 FLOP/s
    assert row.mfu_measured.value == pytest.approx(4.9152e13 / RATE)
    assert row.mfu_datasheet.value == pytest.approx(4.9152e13 / 1e15)
    assert "INHERITED" in row.mfu_datasheet.source
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(ladder_table(lad_))
    assert "9.83% C / 4.92% C" in console.export_text()


def test_ladder_flags_a_law_that_implies_more_than_the_gemm_rate():
    from afford.core.provenance import module
    from afford.plan.scale_ladder import LadderRow, _warnings

    class Ctx:
        sizes = None

    def row(n, mfu):
        t = module(1.0, "", "x")
        return LadderRow(params=n, tokens=t, flops_6nd=t, flops=t, memory=t,
                         mfu_measured=module(mfu, "ratio", "x"))

    warns = _warnings(Ctx(), None, [row(7.5e6, 0.03), row(1e9, 1.51)])
    assert any("more than 100 %" in w and "1B" in w for w in warns)
    assert not any("100 %" in w for w in _warnings(Ctx(), None, [row(7.5e6, 0.03)]))


@pytest.fixture
def with_link(monkeypatch):
    """A certificate whose probes measured the host link: 20 GB/s up, 25 GB/s down."""
    monkeypatch.setattr(figures, "host_link", lambda cert: (
        measured(20e9, "B/s", "host -> device test link"),
        measured(25e9, "B/s", "device -> host test link")))


def test_offload_variant_by_hand(with_link):
    # 124M, ZeRO's accounting (no memory law): 4 B/param stay, 12 move; the link carries
    # 2 B/param down at 25 GB/s and 2 B/param up at 20 GB/s every step
    row = lad(certificate(linear_sizes()), "124M").rows[0]
    o = row.offload
    assert o.device_memory.value == pytest.approx(124e6 * 4) and o.device_memory.tag is Tag.ASSUMED
    assert o.device_memory.source.endswith("4 B/param (Ren et al. 2021, 'ZeRO-Offload)")
    assert o.host_memory.value == pytest.approx(124e6 * 12)
    per_step = 124e6 * 2 / 25e9 + 124e6 * 2 / 20e9                    # 0.02232 s
    assert o.link_seconds_per_step.value == pytest.approx(per_step)
    steps = 2.48e9 / 8192                                              # 302,734.375
    assert o.wall.value == pytest.approx(row.wall_a.value + steps * per_step)
    assert o.wall.extrapolated == row.wall_a.extrapolated
    assert "not timed" in o.note and o.resident.value is True
    # with the link measured the offload wall clock is priced, so affordability is decided
    assert o.affordable.value is True and o.reason.startswith("(a) (extrapolated) within 7d")


def test_offload_uses_the_memory_law_accounting_when_the_row_does(with_link, monkeypatch):
    # a row whose memory came from the memory law: AdamW's fp32 moments (8 B/param) move,
    # the link carries 4 B/param each way
    monkeypatch.setattr(ladder_mod, "memory_bytes", lambda ctx, e: (
        measured(10e9, "B", "law"), "reserved, from the memory law"))
    o = lad(certificate(linear_sizes()), "124M:d768L12").rows[0].offload
    assert o.device_memory.value == pytest.approx(10e9 - 8 * 124e6)
    assert o.link_seconds_per_step.value == pytest.approx(124e6 * 4 / 25e9 + 124e6 * 4 / 20e9)


def test_offload_without_a_measured_link_prices_no_wall_clock():
    o = lad(certificate(linear_sizes()), "124M").rows[0].offload
    assert o.link_seconds_per_step is None and o.wall is None and o.affordable is None
    assert o.reason == "the offload wall clock needs the host link measured by the probes"
    assert "no measured host link" in o.note and o.resident.value is True


def test_reference_points_are_inherited_and_never_pooled():
    lad1 = lad(certificate(linear_sizes()), "1B")
    refs = {(f.device, f.params) for f in lad1.references}
    # within a factor 2 of 1B: the note's 1.5B and the 0.5B points; not 7B
    assert all(0.5e9 <= p <= 2e9 for _, p in refs) and len(refs) == 3
    for f in lad1.references:
        assert f.tokens_per_second.tag is Tag.INHERITED and f.wall.tag is Tag.INHERITED
        assert f.wall.value == pytest.approx(20 * f.params / f.tokens_per_second.value)
        assert "not this box" in f.wall.source
    assert lad(certificate(linear_sizes()), "7.5M").references == []


def test_a_row_whose_law_beats_the_roofline_is_not_affordable_by_it(monkeypatch):
    """Issue 30, item 1 (the note: "an internal inconsistency worth naming"): 1B at 20B
    tokens, (a) 2.44e6 s (1e-9 s/param a step, 2.44e6 steps) within a 60-day budget, while
    the floor (b) at a measured 1e13 FLOP/s is 6 x 1e9 x 2e10 / 1e13 = 1.2e7 s: (a) needs
    492 % of the GEMM rate. The row names it, believes (b), and is not affordable."""
    monkeypatch.setattr(figures, "gemm_rate",
                        lambda cert, dtype: measured(1e13, "FLOP/s", f"{dtype} 8192^3 matmul"))
    budget = 60 * 86400.0
    row = lad(certificate(linear_sizes()), "1B", budget_seconds=budget).rows[0]
    assert row.wall_a.value == pytest.approx(2e10 / 8192 * 1.0) and row.wall_a.value < budget
    assert row.wall_b.value == pytest.approx(1.2e7) and row.wall_b.value > budget
    assert row.affordable.value is False and "(b)" in row.affordable.source
    assert "below the roofline floor (b)" in row.inconsistency and "believes (b)" in row.reason
    assert "492%" in row.inconsistency  # 1.2e7 / 2.44e6
    # the floor within the budget: (b) is a lower bound and (a) cannot be believed: undecided
    roomy = lad(certificate(linear_sizes()), "1B", budget_seconds=2e7).rows[0]
    assert roomy.affordable is None and "lower bound" in roomy.reason


def test_a_law_that_agrees_with_the_floor_within_its_error_decides_as_before(with_rate):
    row = lad(certificate(linear_sizes()), "124M:d768L12").rows[0]
    assert row.inconsistency == "" and row.affordable.value is True  # (a) 37,539 s > (b)
