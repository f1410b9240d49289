"""A NOISY certificate says why first: the host's recorded load against its cores and the fix,
then one line per workload with its worst point; the point-by-point warnings only with
``--verbose``."""

from __future__ import annotations

from afford.cli import certify as cli_certify
from afford.figures.noise import summarize_noise
from afford.schema.time_section import HostLoad
from tests.time_certs import make_time_cert


def _noisy_cert(load: float, cores: int = 2):
    cert = make_time_cert(workload_verdict="NOISY", cert_verdict="NOISY",
                          reasons=["8 x 256: children disagree by 40% (> 10%)"])
    r = cert.workloads[0]
    pts = [p.model_copy(update={"child_spread": spread})
           for p, spread in zip(r.points, (0.40, 0.12, None))]
    r = r.model_copy(update={"points": pts})
    notes = [f"tinylm (fp32): {n}" for p in pts if p.usable for n in p.quality_notes("seq")]
    loads = [HostLoad(at="before", load_average=(load, load, load), cpu_count=cores),
             HostLoad(at="after", load_average=(load + 0.5, load, load), cpu_count=cores)]
    return cert.model_copy(update={"workloads": [r], "host_load": loads,
                                   "warnings": notes + ["tinylm (fp32): a law warning"]})


def test_the_load_line_names_the_cause_and_the_fix_on_a_busy_host():
    s = summarize_noise(_noisy_cert(load=9.8))
    assert s.busy and "9.8 before, 10.3 after" in s.load and "on 2 core(s)" in s.load
    assert "idle machine" in s.load and "--children" in s.load
    assert s.worst == ("tinylm (fp32): worst point seq=256, children 40% apart; 2 of 3 "
                       "points warned",)
    assert len(s.point_notes) == 2 and all("children disagree" in n for n in s.point_notes)


def test_an_idle_host_is_not_blamed():
    s = summarize_noise(_noisy_cert(load=0.2))
    assert not s.busy and "not busy" in s.load and "--children" not in s.load


def test_without_a_recorded_load_there_is_no_load_line():
    cert = _noisy_cert(load=1.0).model_copy(update={"host_load": None})
    assert summarize_noise(cert).load is None


def _stderr(fn, capsys) -> list[str]:
    fn()
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_the_noisy_verdict_names_the_worst_point_then_the_cause(capsys):
    """Certify's time verdict line (one of its last lines, issue 40): per workload its
    worst point, then the cause; every reason and the rule only with --verbose."""
    from afford.api.certify_command import time_verdict
    from afford.report.prose import prose

    cert = _noisy_cert(load=9.8)
    v = time_verdict(cert)
    text = prose(v.cause, *v.figures)
    assert v.label == "NOISY" and text.startswith("tinylm (fp32): worst point seq=256")
    assert f"Cause: {summarize_noise(cert).load}" in text
    assert "8 x 256: children disagree" not in text  # a reason: --verbose
    verbose = _stderr(lambda: cli_certify._print_noisy_reasons(cert), capsys)
    assert any("8 x 256: children disagree by 40%" in ln for ln in verbose)


def test_point_warnings_only_with_verbose(capsys):
    cert = _noisy_cert(load=9.8)
    quiet = " ".join(_stderr(lambda: cli_certify._print_warnings(cert, False), capsys))
    assert "a law warning" in quiet and "children disagree" not in quiet
    loud = " ".join(_stderr(lambda: cli_certify._print_warnings(cert, True), capsys))
    assert loud.count("children disagree") == 2 and "a law warning" in loud
