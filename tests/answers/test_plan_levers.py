"""plan/levers: a levers run read into tagged rows, on a hand-built section (no torch). FLOPs
of a variant = base FLOPs per token x its tokens; MFU = FLOPs / step seconds / peak (PaLM,
Chowdhery et al. 2022, appendix B); the values below are worked by hand."""

import pytest

from afford.core.provenance import NotExecutable, Tag, measured
from afford.figures import probes_figures
from afford.planning import lever_rows as levers
from afford.schema.levers_section import Lever, LeverRun, LeversSection, LeverVariant
from tests.synthetic_cert import T0, certificate, point

PEAK = 1e13  # the certificate's measured bf16 GEMM rate, FLOP/s


def variant(key, spec, seconds, tokens, step0=None, excluded=None):
    p = point(seconds, tokens=tokens, excluded=excluded).model_copy(
        update={"step0_seconds": step0})
    return LeverVariant(key=key, spec=spec, mode="bf16", label=key.upper(), point=p)


def lever(**over):
    fields = dict(name="compile", description="torch.compile", a="a", b="b",
                  metric="step_seconds", per_child=[1.5, 1.6, 1.7], speedup=1.6,
                  speedup_min=1.5, speedup_max=1.7)
    return Lever(**{**fields, **over})


def section(run):
    return LeversSection(device_name="NVIDIA H200", torch_version="2.11.0", started_at=T0,
                         command="afford levers", precision="quick", children=3,
                         clock="fake", runs=[run])


def run(variants, lv=None, flops=1e12, warnings=()):
    # the base variant (spec "tiny+flops") does 1e12 FLOP per 8192-token step
    return LeverRun(workload="tiny", value=1024, mode="bf16", flops_per_step=flops,
                    flops_source="counted", variants=variants, levers=[lv or lever()],
                    warnings=list(warnings))


BASE = variant("a", "tiny+flops", 0.5, 8192)
DOUBLE = variant("b", "tiny+compile", 0.8, 16384, step0=12.0)  # twice the tokens per step


@pytest.fixture
def peak(monkeypatch):
    monkeypatch.setattr(probes_figures, "gemm_rate", lambda cert, dtype: measured(
        PEAK, "FLOP/s", f"GEMM {dtype}") if dtype == "bf16" else None)


def test_variant_flops_scale_with_tokens_per_step():
    r = run([BASE, DOUBLE])
    assert levers.variant_flops(r, BASE) == pytest.approx(1e12)
    assert levers.variant_flops(r, DOUBLE) == pytest.approx(2e12)  # 1e12 / 8192 x 16384
    # achieved FLOP/s = FLOPs / measured step seconds
    assert levers.achieved_flops(r, DOUBLE).value == pytest.approx(2e12 / 0.8)
    assert levers.achieved_flops(r, BASE).value == pytest.approx(2e12)


@pytest.mark.parametrize("r", [
    run([BASE, DOUBLE], flops=None),                                # no FLOP count
    run([variant("a", "tiny", 0.5, 8192), DOUBLE]),                 # no base variant
    run([variant("a", "tiny+flops", 0.5, None), DOUBLE]),           # base without tokens
])
def test_no_flops_without_a_count_and_a_base_with_tokens(r):
    assert levers.variant_flops(r, DOUBLE) is None
    assert levers.achieved_flops(r, DOUBLE) is None


def test_no_flops_for_a_variant_without_tokens_or_a_point():
    r = run([BASE, DOUBLE])
    assert levers.variant_flops(r, variant("c", "tiny+x", 0.5, None)) is None
    blocked = LeverVariant(key="c", spec="tiny+x", mode="bf16", label="C", point=None)
    assert levers.variant_flops(r, blocked) is None
    assert levers.achieved_flops(r, variant("c", "tiny+x", None, 8192)) is None  # not timed


def test_lever_row_by_hand(peak):
    row, = levers.lever_rows(certificate(), section(run([BASE, DOUBLE])))
    assert (row.workload, row.lever, row.a_label, row.b_label) == ("tiny", "compile", "A", "B")
    assert (row.a_seconds.value, row.b_seconds.value) == (0.5, 0.8)
    assert (row.speedup.value, row.speedup_min.value, row.speedup_max.value) == (1.6, 1.5, 1.7)
    assert row.speedup.tag is Tag.MEASURED and "median over 3 children" in row.speedup.source
    assert row.b_step0.value == 12.0
    assert row.mfu_a.value == pytest.approx(1e12 / 0.5 / PEAK)   # 0.2
    assert row.mfu_b.value == pytest.approx(2e12 / 0.8 / PEAK)   # 0.25
    assert row.mfu_a.tag is Tag.MODULE and row.mfu_note == ""
    assert row.not_executable is None


def test_lever_row_without_step0_or_peak(monkeypatch):
    monkeypatch.setattr(probes_figures, "gemm_rate", lambda cert, dtype: None)
    row, = levers.lever_rows(certificate(), section(run([BASE, variant("b", "tiny+c", 0.8,
                                                                       16384)])))
    assert row.b_step0 is None and row.mfu_a is None and row.mfu_b is None
    assert row.mfu_note == "no measured bf16 GEMM rate in the certificate (probes stage)"
    assert row.achieved_b.value == pytest.approx(2e12 / 0.8)  # needs no peak


def test_lever_row_without_a_flop_count_says_why(peak):
    row, = levers.lever_rows(certificate(), section(run([BASE, DOUBLE], flops=None,
                                                        warnings=["FLOP counter failed"])))
    assert row.mfu_a is None and row.mfu_b is None
    assert row.mfu_note == "no FLOP count (FLOP counter failed)"
    assert row.speedup.value == 1.6  # the speedup stands without FLOPs


def test_not_executable_lever_keeps_only_the_seconds(peak):
    blocked = lever(speedup=None, speedup_min=None, speedup_max=None, per_child=[],
                    not_executable=NotExecutable(what="compile", reason="no triton"))
    excluded = variant("b", "tiny+compile", 0.8, 16384, excluded="failed in child 0")
    row, = levers.lever_rows(certificate(), section(run([BASE, excluded], lv=blocked)))
    assert row.not_executable.reason == "no triton"
    assert row.a_seconds.value == 0.5 and row.b_seconds is None  # excluded: no seconds
    assert row.speedup is None and row.mfu_a is None and row.b_step0 is None
    # a lever without a speedup (not measured) is read as not executable too
    row, = levers.lever_rows(certificate(), section(run([BASE, DOUBLE], lv=lever(
        speedup=None))))
    assert row.speedup is None and row.mfu_b is None


def test_the_batch_ab_gives_each_rung_its_gain_and_its_memory():
    """Issue 30, item 9, with the ladder note's own figures: 244 / 440 / 826 ms at batch
    8 / 16 / 32 x 512 tokens is 16.8k / 18.6k / 19.8k tok/s: +10.9 %, then +6.5 %; the
    memory each rung costs beside it."""
    def rung(spec, seconds, batch, reserved):
        v = variant(spec, f"tiny{spec}", seconds, batch * 512)
        p = v.point.model_copy(update={"batch": batch, "peak_reserved_bytes": reserved})
        return v.model_copy(update={"point": p})

    vs = [rung("+flops", 0.244, 8, 2 * 2**30), rung("+x2", 0.440, 16, 4 * 2**30),
          rung("+x4", 0.826, 32, 8 * 2**30), variant("b", "tiny+compile", 0.2, 4096)]
    rows = levers.batch_rungs(run(vs), "H200, levers 2026-09-29")
    assert [r.multiplier for r in rows] == [1, 2, 4] and [r.batch for r in rows] == [8, 16, 32]
    assert [round(r.tokens_per_second.value, -2) for r in rows] == [16800, 18600, 19800]
    assert rows[0].gain is None and rows[0].memory_ratio is None
    assert rows[1].gain.value == pytest.approx((8192 / 0.440) / (4096 / 0.244) - 1)  # +10.9 %
    assert rows[2].gain.value == pytest.approx(0.0654, abs=5e-4)                      # +6.5 %
    assert rows[2].memory_ratio.value == 2.0 and rows[2].memory.tag is Tag.MEASURED
    assert rows[1].step.tag is Tag.MEASURED and rows[1].tokens_per_second.tag is Tag.MODULE
    from rich.console import Console

    from afford.report.ladder_tables import batch_table

    con = Console(width=200, record=True)
    con.print(batch_table(rows))
    text = con.export_text()
    assert "10.91% C" in text and "6.54% C" in text and "8.00 GiB M" in text and "2.0x C" in text


def test_a_missing_rung_is_left_out_and_the_next_compares_with_the_one_before_it():
    vs = [variant("+flops", "tiny+flops", 0.25, 4096), variant("+x4", "tiny+x4", 0.8, 16384)]
    rows = levers.batch_rungs(run(vs), "box")
    assert [r.multiplier for r in rows] == [1, 4]
    assert rows[1].gain.value == pytest.approx((16384 / 0.8) / (4096 / 0.25) - 1)
    assert rows[1].memory is None and rows[1].memory_ratio is None


# --- a lever the children cannot resolve (issue 40, item 6) ----------------------------


@pytest.mark.parametrize("per_child,resolved", [
    ([0.41, 0.66, 1.2], False),   # bf16 at load 8 on a 2-core CPU: a "slowdown" of noise
    ([0.9, 1.04, 1.2], False),    # fused AdamW on an H200: straddles 1x
    ([1.22, 1.3, 1.62], True),    # compile: every child faster, however wide the range
    ([0.63, 0.77, 0.81], True),   # bf16 on a tiny model: every child slower, a real slowdown
])
def test_a_lever_is_resolved_only_where_every_child_moves_the_same_way(per_child, resolved):
    lv = lever(per_child=per_child, speedup=sorted(per_child)[1],
               speedup_min=min(per_child), speedup_max=max(per_child))
    assert levers.resolved(lv) is resolved
    row, = levers.lever_rows(certificate(), section(run([BASE, DOUBLE], lv=lv)),
                             load="load 8.2 on 2 core(s) after measuring")
    assert bool(row.unresolved) is not resolved
    if not resolved:
        assert row.unresolved.startswith("not resolved here (load 8.2 on 2 core(s) after "
                                         "measuring): its children's paired ratios, ")
        assert "neither a speedup nor a slowdown was measured" in row.unresolved
        assert row.speedup.value == lv.speedup  # the figure is kept, for the JSON
    assert levers.resolved(lever(speedup=None)) is None


def test_without_a_load_given_a_row_names_the_load_the_certificate_recorded():
    from afford.schema.time_section import HostLoad

    cert = certificate().model_copy(update={"host_load": [
        HostLoad(at="before", load_average=(7.7, 6.0, 3.0), cpu_count=2),
        HostLoad(at="after", load_average=(6.0, 6.0, 3.0), cpu_count=2)]})
    lv = lever(per_child=[0.5, 0.7, 1.1], speedup=0.7, speedup_min=0.5, speedup_max=1.1)
    row, = levers.lever_rows(cert, section(run([BASE, DOUBLE], lv=lv)))
    assert row.unresolved.startswith("not resolved here (load 7.7 on 2 core(s) before "
                                     "certifying)")
    plain, = levers.lever_rows(certificate(), section(run([BASE, DOUBLE], lv=lv)))
    assert plain.unresolved.startswith("not resolved here: ")
