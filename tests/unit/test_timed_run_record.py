"""The timed run as a child records it and a certificate stores it (issue 38 item 2): every
stored sample keeps its step index (the seeds' rule 1), the run's blocks and its host wall time
ride beside the steps, a point derives the run's mean step, the protocol says how the steps
were timed, and certificates written before any of this still load."""

from __future__ import annotations

import pytest
import torch

from afford.certification.sweep import assemble_point, protocol_of
from afford.measure.sweep_child import run_point
from afford.measure.timing import rule_for
from afford.schema.cert import load_certificate
from afford.workloads import resolve
from tests.paths import data_file


def test_a_cpu_childs_record_keeps_every_steps_index_and_its_runs_wall():
    w = resolve("tinylm", "cpu")
    item = {"child": 0, "position": 0, "mode": "fp32", "value": 16, "batch": 2,
            "batch_key": "batch"}
    rec = run_point(w, item, torch.device("cpu"), rule_for("quick"), 0)["record"]
    steps, idx = rec["timed_seconds"], rec["timed_step_indices"]
    assert len(idx) == len(steps) >= 12
    first = 1 + len(rec["warmup_seconds"])  # step 0, then the warm-up, then the run
    assert idx == list(range(first, first + len(steps)))
    assert len(steps) % rec["timed_block_steps"] == 0
    # the host clock times a CPU step; the run's wall holds every step and the readings
    assert rec["timed_run_seconds"] >= sum(steps)
    assert rec["timed_run_seconds"] < 1.5 * sum(steps) + 0.05


def _event(child: int, steps: list[float], run: float | None):
    rec = {"child": child, "order_position": 0, "timed_seconds": steps,
           "timed_step_indices": list(range(4, 4 + len(steps))),
           "median_seconds": sorted(steps)[len(steps) // 2], "timed_block_steps": 4,
           "timed_run_seconds": run}
    return {"event": "point", "key": "k", "child": child, "record": rec, "shape": {"n": 1}}


def test_a_point_derives_the_runs_mean_step_from_its_children():
    slow_one = [0.010] * 11 + [0.032]  # one rare slow step: the median hides it, the mean not
    events = [_event(0, slow_one, 0.1425), _event(1, [0.011] * 12, 0.1335),
              _event(2, [0.010] * 12, 0.1215)]
    p = assemble_point(1, events, None)
    assert p.median_seconds == 0.010
    # the median of the children's 0.0119, 0.0111 and 0.0101 s a step
    assert p.run_mean_seconds == pytest.approx(0.1335 / 12)
    assert p.children[0].timed_block_steps == 4


def test_a_point_of_an_older_certificate_has_no_run_figures():
    events = [_event(c, [0.010] * 12, None) for c in range(3)]
    assert assemble_point(1, events, None).run_mean_seconds is None


def test_the_protocol_says_how_the_steps_were_timed():
    from afford.certification.request import CertifyRequest

    req = CertifyRequest(precision="adaptive")
    p = protocol_of(req, rule_for("adaptive"), "cuda")
    assert (p.precise_seconds, p.block_seconds, p.floor_seconds) == (0.1, 0.05, 0.25)
    assert "once, at the end of the timed run" in p.clock
    assert protocol_of(req, rule_for("full"), "cpu").precise_seconds is None


@pytest.mark.parametrize("path", ["h200_default_d89f7a2.json",
                                  "h200_time_default_2026-12-02.json",
                                  "cert_v0_h200_tinylm.json"])
def test_certificates_written_before_the_pipelined_run_still_load(path):
    cert = load_certificate(data_file(path))
    assert cert.protocol.block_seconds is None and cert.protocol.precise_seconds is None
    assert "once per block" in cert.protocol.clock  # their own words on how they timed
    for r in cert.workloads:
        for p in r.points + r.design_points:
            assert p.run_mean_seconds is None and p.outlier_children == []
            for k in p.children:
                assert k.timed_block_steps is None and k.timed_run_seconds is None
                assert len(k.timed_step_indices) == len(k.timed_seconds)
