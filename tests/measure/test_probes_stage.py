"""The probes section assembled from synthetic child events (an H200-like run with the
reference figures of docs/REFERENCES.md), the readings and the rendered tables; and the real,
reduced CPU probes stage end to end (slow)."""

import math
from datetime import datetime, timezone

import pytest
from rich.console import Console

from afford import figures
from afford.certification.stage_probes import assemble_section, gemm_dtype_for, workload_items
from afford.core.provenance import NotExecutable, Tag
from afford.figures.probes_figures import probes_json, summarize_probes
from afford.measure.probes.protocol import probe_protocol
from afford.report.probes_tables import probes_device_table, probes_workload_table
from afford.report.probes_tables import probes_warmup_table as warmup_table
from afford.schema.cert import Certificate, Environment, Protocol, WorkloadResult
from afford.schema.datasheet import lookup
from afford.schema.point import ChildPoint, Point
from afford.schema.probes_section import Ladder, ProbesSection

N = 8192
FLOP = 2.0 * N**3


def env(device_type="cuda", name="NVIDIA H200", cls="large-gpu", **kw):
    return Environment(device_type=device_type, device_name=name, device_class=cls,
                       os="Linux", python_version="3.11", torch_version="2.11",
                       torch_num_threads=16, float32_matmul_precision="highest",
                       afford_version="0.1.0", command="test",
                       started_at=datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc), **kw)


def child(c, step0, warm):
    return ChildPoint(child=c, order_position=0, step0_seconds=step0, warmup_seconds=[warm * 3],
                      timed_seconds=[warm] * 12, timed_step_indices=list(range(2, 14)),
                      median_seconds=warm)


def result(name, param, medians, mode="bf16", shape=None):
    points = [Point(value=v, shape={**(shape or {}), param: v}, median_seconds=m,
                    step0_seconds=40 * m, step0_over_warm=40.0,
                    children=[child(c, 40 * m, m) for c in range(3)], resident=True)
              for v, m in medians.items()]
    return WorkloadResult(name=name, source="builtin", mode=mode, sweep_param=param,
                          points=points)


def gemm_event(dtype, rate, err):
    med = FLOP / rate
    return {"result": {"dtype": dtype, "n": N, "flop_per_call": FLOP, "warmup_calls": 3,
                       "seconds": [med] * 10, "median_seconds": med, "flops_per_second": rate,
                       "max_rel_error": err, "reference": "fp64 on 64 random rows",
                       "settings": {}}}


def rung(m, tokens, secs):
    return {"multiplier": m, "shape": {"batch": 4 * m, "seq": 256}, "tokens_per_step": tokens,
            "step0_seconds": 0.5, "warmup_seconds": [secs] * 2, "timed_seconds": [secs] * 10,
            "timed_step_indices": list(range(3, 13)), "median_seconds": secs}


def trace(level):
    t = [round(0.1 * i, 1) for i in range(11)]
    return {"result": {"hz": 10.0, "t_seconds": t, "gpu": [0.9, 0.9] + [level] * 9,
                       "memory": [0.1] * 11, "error": None, "source": "NVML fake"}}


TINY_FLOPS = 4.0e9    # made-up counts; only their use is checked
Q3_FLOPS = 6.4e11


def events():
    tiny = [rung(1, 1024, 0.0067), rung(2, 2048, 0.0068), rung(4, 4096, 0.0070)]
    q3 = [rung(1, 4096, 0.015), rung(2, 8192, 0.029), rung(4, 16384, 0.057)]
    ck = {"value": 256, "shape": {"batch": 4, "seq": 256}, "directory": "/tmp", "bytes": 10**6,
          "write_seconds": [0.02, 0.01, 0.03], "median_write_seconds": 0.02,
          "load_seconds": 0.005, "verified": True, "mismatch": None, "method": "atomic"}
    return {
        "gemm.fp32": gemm_event("fp32", 50.7e12, 1e-6),
        "gemm.tf32": gemm_event("tf32", 401e12, 1e-3),
        "gemm.bf16": gemm_event("bf16", 762e12, 3e-3),
        # gemm.fp16 missing: the child died before it
        "copy": {"result": {"buffer_bytes": 2**30, "bytes_per_call": 2**31, "warmup_calls": 3,
                            "seconds": [2**31 / 4.24e12] * 10,
                            "median_seconds": 2**31 / 4.24e12, "bytes_per_second": 4.24e12}},
        "w0.ladder": {"result": {"batch_key": "batch", "rungs": tiny}},
        "w0.utilisation": trace(0.15),
        "w0.flops.256": {"result": {"value": 256, "shape": {"seq": 256}, "flops": TINY_FLOPS,
                                    "by_op": {"aten.mm": TINY_FLOPS}, "counter": "fake"}},
        "w0.flops.512": {"result": {"value": 512, "shape": {"seq": 512}, "flops": 2 * TINY_FLOPS,
                                    "by_op": {}, "counter": "fake"}},
        "w0.checkpoint": {"result": ck},
        "w1.ladder": {"result": {"batch_key": "batch", "rungs": q3}},
        "w1.utilisation": trace(0.97),
        "w1.flops.512": {"result": {"value": 512, "shape": {"seq": 512}, "flops": Q3_FLOPS,
                                    "by_op": {}, "counter": "fake"}},
        "w1.flops.1024": {"not_executable": {"what": "FLOPs of a step",
                                             "reason": "OutOfMemoryError: (injected)"}},
        "w1.checkpoint": {"not_executable": {"what": "checkpoint write",
                                             "reason": "PermissionError: read-only folder"}},
        "startup": {"result": {"process_seconds": 2.0, "import_torch_seconds": 1.5,
                               "cuda_init_seconds": 0.4, "torch_version": "2.11",
                               "role": "probe child"}},
    }


def section(stopped="the probe child exited with code -9"):
    e = env()
    results = [result("tiny", "seq", {256: 0.0065, 512: 0.0066}),
               result("tinylm", "seq", {512: 0.015, 1024: 0.031})]
    items = workload_items(results)
    runs = [{"process_seconds": p, "import_torch_seconds": t, "cuda_init_seconds": 0.5,
             "torch_version": "2.11"} for p, t in ((1.9, 1.4), (2.4, 1.6))]
    ds, warn = lookup(e.device_name)
    sec = assemble_section(probe_protocol("adaptive", "cuda", "large-gpu"), e, items, results,
                           events(), stopped, runs, None, ds, [warn] if warn else [], 12.5)
    return e, results, sec


def cert_with(sec, e, results):
    proto = Protocol(precision="adaptive", children=3, warmup_steps=3, warmup_seconds=0.3,
                     min_timed_steps=12, floor_seconds=0.5, max_floor_seconds=3.0,
                     target_rel_precision=0.01, clock="fake")
    return Certificate(environment=e, protocol=proto, workloads=results, probes=sec)


def test_workload_items_probe_the_smallest_resident_point_and_count_flops_at_both_ends():
    r = result("tinylm", "seq", {512: 0.015, 1024: 0.031, 2048: 0.07})
    r.points[0] = r.points[0].model_copy(update={"resident": False,
                                                 "excluded_reason": "not resident: OOM"})
    assert workload_items([r]) == [{"index": 0, "spec": "tinylm", "mode": "bf16",
                                    "value": 1024, "flop_values": [1024, 2048]}]


def test_flops_the_sweep_counted_are_not_counted_again_and_reach_the_section():
    from afford.schema.point import StepFlops

    e = env()
    r = result("tinylm", "seq", {512: 0.015, 1024: 0.031, 2048: 0.07})
    counted = StepFlops(total=4e12, gemm=3e12, attn=1e12, other=0.0, by_op={"mm": 4e12},
                        counter="FlopCounterMode")
    r.points[0] = r.points[0].model_copy(update={"flops": counted})
    r.points[2] = r.points[2].model_copy(update={"flops": StepFlops(error="no formula")})
    [it] = workload_items([r])
    assert it["flop_values"] == [2048]  # 512 is counted, 2048's count failed: counted again
    assert it["value"] not in it["flop_values"]  # the probe child skips the x1 count
    ev = {"w0.flops.2048": {"result": {"value": 2048, "shape": {"seq": 2048}, "flops": 1.6e13,
                                       "by_op": {"mm": 1.6e13}, "counter": "fake"}}}
    sec = assemble_section(probe_protocol("adaptive", "cuda", "large-gpu"), e, [it], [r], ev,
                           None, [], None, None, [], 1.0)
    f512, f2048 = sec.workloads[0].flops
    assert (f512.value, f512.flops, f512.by_op, f512.step_seconds) == (512, 4e12, {"mm": 4e12},
                                                                        0.015)
    assert (f2048.value, f2048.flops, f2048.counter) == (2048, 1.6e13, "fake")


def test_missing_probes_are_not_executable_with_the_reason_the_child_stopped():
    _, _, sec = section()
    fp16 = sec.gemm["fp16"]
    assert isinstance(fp16, NotExecutable) and "exited with code -9" in fp16.reason
    assert any("exited with code -9" in w for w in sec.warnings)
    q3 = sec.workloads[1]
    assert isinstance(q3.checkpoint, NotExecutable) and "read-only" in q3.checkpoint.reason
    assert isinstance(q3.flops[1], NotExecutable) and "OutOfMemory" in q3.flops[1].reason


def test_tiny_shape_is_launch_bound_and_q3_is_not():
    _, _, sec = section()
    tiny, q3 = sec.workloads
    assert isinstance(tiny.ladder, Ladder) and tiny.ladder.fixed_share > 0.9
    assert tiny.utilisation.kept == 9 and tiny.utilisation.mean == pytest.approx(0.15)
    assert tiny.verdict.label == "launch-bound"
    assert q3.ladder.fixed_share < 0.1 and q3.utilisation.mean == pytest.approx(0.97)
    # arithmetic share at seq=512: 6.4e11 FLOPs at 762 TFLOP/s against the sweep's 15 ms
    assert q3.verdict.arithmetic_share == pytest.approx(6.4e11 / 762e12 / 0.015)
    assert q3.verdict.label == "memory-bound"
    assert q3.flops[0].step_seconds == 0.015


def test_startup_medians_over_the_fresh_children_and_the_probe_child():
    _, _, sec = section()
    s = sec.startup
    assert [r.role for r in s.runs] == ["startup", "startup", "probe child"]
    assert s.import_torch_seconds == 1.5 and s.process_seconds == 2.0   # medians of three
    assert s.cuda_init_seconds == 0.5
    assert isinstance(s.import_transformers_seconds, NotExecutable)


def test_section_round_trips_through_json():
    e, results, sec = section()
    again = ProbesSection.model_validate_json(sec.model_dump_json())
    assert again == sec
    assert isinstance(again.gemm["fp16"], NotExecutable)


def test_readings_are_tagged_with_their_provenance():
    e, results, sec = section()
    cert = cert_with(sec, e, results)
    rate = figures.gemm_rate(cert, "bf16")
    assert rate.tag == Tag.MEASURED and rate.value == 762e12 and rate.unit == "FLOP/s"
    assert figures.gemm_rate(cert, "fp16") is None
    peak = figures.datasheet_peak(cert, "bf16")
    assert peak.tag == Tag.INHERITED and peak.value == 989e12 and "secondary" in peak.source
    assert figures.copy_bandwidth(cert).value == 4.24e12
    assert figures.checkpoint_write_seconds(cert, "tiny").value == 0.02
    assert figures.checkpoint_bytes(cert, "tiny").value == 10**6
    assert figures.checkpoint_write_seconds(cert, "tinylm") is None
    assert figures.step_flops(cert, "tinylm", 512).value == Q3_FLOPS
    assert figures.boundness(cert, "tiny").value == "launch-bound"
    starts = figures.startup_seconds(cert)
    assert set(starts) == {"process", "import_torch", "cuda_init", "first_step"}
    assert starts["import_torch"].value == 1.5
    assert starts["first_step"].value == pytest.approx(40 * 0.031)  # tinylm's, the slowest


def test_readings_without_the_probes_stage():
    e, results, _ = section()
    cert = cert_with(None, e, results)
    assert figures.gemm_rate(cert, "bf16") is None and figures.copy_bandwidth(cert) is None
    assert figures.checkpoint_bytes(cert, "tiny") is None and figures.startup_seconds(cert) == {}
    assert figures.datasheet_peak(cert, "bf16").value == 989e12   # looked up by the device name


def render(table) -> str:
    con = Console(width=220, record=True)
    con.print(table)
    return con.export_text()


def test_tables_show_measured_against_datasheet_with_tags():
    e, results, sec = section()
    s = summarize_probes(cert_with(sec, e, results))
    dev = render(probes_device_table(s, "device probes"))
    assert "762 TFLOP/s M" in dev and "989 TFLOP/s I" in dev
    assert "77.05% C" in dev                     # 762 / 989
    assert "4.24 TB/s M" in dev and "4.8 TB/s I" in dev and "88.33% C" in dev
    assert "NOT EXECUTABLE" in dev and "exited with code -9" in dev
    assert "12.50 s M" in dev                     # the stage's wall time
    wl = render(probes_workload_table(s, "workloads"))
    assert "launch-bound C" in wl and "memory-bound C" in wl
    # MFU at the largest counted point of tiny (seq=512): 8e9 / 6.6 ms / 762 TFLOP/s
    assert f"{8.0e9 / 0.0066 / 762e12:.2%} C" in wl
    warm = render(warmup_table(s, "warm"))
    assert "40.0x C" in warm and "20.00 ms M" in warm and "NOT EXECUTABLE" in warm


def test_the_two_step0_over_warm_ratios_say_which_is_which():
    """Issue 30, item 11: certify printed tinylm's step-0 / warm as 2.1x in its summary and
    1.8x in the warm-up table without saying that one is the median over the sweep's points
    and the other the largest point's."""
    from afford.figures.summary import summarize
    from afford.report.terminal import certificate_table

    e, results, sec = section()
    cert = cert_with(sec, e, results)
    summary = " ".join(render(certificate_table(summarize(cert), "summary")).split())
    warm = " ".join(render(warmup_table(summarize_probes(cert), "warm")).split())
    assert "step0/warm, median of points" in summary
    assert "step0/warm, at this point" in warm and "median over every point" in warm


def test_json_summary_keeps_tags_and_not_executable():
    e, results, sec = section()
    doc = probes_json(cert_with(sec, e, results))
    bf16 = next(r for r in doc["device"] if r["figure"].startswith("GEMM bf16"))
    assert bf16["measured"] == {"value": 762e12, "unit": "FLOP/s", "tag": "MEASURED"}
    fp16 = next(r for r in doc["device"] if r["figure"].startswith("GEMM fp16"))
    assert fp16["measured"]["status"] == "NOT EXECUTABLE"


def test_fp32_mode_uses_the_tf32_ceiling_only_when_tf32_was_on():
    assert gemm_dtype_for("fp32", env()) == "fp32"
    assert gemm_dtype_for("fp32", env(tf32_matmul=True)) == "tf32"
    assert gemm_dtype_for("bf16", env()) == "bf16"
    assert gemm_dtype_for("fp32", env("cpu", "AMD EPYC", "cpu")) == "fp32"


def test_unknown_device_has_no_datasheet_and_a_warning():
    ds, warn = lookup("AMD EPYC 7B13")
    assert ds is None and "no datasheet peaks" in warn


@pytest.mark.slow
def test_cpu_probes_stage_end_to_end(cpu_cert):
    """The real reduced CPU certificate of conftest ran the probes stage: every probe ran or
    says why not, with hand-checkable figures."""
    p = cpu_cert.probes
    assert p is not None and p.protocol.precision == "quick"
    assert p.gemm["fp32"].flops_per_second > 0 and p.gemm["fp32"].max_rel_error < 1e-5
    assert p.gemm["bf16"].flops_per_second > 0
    assert "CPU has no TF32" in p.gemm["tf32"].reason
    assert p.device_copy.bytes_per_call == 2 * p.device_copy.buffer_bytes
    assert isinstance(p.host_copy, NotExecutable) and "no host link" in p.host_copy.reason
    for w in p.workloads:  # the step's own matmul shapes, timed alone (the CPU has no TF32)
        assert w.gemm_shapes.distinct_shapes >= len(w.gemm_shapes.timed) >= 1
        assert all(r.fraction_of_square > 0 for r in w.gemm_shapes.timed)
    from tests.measure.test_probes_flops import softmax_flops, tinylm_flops

    for w in p.workloads:
        assert isinstance(w.utilisation, NotExecutable) and "CPU" in w.utilisation.reason
        assert [r.multiplier for r in w.ladder.rungs] == [1, 2, 4]
        for r in w.ladder.rungs:
            assert r.error is None and len(r.timed_seconds) == len(r.timed_step_indices) >= 5
        assert w.checkpoint.verified and w.checkpoint.bytes > 0
        assert len(w.checkpoint.write_seconds) == p.protocol.checkpoint_writes
        # a verdict, or the reason there is none: on this shared 2-core box a 15 us step
        # may not grow with the batch beyond its noise (the ladder fit then fails, F / t
        # above 100 %), and with no NVML on a CPU nothing else can decide it
        assert w.verdict.label in ("launch-bound", "compute-bound", "memory-bound") or (
            w.verdict.label == "undetermined"
            and any(r.startswith("the ladder fit failed") for r in w.verdict.reasons)), \
            w.verdict.reasons
        for f in w.flops:
            sh = f.shape
            want = tinylm_flops(sh["batch"], sh["seq"], sh["d"], sh["L"]) if w.name == "tinylm" \
                else softmax_flops(sh["n"], sh["s"], sh["d"])
            assert f.flops == want
    assert [w.value for w in p.workloads] == [16, 32]      # the smallest sweep points
    s = p.startup
    # the three sweep children were the fresh-process runs: no startup child was spawned
    assert [r.role for r in s.runs] == ["sweep child 0", "sweep child 1", "sweep child 2",
                                        "probe child"]
    assert cpu_cert.protocol.prewarmed_children == []
    assert set(p.probe_seconds) >= {"gemm.fp32", "copy", "w0.ladder", "w1.ladder"}
    assert 0 < s.import_torch_seconds < s.process_seconds
    assert isinstance(s.cuda_init_seconds, NotExecutable)
    summary = summarize_probes(cpu_cert)
    assert "NOT EXECUTABLE" in render(probes_device_table(summary, "cpu"))
    assert not math.isnan(p.wall_seconds)


def test_a_failed_ladder_explains_the_probes_that_ride_on_it():
    e = env()
    results = [result("weird", "seq", {256: 0.01})]
    ev = {"w0.ladder": {"not_executable": {"what": "batch ladder",
                                           "reason": "ValueError: shape has no batch entry"}}}
    sec = assemble_section(probe_protocol("quick", "cuda", "large-gpu"), e,
                           workload_items(results), results, ev, None, [], "boom", None, [], 1.0)
    w = sec.workloads[0]
    assert isinstance(w.checkpoint, NotExecutable) and "no batch entry" in w.checkpoint.reason
    assert all(isinstance(f, NotExecutable) and "batch ladder" in f.reason for f in w.flops)
    assert w.verdict.label == "undetermined"
    assert isinstance(sec.startup, NotExecutable) and sec.startup.reason == "boom"


def test_import_times_are_refused_once_torch_is_imported():
    import torch  # noqa: F401  (already imported by this test process)

    from afford.measure.probes.startup import measure_imports

    with pytest.raises(RuntimeError, match="already imported"):
        measure_imports(None)
