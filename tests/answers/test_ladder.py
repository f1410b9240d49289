"""The scale ladder: arithmetic worked by hand, extrapolation tags, two columns never pooled."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from afford.cli import app
from afford.core.errors import InputError
from afford.core.provenance import Tag, Tagged, inherited, measured
from afford.core.published_constants import load_scaling
from afford.figures import memory_figures, probes_figures
from afford.planning import scale_ladder as ladder_mod
from afford.planning.ladder_steps import Entry, parse_entries
from afford.planning.scale_ladder import LadderRow, build_ladder
from afford.report.ladder_tables import ladder_notes, ladder_table
from afford.schema.cert import save_certificate
from tests.paths import data_file
from tests.synthetic_cert import SHAPES, certificate, linear_sizes, size_params, sizes_section

WEEK = 7 * 86400.0
RATE = 5e14  # FLOP/s, a measured bf16 GEMM rate for the tests
N768 = size_params(768, 12)  # 84,934,656: the synthetic family's own count at d768 L12
N2048 = size_params(2048, 20)  # 1,006,632,960 at d2048 L20


@pytest.fixture
def with_rate(monkeypatch):
    """A certificate whose probes measured a bf16 GEMM rate of 5e14 FLOP/s."""
    monkeypatch.setattr(probes_figures, "gemm_rate",
                        lambda cert, dtype: measured(RATE, "FLOP/s", f"{dtype} 8192^3 matmul"))


def lad(cert, params="124M", **kw):
    kw.setdefault("budget_seconds", WEEK)
    return build_ladder(cert, parse_entries(params), constants=load_scaling(), **kw)


def test_tokens_flops_and_both_wall_clocks_by_hand(with_rate):
    row = lad(certificate(linear_sizes()), f"{N768}:d768L12").rows[0]
    assert row.tokens.value == pytest.approx(20 * N768)
    assert row.flops_6nd.value == pytest.approx(6 * N768 * 20 * N768)
    # 12 L d T per token = 12 x 12 x 768 x 1024 = 113,246,208; x D
    assert row.flops_attention.value == pytest.approx(113_246_208 * 20 * N768)
    # (a): the law's step is 1e-9 s x the shape's 12 L d^2 parameters = 84.93 ms, over
    # 20 N / 8192 steps; within the sizes fitted (3.1M..201M), so not extrapolated
    assert row.step.value == pytest.approx(1e-9 * N768, rel=1e-6)
    assert row.wall_a.value == pytest.approx(20 * N768 / 8192 * 1e-9 * N768, rel=1e-6)
    assert row.wall_a.tag is Tag.FITTED and not row.wall_a.extrapolated and row.beyond is None
    # the law's stated error: its worst leave-one-out error over the three sizes (exact here)
    assert row.wall_a_error.value == pytest.approx(0.0, abs=1e-9)
    assert row.wall_a_error.source == "worst leave-one-out error over the 3 sizes fitted"
    # (b): FLOPs / 5e14 FLOP/s
    assert row.wall_b.value == pytest.approx(row.flops.value / RATE)
    assert row.wall_b.tag is Tag.MODULE and not row.wall_b.extrapolated
    # memory: states only, 16 B/param, assumed with the reason
    assert row.memory.value == pytest.approx(N768 * 16) and row.memory.tag is Tag.ASSUMED
    assert "activations not counted" in row.memory.source
    assert "16 B/param (Rajbhandari et al. 2020 (ZeRO), section 3.1)" in row.memory.source
    assert row.affordable.value is True and "(a)" in row.reason
    assert row.shape == {"d": 768, "L": 12, "H": 12, "batch": 8, "seq": 1024}
    assert row.shape_note == "given"


def test_a_rung_without_a_shape_gets_one_at_the_family_aspect():
    row = lad(certificate(linear_sizes()), "124M").rows[0]
    # 12 L d^2 = 124M at d = 64 L: L = 13.6 -> 14, d = 896
    assert row.shape["d"] == 896 and row.shape["L"] == 14 and row.shape["H"] == 14
    assert row.shape_note.startswith("chosen: d896L14 at tinylm's aspect d/L = 64")
    # the shape's work, N's state bytes: within a few per mille of the shape's own step
    assert row.step.value == pytest.approx(1e-9 * size_params(896, 14), rel=5e-3)
    given = lad(certificate(linear_sizes()), "124M:d768L12").rows[0]
    assert "has 84.9M parameters in tinylm's family, not 124M" in given.shape_note


def test_a_sizes_section_without_a_law_says_so_in_place_of_wall_clock_a():
    sizes = linear_sizes()
    one = sizes.model_copy(update={"sizes": sizes.sizes[:1], "size_law": None,
                                   "scaling": None})
    row = lad(certificate(one), "124M").rows[0]
    assert row.wall_a is None and row.step is None
    assert row.wall_a_note == "only 1 resident size(s): no size law"
    assert row.affordable is None and "(a) unknown (only 1 resident size(s)" in row.reason


def test_an_older_section_is_refitted_here_within_the_measured_ceilings(with_rate):
    old = linear_sizes().model_copy(update={"size_law": None, "scaling": None})
    lad_ = lad(certificate(old), f"{N768}:d768L12")
    assert lad_.law_how.startswith("refitted here from the certificate's sizes")
    # the refit bounds a counted attention FLOP at 1 / (2 x 5e14) s, which these steps
    # leave free: the law takes that time from the GEMM term and misses by under 2 %
    assert lad_.rows[0].step.value == pytest.approx(1e-9 * N768, rel=0.02)
    assert lad_.law.startswith("t = max(host, busy)")


def test_in_range_row_is_not_extrapolated_and_one_billion_is_not_affordable():
    n20 = size_params(512, 8)
    in_range = lad(certificate(linear_sizes()), f"{n20}:d512L8")
    assert not any("extrapolated" in w for w in in_range.warnings)
    rows = lad(certificate(linear_sizes()), f"{n20}:d512L8,{N2048}:d2048L20").rows
    assert rows[0].wall_a.value == pytest.approx(20 * n20 / 8192 * 1e-9 * n20, rel=1e-6)
    assert not rows[0].wall_a.extrapolated
    # 1.007B: 20 N / 8192 = 2,457,600 steps x 1.0066 s: 28.6 days > one week
    assert rows[1].wall_a.value == pytest.approx(20 * N2048 / 8192 * 1e-9 * N2048, rel=1e-6)
    assert rows[1].wall_a.extrapolated and rows[1].beyond == pytest.approx(N2048 / 201326592)
    assert rows[1].affordable.value is False
    assert "by the measured law (a) (extrapolated)" in rows[1].reason


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1e3, max_value=1e12, allow_nan=False))
def test_every_row_outside_the_measured_sizes_is_tagged_extrapolated(n):
    row = lad(certificate(linear_sizes()), f"{n:.6g}").rows[0]
    inside = size_params(256, 4) <= float(f"{n:.6g}") <= size_params(1024, 16)
    assert row.wall_a.extrapolated is (not inside)
    assert (row.beyond is not None) is (float(f"{n:.6g}") > size_params(1024, 16))


def test_extrapolated_rows_are_starred_in_the_table():
    from rich.console import Console

    n20 = size_params(512, 8)
    table = ladder_table(lad(certificate(linear_sizes()), f"{n20}:d512L8,1B"))
    console = Console(width=250, record=True)
    console.print(table)
    lines = [line for line in console.export_text().splitlines() if "│" in line]
    assert any(line.lstrip("│ ").startswith("25.2M") and " F " in line + " " and "F*" not in line
               for line in lines)
    assert any(line.lstrip("│ ").startswith("1B") and "F*" in line and "x5 beyond" in line
               for line in lines)


def _seconds_fields(row: LadderRow) -> dict[str, Tagged]:
    return {k: v for k, v in row if isinstance(v, Tagged) and v.unit == "s"}


def test_the_two_wall_clocks_are_never_pooled(with_rate, monkeypatch):
    cert = certificate(linear_sizes())
    row = lad(cert).rows[0]
    # the only durations in a row are (a) and (b): no third, combined one
    assert set(_seconds_fields(row)) == {"step", "wall_a", "wall_b"}
    assert row.wall_a.tag is Tag.FITTED and row.wall_b.tag is Tag.MODULE
    # each column moves only with its own input
    monkeypatch.setattr(probes_figures, "gemm_rate",
                        lambda cert, dtype: measured(2 * RATE, "FLOP/s", "faster"))
    faster = lad(cert).rows[0]
    assert faster.wall_a == row.wall_a and faster.wall_b.value == pytest.approx(
        row.wall_b.value / 2)
    slower_law = certificate(sizes_section(SHAPES, [2e-9 * size_params(d, L) for d, L in SHAPES]))
    slow = lad(slower_law).rows[0]
    assert slow.wall_b == faster.wall_b and slow.wall_a.value == pytest.approx(
        2 * row.wall_a.value)
    assert set(json.loads(faster.model_dump_json())) == set(LadderRow.model_fields)


def test_no_measured_rate_leaves_b_empty_with_the_reason():
    row = lad(certificate(linear_sizes())).rows[0]
    assert row.wall_b is None and "never taken from a datasheet" in row.wall_b_note
    assert row.wall_a is not None


def test_a_datasheet_rate_is_not_used_for_the_floor(monkeypatch):
    monkeypatch.setattr(probes_figures, "gemm_rate",
                        lambda cert, dtype: inherited(989e12, "FLOP/s", "datasheet"))
    row = lad(certificate(linear_sizes())).rows[0]
    assert row.wall_b is None and "INHERITED, not measured" in row.wall_b_note


def test_without_sizes_the_floor_can_only_rule_out(with_rate):
    cert = certificate(None)
    small, big = lad(cert, "1M,3B").rows
    assert small.wall_a is None and "certify again, or afford certify --sizes" in \
        small.wall_a_note
    # 1M: 6 x 1e6 x 2e7 / 5e14 = 0.24 s, fits: undecided, said so
    assert small.wall_b.value == pytest.approx(0.24)
    assert small.affordable is None and "lower bound" in small.reason
    assert small.reason.startswith("(a) unknown (no sizes section")
    # 3B: 6 x 3e9 x 6e10 / 5e14 = 2.16e6 s > a week: ruled out by (b)
    assert big.wall_b.value == pytest.approx(2.16e6)
    assert big.affordable.value is False and "floor (b)" in big.reason


def test_without_sizes_the_attention_term_is_omitted_and_said_why(with_rate):
    row = lad(certificate(None), "1M:d64L2").rows[0]
    assert row.flops_attention is None
    assert row.flops.value == pytest.approx(6 * 1e6 * 2e7)  # 6 N D alone
    assert "attention term omitted: no sizes measured: the sequence length T is unknown" in \
        row.flops.source


def test_a_cpu_first_look_says_what_the_ladder_lacks(with_rate):
    row = lad(certificate(None, device_type="cpu", device_class="cpu"), "1M").rows[0]
    assert row.wall_a is None and "a CPU's certify times one size of tinylm" in row.wall_a_note
    assert row.affordable is None and row.reason.startswith("(a) unknown (no model sizes")


def test_the_phase_finding_is_a_note():
    sizes = linear_sizes().model_copy(update={"premise": "fails", "finding": "the optimizer"})
    assert "phase split (fails): the optimizer" in ladder_notes(lad(certificate(sizes)))


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
    from types import SimpleNamespace

    seen = {}

    def answer(cert, name, shape, mode=None, alloc_conf=""):
        seen.update(shape, name=name, mode=mode)
        return SimpleNamespace(figure=Tagged(value=120e9, unit="B", tag=Tag.FITTED,
                                             source="memory law, reserved"),
                               why="the memory law", extrapolated=False, reasons=())

    monkeypatch.setattr(memory_figures, "memory_answer", answer)
    row = lad(certificate(linear_sizes()), "1B:d2048L20H16").rows[0]
    assert seen == {"batch": 8, "seq": 1024, "d": 2048, "L": 20, "H": 16, "params": 10**9,
                    "name": "tinylm", "mode": "bf16"}
    assert row.memory.value == 120e9 and row.memory.tag is Tag.FITTED
    assert row.memory_note == "reserved: the memory law"
    assert row.resident.value is False  # 120e9 > 0.9 x 100 GiB
    assert row.affordable.value is False and row.reason.startswith("not resident")


def test_states_alone_over_the_budget_are_not_resident():
    row = lad(certificate(linear_sizes()), "10B").rows[0]  # 160e9 B > 0.9 x 100 GiB
    assert row.resident.value is False and row.resident.tag is Tag.ASSUMED
    assert row.affordable.value is False and "not resident" in row.reason


def test_tf32_runs_use_the_tf32_rate(monkeypatch):
    asked = []
    monkeypatch.setattr(probes_figures, "gemm_rate", lambda cert, dtype: asked.append(dtype))
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
    assert sum("shape chosen" in n for n in notes) == 2


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
    assert doc["rows"][1]["step"]["tag"] == "FITTED" and doc["workload"] == "tinylm"


def test_cli_ladder_table(cert_file):
    r = runner.invoke(app, ["ladder", str(cert_file)])
    assert r.exit_code == 0, r.output
    assert "(b): no measured bf16 GEMM rate" in r.stdout
    assert "(a) law: t = max(host, busy); busy = 2.02e-14 s/GEMM FLOP" in r.stdout
    assert "1B shape chosen: d1728L27 at tinylm's aspect d/L = 64" in r.stdout
    assert "1B: needs 27d 08h by the measured law (a) (extrapolated), stated error 0% > " \
        "budget 7d" in r.stdout


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
    monkeypatch.setattr(probes_figures, "datasheet_peak",
                        lambda cert, dtype: inherited(1e15, "FLOP/s", "datasheet (secondary)"))
    lad_ = lad(certificate(linear_sizes()), f"{N768}:d768L12")
    row = lad_.rows[0]
    achieved = row.flops.value / row.wall_a.value
    assert row.mfu_measured.value == pytest.approx(achieved / RATE)
    assert row.mfu_datasheet.value == pytest.approx(achieved / 1e15)
    assert "INHERITED" in row.mfu_datasheet.source
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(ladder_table(lad_))
    assert "12.01% C / 6.01% C" in console.export_text()  # 6.005e13 FLOP/s achieved


def test_mfu_is_shown_only_as_a_share_of_a_whole(monkeypatch):
    """(a) implying 490 % of a measured 1e13 FLOP/s: no MFU figure, the row names it."""
    monkeypatch.setattr(probes_figures, "gemm_rate",
                        lambda cert, dtype: measured(1e13, "FLOP/s", "slow matmul"))
    lad_ = lad(certificate(linear_sizes()), f"{N768}:d768L12")
    row = lad_.rows[0]
    assert row.mfu_measured is None and "below the roofline floor (b)" in row.inconsistency
    assert any("more than 100 %" in w and "84.9M" in w for w in lad_.warnings)


@pytest.fixture
def with_link(monkeypatch):
    """A certificate whose probes measured the host link: 20 GB/s up, 25 GB/s down."""
    monkeypatch.setattr(probes_figures, "host_link", lambda cert: (
        measured(20e9, "B/s", "host -> device test link"),
        measured(25e9, "B/s", "device -> host test link")))


def test_offload_variant_by_hand(with_link):
    # 124M, ZeRO's accounting (no memory law): 4 B/param stay, 12 move; the link carries
    # 2 B/param down at 25 GB/s and 2 B/param up at 20 GB/s every step
    row = lad(certificate(linear_sizes()), "124M:d768L12").rows[0]
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
    assert o.affordable.value is True and o.reason.startswith("(a) ") and "within 7d" in \
        o.reason


def test_offload_uses_the_memory_law_accounting_when_the_row_does(with_link, monkeypatch):
    # a row whose memory came from the memory law: AdamW's fp32 moments (8 B/param) move,
    # the link carries 4 B/param each way
    monkeypatch.setattr(ladder_mod, "memory_bytes", lambda ctx, e, shape: (
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
    """Issue 30, item 1 (the note: "an internal inconsistency worth naming"): the law (1e-9
    s per parameter a step: 4.9e13 FLOP/s of 6 N per token) against a measured 1e13 FLOP/s:
    (a) is below the floor (b) by 4.9x, so (a) needs 491 % of the GEMM rate. The row names
    it, believes (b), and is not affordable where (b) is over the budget."""
    monkeypatch.setattr(probes_figures, "gemm_rate",
                        lambda cert, dtype: measured(1e13, "FLOP/s", f"{dtype} 8192^3 matmul"))
    budget = 60 * 86400.0
    row = lad(certificate(linear_sizes()), f"{N2048}:d2048L20", budget_seconds=budget).rows[0]
    assert row.wall_a.value < budget < row.wall_b.value
    assert row.affordable.value is False and "(b)" in row.affordable.source
    assert "below the roofline floor (b)" in row.inconsistency and "believes (b)" in row.reason
    assert f"{row.wall_b.value / row.wall_a.value:.0%}" in row.inconsistency
    # the floor within the budget: (b) is a lower bound and (a) cannot be believed: undecided
    roomy = lad(certificate(linear_sizes()), f"{N2048}:d2048L20", budget_seconds=1e8).rows[0]
    assert roomy.affordable is None and "lower bound" in roomy.reason


def test_a_law_that_agrees_with_the_floor_within_its_error_decides_as_before(with_rate):
    row = lad(certificate(linear_sizes()), f"{N768}:d768L12").rows[0]
    assert row.inconsistency == "" and row.affordable.value is True  # (a) > (b)


# ---- the recorded H200 sizes certificate, the default GPU certificate, a user's family ----

H200_SIZES = str(data_file("h200_sizes_levers_63bd66d.json"))


def test_recorded_h200_sizes_refitted_here_never_beat_the_gemm_rate():
    """tinylm 1M-203M at 8 x 1024 on an H200 (wall times only, the three smallest on the
    launch floor). The power law it stored predicted 1B at 149 % of the measured GEMM rate;
    refitted here, every rung stays under the rate with its reasons in one line each."""
    from afford.schema.cert import load_certificate

    cert = load_certificate(H200_SIZES)
    lad_ = lad(cert, "7.5M,20M,124M,350M:d1024L24,1B:d2048L16,1B")
    assert lad_.law_how.startswith("refitted here") and "wall times only" in lad_.law
    assert "largest size held out (tinylm@d1024L16H16b8s1024)" in lad_.law_checks
    rate = cert.probes.gemm["bf16"].flops_per_second
    for r in lad_.rows:
        assert r.flops.value / r.wall_a.value < rate  # (a) implies under 100 % of the rate
        assert r.inconsistency == "" and r.affordable is not None
        assert r.mfu_measured is not None and 0 < r.mfu_measured.value < 1
        assert "\n" not in r.reason and r.reason.count("within") + r.reason.count(">") == 1
        assert r.memory.tag is Tag.FITTED  # the certificate's memory law at the rung's shape
    one_b = lad_.rows[4]
    assert one_b.beyond == pytest.approx(1e9 / 202852352) and one_b.wall_a_error is not None
    assert "the largest size held out" in one_b.wall_a_error.source
    assert not any("more than 100 %" in w for w in lad_.warnings)
    assert not any("R^2" in w for w in lad_.warnings)  # the old power law's note is not ours


def _default_sizes():
    """The default GPU certify's three ladder sizes, profiled, from fake readings: device
    busy 1.5 x the GEMM bound + 4 us per kernel, host 30 us per kernel, 130 + 50 L kernels."""
    from afford.certification.stage_sizes import LADDER_SIZES
    from afford.fit.time.size_law import fit_sizes_section
    from afford.schema.point import StepFlops
    from afford.schema.sizes_section import SizePoint, SizesSection
    from tests.synthetic_cert import point

    batch, seq, dims = LADDER_SIZES["large-gpu"]
    sizes = []
    for d, L, H in dims:
        n = size_params(d, L)
        g, a, k = 6.0 * batch * seq * n, 12.0 * batch * seq * seq * d * L, 130 + 50 * L
        busy = 1.5 * g / RATE + 0.75 * a / RATE + 16 * n / 4e12 + 4e-6 * k
        t = max(30e-6 * k, busy + 1e-6 * k)
        p = point(t, tokens=batch * seq).model_copy(update={
            "flops": StepFlops(gemm=g, attn=a), "device_busy_seconds": busy,
            "kernels_per_step": float(k), "device_gap_seconds": 1e-6})
        sizes.append(SizePoint(spec=f"tinylm@d{d}L{L}H{H}b{batch}s{seq}", d=d, L=L, H=H,
                               params=n, point=p))
    law, scaling, notes = fit_sizes_section("tinylm", sizes, batch=batch, seq=seq,
                                            gemm_rate=RATE, bandwidth=4e12, bytes_per_param=16)
    return SizesSection(mode="bf16", batch=batch, seq=seq, tokens_per_step=batch * seq,
                        sizes=sizes, size_law=law, scaling=scaling, warnings=notes)


def test_the_default_gpu_certificate_answers_every_row(with_rate):
    lad_ = lad(certificate(_default_sizes()), "7.5M,20M,124M,350M,1B,3B,13B")
    assert all(r.affordable is not None for r in lad_.rows), [r.reason for r in lad_.rows]
    assert all(r.step is not None and r.wall_a_error is not None for r in lad_.rows)
    assert [r.affordable.value for r in lad_.rows][:2] == [True, True]
    assert lad_.rows[-1].affordable.value is False  # 13B: 16 B/param alone is 208 GB
    assert "sides" not in lad_.law and "busy + " in lad_.law  # the profiled two-sided law
    # the largest size held out checks the extrapolation: exact on these readings
    assert lad_.law_checks.endswith("at x2.7 beyond the others")


def _family_cert(with_shape: bool = True, name: str = "hf:gpt_neox@d1024L16"):
    """A certificate of one user family measured at d1024 L16 (V 32000) at four batch x
    seq, profiled: busy 2 x the GEMM bound + 5 us per kernel, 1900 kernels, host 30 us each."""
    from afford.schema.cert import WorkloadResult
    from afford.schema.point import StepFlops
    from tests.synthetic_cert import point

    d, L, V = 1024, 16, 32000
    n = 12 * L * d * d + 2 * V * d
    pts = []
    for b, s in ((8, 1024), (16, 1024), (4, 2048), (32, 512)):
        g = 6.0 * b * s * (12 * L * d * d + V * d)
        a = 12.0 * b * s * s * d * L
        busy = 2 * g / RATE + a / RATE + 5e-6 * 1900
        shape = {"batch": b, "seq": s, **({"d": d, "L": L, "H": 16, "V": V} if with_shape
                                          else {})}
        pts.append(point(max(busy + 1e-6 * 1900, 30e-6 * 1900), value=s, tokens=b * s)
                   .model_copy(update={"shape": shape, "params": n, "vocab": V,
                                       "flops": StepFlops(gemm=g, attn=a),
                                       "device_busy_seconds": busy, "kernels_per_step": 1900.0,
                                       "device_gap_seconds": 1e-6}))
    r = WorkloadResult(name=name, source="builtin", mode="bf16",
                       sweep_param="seq", points=pts)
    return certificate(None).model_copy(update={"workloads": [r]})


def test_a_users_family_is_scaled_from_its_one_measured_size(with_rate):
    cert = _family_cert()
    n0 = 12 * 16 * 1024**2 + 2 * 32000 * 1024  # 266,862,592: the family's own size
    lad_ = lad(cert, f"{n0}:d1024L16,937M:d2048L16H16", workload="hf:gpt_neox")
    own, big = lad_.rows
    # its base shape: the most tokens (16 x 1024; no tinylm law to match the batch x seq of)
    assert lad_.workload == "hf:gpt_neox@d1024L16" and lad_.batch == 16 and lad_.seq == 1024
    assert "read at d1024L16 (4 profiled shapes)" in lad_.law_how
    # at its own size the law is its own measured step
    b, s = 16, 1024
    g = 6.0 * b * s * (12 * 16 * 1024**2 + 32000 * 1024)
    busy = 2 * g / RATE + 12.0 * b * s * s * 1024 * 16 / RATE + 5e-6 * 1900
    assert own.step.value == pytest.approx(busy + 1e-6 * 1900, rel=0.02)
    assert not own.wall_a.extrapolated and big.wall_a.extrapolated
    # d2048 L16: 4x the layers' GEMM FLOPs, 2x the head's; the same kernels (same depth)
    g2 = 6.0 * b * s * (12 * 16 * 2048**2 + 32000 * 2048)
    busy2 = 2 * g2 / RATE + 12.0 * b * s * s * 2048 * 16 / RATE + 5e-6 * 1900
    assert big.step.value == pytest.approx(busy2 + 1e-6 * 1900, rel=0.05)
    assert big.beyond == pytest.approx(937e6 / n0)
    assert big.wall_a_error is None  # one size of the family, no tinylm law: unchecked


def test_a_module_factory_whose_shape_names_d_and_L_is_scaled_too(with_rate):
    cert = _family_cert(name="mylab.models:make_lm")
    lad_ = lad(cert, "1B", workload="mylab.models:make_lm")
    row = lad_.rows[0]
    assert lad_.workload == "mylab.models:make_lm" and row.step is not None
    assert row.shape_note.startswith("chosen: d1664L26 at mylab.models:make_lm's aspect")
    assert row.affordable is not None and row.wall_a.extrapolated


def test_a_family_that_cannot_be_scaled_says_why(with_rate):
    lad_ = lad(_family_cert(with_shape=False), "1B", workload="hf:gpt_neox")
    row = lad_.rows[0]
    assert row.wall_a is None and "names no width d and depth L" in row.wall_a_note
    assert row.affordable is None and row.reason.startswith("(a) unknown (hf:gpt_neox")
    with pytest.raises(InputError, match="no such workload in bf16; it has: hf:gpt_neox"):
        lad(_family_cert(), "1B", workload="hf:llama")
