"""Issue 33's reproducers, each through the real command line: an input a user or a damaged
file can give, which gave a traceback or printed nonsense at exit 0/1, is now exit 2 with a
one-line error naming what is wrong (items 1, 2 and 6)."""

from __future__ import annotations

import copy
import json
import sys

import pytest
from typer.testing import CliRunner

from afford.cli import app
from tests import fuzz_inputs as fz

runner = CliRunner()


def refused(args, *, match: str, env: dict | None = None) -> str:
    """Exit 2, one line on stderr containing ``match``, no traceback; the line."""
    r = runner.invoke(app, [str(a) for a in args], env=env)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 2, (r.exit_code, r.output)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.stderr
    assert match in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    out = {"dir": d,
           "cert": fz.write(d, "cert.json", fz.to_json(fz.cert_doc())),
           "probe_cert": fz.write(d, "probe.json", fz.to_json(fz.probe_cert_doc())),
           "platform": fz.write(d, "platform.toml", fz.to_toml(fz.platform_doc())),
           "run": fz.write(d, "run.toml", fz.to_toml(fz.run_doc())),
           "probe_run": fz.write(d, "probe-run.toml", fz.to_toml(fz.probe_run_doc())),
           "manifest": fz.write(d, "manifest.json", fz.to_json(fz.manifest_doc()))}
    r = runner.invoke(app, ["plan", str(out["cert"]), "-p", str(out["platform"]), "--run",
                            str(out["run"]), "--json"])
    assert r.exit_code == 0, r.output
    out["plan"] = json.loads(r.stdout)
    return out


def _write(files, name: str, doc) -> str:
    text = fz.to_toml(doc) if name.endswith(".toml") else fz.to_json(doc)
    return str(fz.write(files["dir"], name, text))


# ---------------------------------------------------------------- platform and run files


@pytest.mark.parametrize("edit,match", [
    (lambda p: p.update(budget_fraction={"value": 1e-300, "assumed": "x"}),
     "budget_fraction: 1e-300 is not a fraction in [1e-06, 1]"),
    (lambda p: p["device"].update(memory={"value": True, "cite": "x"}),
     "device.memory.value: True is not a quantity"),
    (lambda p: p.update(weekly_quota={"value": "1e-320s", "cite": "x"}),
     "weekly_quota: '1e-320s' must be positive (at least 1e-09 s"),
])
def test_a_platform_figure_no_platform_has_is_refused(files, edit, match):
    doc = fz.platform_doc()
    edit(doc)
    p = _write(files, "p.toml", doc)
    refused(["plan", files["cert"], "-p", p, "--run", files["run"]], match=match)


# ---------------------------------------------------------------- certificates


def _cert(files, edit, probes: bool = False) -> str:
    doc = fz.probe_cert_doc() if probes else fz.cert_doc()
    edit(doc)
    return _write(files, "c.json", doc)


def test_a_memory_law_with_a_dimension_of_0_is_refused(files):
    c = _cert(files, lambda d: d["memory"]["laws"][0]["base_dims"].update(d=0))
    refused(["report", c, "-o", files["dir"] / "r.md", "--force"],
            match="memory.laws.0.base_dims.d: Value error, a dimension: 0 is out of range")


def test_a_gemm_ceiling_of_0_is_refused(files):
    c = _cert(files, lambda d: [g.update(flops_per_second=0)
                                for g in d["probes"]["gemm"].values()], probes=True)
    refused(["ladder", c, "--params", "1M,10M"],
            match="flops_per_second: Value error, a rate per second: 0.0 is out of range [1,")


@pytest.mark.parametrize("field,value,match", [
    ("median_write_seconds", 1e308, "1e+308 is out of range [-1e+60, 1e+60]"),
    ("median_write_seconds", 3.2e9, "a time in seconds: 3200000000.0 is out of range"),
    ("bytes", -1, "a byte count: -1 is out of range [0,"),
])
def test_a_checkpoint_probe_no_write_can_give_is_refused(files, field, value, match):
    def edit(d):
        for w in d["probes"]["workloads"]:
            w["checkpoint"][field] = value
    c = _cert(files, edit, probes=True)
    refused(["plan", c, "-p", files["platform"], "--run", files["probe_run"]], match=match)


def test_held_out_errors_past_any_float_product_are_refused(files):
    def edit(d):
        for h in d["memory"]["laws"][0]["heldout"]:
            h["error"] = 1e308
    refused(["size", _cert(files, edit), "--seq", "1024"], match="heldout[0].error: 1e+308")


def test_sweep_values_of_minus_1_are_refused_not_compared(files):
    def edit(d):
        for p in d["workloads"][0]["points"]:
            p["value"] = -1
    c = _cert(files, edit)
    refused(["compare", c, c, "--tol", "5%"], match="a dimension: -1 is out of range [1")


def test_a_negative_fixed_term_reads_as_a_subtraction():
    from afford.schema.memory_section import MemoryFit

    def fit(fixed):
        return MemoryFit(quantity="reserved", form="states_plus_fixed", c_res=2.0, c_op=0.0,
                         fixed_bytes=fixed, s2_term=False, r2=1.0, residuals=[0.0],
                         n_points=3).describe()
    assert fit(-21.3 * 2**20).startswith("states - 21.30 MiB + L*(")
    assert fit(-1e-3).startswith("states + 0 B + L*(")  # never "+ -0 B" nor "- 0 B"
    assert fit(56.7 * 2**20).startswith("states + 56.70 MiB + L*(")


# ---------------------------------------------------------------- ledger, manifest, plans


def test_a_date_out_of_range_is_refused(files):
    refused(["history", "add", "-f", files["dir"] / "h.tsv", "--quantity", "x/loss",
             "--value", "1", "--device", "d", "--command", "c", "--commit", "a", "--torch",
             "2", "--date", "0001-01-01T00:00:00+14:00"],
            match="0001-01-01T00:00:00+14:00 is out of range (from 1970-01-01 to 9000-01-01)")


@pytest.mark.parametrize("edit,match", [
    (lambda s: s.update(sha256=None), "PINNED without its sha256"),
    (lambda s: s.update(size_bytes=fz.Raw("1" + "0" * 399, "")), "a number of 400 digits"),
])
def test_a_manifest_source_no_pin_gives_is_refused(files, edit, match):
    doc = fz.manifest_doc()
    edit(doc["sources"][0])
    m = _write(files, "m.json", doc)
    refused(["report", files["cert"], "--manifest", m, "-o", files["dir"] / "r.md",
             "--force"], match=match)
    (files["dir"] / "data.txt").write_text("data")
    refused(["pin", files["dir"] / "data.txt", "-o", m], match=match)


def test_a_plan_with_a_memory_fraction_of_1e40_is_refused(files):
    doc = copy.deepcopy(files["plan"])
    doc["memory"]["fraction"]["value"] = 1e40
    refused(["report", "--plan", _write(files, "plan.json", doc), "-o", files["dir"] / "p.md",
             "--force"], match="memory.fraction: 1e+40 is out of range [1e-06, 1]")


def test_report_plots_dir_that_is_a_file_is_refused(files):
    pytest.importorskip("matplotlib")
    refused(["report", files["cert"], "--plots-dir", files["cert"], "-o",
             files["dir"] / "r.md", "--force"], match="a file is there, not a folder")


# ---------------------------------------------------------------- bars and milestones


@pytest.fixture(scope="module")
def milestones(files):
    """A corpus, its bars (afford bars) and a ladder on them."""
    d = files["dir"]
    corpus = d / "corpus.bin"
    corpus.write_bytes(bytes((i * 7919) % 251 for i in range(20_000)))
    r = runner.invoke(app, ["bars", str(corpus), "--heldout", "last:2KB", "--order", "1",
                            "-o", str(d / "bars.json"), "--force"])
    assert r.exit_code == 0, r.output
    window = json.loads((d / "bars.json").read_text())["window"]["sha256"]
    ladder = fz.write(d, "ladder.toml", fz.to_toml(fz.ladder_doc()))
    return {"corpus": corpus, "window": window, "ladder": ladder}


@pytest.mark.parametrize("flags,match", [
    (["--add-k", "inf"], "--add-k: inf is not a finite quantity"),
    (["--method", "streaming", "--buckets", "2^0"], "--buckets '2^0': 1 is out of range"),
    (["--method", "streaming", "--buckets", "2^99"], "--buckets 2^N: 99"),
])
def test_a_bars_flag_out_of_range_is_refused(files, milestones, flags, match):
    refused(["bars", milestones["corpus"], "--heldout", "last:2KB", "--order", "1", *flags],
            match=match)


@pytest.mark.parametrize("text,match", [
    ('[{{"step": 10, "tokens": 1000, "bpb": [], "window": "{w}"}}]', "bpb: [] is not a number"),
    ('[{{"step": 1{z}, "tokens": 1000, "bpb": 2.0, "window": "{w}"}}]',
     "step: a number of 61 digits is out of range [0, 1e+18]"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
])
def test_an_eval_log_no_trainer_writes_is_refused(files, milestones, text, match):
    log = fz.write(files["dir"], "log.json", text.format(w=milestones["window"], z="0" * 60))
    refused(["milestones", milestones["ladder"], "--log", f"a={log}"], match=match)


def test_a_plan_beside_the_milestones_is_read_bounded(files, milestones):
    log = fz.write(files["dir"], "ok.json", fz.to_json(fz.eval_log(milestones["window"], "a")))
    deep = fz.write(files["dir"], "deep.json", "[" * 100_000 + "]" * 100_000)
    refused(["milestones", milestones["ladder"], "--log", f"a={log}", "--plan", deep],
            match="nested deeper than 64 levels")


# ---------------------------------------------------------------- the user's generator


@pytest.mark.parametrize("body,match", [
    ("raise ValueError('boom at import')", "importing badgen failed: it raised ValueError: "
     "boom at import"),
    ("import sys\nsys.exit(7)", "importing badgen failed: it called sys.exit(7)"),
])
def test_a_generator_module_that_fails_is_one_line_exit_2(tmp_path, monkeypatch, body,
                                                          match):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "badgen.py").write_text(body + "\n")
    try:
        refused(["pin", "--generator", "badgen:make", "-o", tmp_path / "m.json"],
                match=f"--generator 'badgen:make': {match}")
    finally:
        sys.modules.pop("badgen", None)


# ---------------------------------------------------------------- counts and the timeout


@pytest.mark.parametrize("args,env,match", [
    (["--children", "99999999999999999999"], None,
     "--children: 99999999999999999999 is out of range [3, 64]"),
    (["--sweep", "s=1.5"], None, "--sweep s: 1.5 is not a whole number"),
    ([], {"AFFORD_CHILD_TIMEOUT": "1e-320"}, "AFFORD_CHILD_TIMEOUT: 1e-320 is out of range"),
])
def test_certify_refuses_a_count_or_timeout_no_run_can_take(tmp_path, args, env, match):
    refused(["certify", *args, "--out", tmp_path / "c.json"], match=match, env=env)


def test_ladder_refuses_a_ratio_of_1e_320(files):
    refused(["ladder", files["cert"], "--params", "1M", "--ratio", "1e-320"],
            match="--ratio: 1e-320 is out of range [0.001, 1e+06]")


@pytest.mark.parametrize("value,unit,shown", [("-1", "B", None), ("-2.5", "s", None),
                                              ("-0", "B", "0 B"), ("-3", "", "-3")])
def test_a_ledger_reading_of_a_size_or_time_is_never_negative(files, value, unit, shown):
    """A negative size, time or rate is no reading (exit 2); ``-0`` reads ``0`` (history
    show printed ``-0 B``); a quantity without such a unit may be negative."""
    f = files["dir"] / f"ledger-{unit or 'none'}.tsv"
    args = ["history", "add", "-f", f, "--quantity", "x/peak", "--value", value, "--unit",
            unit, "--device", "d", "--command", "c", "--commit", "a", "--torch", "2"]
    if shown is None:
        refused(args, match=f"value: {value} is out of range [0, 1e+60] (a reading in {unit} "
                "is never negative)")
        return
    assert runner.invoke(app, [str(a) for a in args]).exit_code == 0
    r = runner.invoke(app, ["history", "show", "-f", str(f)])
    assert r.exit_code == 0 and shown in r.stdout and "-0 B" not in r.stdout, r.stdout
