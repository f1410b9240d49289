"""Issue 14, item 6: a certificate whose numbers are nonsense must not reach ``afford size``
or preflight as "fits" or GO. A negative memory coefficient, negative reserved bytes or a
fixed term that makes the predicted peak negative are refused (exit 2, one line)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.schema.cert import save_certificate
from tests import fuzz_inputs as fz
from tests.answers.test_sizing import gpu_cert, gpu_law  # noqa: F401 - fixtures

runner = CliRunner()


@pytest.fixture(scope="module")
def gpu_doc(gpu_cert, tmp_path_factory):  # noqa: F811
    path = tmp_path_factory.mktemp("broken") / "gpu.json"
    save_certificate(gpu_cert, path)
    return json.loads(path.read_text())


def _size(tmp_path, doc, *more: str):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    return runner.invoke(app, ["size", str(path), "--seq", "512", "--batch", "8", *more])


def test_the_valid_certificate_fits(gpu_doc, tmp_path):
    r = _size(tmp_path, gpu_doc)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    fits = [line for line in r.output.splitlines() if line.startswith("│ fits ")]
    assert len(fits) == 1 and "│ yes: " in fits[0], r.output  # the fits row says yes
    doc = json.loads(_size(tmp_path, gpu_doc, "--json").stdout)
    assert doc["fits"] is True and doc["fits_level"] == "yes"


@pytest.mark.parametrize("field", ["c_res", "c_op"])
def test_a_negative_memory_coefficient_is_refused_at_load(gpu_doc, tmp_path, field):
    doc = json.loads(json.dumps(gpu_doc))
    doc["memory"]["laws"][0]["allocated"][field] = -1e9
    r = _size(tmp_path, doc)
    assert r.exit_code == 2, r.output
    assert field in r.output and "fits" not in r.output


def test_a_fixed_term_that_makes_the_peak_negative_is_refused(gpu_doc, tmp_path):
    doc = json.loads(json.dumps(gpu_doc))
    for fit in ("allocated", "reserved"):
        if doc["memory"]["laws"][0].get(fit):
            doc["memory"]["laws"][0][fit]["fixed_bytes"] = -1e20
    r = _size(tmp_path, doc)
    assert r.exit_code == 2, r.output
    assert "not a peak" in r.output and "-1" not in r.stdout


@pytest.mark.parametrize("field", ["peak_reserved_bytes", "peak_allocated_bytes"])
def test_negative_reserved_bytes_never_give_go(tmp_path, field):
    doc = fz.cert_doc()
    for p in doc["workloads"][0]["points"]:
        p[field] = -(2**40)
        for c in p["children"]:
            c[field] = -(2**40)
    cert = tmp_path / "c.json"
    cert.write_text(json.dumps(doc))
    platform = fz.write(tmp_path, "p.toml", fz.to_toml(fz.platform_doc()))
    run = fz.write(tmp_path, "r.toml", fz.to_toml(fz.run_doc()))
    r = runner.invoke(app, ["preflight", str(cert), "-p", str(platform), "--run", str(run)])
    assert r.exit_code == 2, r.output
    assert field in " ".join(r.output.split()) and "GO" not in r.stdout


@pytest.mark.parametrize("mtbf,restart,step", [(0.5, 210.0, 1.0), (2.2e-308, 1.0, 1.0),
                                               (86400.0, 2.0**31, 1.0), (86400.0, 1.0, 3e9)])
def test_failures_far_faster_than_a_save_leave_daly_out_not_infinite(mtbf, restart, step):
    """The fuzz found T_w = M e^(R/M) (e^((tau+d)/M) - 1) / tau overflowing (an MTBF of half
    a second beside a 210 s restart printed an infinite waste)."""
    import math

    from afford.core.provenance import assumed
    from afford.planning.failures import daly

    d = daly(assumed(mtbf, "s", "t"), assumed(1.0, "s", "t"), assumed(restart, "s", "t"),
             assumed(step, "s", "t"), assumed(149, "steps", "t"))
    if d is not None:
        assert all(math.isfinite(t.value) for t in (d.daly_waste, d.budget_waste,
                                                     d.budget_loss_per_failure_seconds))
    assert daly(assumed(86400.0, "s", "t"), assumed(60.0, "s", "t"), assumed(200.0, "s", "t"),
                assumed(1.0, "s", "t"), assumed(1000, "steps", "t")) is not None


@pytest.mark.parametrize("flag,value", [("--ratio", "nan"), ("--ratio", "inf"),
                                        ("--ratio", "-1"), ("--memory-fraction", "nan"),
                                        ("--budget", "nan")])
def test_ladder_refuses_nonsense_numbers(tmp_path, flag, value):
    """Issue 14 item 6: ``--ratio nan`` printed NaN FLOPs and called every size affordable."""
    cert = fz.write(tmp_path, "c.json", fz.to_json(fz.cert_doc()))
    r = runner.invoke(app, ["ladder", str(cert), "--params", "1M,10M", flag, value])
    assert r.exit_code == 2 and flag in r.output, r.output
    assert "nan" not in r.stdout.lower()


@pytest.mark.parametrize("plan", ["null", "[]", "cert"])
def test_report_refuses_what_is_not_a_plan(tmp_path, plan):
    """Issue 14 item 6: ``report --plan`` accepted ``null`` or a certificate as a plan."""
    text = fz.to_json(fz.cert_doc()) if plan == "cert" else plan
    p = fz.write(tmp_path, "p.json", text)
    r = runner.invoke(app, ["report", "--plan", str(p), "-o", str(tmp_path / "r.md")])
    assert r.exit_code == 2 and "not a plan" in r.output, r.output
    assert not (tmp_path / "r.md").exists()
