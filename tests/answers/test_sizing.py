"""Sizing from a memory law: published tables, a synthetic GPU certificate whose law is known
exactly, figures.predicted_memory / max_batch, and `afford size` through the runner."""

import json
import math
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from afford import figures
from afford.certification.stage_memory import build_law, dim_keys, memory_modes, plan_job
from afford.cli import app
from afford.core.provenance import Tag, module
from afford.core.published_constants import load_memory_defaults
from afford.figures import memory_figures
from afford.fit.memory import sizing
from afford.schema import memory_law
from afford.schema.cert import Certificate, Environment, Protocol, save_certificate
from afford.schema.memory_section import MemorySection, MemoryShape
from afford.workloads import resolve
from afford.workloads.tinylm import tinylm_params
from tests.paths import ROOT

GiB, MiB = 2**30, 2**20
C_RES, FIXED = 72.0, 30 * MiB           # the synthetic box's allocated law
C_RES_R, FIXED_R = 75.6, 94 * MiB       # and its reserved law
DEVICE = 150_000_000_000


# ---- published numbers -----------------------------------------------------------------

@pytest.mark.parametrize("mode,B,gib", [("fp32", 8, 17.89), ("fp32", 4, 9.87),
                                        ("bf16", 8, 9.87), ("bf16", 4, 5.86)])
def test_korthikanti_plus_zero_reproduces_the_gpt2_table(mode, B, gib):
    """docs/REFERENCES.md: GPT-2 small (124.4M params, L12, h768, a12) at B x 1024, eq. 1 as
    published (scores materialised) + 16 B/param."""
    k = sizing.korthikanti_zero(mode, "fused", 768, 12, published=True)
    dims = {"B": B, "s": 1024, "d": 768, "L": 12, "H": 12}
    # the table prints two decimals, rounded half up (17.885 -> 17.89)
    assert k.bytes(124.4e6, dims) / GiB == pytest.approx(gib, abs=0.0051)


def test_four_x_rule_on_gpt2_small_is_1_85_gib():
    dims = {"B": 8, "s": 1024, "d": 768, "L": 12, "H": 12}
    assert sizing.four_x_model_size().bytes(124.4e6, dims) / GiB == pytest.approx(1.85, abs=0.005)
    # frozen parameters are counted at the rule's frozen bytes per parameter, on top
    assert sizing.four_x_model_size().bytes(10.0, dims, frozen=5.0) == 16 * 10 + 16 * 5
    # a constant a default leaves out (None) counts 0; a fixed workspace adds its bytes
    part = sizing.Defaults(key="k", name="partial", citation="c", c_res=2.0, fixed_bytes=100.0)
    assert part.bytes(10.0, dims, frozen=5.0) == 100 + 12 * 2.0 * 8 * 1024 * 768


def test_korthikanti_fused_attention_folds_softmax_statistics_into_c_res():
    k = sizing.korthikanti_zero("bf16", "fused", 768, 12)
    assert (k.c_res, k.c_op) == (34.0 + 4 * 12 / 768, 0.0)  # 34 s b h + 4 a s b
    # fp32 activations double the 34 s b h term; the 4 a s b softmax statistics stay
    assert sizing.korthikanti_zero("fp32", "fused", 768, 12).c_res == 68.0 + 4 * 12 / 768
    assert sizing.korthikanti_zero("fp32", "materialised", 64, 1).c_res == 68.0
    assert sizing.korthikanti_zero("fp32", None, 64, 1) is None  # not attention


def test_inherited_defaults_absent_until_filled():
    d, why = sizing.inherited_defaults("bf16", {"source": {"citation": ""}, "modes": {}})
    assert d is None and "no INHERITED" in why
    data = {"source": {"citation": "afford on H200", "date": "2026-12-02", "commit": "abc"},
            "modes": {"bf16": {"bytes_per_param": 16.0, "c_res": 41.5, "c_op": 0.0,
                               "fixed_bytes": 1e8}}}
    d, _ = sizing.inherited_defaults("bf16", data)
    assert (d.c_res, d.fixed_bytes, d.tag) == (41.5, 1e8, Tag.INHERITED)
    assert "commit abc" in d.citation
    # a table without a fixed term has none (the law's fixed bytes default to 0)
    del data["modes"]["bf16"]["fixed_bytes"]
    assert sizing.inherited_defaults("bf16", data)[0].fixed_bytes == 0.0
    # the shipped data file parses (its tables may still be empty)
    assert isinstance(load_memory_defaults(), dict)


# ---- a synthetic GPU box with a known law ----------------------------------------------

def fake_shapes(job, w):
    """What the memory child would report on a box whose law is exactly C_RES, FIXED."""
    out = []
    for role, shape in job.runs:
        dims = w.dims(shape)
        params = tinylm_params(dims["d"], dims["L"], dims["s"])
        act = dims["L"] * dims["B"] * dims["s"] * dims["d"]
        states = 16 * params
        alloc = states + FIXED + C_RES * act
        res = states + FIXED_R + C_RES_R * act
        out.append(MemoryShape(
            key=job.key(role, shape), role=role, shape=shape, dims=dims, params=params,
            states_bytes=states, steps=4, memory_source="synthetic",
            allocated_by_step=[int(alloc - 8 * params)] + [int(alloc)] * 3,
            reserved_by_step=[int(res - 8 * params), int(res) - 2 * MiB, int(res), int(res)]))
    return out


@pytest.fixture(scope="module")
def gpu_law():
    w = resolve("tinylm", "large-gpu")
    job = plan_job("tinylm", w, "bf16", "large-gpu")
    env = SimpleNamespace(device_type="cuda", device_memory_bytes=DEVICE)
    return build_law(job, fake_shapes(job, w), env)


def make_cert(memory, device_type="cuda", device_memory=DEVICE):
    env = Environment(device_type=device_type, device_name="Fake GPU", device_class="large-gpu",
                      device_memory_bytes=device_memory, os="test", python_version="3",
                      torch_version="2", torch_num_threads=1, float32_matmul_precision="highest",
                      afford_version="0", command="test",
                      started_at=datetime(2026, 12, 2, tzinfo=timezone.utc))
    protocol = Protocol(precision="quick", children=3, warmup_steps=2, warmup_seconds=0.05,
                        min_timed_steps=12, floor_seconds=0.1, max_floor_seconds=0.1,
                        target_rel_precision=0.01, clock="fake")
    return Certificate(environment=env, protocol=protocol, workloads=[], memory=memory)


@pytest.fixture(scope="module")
def gpu_cert(gpu_law):
    return make_cert(MemorySection(steps_per_shape=4, budget_fraction=0.9, tolerance=0.05,
                                   targets={"allocated": 0.02, "reserved": 0.03},
                                   device_memory_bytes=DEVICE, laws=[gpu_law], wall_seconds=1.0))


def test_plan_has_sweeps_and_heldout_shapes():
    w = resolve("tinylm", "large-gpu")
    assert dim_keys(w, w.shape(512)) == {"B": "batch", "s": "seq", "d": "d", "L": "L", "H": "H"}
    job = plan_job("tinylm", w, "fp32", "large-gpu")
    bs = {role: [] for role, _ in job.runs}
    for role, shape in job.runs:
        bs[role].append((shape["batch"], shape["seq"]))
    assert bs["base"] == [(8, 2048)] and bs["warmup"] == [(8, 2048)]
    assert bs["seq"] == [(8, 512), (8, 1024), (8, 4096)]
    assert bs["batch"] == [(2, 2048), (4, 2048), (16, 2048)]
    assert bs["heldout-interpolated"] == [(6, 3072)]
    assert bs["heldout-seq"] == [(8, 8192)] and bs["heldout-batch"] == [(32, 2048)]


def test_memory_modes():
    assert memory_modes([], "cuda", "9.0") == ["fp32", "bf16"]
    assert memory_modes([], "cuda", "7.5") == ["fp32"]
    assert memory_modes([], "cpu", None) == ["fp32"]
    assert memory_modes(["bf16", "bf16"], "cuda", "9.0") == ["bf16"]


def test_law_recovers_the_synthetic_box(gpu_law):
    law = gpu_law
    assert law.allocated.form == "states_plus_fixed"
    assert law.allocated.c_res == pytest.approx(C_RES, rel=1e-6)
    assert law.allocated.fixed_bytes == pytest.approx(FIXED, rel=1e-4)
    assert law.reserved.c_res == pytest.approx(C_RES_R, rel=1e-6)
    assert law.bytes_per_param == 16.0 and law.params_per_s == pytest.approx(512.0)
    assert law.batch_linearity_r2 == pytest.approx(1.0)
    assert law.attention == "fused"
    # held-out: exact law, so every error is ~0; 2x beyond is flagged extrapolated
    assert {h.role: h.extrapolated for h in law.heldout} == {
        "heldout-interpolated": False, "heldout-seq": True, "heldout-batch": True}
    assert all(abs(h.error) < 1e-6 and abs(h.reserved_error) < 1e-6 for h in law.heldout)
    assert not [w for w in law.warnings if "held-out" in w]
    # one step vs the loop: 8 B/param (the Adam moments), 2 MiB of allocator growth
    assert law.loop.median_extra_bytes_per_param == pytest.approx(8.0)
    assert law.loop.max_growth_after_step1_bytes == 2 * MiB


def test_verdicts_on_the_synthetic_box(gpu_law):
    by = {(v.default_name.split(" (")[0].split(" +")[0], v.constant): v for v in gpu_law.verdicts}
    zero = by[("Korthikanti", "bytes_per_param")]
    assert zero.status == "CONFIRMED" and zero.effect == pytest.approx(0.0, abs=1e-9)
    c_res = next(v for v in gpu_law.verdicts if v.constant == "c_res" and "fused" in v.default_name)
    # bf16: 34 + 4*8/512 = 34.0625 against 72 -> under-predicts: optimistic
    assert c_res.default_value == pytest.approx(34.0625)
    assert c_res.status == "WRONG" and c_res.direction == "optimistic"
    assert c_res.max_batch_default > c_res.max_batch_fitted
    four = by[('"4x model size" rule', "formula")]
    assert four.direction == "optimistic" and "any batch" in four.consequence


def _hand_max_batch(s, budget):
    """reserved(B) = 16 P(s) + FIXED_R + C_RES_R * L*B*s*d  <=  budget."""
    states = 16 * tinylm_params(512, 8, s)
    return math.floor((budget - states - FIXED_R) / (C_RES_R * 8 * s * 512))


def test_predicted_memory_and_max_batch_through_readings(gpu_cert):
    alloc, res = figures.predicted_memory(gpu_cert, "tinylm", {"batch": 16, "seq": 8192})
    states = 16 * tinylm_params(512, 8, 8192)
    act = 8 * 16 * 8192 * 512
    assert alloc.tag == Tag.FITTED and alloc.extrapolated
    assert alloc.value == pytest.approx(states + FIXED + C_RES * act, rel=1e-6)
    assert res.value == pytest.approx(states + FIXED_R + C_RES_R * act, rel=1e-6)
    inside, _ = figures.predicted_memory(gpu_cert, "tinylm", {"B": 6, "s": 768})
    assert not inside.extrapolated
    mb = figures.max_batch(gpu_cert, "tinylm", {"seq": 4096}, 0.9 * DEVICE)
    # seq 4096 lies past the measured sequences: the largest batch that fits with the
    # extrapolation's plausible error, at most the law's own (worked by hand)
    assert mb.tag == Tag.FITTED and mb.extrapolated
    assert 0.9 * _hand_max_batch(4096, 0.9 * DEVICE) <= mb.value <= \
        _hand_max_batch(4096, 0.9 * DEVICE)
    cap = module(0.9 * DEVICE, "B", "test")
    at = figures.memory_answer(gpu_cert, "tinylm", {"batch": mb.value, "seq": 4096}, budget=cap)
    over = figures.memory_answer(gpu_cert, "tinylm", {"batch": mb.value + 1, "seq": 4096},
                                 budget=cap)
    assert at.fits == "likely" and over.fits in ("uncertain", "no")
    assert figures.predicted_memory(gpu_cert, "nope", {"seq": 1}) is None
    assert figures.max_batch(gpu_cert, "tinylm", {"seq": 1}, 1, mode="fp32") is None


def test_other_width_scales_params_and_is_extrapolated(gpu_law):
    p = sizing.predict(gpu_law, {"d": 1024, "seq": 512}, "run")
    assert p.extrapolated and p.notes and "L*d^2" in p.notes[0]
    base = tinylm_params(512, 8, 512)
    assert p.params.value == pytest.approx(base * 4)
    given = sizing.predict(gpu_law, {"d": 1024, "params": 1e8}, "run")
    assert given.params.value == 1e8 and not given.notes


# ---- afford size -------------------------------------------------------------------------

runner = CliRunner()


def size(*args):
    return runner.invoke(app, ["size", *map(str, args)])


@pytest.fixture(scope="module")
def gpu_cert_path(gpu_cert, tmp_path_factory):
    path = tmp_path_factory.mktemp("size") / "gpu.json"
    save_certificate(gpu_cert, path)
    return path


@pytest.mark.parametrize("args,match", [
    (["/no/such/cert.json", "--seq", "512"], "no such file"),
    (["CERT", "--seq", "512", "--workload", "nope"], "no memory law for 'nope'"),
    (["CERT", "--seq", "abc"], "--seq 'abc'"),
    (["CERT", "--seq", "0"], "positive whole number"),
    (["CERT", "--seq", "1.5"], "positive whole number"),
    (["CERT", "--seq", "512", "--batch", "-3"], "--batch"),
    (["CERT", "--seq", "512", "--budget", "1.5"], "out of range [1e-06, 1]"),
    (["CERT", "--seq", "512", "--memory-fraction", "150%"], "out of range [1e-06, 1]"),
    (["CERT", "--seq", "512", "--mode", "int4"], "unknown mode"),
    (["CERT", "--seq", "512", "--mode", "fp32"], "in mode fp32"),
])
def test_size_bad_input_exits_2(gpu_cert_path, args, match):
    r = size(*[str(gpu_cert_path) if a == "CERT" else a for a in args])
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


def test_size_without_seq_is_a_usage_error(gpu_cert_path):
    assert size(gpu_cert_path).exit_code == 2


def test_size_of_a_certificate_without_memory_section(tmp_path):
    path = tmp_path / "old.json"
    save_certificate(make_cert(None), path)
    r = size(path, "--seq", "512")
    assert r.exit_code == 2 and "no memory section" in r.output


def test_size_json_answers_with_the_largest_batch(gpu_cert_path):
    r = size(gpu_cert_path, "--seq", "4096", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    mb = _hand_max_batch(4096, 0.9 * DEVICE)
    assert doc["schema"] == "afford.size/1" and doc["dims"]["s"] == 4096
    got = doc["max_batch"]["value"]  # past the measured sequences: with room for its error
    assert 0.9 * mb <= got <= mb and doc["max_batch"]["tag"] == "FITTED"
    assert doc["dims"]["B"] == got and doc["fits_level"] == "likely"  # no --batch: at the largest
    assert doc["peak_allocated"]["tag"] == "FITTED" and doc["peak_allocated"]["extrapolated"]
    keys = {c["key"] for c in doc["comparisons"]}
    assert {"four_x_model_size", "korthikanti_zero", "korthikanti_eq1_zero"} <= keys
    assert all(c["peak"]["tag"] == "MODULE" for c in doc["comparisons"])
    assert doc["heldout_max_error"]["allocated"]["value"] < 1e-6


def test_size_batch_that_does_not_fit_exits_1_with_the_oom_note(gpu_cert_path):
    r = size(gpu_cert_path, "--seq", "4096", "--batch", "1000", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["fits_level"] == "no" and doc["over_device_memory"] is True
    assert doc["note"] == memory_figures.OOM_NOTE
    ok = size(gpu_cert_path, "--seq", "4096", "--batch", "8")
    assert ok.exit_code == 0 and "yes" in ok.stdout and "F*" in ok.stdout


def test_size_budget_between_budget_and_card_fits_no_without_oom_note(gpu_cert_path):
    b = _hand_max_batch(4096, 0.9 * DEVICE) + 1  # over 90 %, under the card
    r = size(gpu_cert_path, "--seq", "4096", "--batch", b, "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["fits_level"] in ("no", "uncertain") and doc["note"] is None
    r = size(gpu_cert_path, "--seq", "4096", "--batch", b, "--budget", "100%", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["fits_level"] == "likely"


def test_size_memory_fraction_and_its_deprecated_name(gpu_cert_path):
    b = _hand_max_batch(4096, 0.9 * DEVICE) + 1  # over 90 %, under the card
    new = size(gpu_cert_path, "--seq", "4096", "--batch", b, "--memory-fraction", "1.0", "--json")
    assert new.exit_code == 0 and json.loads(new.stdout)["fits_level"] == "likely"
    assert "deprecated" not in new.stderr
    old = size(gpu_cert_path, "--seq", "4096", "--batch", b, "--budget", "1.0", "--json")
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert old.stderr.count("\n") == 1 and "--budget is deprecated; use --memory-fraction" \
        in old.stderr
    assert "--budget" not in size(gpu_cert_path, "--help").stdout


def test_renderers_tag_every_number(gpu_cert):
    from rich.console import Console

    from afford.report.memory_tables import memory_summary_table, size_tables

    console = Console(width=200, record=True)
    report = memory_figures.size(gpu_cert, "tinylm", 4096, 64, None, 0.9, "run")
    for t in size_tables(report):
        console.print(t)
    console.print(memory_summary_table(gpu_cert))
    text = console.export_text()
    assert "F*" in text and "CONFIRMED" in text and "WRONG (optimistic)" in text
    assert "Korthikanti" in text and '"4x model size" rule' in text


def test_shape_with_a_bad_dimension_is_input_error(gpu_law):
    from afford.core.errors import InputError

    with pytest.raises(InputError, match="positive integer"):
        sizing.predict(gpu_law, {"seq": 0}, "run")
    assert not memory_law.extrapolated(gpu_law, {**gpu_law.base_dims})
    assert memory_law.extrapolated(gpu_law, {**gpu_law.base_dims, "L": 4})


def test_size_when_not_even_one_sequence_fits_exits_1(gpu_cert_path):
    r = size(gpu_cert_path, "--seq", "10000000", "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["max_batch"]["value"] == 0 and doc["fits_level"] == "no"
    assert doc["dims"]["B"] == 1  # shown at one sequence


def test_defaults_block_from_a_certificate_round_trips(gpu_cert):
    import importlib.util

    tomllib = pytest.importorskip("tomllib")
    path = ROOT / "tools" / "memory_defaults_from_cert.py"
    spec = importlib.util.spec_from_file_location("memory_defaults_from_cert", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    data = tomllib.loads(mod.block(gpu_cert, "tinylm"))
    d, _ = sizing.inherited_defaults("bf16", data)
    law = gpu_cert.memory.laws[0]
    assert d.c_res == pytest.approx(law.allocated.c_res, rel=1e-6)
    assert d.fixed_bytes == pytest.approx(law.allocated.fixed_bytes, abs=1)
    assert data["source"]["date"] == "2026-12-02" and "Fake GPU" in d.citation
    # with these defaults the verdicts judge the box's own law: every constant CONFIRMED
    mine = [v for v in sizing.verdicts(law, law.base_dims, 1e11, data=data)
            if v.default_name.startswith("afford H200")]
    assert mine and all(v.status == "CONFIRMED" for v in mine)


def test_shapes_that_were_not_resident_are_left_out():
    from afford.certification.stage_memory import exclusion

    base = dict(key="k", role="seq", shape={}, dims={"B": 1, "s": 1}, params=10,
                states_bytes=160, steps=2)
    ok = MemoryShape(**base, allocated_by_step=[5, 6], reserved_by_step=[7, 8])
    assert exclusion(ok, "allocated", 100) is None
    assert "exceeds the device" in exclusion(ok, "allocated", 7)  # WDDM: paged, not raised
    swapped = MemoryShape(**base, rss_by_step=[50, 60], baseline_rss_bytes=10, swap_bytes=4096)
    assert "paged to swap" in exclusion(swapped, "rss_increment", None)
    flat = MemoryShape(**base, rss_by_step=[10, 10], baseline_rss_bytes=10)
    assert "not above the baseline" in exclusion(flat, "rss_increment", None)
    oom = MemoryShape(**{**base, "steps": 0}, oom=True, error="OutOfMemoryError: x")
    assert exclusion(oom, "allocated", None).startswith("out of memory: OutOfMemoryError")


# ---- the user's own constants (afford size --constants) -----------------------------------

MY_CONSTANTS = """schema = "afford.constants/1"
name = "my sizing"
citation = "mysizing.py at abc123"

[[constant]]
name = "C_RESIDUAL"
value = {c_res}
unit = "B/elem"
multiplies = "c_res"
mode = "bf16"

[[constant]]
name = "BYTES_PER_PARAM"
value = 16
unit = "B/param"
multiplies = "bytes_per_param"
mode = "bf16"

[[constant]]
name = "C_RESIDUAL_FP32"
value = 18
unit = "B/elem"
multiplies = "c_res"
mode = "fp32"
"""


def _constants(tmp_path, c_res):
    path = tmp_path / "my_sizing.toml"
    path.write_text(MY_CONSTANTS.format(c_res=c_res))
    return path


def test_user_constants_judged_like_the_defaults(gpu_cert, tmp_path):
    """The synthetic box's law is exactly C_res = 72 B/elem, 16 B/param (bf16). A user's
    C_res of 72 is CONFIRMED; 60 is WRONG and optimistic, and replacing it changes the peak
    by exactly L x (60 - 72) x B*s*d bytes at the target."""
    from afford.schema.user_constants import load_constants

    law = gpu_cert.memory.laws[0]
    ok = sizing.user_defaults(load_constants(_constants(tmp_path, 72)), "bf16")[0]
    mine = [v for v in sizing.verdicts(law, law.base_dims, 1e11, extra=(ok,))
            if v.default_name == "my sizing"]
    assert {v.constant: v.status for v in mine} == {"bytes_per_param": "CONFIRMED",
                                                    "c_res": "CONFIRMED"}
    # bytes_per_param and c_res only: c_op missing, so the whole formula is not judged
    assert not ok.formula and "C_RESIDUAL = 72 B/elem (c_res)" in ok.citation
    bad = sizing.user_defaults(load_constants(_constants(tmp_path, 60)), "bf16")[0]
    v = next(v for v in sizing.verdicts(law, law.base_dims, 1e11, extra=(bad,))
             if v.default_name == "my sizing" and v.constant == "c_res")
    d = law.base_dims
    act = d["L"] * d["B"] * d["s"] * d["d"]
    assert v.default_bytes - v.fitted_bytes == pytest.approx((60 - law.allocated.c_res) * act)
    assert v.status == "WRONG" and v.direction == "optimistic"
    assert v.effect == pytest.approx(v.default_bytes / v.fitted_bytes - 1)
    none, why = sizing.user_defaults(load_constants(_constants(tmp_path, 60)), "fp16")
    assert none is None and "no constants for mode fp16" in why


@pytest.mark.parametrize("edit,match", [
    (('unit = "B/elem"', 'unit = "GiB"', 1), "is in B/elem, not 'GiB'"),
    (('mode = "fp32"', 'mode = "int8"', 1), "not one of"),
    (('citation = "mysizing.py at abc123"', 'citation = ""', 1), "citation"),
    (('mode = "fp32"', 'mode = "bf16"', 1), "two constants multiply c_res in mode bf16"),
])
def test_user_constants_schema_refuses_bad_files(tmp_path, edit, match):
    from afford.core.errors import InputError
    from afford.schema.user_constants import load_constants

    path = tmp_path / "c.toml"
    path.write_text(MY_CONSTANTS.format(c_res=72).replace(*edit))
    with pytest.raises(InputError, match=match):
        load_constants(path)


def test_size_with_constants_through_the_cli(gpu_cert_path, tmp_path):
    path = _constants(tmp_path, 60)
    r = size(gpu_cert_path, "--seq", "512", "--constants", path, "--json")
    assert r.exit_code == 0, r.output  # no --batch: the largest batch that fits, so it fits
    doc = json.loads(r.stdout)
    assert doc["fits"] is True
    mine = {v["constant"]: v["status"] for v in doc["verdicts"]
            if v["default_name"] == "my sizing"}
    assert mine == {"bytes_per_param": "CONFIRMED", "c_res": "WRONG"}
    assert any("whole formula is not judged" in w for w in doc["warnings"])
    text = size(gpu_cert_path, "--seq", "512", "--constants", path)
    assert "my sizing" in text.output and "WRONG" in text.output
    assert runner.invoke(app, ["schema", "constants"]).exit_code == 0


def test_user_constants_with_every_term_judge_the_whole_formula(gpu_cert):
    from afford.schema.user_constants import UserConstants

    consts = UserConstants.model_validate({
        "schema": "afford.constants/1", "name": "mine", "citation": "here",
        "constant": [{"name": n, "value": v, "unit": u, "multiplies": t, "mode": "bf16"}
                     for n, v, u, t in (("P", 16, "B/param", "bytes_per_param"),
                                        ("R", 72, "B/elem", "c_res"),
                                        ("O", 0, "B/elem", "c_op"))]})
    law = gpu_cert.memory.laws[0]
    mine, why = sizing.user_defaults(consts, "bf16")
    assert mine.formula and why == ""
    got = {v.constant for v in sizing.verdicts(law, law.base_dims, 1e11, extra=(mine,))
           if v.default_name == "mine"}
    assert got == {"bytes_per_param", "c_res", "c_op", "formula"}


def test_every_verdict_row_group_names_its_formula(gpu_cert, tmp_path):
    """Issue 30, item 11: a user's formula without a bytes_per_param constant (here c_res
    alone) lost its name in the verdict table: the name was printed only on a formula or a
    bytes_per_param row."""
    from rich.console import Console

    from afford.report.memory_tables import verdict_table
    from afford.schema.user_constants import load_constants

    path = tmp_path / "only_c_res.toml"
    path.write_text(MY_CONSTANTS.format(c_res=60).split("[[constant]]")[0] + "[[constant]]"
                    + MY_CONSTANTS.format(c_res=60).split("[[constant]]")[1])
    mine = sizing.user_defaults(load_constants(path), "bf16")[0]
    law = gpu_cert.memory.laws[0]
    rows = [v for v in sizing.verdicts(law, law.base_dims, 1e11, extra=(mine,))]
    assert [v.constant for v in rows if v.default_name == "my sizing"] == ["c_res"]
    con = Console(width=250, record=True)
    con.print(verdict_table(rows, "verdicts"))
    line = next(ln for ln in con.export_text().splitlines() if "c_res" in ln and "WRONG" in ln
                and "60" in ln)
    assert "my sizing" in line
