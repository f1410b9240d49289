"""compare: the tolerance is stated before B is read; A and B are never pooled."""

import inspect
import json

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.core.errors import InputError
from afford.planning import compare_laws as compare
from tests.synthetic import make_cert

runner = CliRunner()


@pytest.fixture
def pair(tmp_path):
    def write(name, cert):
        p = tmp_path / name
        p.write_text(cert.to_json())
        return p

    return {"a": write("a.json", make_cert()),
            "same": write("same.json", make_cert("Other GPU", scale=1.03)),
            "slow": write("slow.json", make_cert("Slow GPU", scale=1.3))}


def test_the_tolerance_is_stated_before_b_is_read(pair):
    events = []

    def load(path):
        events.append(("load", path))
        return compare.load_certificate(path)

    def on_stated(s):
        events.append(("stated", s.tolerance, [law.workload for law in s.laws]))

    result = compare.compare_files(pair["a"], pair["same"], "5%", load=load,
                                   on_stated=on_stated)
    assert events == [("load", pair["a"]), ("stated", 0.05, ["softmax", "tinylm"]),
                      ("load", pair["same"])]
    assert result.tolerance == 0.05 and result.tolerance_text == "5%"
    # judge cannot be handed another tolerance: it only has the stated one
    assert list(inspect.signature(compare.judge).parameters) == ["stated", "b", "b_path"]


def test_a_bad_tolerance_fails_before_any_file_is_read(pair):
    calls = []
    with pytest.raises(InputError, match="--tol"):
        compare.compare_files(pair["a"], pair["same"], "five", load=calls.append)
    assert calls == []


@pytest.mark.parametrize("text", ["0", "0%", "100%", "1.5", "-5%", "nan", "inf", "1e999%",
                                  "[/]", ""])
def test_tolerance_range(text):
    with pytest.raises(InputError):
        compare.parse_tolerance(text)


def test_a_slower_box_does_not_reproduce(pair):
    r = compare.compare_files(pair["a"], pair["slow"], "5%")
    assert r.verdict == compare.NOT_REPRODUCED
    soft = r.checks[0]
    assert soft.workload == "softmax" and soft.verdict == compare.NOT_REPRODUCED
    # B's time is 1.3x A's law /(1 + residual); A's law predicts exp(a) x^b, so the error at
    # s=256 (residual +1 %) is 1.01 / 1.3 - 1
    assert soft.points[0].error.value == pytest.approx(1.01 / 1.3 - 1.0, rel=1e-12)
    assert all(not p.within for p in soft.points)
    assert soft.worst.value == pytest.approx(0.99 / 1.3 - 1.0)  # s=512, residual -1 %


def test_within_tolerance_reproduces_and_the_boundary_is_inclusive(pair):
    r = compare.compare_files(pair["a"], pair["same"], "5%")
    assert r.verdict == compare.REPRODUCES
    errs = [p.error.value for c in r.checks for p in c.points]
    assert len(errs) == 8 and max(abs(e) for e in errs) < 0.05
    worst = max(abs(e) for e in errs)
    tight = compare.compare_files(pair["a"], pair["same"], repr(worst))
    assert tight.verdict == compare.REPRODUCES
    tighter = compare.compare_files(pair["a"], pair["same"], repr(worst * 0.999))
    assert tighter.verdict == compare.NOT_REPRODUCED


def test_never_pooled(pair):
    """The law used is A's, unchanged; B's own law plays no part."""
    a = compare.load_certificate(pair["a"])
    r = compare.compare_files(pair["a"], pair["slow"], "5%")
    assert [law.law for law in r.laws] == [w.law for w in a.workloads]
    for check, w in zip(r.checks, a.workloads):
        for p in check.points:
            assert p.predicted.value == pytest.approx(w.law.predict(p.x)[0], rel=1e-15)
            assert p.predicted.tag.value == "FITTED" and p.measured.tag.value == "MEASURED"
            assert p.measured.source.startswith("B: ")


def test_extrapolated_predictions_are_flagged(tmp_path):
    a = make_cert()
    b = make_cert("Other GPU")
    w = b.workloads[0]
    pts = [p.model_copy(update={"value": p.value * 2}) for p in w.points]
    b = b.model_copy(update={"workloads": [w.model_copy(update={"points": pts})]})
    (tmp_path / "a.json").write_text(a.to_json())
    (tmp_path / "b.json").write_text(b.to_json())
    r = compare.compare_files(tmp_path / "a.json", tmp_path / "b.json", "50%")
    extra = [p.predicted.extrapolated for p in r.checks[0].points]
    assert extra == [False, False, False, True]  # 4096 is beyond A's 256..2048
    assert r.checks[1].verdict == compare.NOT_COMPARED and "no tinylm" in r.checks[1].note


def test_different_fixed_shapes_are_not_compared(tmp_path):
    b = make_cert("Other GPU")
    w = b.workloads[0]
    pts = [p.model_copy(update={"shape": {**p.shape, "b": 4}}) for p in w.points]
    b = b.model_copy(update={"workloads": [w.model_copy(update={"points": pts})]})
    (tmp_path / "a.json").write_text(make_cert().to_json())
    (tmp_path / "b.json").write_text(b.to_json())
    r = compare.compare_files(tmp_path / "a.json", tmp_path / "b.json", "5%")
    assert r.verdict == compare.NOT_COMPARED
    assert "shapes differ" in r.checks[0].note


def run(*args):
    return runner.invoke(app, ["compare", *args])


def test_cli_exit_codes(pair, tmp_path):
    r = run(str(pair["a"]), str(pair["same"]), "--tol", "5%")
    assert r.exit_code == 0, r.output
    assert "tolerance 5%, stated before B was read" in r.stdout and "REPRODUCES" in r.stdout
    r = run(str(pair["a"]), str(pair["slow"]), "--tol", "5%", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["schema"] == "afford.compare/1" and doc["tolerance"] == 0.05
    assert list(doc)[:3] == ["schema", "tolerance", "tolerance_text"]
    assert doc["verdict"] == "DOES NOT REPRODUCE"
    assert run(str(pair["a"]), str(pair["same"])).exit_code == 2  # --tol is required
    r = run(str(pair["a"]), str(tmp_path / "missing.json"), "--tol", "5%")
    assert r.exit_code == 2 and "no such file" in r.output and "Traceback" not in r.output
    r = run(str(pair["a"]), str(pair["same"]), "--tol", "lots")
    assert r.exit_code == 2 and "--tol" in r.output


def test_cli_nothing_comparable_exits_2(tmp_path):
    b = make_cert("Other GPU")
    b = b.model_copy(update={"workloads": []})
    (tmp_path / "a.json").write_text(make_cert().to_json())
    (tmp_path / "b.json").write_text(b.to_json())
    r = run(str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--tol", "5%")
    assert r.exit_code == 2 and "no law of A could be checked" in r.output


@pytest.mark.parametrize("text", ["nan", "-inf", "1e999", "0", "-1%", "[/]", "1" * 400])
def test_a_bad_tol_flag_is_exit_2_in_one_line(pair, text):
    from typer.testing import CliRunner

    from afford.cli import app

    r = CliRunner().invoke(app, ["compare", str(pair["a"]), str(pair["same"]), "--tol", text])
    assert r.exit_code == 2 and "--tol" in r.output and "Traceback" not in r.output, r.output


# ---- with a step-time model (issue 19) -------------------------------------------------------


def _timed_cert(seconds=None):
    """A certificate whose tinylm has a step-time model over the time design (tests/
    time_fakes: the max form; ``seconds(item, child)`` moves what the children measured)."""
    from afford.certification.stage_time import refit_law, settle
    from afford.schema.cert import Certificate, save_certificate
    from tests.synthetic_cert import environment, protocol
    from tests.time_fakes import FakeRounds, sweep

    r, design, reg, w = sweep(seconds=seconds)
    results, verdict = settle([r], [design], reg, FakeRounds(), device_type="cuda",
                              device_memory=10**12, children=3,
                              refit=lambda i, x: refit_law("tinylm", w, "bf16", x))
    return Certificate(environment=environment(), protocol=protocol(), workloads=results,
                       time_verdict=verdict), save_certificate


def test_a_certificate_with_a_time_model_reproduces_itself_within_5_percent(tmp_path):
    """The floor point measured 30 % above the law in one child of three (as a process's
    floor does): where A measured a shape its measurement is what it states, so a certificate
    agrees with itself at every shape, the floor included."""
    from afford.core.provenance import Tag
    from tests.time_fakes import law, shape_of

    cert, save_certificate = _timed_cert(lambda it, c: law(*shape_of(it)) * (1.3 if it["key"] ==
                                                            "tinylm|bf16|1024" and c else 1.0))
    path = tmp_path / "a.json"
    save_certificate(cert, path)
    res = compare.compare_files(path, path, "5%")
    check = res.checks[0]
    assert res.verdict == compare.REPRODUCES and check.law.startswith("step-time model t = max(")
    shapes = [p.shape for p in check.points]
    # 4 sweep + 4 across (1 x 16384: the fused design's long sequence) + 3 held out
    assert len(shapes) == 11 and "1 x 32768" in shapes and "64 x 1024" in shapes
    assert all(p.error.value == 0 and p.predicted.tag is Tag.MEASURED for p in check.points)
    floor = next(p for p in check.points if p.shape == "8 x 1024")
    assert floor.floor and floor.within
    r = run(str(path), str(path), "--tol", "5%")
    assert r.exit_code == 0 and "(floor)" in r.output


def test_a_shape_a_did_not_measure_is_judged_by_as_model(tmp_path):
    """B measured a shape A never did: A's model predicts it (FITTED); the rest are A's own
    measurements."""
    from afford.core.provenance import Tag

    a, save_certificate = _timed_cert()
    w = a.workloads[0]
    dropped = w.design_points[-1]
    a = a.model_copy(update={"workloads": [w.model_copy(update={
        "design_points": w.design_points[:-1]})]})
    b, _ = _timed_cert()
    save_certificate(a, tmp_path / "a.json")
    save_certificate(b, tmp_path / "b.json")
    res = compare.compare_files(tmp_path / "a.json", tmp_path / "b.json", "5%")
    by = {p.shape: p for p in res.checks[0].points}
    label = f"{dropped.batch:g} x {dropped.seq:g}"
    assert by[label].predicted.tag is Tag.FITTED and "A's step-time model" in \
        by[label].predicted.source
    assert sum(p.predicted.tag is Tag.MEASURED for p in by.values()) == len(by) - 1
    # the fake children measure the model's own law, so the model predicts them closely
    assert abs(by[label].error.value) < 0.05 and res.verdict == compare.REPRODUCES


def test_a_slower_box_does_not_reproduce_a_time_model(tmp_path):
    from tests.time_fakes import law, shape_of

    (a, save_certificate), (b, _) = _timed_cert(), _timed_cert(
        lambda it, c: law(*shape_of(it)) * 1.08)
    save_certificate(a, tmp_path / "a.json")
    save_certificate(b, tmp_path / "b.json")
    res = compare.compare_files(tmp_path / "a.json", tmp_path / "b.json", "5%")
    assert res.verdict == compare.NOT_REPRODUCED
    work = [p for p in res.checks[0].points if not p.floor]
    assert all(p.error.value == pytest.approx(1 / 1.08 - 1) and not p.within for p in work)
    assert compare.compare_files(tmp_path / "a.json", tmp_path / "b.json",
                                 "10%").verdict == compare.REPRODUCES


def test_a_certificate_without_a_time_section_is_judged_by_its_throughput_law(pair):
    res = compare.compare_files(pair["a"], pair["a"], "5%")
    assert all(law.time is None for law in res.laws)
    assert all(p.shape is None for c in res.checks for p in c.points)


def _noisy(cert):
    from afford.schema.time_section import CertTimeVerdict

    v = CertTimeVerdict(label="NOISY", reasons=["tinylm (bf16): children disagree by 60%"],
                        child_tolerance=0.1, held_out_tolerance=0.1, floor_tolerance=0.5,
                        rule="r")
    return cert.model_copy(update={"time_verdict": v})


def test_a_noisy_certificate_is_named_beside_the_verdict(tmp_path):
    """Issue 30, item 11: compare said REPRODUCES for a NOISY certificate without a word."""
    (tmp_path / "a.json").write_text(make_cert().to_json())
    (tmp_path / "b.json").write_text(_noisy(make_cert("Other GPU", scale=1.03)).to_json())
    r = run(str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--tol", "5%")
    assert r.exit_code == 0 and "REPRODUCES" in r.stdout
    text = " ".join(r.stdout.split())
    assert "NOISY: B is NOISY (tinylm (bf16): children disagree by 60%)" in text
    doc = json.loads(run(str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--tol", "5%",
                         "--json").stdout)
    assert doc["b_noisy"] == ["tinylm (bf16): children disagree by 60%"] and doc["a_noisy"] == []
    clean = run(str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--tol", "5%")
    assert "NOISY" not in clean.stdout
    res = compare.compare_files(tmp_path / "b.json", tmp_path / "a.json", "5%")
    assert res.a_noisy and not res.b_noisy and res.noisy


@pytest.mark.parametrize("verdict,says,never", [
    ("REPRODUCES", "A's laws describe B within 5%", "do not describe"),
    ("DOES NOT REPRODUCE", "A's laws do not describe B within 5%", "laws describe B"),
    ("NOT COMPARED", "no law of A could be checked against B", "describe"),
])
def test_the_verdict_sentence_agrees_with_its_word(pair, tmp_path, verdict, says, never):
    """Issue 32, item 8: "NOT COMPARED: A's laws do not describe B" said two contradicting
    things."""
    from afford.report.compare_tables import footer

    b = {"REPRODUCES": pair["same"], "DOES NOT REPRODUCE": pair["slow"]}.get(verdict)
    if b is None:
        b = tmp_path / "empty.json"
        b.write_text(make_cert("Other GPU").model_copy(update={"workloads": []}).to_json())
    res = compare.compare_files(pair["a"], b, "5%")
    first = footer(res).splitlines()[0]
    assert res.verdict == verdict and first.startswith(f"{verdict}: {says}")
    assert never not in first.replace(says, "")
