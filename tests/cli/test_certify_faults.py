"""Issue 14, wrong exit codes and lost measurements: certify writes a partial certificate
(``status="partial"``, ``failures``) and exits 3 when a workload ends with no usable point
(every point out of memory included), a stage after the sweep fails, or a gate cannot be
evaluated; a certificate whose write fails is saved beside the requested path.

The sweep's children are replaced by made-up records (``afford.certification.run_children``): what
is under test is what certify and the command line do with them, not the timing."""

from __future__ import annotations

import errno
import json

import pytest
from typer.testing import CliRunner

import afford.certification as certify_mod
from afford.cli import app
from afford.schema.cert import load_certificate

runner = CliRunner()
ARGS = ["certify", "-w", "tinylm", "--sweep", "seq=32,64,128", "--device", "cpu",
        "--no-probes", "--no-memory", "--quick", "--json"]


def _fake_children(record_for):
    def run_children(items, *, children, on_event=lambda e: None, **_):
        out = []
        for c in range(children):
            got = {}
            for pos, it in enumerate(items):
                rec = {"child": c, "order_position": pos, **record_for(it)}
                got[it["key"]] = {"event": "point", "key": it["key"], "child": c,
                                  "shape": {"seq": it["value"]}, "vocab": 256, "record": rec}
            out.append(got)
        return out
    return run_children


def _timed(it):
    # proportional to the tokens of the step (tinylm's CPU batch is 4; the step-time design's
    # shapes name their own batch), so the step-time model finds the run consistent
    t = 1e-3 * it["value"] * (it.get("batch") or 4) / 4
    return {"median_seconds": t, "timed_seconds": [t] * 3,
            "timed_step_indices": [3, 4, 5], "step0_seconds": 0.1,
            "first_loss": 5.545}  # ln 256: at chance


def _oom(it):
    return {"oom": True, "error": "OutOfMemoryError: CUDA out of memory"}


def _run(monkeypatch, tmp_path, record_for, *extra):
    monkeypatch.setattr(certify_mod, "run_children", _fake_children(record_for))
    out = tmp_path / "cert.json"
    r = runner.invoke(app, [*ARGS, "-o", str(out), *extra])
    return r, out


def test_a_healthy_run_is_complete_and_exits_0(monkeypatch, tmp_path):
    r, out = _run(monkeypatch, tmp_path, _timed)
    assert r.exit_code == 0, r.output
    c = load_certificate(out)
    assert c.status == "complete" and c.failures == []


def test_every_point_out_of_memory_writes_a_partial_certificate_and_exits_3(
        monkeypatch, tmp_path):
    r, out = _run(monkeypatch, tmp_path, _oom)
    assert r.exit_code == 3, r.output
    c = load_certificate(out)
    assert c.status == "partial"
    assert "no usable point" in c.failures[0] and "out of memory" in c.failures[0]
    assert len(c.workloads[0].points) == 3  # what was measured is kept
    assert "partial certificate is written" in r.output
    assert "Traceback" not in r.output


def test_a_stage_that_fails_keeps_the_sweep_and_exits_3(monkeypatch, tmp_path):
    def broken(ctx):
        raise RuntimeError("the stage broke")

    broken.__name__ = "memory_stage"
    monkeypatch.setattr(certify_mod, "stages_for", lambda req: [broken])
    r, out = _run(monkeypatch, tmp_path, _timed)
    assert r.exit_code == 3, r.output
    c = load_certificate(out)
    assert c.status == "partial" and "stage memory failed" in c.failures[0]
    assert all(p.usable for p in c.workloads[0].points)


def test_a_gate_that_cannot_be_evaluated_exits_3(monkeypatch, tmp_path):
    r, out = _run(monkeypatch, tmp_path, lambda it: {**_timed(it), "first_loss": None})
    assert r.exit_code == 3, r.output
    c = load_certificate(out)
    assert c.gates is not None and c.gates.gates[0].status == "NOT EXECUTABLE"
    assert any("gate init-loss could not be evaluated" in f for f in c.failures), c.failures


def test_a_failed_write_saves_the_measurement_beside_the_path(monkeypatch, tmp_path):
    import afford.core.io as io

    real = io._fill
    calls = []

    def disk_full_once(fd, data, mode):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data, mode)

    monkeypatch.setattr(io, "_fill", disk_full_once)
    r, out = _run(monkeypatch, tmp_path, _timed)
    assert r.exit_code == 3, r.output
    assert not out.exists()
    rescued = [p for p in tmp_path.iterdir() if ".rescued-" in p.name]
    assert len(rescued) == 1, list(tmp_path.iterdir())
    assert str(rescued[0]) in " ".join(r.output.split())
    assert load_certificate(rescued[0]).workloads[0].points  # the measurement itself
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_out_naming_a_folder_is_refused_before_measuring(monkeypatch, tmp_path):
    def never(*a, **k):
        raise AssertionError("measured although --out is a folder")

    monkeypatch.setattr(certify_mod, "run_children", never)
    r = runner.invoke(app, [*ARGS, "-o", str(tmp_path)])
    assert r.exit_code == 2 and "is a folder" in r.output


@pytest.mark.parametrize("sweep", ["n=1e30", "n=inf", "n=nan", "seq=0", "n=" + "9" * 400])
def test_sweep_values_out_of_range_are_bad_input(monkeypatch, tmp_path, sweep):
    monkeypatch.setattr(certify_mod, "run_children", _fake_children(_timed))
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["certify", "--sweep", sweep, "--device", "cpu", "--json"])
    assert r.exit_code == 2, r.output
    assert "--sweep" in r.output and not list(tmp_path.iterdir())


def test_a_partial_certificate_loads_and_a_status_without_failures_does_not(tmp_path):
    from afford.core.errors import InputError
    from tests.plan_helpers import make_cert

    c = make_cert().model_copy(update={"status": "partial", "failures": ["x"]})
    p = tmp_path / "c.json"
    p.write_text(c.to_json())
    assert load_certificate(p).status == "partial"
    doc = json.loads(c.to_json())
    doc["failures"] = []
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError):
        load_certificate(p)



def test_a_bad_child_timeout_is_refused_before_measuring(monkeypatch, tmp_path):
    def never(*a, **k):
        raise AssertionError("measured although AFFORD_CHILD_TIMEOUT is bad")

    monkeypatch.setattr(certify_mod, "run_children", never)
    monkeypatch.setenv("AFFORD_CHILD_TIMEOUT", "-3")
    r = runner.invoke(app, [*ARGS, "-o", str(tmp_path / "c.json")])
    assert r.exit_code == 2 and "AFFORD_CHILD_TIMEOUT" in r.output, r.output


# ---------------------------------------------------------------- issue 33, item 6


STOPPED = ("child 1 was stopped by the watchdog after 900 s without progress (a hung or "
           "stopped process; AFFORD_CHILD_TIMEOUT sets the limit)")


def test_a_stopped_child_is_named_in_the_failures_even_when_remeasured(monkeypatch, tmp_path):
    """A SIGSTOPped child was stopped by the watchdog and its points measured again in a
    fresh child: the certificate is complete in its points, but names the stopped child in
    its failures and the output, and certify exits 3."""
    def record_for(it):
        rec = _timed(it)
        return {**rec, "round": "remeasure", "replaced": STOPPED} if it["value"] == 64 else rec
    r, out = _run(monkeypatch, tmp_path, record_for)
    assert r.exit_code == 3, r.output
    c = load_certificate(out)
    assert c.status == "partial" and all(p.usable for p in c.workloads[0].points)
    assert [f for f in c.failures if "stopped by the watchdog" in f] == \
        [f"workload tinylm (fp32): {STOPPED}; its unfinished points were measured again in a "
         "fresh child"]
    assert "stopped by the watchdog" in r.output


def test_a_stopped_memory_child_makes_the_certificate_partial(monkeypatch, tmp_path):
    """A memory child stopped by its watchdog (AFFORD_CHILD_TIMEOUT) is a failed
    measurement, not a law that cannot be fitted here: exit 3, not 1."""
    from afford.core.provenance import NotExecutable
    from afford.schema.memory_section import MemorySection

    why = "the memory child was stopped by the watchdog after 5 s without progress"

    def memory_stage(ctx):
        return {"memory": MemorySection(
            steps_per_shape=3, budget_fraction=0.9, tolerance=0.1, targets={},
            not_executable=[NotExecutable(what="memory child", reason=why, failed=True),
                            NotExecutable(what="memory law of x", reason="not transformer-"
                                          "shaped")], wall_seconds=5.0)}

    monkeypatch.setattr(certify_mod, "stages_for", lambda req: [memory_stage])
    r, out = _run(monkeypatch, tmp_path, _timed)
    assert r.exit_code == 3, r.output
    assert load_certificate(out).failures == [f"memory: memory child: {why}"]


def test_a_probe_that_raises_is_a_failure_not_not_executable():
    """A full disk under the checkpoint probe (an OSError in the probe child) is sent as a
    failed measurement; one that cannot run here by design stays NOT EXECUTABLE."""
    import io as stdio

    from afford.core.provenance import NotExecutable
    from afford.measure.probes.probe_child import Emitter

    buf = stdio.StringIO()

    def full_disk():
        raise OSError(errno.ENOSPC, "No space left on device")

    Emitter(buf).run("w0.checkpoint", "checkpoint write", full_disk)
    Emitter(buf).run("gemm.fp32", "GEMM fp32",
                     lambda: NotExecutable(what="GEMM fp32", reason="no CUDA device"))
    events = [json.loads(line) for line in buf.getvalue().splitlines()
              if json.loads(line)["event"] == "probe"]
    assert [e["not_executable"]["failed"] for e in events] == [True, False]
    assert "No space left on device" in events[0]["not_executable"]["reason"]
