"""Platforms, run files and the plan / preflight commands through typer's runner."""

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from afford.cli import app
from afford.core.errors import InputError
from afford.core.provenance import Tag
from afford.planning import planner
from afford.report.plan_tables import render_plan, render_verdict
from afford.schema.cert import save_certificate
from afford.schema.manifest import pinned_sources
from afford.schema.platform import load_platform, presets
from afford.schema.run import load_run
from tests.goldens import check_numbers, check_text
from tests.paths import ROOT
from tests.plan_helpers import make_cert, make_platform, make_run

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


PLATFORM = """
name = "mine"
session_cap = { value = "12h", cite = "docs" }
weekly_quota = { value = "30h", cite = "docs" }
disk = { value = "20GB", cite = "docs" }
"""
RUN = """
workload = "tinylm"
mode = "fp32"
value = 64
target_steps = 1000
checkpoints_kept = 1
"""


# --- platform presets and files -----------------------------------------------------------

def test_presets_load_with_their_citations():
    assert presets() == ["colab-free", "kaggle-p100", "kaggle-t4x2", "local", "spot"]
    k = load_platform("kaggle-t4x2")
    assert k.session_cap.tagged().value == 43200.0 and k.session_cap.tagged().tag is Tag.INHERITED
    assert k.weekly_quota.tagged().value == 108000.0
    assert k.disk.tagged().value == 20_000_000_000  # decimal GB
    assert k.device.count == 2 and k.device.matches("Tesla T4")
    # the driver's ~15 GiB, as COSTS 3.2 budgets it (15.0 GiB x 0.90 = 13.50 GiB)
    assert k.device.memory.tagged().value == 15 * 2**30 and "COSTS" in k.device.memory.cite
    assert not k.device.matches("NVIDIA H200") and not k.device.matches("GTX T40")
    assert load_platform("kaggle-p100").device.matches("Tesla P100-PCIE-16GB")
    colab = load_platform("colab-free")
    assert colab.session_cap.tagged().tag is Tag.ASSUMED
    assert colab.weekly_quota.sentinel == "unknown"
    assert load_platform("local").session_cap.si() is None
    assert load_platform("spot").mtbf.tagged().tag is Tag.ASSUMED
    for name in presets():  # every startup component it cannot measure carries a reason
        for part in load_platform(name).startup.values():
            assert part.assumed or part.cite


def test_the_example_platform_file_loads():
    p = load_platform(ROOT / "examples/platforms/16gib-12h.toml")
    assert p.device.memory.tagged().value == 16 * 2**30 and p.session_cap.si() == 43200.0


def test_defaults_are_tagged_assumed():
    p = make_platform()
    assert p.budget_fraction.tagged().value == 0.9
    assert p.budget_fraction.tagged().tag is Tag.ASSUMED
    assert p.margin.tagged().value == 3600.0


@pytest.mark.parametrize("edit,match", [
    (lambda t: t.replace('session_cap = { value = "12h", cite = "docs" }', ""),
     "field session_cap: required field is missing"),
    (lambda t: t.replace('cite = "docs" }', 'cite = "docs", assumed = "why" }', 1),
     "field session_cap: give exactly one of cite"),
    (lambda t: t.replace('value = "12h", cite = "docs"', 'value = "12 hours", cite = "docs"'),
     "field session_cap: cannot read '12 hours' as a duration"),
    (lambda t: t.replace('value = "12h", cite = "docs"', 'value = "12h"'),
     "field session_cap: give exactly one of cite"),
    (lambda t: t.replace("session_cap", "sesion_cap"), "field sesion_cap: unknown field"),
    (lambda t: t + 'margin = { value = "12h", assumed = "x" }\n',
     "margin (43200 s) must be shorter"),
    (lambda t: t + 'budget_fraction = { value = 1.5, assumed = "x" }\n',
     "field budget_fraction: 1.5 is not a fraction in [1e-06, 1]"),
    (lambda t: t.replace('value = "12h", cite', 'value = "unknown", cite'),
     "field session_cap: 'unknown' is not allowed here"),
    (lambda t: t.replace('value = "20GB"', 'value = "-5GB"'), "field disk: cannot read"),
    (lambda t: t + "[device]\ncount = 0\n",
     "field device.count: Input should be greater than or equal to 1"),
    (lambda t: t + "name = \n", "not valid TOML"),
])
def test_bad_platform_file_exits_2_naming_field_and_reason(tmp_path, edit, match):
    path = write(tmp_path, "p.toml", edit(PLATFORM))
    cert = tmp_path / "c.json"
    save_certificate(make_cert(), cert)
    r = run("plan", cert, "--platform", path)
    assert r.exit_code == 2, r.output
    assert match in flat(r.output)
    assert "Traceback" not in r.output and str(path) in r.output.replace("\n", "")


@pytest.mark.parametrize("edit,match", [
    (lambda t: t.replace('workload = "tinylm"', ""), "field workload: required field is missing"),
    (lambda t: t + "shape = { seq = 64 }\n",
     "give one of value (the sweep value) or shape (the full shape), not both"),
    (lambda t: t.replace("target_steps = 1000", ""),
     "exactly one of target_tokens or target_steps"),
    (lambda t: t + 'target_tokens = "1B"\n', "exactly one of target_tokens or target_steps"),
    (lambda t: t + 'checkpoint_overhead = "150%"\n', "field checkpoint_overhead: '150%' is not"),
    (lambda t: t.replace("checkpoints_kept = 1", "checkpoints_kept = 0"),
     "field checkpoints_kept: Input should be greater than or equal to 1"),
    (lambda t: t.replace('"fp32"', '"int8"'), "field mode: Input should be 'fp32', 'bf16' or"),
    (lambda t: t.replace("target_steps = 1000", 'target_steps = "lots"'),
     "field target_steps: cannot read 'lots' as a count"),
    (lambda t: t.replace("target_steps = 1000", "target_steps = 0.5"),
     "field target_steps: 0.5 is not a positive whole count"),
])
def test_bad_run_file_exits_2_naming_field_and_reason(tmp_path, edit, match):
    path = write(tmp_path, "r.toml", edit(RUN))
    cert = tmp_path / "c.json"
    save_certificate(make_cert(), cert)
    r = run("preflight", cert, "--platform", "local", "--run", path)
    assert r.exit_code == 2, r.output
    assert match in flat(r.output)
    assert "Traceback" not in r.output


def test_unknown_preset_and_missing_files_exit_2(tmp_path):
    cert = tmp_path / "c.json"
    save_certificate(make_cert(), cert)
    r = run("plan", cert, "--platform", "kaggle-a100")
    assert r.exit_code == 2 and "presets are colab-free, kaggle-p100" in flat(r.output)
    assert run("plan", cert, "--platform", tmp_path / "no.toml").exit_code == 2
    assert run("plan", tmp_path / "no.json", "--platform", "local").exit_code == 2
    r = run("plan", cert, "--platform", "local", "--run", tmp_path / "no.toml")
    assert r.exit_code == 2 and "no such file" in flat(r.output)
    assert run("preflight", cert, "--platform", "local").exit_code == 2  # --run is required


def test_the_example_run_file_loads():
    r = load_run(ROOT / "examples/runs/example.toml")
    assert r.name and r.checkpoints_kept >= 1


# --- manifests ----------------------------------------------------------------------------

def test_manifest_pins(tmp_path):
    m = write(tmp_path, "m.json", json.dumps({"schema": "afford.manifest/1", "sources": [
        {"name": "a", "sha256": "ab" * 32, "status": "PINNED"},
        {"name": "b", "status": "UNPINNED"}]}))
    assert pinned_sources(m) == {"a": True, "b": False}
    assert pinned_sources(None) == {}
    with pytest.raises(InputError, match="not an afford data manifest"):
        pinned_sources(write(tmp_path, "x.json", "{}"))


# --- the commands on the synthetic certificate --------------------------------------------

@pytest.fixture()
def synthetic(tmp_path):
    cert = tmp_path / "c.json"
    save_certificate(make_cert(), cert)
    plat = write(tmp_path, "p.toml", """
name = "p100-test"
session_cap = { value = "12h", cite = "docs" }
weekly_quota = { value = "30h", cite = "docs" }
disk = { value = "500MB", cite = "docs" }
[device]
name = "P100"
""")
    runf = write(tmp_path, "r.toml", RUN.replace("value = 64", "value = 512")
                 + 'data_sources = ["web"]\nmax_weeks = 1\n')
    return cert, plat, runf


def test_preflight_no_go_exits_1_with_every_reason(synthetic):
    cert, plat, runf = synthetic
    r = run("preflight", cert, "--platform", plat, "--run", runf)
    assert r.exit_code == 1, r.output
    assert "NO-GO" in r.output and "do not fit on the disk" in flat(r.output)
    assert "not pinned (web)" in flat(r.output)


def test_preflight_json_is_one_document(synthetic, tmp_path):
    cert, plat, runf = synthetic
    m = write(tmp_path, "m.json", json.dumps({"schema": "afford.manifest/1", "sources": [
        {"name": "web", "sha256": "cd" * 32, "status": "PINNED"}]}))
    r = run("preflight", cert, "--platform", plat, "--run", runf, "--manifest", m, "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["schema"] == "afford.preflight/1" and doc["go"] is False
    assert doc["plan"]["schema"] == "afford.plan/1"
    assert not any("not pinned" in w for w in doc["warnings"])


def test_plan_json_round_trips(synthetic):
    cert, plat, runf = synthetic
    r = run("plan", cert, "--platform", plat, "--run", runf, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["quota"]["naive_chunks"]["source"].startswith("quota / chunk (WRONG")
    kill = doc["failures"]["rows"][1]
    assert kill["point"] == "mid-chunk" and "worst_with" in kill and "restart" in kill
    from afford.planning.result import PlanResult
    assert PlanResult.model_validate(doc).quota.whole_chunks.value == 2


def render(renderable, width=140) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def _golden(name: str, text: str) -> None:
    check_text(name, text)


@pytest.mark.parametrize("step", [1.0, 0.299])
def test_golden_plan_numbers(step):
    """Every figure of the plan, compared with a relative tolerance; at 1 s and 0.299 s a step."""
    p = planner.plan(make_cert(step_512=step),
                     make_platform(mtbf={"value": "6h", "assumed": "observed"}),
                     make_run(data_sources=["web"]))
    check_numbers(f"plan_synthetic_step{step:g}.json", p.model_dump(mode="json", by_alias=True))


def test_golden_verdict_numbers():
    v = planner.preflight(make_cert(device="Tesla T4", step_512=0.299), make_platform(),
                          make_run(max_weeks=1))
    doc = v.model_dump(mode="json", by_alias=True)
    assert doc["go"] is False
    check_numbers("preflight_synthetic_step0.299.json", doc)


def test_golden_plan_render():
    p = planner.plan(make_cert(), make_platform(mtbf={"value": "6h", "assumed": "observed"}),
                     make_run(data_sources=["web"]))
    text = render(render_plan(p))
    assert "naive: quota / chunk (WRONG: charges nothing for startup)" in text
    _golden("plan_synthetic.txt", text)


def test_golden_verdict_render():
    v = planner.preflight(make_cert(device="Tesla T4"), make_platform(), make_run(max_weeks=1))
    text = render(render_verdict(v))
    assert text.startswith("NO-GO")
    _golden("preflight_synthetic.txt", text)


# --- the commands on a real CPU certificate -------------------------------------------------

@pytest.mark.slow  # reads the session's real CPU certificate (~150 s once)
def test_plan_on_a_real_cpu_certificate(cpu_cert_path, tmp_path):
    r = run("plan", cpu_cert_path, "--platform", "local", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["chunk"]["chunk_seconds"] is None and doc["quota"] is None
    assert len(doc["rows"]) == 6 and all(row["fits"] for row in doc["rows"])
    assert doc["memory"]["device_memory_bytes"]["tag"] == "MEASURED"
    text = run("plan", cpu_cert_path, "--platform", "kaggle-p100")
    assert text.exit_code == 0 and "chunk table" in text.output


@pytest.mark.slow  # reads the session's real CPU certificate (~150 s once)
def test_preflight_on_a_real_cpu_certificate(cpu_cert_path, tmp_path):
    runf = write(tmp_path, "r.toml", RUN)
    # a real certificate of this shared 2-core box may come out NOISY under load: preflight
    # then says NO-GO only where the children's spread flips the decision, and GO once the
    # noise is accepted
    r = run("preflight", cpu_cert_path, "--platform", "local", "--run", runf)
    from afford.figures.time_figures import verdict_label
    from afford.schema.cert import load_certificate

    if verdict_label(load_certificate(cpu_cert_path)) == "NOISY":
        assert "NOISY" in flat(r.output), r.output
        if r.exit_code == 1:
            assert "flips inside their measured spread" in flat(r.output), r.output
        r = run("preflight", cpu_cert_path, "--platform", "local", "--run", runf,
                "--accept-noisy")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("GO")
    r = run("preflight", cpu_cert_path, "--platform", "kaggle-p100", "--run", runf)
    assert r.exit_code == 1 and "never pools devices" in flat(r.output)
