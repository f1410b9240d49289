"""A real, reduced CPU certificate end to end: child processes, raw samples, law; and that
certificate read back: the schema's round trip and the report (here, not in tests/unit or
tests/answers: those lanes never make a real certificate)."""

import json

import pytest

from afford.certification.sweep import assemble_point
from afford.core.errors import InputError
from afford.report import markdown
from afford.report.build import Inputs, build_report
from afford.schema.cert import CERT_SCHEMA, Certificate, load_certificate, save_certificate

pytestmark = pytest.mark.slow


def test_certificate_keeps_raw_samples_with_step_indices(cpu_cert: Certificate):
    assert cpu_cert.protocol.children == 3 and cpu_cert.protocol.precision == "quick"
    for w in cpu_cert.workloads:
        for p in w.points + w.design_points:
            # three children; more only where the time verdict asked for a re-measure, or
            # where fresh extension children measured a shape the sweep's children had
            # measured already (a shape of the ladder's continuation)
            counted = [k for k in p.children if k.round != "remeasure"]
            if any(k.round == "extension" for k in p.children):
                assert len(counted) >= 3
            else:
                assert len(counted) == 3
            assert len({(k.round, k.child) for k in p.children}) == len(p.children)
            # a re-measure the time verdict asked for is a fresh child numbered after the
            # sweep's; one that replaces a record its child left (it died, or the watchdog
            # stopped it on a loaded box) keeps that child's number and says what it replaced
            assert all(k.child == 3 or k.replaced for k in p.children
                       if k.round == "remeasure")
            for k in p.children:
                assert k.step0_seconds > 0
                assert len(k.warmup_seconds) >= cpu_cert.protocol.warmup_steps
                assert len(k.timed_seconds) == len(k.timed_step_indices) >= 12
                # timed steps come after step 0 and the warm-up, in order
                assert k.timed_step_indices[0] == 1 + len(k.warmup_seconds)
                assert k.timed_step_indices == sorted(k.timed_step_indices)
                assert k.grads_checked and k.grads_checked > 0
                assert k.peak_rss_bytes > 0 and "RSS" in k.memory_source


def test_children_use_different_orders(cpu_cert: Certificate):
    orders = []
    for c in range(3):
        orders.append([(w.name, p.value) for w in cpu_cert.workloads for p in w.points
                       for k in p.children if k.child == c])
        orders[-1].sort(key=lambda wp: next(k.order_position for w in cpu_cert.workloads
                                            if w.name == wp[0] for p in w.points
                                            if p.value == wp[1] for k in p.children
                                            if k.child == c))
    assert len({tuple(o) for o in orders}) > 1


def test_point_value_is_median_of_child_medians(cpu_cert: Certificate):
    import statistics

    for w in cpu_cert.workloads:
        for p in w.points:
            meds = [statistics.median(k.timed_seconds) for k in p.children]
            assert p.median_seconds == pytest.approx(statistics.median(meds))
            assert p.resident is True


def test_law_fitted_over_resident_points(cpu_cert: Certificate):
    tiny = next(w for w in cpu_cert.workloads if w.name == "tinylm")
    assert tiny.law is not None and tiny.law.x == [16.0, 32.0, 64.0]
    assert tiny.law.power.loo_rel_errors is not None
    assert cpu_cert.environment.device_type == "cpu"
    assert cpu_cert.environment.elapsed_seconds > 0
    assert cpu_cert.environment.torch_num_threads >= 1


def test_first_loss_is_at_chance_for_tinylm(cpu_cert: Certificate):
    import math

    tiny = next(w for w in cpu_cert.workloads if w.name == "tinylm")
    for p in tiny.points:
        for k in p.children:
            assert k.first_loss == pytest.approx(math.log(256), rel=0.02)


def test_the_time_design_is_measured_beside_the_sweep(cpu_cert: Certificate):
    """tinylm (batch 4) at seq 16, 32, 64 on a CPU: its attention is fused (SDPA), so four
    shapes across (the last a long sequence at batch 1, 2x the longest), three held out (the
    sequence one at 4x the longest, batch 1), FLOPs counted for every fitted shape, once
    per round that measured it, the model fitted and its held-out errors kept."""
    tiny = next(w for w in cpu_cert.workloads if w.name == "tinylm")
    t = tiny.time
    assert [p.role for p in tiny.points] == ["sweep"] * 3
    assert [(p.role, p.batch, p.seq) for p in tiny.design_points[:7]] == [
        ("across", 1, 32), ("across", 16, 16), ("across", 8, 32), ("across", 1, 128),
        ("held_out_interpolated", 4, 48), ("held_out_seq", 1, 256), ("held_out_batch", 32, 8)]
    for p in tiny.points + tiny.design_points:
        counted = [k for k in p.children if k.flops is not None]
        if p.held_out:  # predicted from the scaling laws: never counted
            assert counted == [] and p.flops is None
        else:
            # once per round that measured the shape, by that round's first child: child 0
            # of the sweep, or the extension round's first fresh child (numbered after the
            # sweep's: child 3, where the sweep's children 1 and 2 measured it early)
            assert counted and p.flops.gemm > 0
            rounds = [k.round for k in counted]
            assert len(set(rounds)) == len(rounds)
            assert all(k.child in (0, 3) for k in counted)
    assert t.model is not None and len(t.model.held_out) == 3
    assert t.verdict is not None and cpu_cert.time_verdict is not None
    assert "synchronous" in cpu_cert.protocol.step_semantics
    assert [h.at for h in cpu_cert.host_load] == ["before", "after"]


# ---- the certificate read back: the schema's round trip, the report ------------------------


def test_round_trip(cpu_cert_path, tmp_path):
    cert = load_certificate(cpu_cert_path)
    out = tmp_path / "again.json"
    save_certificate(cert, out)
    again = load_certificate(out)
    assert again == cert
    assert json.loads(out.read_text())["schema"] == CERT_SCHEMA


def test_refuses_to_overwrite_without_asking(cpu_cert, tmp_path):
    out = tmp_path / "c.json"
    out.write_text("mine")
    with pytest.raises(InputError, match="already exists"):
        save_certificate(cpu_cert, out)
    assert out.read_text() == "mine"
    save_certificate(cpu_cert, out, overwrite=True)
    assert load_certificate(out) == cpu_cert


def test_report_of_a_real_cpu_certificate(cpu_cert):
    text = markdown.render(build_report(Inputs(certs=(("cpu.json", cpu_cert),))))
    assert f"## Device: {cpu_cert.environment.device_name}" in text
    assert "tinylm (fp32)" in text and "softmax (fp32)" in text
    memory = text[text.index("### Memory"):text.index("### Residency")]
    assert "law of peak RSS increment" in memory and "reserved" not in memory
    assert "Not shown, because they carry no provenance tag" not in memory


def test_oom_point_is_not_resident_and_excluded():
    events = [{"event": "point", "key": "k",
               "record": {"child": c, "order_position": 0, "oom": True,
                          "error": "OutOfMemoryError: x"}}
              for c in range(3)]
    p = assemble_point(4096, events, device_memory=10**9)
    assert p.resident is False and "out of memory" in p.excluded_reason
    assert p.median_seconds is None


def test_over_reserved_point_is_not_resident():
    rec = {"child": 0, "order_position": 0, "timed_seconds": [1.0] * 12,
           "timed_step_indices": list(range(4, 16)), "median_seconds": 1.0,
           "peak_reserved_bytes": 2 * 10**9, "peak_allocated_bytes": 10**9}
    events = [{"event": "point", "key": "k", "record": {**rec, "child": c}} for c in range(3)]
    p = assemble_point(1, events, device_memory=10**9)
    assert p.resident is False and "exceeds" in p.excluded_reason
