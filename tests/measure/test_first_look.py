"""A first answer fast (issue 32, item 1): on a CPU, ``afford certify`` with no precision and no
workload is a first look (tinylm at the quick protocol) and says how to get the full
certificate; a GPU's default is unchanged; off a terminal, certify writes one progress line
per stage and per workload with the elapsed time and an estimate."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from afford.certification.request import FIRST_LOOK, CertifyRequest, device_defaults, is_first_look
from afford.cli import app
from afford.report.progress import LineProgress
from afford.schema.cert import load_certificate
from tests.paths import DATA

CERT = DATA / "cpu_tinylm_tiny.json"


@pytest.mark.parametrize("asked, device, precision, workloads", [
    (dict(precision=None), "cpu", "quick", list(FIRST_LOOK)),  # the first look
    (dict(precision="quick"), "cpu", "quick", []),  # --quick: the default set, as before
    (dict(precision="full"), "cpu", "full", []),
    (dict(precision=None, workloads=["hf:gpt2"]), "cpu", "adaptive", ["hf:gpt2"]),
    (dict(precision=None), "cuda", "adaptive", []),  # a GPU's default is unchanged
    (dict(precision=None, workloads=["tinylm"]), "cuda", "adaptive", ["tinylm"]),
])
def test_what_a_request_leaves_to_the_device(asked, device, precision, workloads):
    req = device_defaults(CertifyRequest(**asked), device)
    assert (req.precision, req.workloads) == (precision, workloads)
    assert is_first_look(asked["precision"], asked.get("workloads", []), device) == \
        (workloads == list(FIRST_LOOK) and device == "cpu" and "workloads" not in asked)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _plan():
    items = [{"workload": "tinylm", "mode": "fp32"}] * 2 + \
        [{"workload": "softmax", "mode": "fp32"}]
    return SimpleNamespace(items=items, device="cpu", precision="quick")


def _events(clock: Clock, lines: LineProgress) -> None:
    """A sweep of two children over tinylm (2 shapes) and softmax (1), then the stages."""
    lines.event({"event": "stage", "key": "sweep"})
    for child, t in ((0, 10.0), (1, 20.0)):
        for key in ("tinylm|fp32|32", "softmax|fp32|64", "tinylm|fp32|64"):
            lines.event({"event": "begin", "key": key, "child": child})
            lines.event({"event": "point", "key": key, "child": child})
        clock.t += t
        lines.event({"event": "done", "child": child})
    for stage, t in (("time", 4.0), ("probes", 6.0), ("done", 0.0)):
        lines.event({"event": "stage", "key": stage})
        clock.t += t


def test_line_progress_says_each_stage_and_each_workload_with_elapsed_and_estimate():
    clock, stream = Clock(), io.StringIO()
    lines = LineProgress(children=2, stream=stream, clock=clock)
    lines.plan(_plan())
    _events(clock, lines)
    got = stream.getvalue().splitlines()
    assert got[0] == ("[    0 s] certify on cpu, quick protocol: tinylm (fp32) 2 shapes, "
                      "softmax (fp32) 1 shapes; 2 children each")
    assert got[1].startswith("[    0 s] sweep: every shape timed in 2 independent children")
    assert got[2:4] == [
        "[   10 s] sweep: child 1 of 2: tinylm (fp32) 2 shapes timed; about 10 s left in the "
        "sweep (its children took 10 s each)",
        "[   10 s] sweep: child 1 of 2: softmax (fp32) 1 shapes timed; about 10 s left in the "
        "sweep (its children took 10 s each)"]
    assert got[4].startswith("[   30 s] sweep: child 2 of 2: tinylm (fp32) 2 shapes timed")
    assert got[6].startswith("[   30 s] sweep done in 30 s; time model:")
    assert got[7].startswith("[   34 s] time done in 4 s; probes:")
    assert got[8] == "[   40 s] probes done in 6 s; measured in 40 s"


def test_a_first_look_off_a_terminal_says_so_and_writes_its_progress(tmp_path, monkeypatch):
    """``afford certify`` in a pipe on a CPU: the request leaves precision and workloads to
    the device, the first look is announced with the way to the full certificate, and the
    progress comes as lines (certify's measuring replaced by a scripted run)."""
    import afford.certification as certify_pkg

    asked = []

    def fake_certify(req, on_event, on_plan):
        asked.append(req)
        clock = Clock()
        on_plan(_plan())
        _events(clock, SimpleNamespace(event=on_event))
        return load_certificate(CERT)

    monkeypatch.setattr(certify_pkg, "certify", fake_certify)
    r = CliRunner().invoke(app, ["certify", "-o", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output  # NOISY (made at load 8) and still exit 0
    assert asked[0].precision is None and asked[0].workloads == []
    out = r.output
    assert "A first look (the default on a CPU): tinylm at the quick protocol; the full " \
        "certificate: afford certify --full" in out
    assert "sweep: child 1 of 3: tinylm (fp32) 2 shapes timed; about" in out
    assert "probes done in" in out
    assert out.count("A first look") == 2  # as the plan is made, and under the summary


def test_the_precision_flags_exclude_each_other():
    r = CliRunner().invoke(app, ["certify", "--quick", "--adaptive"])
    assert r.exit_code == 2 and "contradict" in r.output
