"""The size law, the phase split and the levers' arithmetic, on synthetic readings."""

import math

import pytest

from afford.certification import stage_levers as lv
from afford.certification.stage_sizes import SIZES, ladder_items, size_configs
from afford.core.errors import InputError
from afford.core.provenance import NotExecutable
from afford.fit.time.phases import growth, phase_child, phase_split, premise
from afford.fit.time.size_law import fit_sizes_section
from afford.fit.time.speedup import per_child_speedups, summarize
from afford.fit.time.verdicts import mfu
from afford.schema.levers_section import LeverVariant
from afford.schema.point import ChildPoint, StepFlops
from afford.schema.sizes_section import PhaseChild, SizePoint
from afford.workloads import resolve
from afford.workloads.tinylm import tinylm_params
from tests.synthetic_cert import point


def _sizes(shapes, seconds, excluded=(), flops=True):
    """tinylm-shaped sizes at 8 x 1024 with their counted FLOPs (or none) and steps."""
    out = []
    for i, ((d, L), t) in enumerate(zip(shapes, seconds)):
        n = 12 * L * d * d + 256 * d
        counted = StepFlops(gemm=6 * 8192 * n, attn=12 * 8 * 1024**2 * d * L) if flops else None
        p = point(t, resident=i not in excluded,
                  excluded="not resident: ran out of memory" if i in excluded else None)
        out.append(SizePoint(spec=f"tinylm@d{d}L{L}", d=d, L=L, H=max(1, d // 64), params=n,
                             point=p.model_copy(update={"flops": counted})))
    return out


SHAPES = [(128, 4), (256, 6), (512, 8), (768, 12), (1024, 16)]


def _fit(sizes, rate=8e14):
    return fit_sizes_section("tinylm", sizes, batch=8, seq=1024, gemm_rate=rate,
                             bandwidth=4e12, bytes_per_param=16.0)


def test_section_law_and_scaling_from_counted_flops():
    """Wall steps 1.5 x the GEMM bound over three sizes above a 9 ms floor: the family's
    scaling is read exactly off the counted FLOPs, and the law extrapolates the work."""
    def step(d, L):
        return max(9e-3, 1.5 * 6 * 8192 * (12 * L * d * d + 256 * d) / 8e14)

    law, scaling, notes = _fit(_sizes(SHAPES, [step(d, L) for d, L in SHAPES]))
    assert notes == [] and law.sides == "wall"
    assert scaling.layer_gemm == pytest.approx(6 * 8192 * 12) and scaling.max_rel_error < 1e-9
    assert scaling.outer_gemm == pytest.approx(6 * 8192 * 256)
    assert scaling.layer_attn == pytest.approx(12 * 8 * 1024**2)
    assert "counted" in scaling.source and scaling.aspect == 64 and scaling.head_dim == 64
    w = scaling.work(2048, 24, 16.0)
    assert law.predict(w).seconds == pytest.approx(step(2048, 24), rel=0.05)


def test_section_without_counted_flops_uses_six_n():
    law, scaling, _ = _fit(_sizes(SHAPES, [0.01, 0.011, 0.016, 0.027, 0.033], flops=False))
    assert "6 N per token" in scaling.source and law is not None


def test_section_law_keeps_exclusions_and_needs_two_sizes():
    law, _, notes = _fit(_sizes(SHAPES[:4], [1e-2, 2e-2, 4e-2, 8e-2], excluded={3}))
    assert [p.label for p in law.points] == ["tinylm@d128L4", "tinylm@d256L6", "tinylm@d512L8"]
    assert notes == ["tinylm@d768L12 left out: not resident: ran out of memory"]
    law, scaling, notes = _fit(_sizes(SHAPES[:2], [1e-2, 2e-2], excluded={1}))
    assert law is None and scaling is None and "only 1 resident size" in notes[-1]


def test_ladder_sizes_ride_in_the_sweep_on_a_gpu():
    from afford.certification.request import CertifyRequest, resolve
    from afford.workloads import resolve as resolve_workload

    plan = resolve(CertifyRequest(), "cuda", "large-gpu", "cuda:0")
    keys = [it["key"] for it in plan.sizes]
    # the default tinylm at seq 1024 is the first ladder size already: two items more
    assert [it["workload"] for it in plan.sizes] == ["tinylm@d1024L12H16b8s1024",
                                                     "tinylm@d2048L8H32b8s1024"]
    assert all(k in [it["key"] for it in plan.items] for k in keys)
    assert all(it["synced"] is False for it in plan.sizes)  # no synced steps: seconds saved
    assert resolve(CertifyRequest(sizes=True), "cuda", "large-gpu", "cuda:0").sizes == []
    assert resolve(CertifyRequest(ladder_sizes=False), "cuda", "large-gpu", "cuda:0").sizes == []
    assert resolve(CertifyRequest(workloads=["tinylm"]), "cpu", "cpu", "cpu").sizes == []
    w = resolve_workload("softmax", "large-gpu")
    assert ladder_items([("softmax", w, "bf16", [1024])], "large-gpu") == []
    other = resolve_workload("tinylm@d256L4", "large-gpu")
    got = ladder_items([("tinylm@d256L4", other, "bf16", [1024])], "large-gpu")
    assert [it["workload"] for it in got] == ["tinylm@d512L8H8b8s1024",
                                              "tinylm@d1024L12H16b8s1024",
                                              "tinylm@d2048L8H32b8s1024"]


def test_size_tables_share_one_batch_and_seq_and_grow():
    for device_class in SIZES:
        configs = size_configs(device_class)
        assert len(configs) >= 3 and len({(c.batch, c.seq) for c in configs}) == 1
        params = [tinylm_params(c.d, c.L, c.seq) for c in configs]
        assert params == sorted(params) and all(c.d % c.H == 0 for c in configs)
    big = [tinylm_params(c.d, c.L, c.seq) for c in size_configs("large-gpu")]
    assert big[0] < 1.5e6 and 80e6 < big[3] < 90e6 and big[-1] > 2e8  # ~1M ... ~85M, 200M


def test_phase_child_keeps_timed_steps_only():
    phases = {"step_index": [0, 1, 2, 3, 4], "forward_seconds": [9, 1, 2, 3, 4],
              "backward_seconds": [9, 2, 4, 6, 8], "optimizer_seconds": [9, .1, .2, .3, .4]}
    c = phase_child(1, phases, timed_indices=[3, 4])
    assert c.step_indices == [3, 4] and c.forward_seconds == [3, 4]
    assert c.optimizer_seconds == [.3, .4]


def _split(params, fwd, bwd, opt, step):
    kids = [PhaseChild(child=c, step_indices=[5, 6], forward_seconds=[fwd] * 2,
                       backward_seconds=[bwd] * 2, optimizer_seconds=[opt] * 2)
            for c in range(3)]
    return phase_split("x", params, kids, [step] * 3)


def test_growth_and_premise_by_hand():
    # N x100; optimizer 1 ms -> 10 ms: b = ln 10 / ln 100 = 0.5 > 0.1: grows, premise fails
    small = _split(10**6, 2e-3, 4e-3, 1e-3, 8e-3)
    large = _split(10**8, 2e-2, 4e-2, 1e-2, 8e-2)
    rows = growth(small, large)
    opt = next(g for g in rows if g.phase == "optimizer")
    assert opt.ratio == pytest.approx(10) and opt.exponent == pytest.approx(0.5)
    assert opt.share_small == pytest.approx(0.125) and opt.share_large == pytest.approx(0.125)
    verdict, finding = premise(rows, 10**6, 10**8)
    assert verdict == "fails" and "N^0.50" in finding and "grows with N" in finding
    assert finding.startswith("from N=1,000,000 to N=100,000,000 (x100) the optimizer step "
                              "went x10.00")
    # optimizer 1 ms -> 1.2 ms: b = ln 1.2 / ln 100 = 0.0396: flat, premise holds
    flat = _split(10**8, 2e-2, 4e-2, 1.2e-3, 6.2e-2)
    rows = growth(small, flat)
    opt = next(g for g in rows if g.phase == "optimizer")
    assert opt.exponent == pytest.approx(math.log(1.2) / math.log(100))
    assert premise(rows, 10**6, 10**8)[0] == "holds"


def test_a_phase_timed_at_zero_seconds_is_left_out_of_the_growth():
    # an optimizer too fast to time (0 s, e.g. SGD without state on a tiny model) has no
    # ratio or exponent; the other phases and the step keep theirs
    rows = growth(_split(10**6, 2e-3, 4e-3, 0.0, 6e-3), _split(10**8, 2e-2, 4e-2, 1e-3, 6.1e-2))
    assert [g.phase for g in rows] == ["forward", "backward", "step"]
    assert rows[0].exponent == pytest.approx(0.5)  # 10x over N x100
    rows = growth(_split(10**6, 2e-3, 4e-3, 1e-3, 7e-3), _split(10**8, 2e-2, 4e-2, 0.0, 6e-2))
    assert [g.phase for g in rows] == ["forward", "backward", "step"]


def test_premise_untested_without_a_split():
    broken = phase_split("x", 10**6, [], [], "child 0 exited with code 1")
    assert broken.error == "child 0 exited with code 1" and broken.forward_seconds is None
    assert growth(broken, _split(10**8, 1, 1, 1, 3)) == []
    assert premise([], None, None)[0] == "untested"


def test_speedups_paired_within_children():
    a = {0: 10.0, 1: 12.0, 2: 11.0}
    b = {0: 5.0, 1: 4.0, 2: 5.5, 3: 1.0}  # child 3 timed only B: not paired
    assert per_child_speedups(a, b, "step_seconds") == [2.0, 3.0, 2.0]
    assert summarize([2.0, 3.0, 2.0]) == (2.0, 2.0, 3.0)
    # batch x2: tokens 8192 -> 16384; t 10 -> 15 s: (16384/15) / (8192/10) = 4/3
    assert per_child_speedups({0: 10.0}, {0: 15.0}, "tokens_per_second", 8192, 16384) == \
        [pytest.approx(4 / 3)]
    with pytest.raises(ValueError):
        per_child_speedups(a, b, "tokens_per_second")
    assert summarize([]) == (None, None, None)
    # a child that timed a side at 0 s (a broken timing) is left out, on either side
    assert per_child_speedups({0: 1.0, 1: 0.0, 2: 2.0}, {0: 0.5, 1: 1.0, 2: 0.0},
                              "step_seconds") == [2.0]
    assert mfu(1e12, 0.01, 5e14) == pytest.approx(0.2)


def test_lever_pairs_in_bf16_and_fp32():
    p = {x.name: x for x in lv.pairs("tinylm@q3", "bf16", lv.LEVERS)}
    assert p["bf16"].a == ("tinylm@q3", "fp32") and p["bf16"].b == ("tinylm@q3+flops", "bf16")
    assert p["fused"].a == ("tinylm@q3+foreach", "bf16")
    assert p["fused"].b == ("tinylm@q3+fused", "bf16")
    assert p["cudagraphs"].b == ("tinylm@q3+cudagraphs", "bf16")
    assert p["batch4"].metric == "tokens_per_second"
    q = {x.name: x for x in lv.pairs("tinylm", "fp32", ("bf16",))}
    assert q["bf16"].a == ("tinylm+flops", "fp32") and q["bf16"].b == ("tinylm", "bf16")


def test_levers_not_applicable_here_say_why(monkeypatch):
    assert "need a CUDA device" in lv.not_applicable("cudagraphs", "cpu")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CXX", raising=False)
    assert "C++ compiler" in lv.not_applicable("compile", "cpu")
    assert lv.not_applicable("fused", "cpu") is None


def test_lever_names_and_workloads_checked():
    assert lv.parse_levers(None) == lv.LEVERS
    assert lv.parse_levers("fused, bf16") == ("fused", "bf16")
    with pytest.raises(InputError, match="unknown lever"):
        lv.parse_levers("fused,turbo")
    with pytest.raises(InputError, match="without step options"):
        lv.check_workloads(["tinylm+fused"], "cpu")
    assert lv.check_workloads(["tinylm@q3", "tinylm@d64L2H2b4s256"], "cpu") == [
        ("tinylm@q3", 512), ("tinylm@d64L2H2b4s256", 256)]
    assert lv.lever_value(resolve("softmax", "cpu"), "cpu") == 256  # middle of 64..512


def _variant(key, seconds=None, excluded=None, blocked=None, tokens=8192):
    kids = [ChildPoint(child=c, order_position=0, median_seconds=s)
            for c, s in enumerate(seconds or [])]
    p = None if blocked else point(seconds[0] if seconds else None, children=kids,
                                   excluded=excluded, tokens=tokens,
                                   resident=None if excluded else True)
    return LeverVariant(key=key, spec=key, mode="bf16", label=key, point=p,
                        not_executable=NotExecutable(what="w", reason=blocked) if blocked else None)


def test_lever_speedup_and_not_executable_paths():
    pair = lv.Pair("compile", ("A", "bf16"), ("B", "bf16"), "step_seconds")
    from afford.certification.sweep import point_key

    def variants(a, b):
        return {point_key("A", "bf16", 1): a, point_key("B", "bf16", 1): b}

    ok = lv._lever(pair, variants(_variant("A", [2.0, 3.0, 4.0]),
                                  _variant("B", [1.0, 1.0, 2.0])), 1)
    assert ok.per_child == [2.0, 3.0, 2.0] and ok.speedup == 2.0 and ok.not_executable is None
    blocked = lv._lever(pair, variants(_variant("A", [1.0]), _variant("B", blocked="no cc")), 1)
    assert blocked.speedup is None and blocked.not_executable.reason == "no cc"
    failed = lv._lever(pair, variants(_variant("A", [1.0]),
                                      _variant("B", excluded="failed in child 0: RuntimeError: "
                                               "inductor")), 1)
    assert failed.not_executable.reason.startswith("failed in child 0: RuntimeError")


def test_stages_are_wired_to_the_request(monkeypatch):
    from types import SimpleNamespace

    from afford import certification
    from afford.certification import stage_sizes as sz

    assert certification.stages_for(certification.CertifyRequest(
        gates=False, memory=False, probes=False)) == []
    assert [s.__name__ for s in certification.stages_for(certification.CertifyRequest(
        sizes=True, levers=True, gates=False, memory=False, probes=False))] \
        == ["sizes_stage", "levers_stage"]
    seen = {}
    monkeypatch.setattr(sz, "measure_sizes", lambda configs, **kw: seen.update(
        configs=configs, **kw) or "S")
    monkeypatch.setattr(lv, "measure_levers", lambda job, on_event: seen.update(job=job) or "L")
    ctx = SimpleNamespace(
        req=certification.CertifyRequest(precision="quick", children=4, seed=7, sizes=True),
        env=SimpleNamespace(device_memory_bytes=123, device_type="cpu", device_name="box",
                            torch_version="t", command="c"),
        plan=SimpleNamespace(device="cpu", device_class="cpu", workloads=[("tinylm", None,
                                                                           "bf16", [1])]),
        on_event=lambda e: None)
    assert sz.sizes_stage(ctx) == {"sizes": "S"}
    assert seen["mode"] == "bf16" and seen["children"] == 4 and seen["device_memory"] == 123
    assert len(seen["configs"]) == len(SIZES["cpu"][2])
    assert lv.levers_stage(ctx) == {"levers": "L"}
    job = seen["job"]
    assert job.workloads == ["tinylm"] and job.levers == lv.LEVERS and job.mode == "bf16"
    assert job.precision == "quick" and job.seed == 7 and job.device_name == "box"


def test_batch_ladder_fixed_share_by_hand():
    """t = 6 ms + 1e-6 s x tokens at 1k, 2k, 4k tokens: F = 6 ms, share at x1 = 6/7."""
    from afford.certification.sweep import point_key

    def v(spec, tokens):
        key = point_key(spec, "bf16", 64)
        return key, LeverVariant(key=key, spec=spec, mode="bf16", label=spec,
                                 point=point(6e-3 + 1e-6 * tokens, tokens=tokens))

    variants = dict([v("w+flops", 1000), v("w+x2", 2000), v("w+x4", 4000)])
    law, share = lv.batch_ladder("w", "bf16", 64, variants)
    assert law.params["F"] == pytest.approx(6e-3) and law.params["c"] == pytest.approx(1e-6)
    assert share == pytest.approx(6 / 7)
    del variants[point_key("w+x4", "bf16", 64)]
    assert lv.batch_ladder("w", "bf16", 64, variants) == (None, None)


def test_growth_needs_two_parameter_counts_in_order():
    small, large = _split(10**6, 2e-3, 4e-3, 1e-3, 8e-3), _split(10**8, 2e-2, 4e-2, 1e-2, 8e-2)
    assert growth(large, small) == [] and growth(small, small) == []
    no_n = _split(None, 2e-3, 4e-3, 1e-3, 8e-3)
    assert growth(no_n, large) == [] and growth(small, no_n) == []
    # phases timed but no whole-step median (no step timings came back): no shares, no rows
    kids = [PhaseChild(child=0, step_indices=[5], forward_seconds=[2e-3],
                       backward_seconds=[4e-3], optimizer_seconds=[1e-3])]
    no_step = phase_split("x", 10**6, kids, [])
    assert no_step.step_seconds is None and no_step.forward_seconds == 2e-3
    assert growth(no_step, large) == [] and growth(small, phase_split("x", 10**8, kids, [])) == []


def test_ladder_sizes_are_read_from_the_sweeps_records(monkeypatch):
    """The default GPU certify's sizes stage on fake child records: the default tinylm's
    seq-1024 point is the first size, the two ladder items the others; each child's record
    carries its timings, the first child's counted FLOPs and the last child's profile; the
    law is bounded by the probes' GEMM rate and bandwidth and uses the memory law's bytes."""
    from types import SimpleNamespace

    from afford.certification.request import CertifyRequest, resolve
    from afford.certification.stage_sizes import LADDER_SIZES, sizes_stage
    from afford.certification.sweep import point_key
    from afford.schema.probes_section import CopyProbe, GemmProbe

    plan = resolve(CertifyRequest(), "cuda", "large-gpu", "cuda:0")
    rate, bw = 8e14, 4e12
    batch, seq, dims = LADDER_SIZES["large-gpu"]
    mode = plan.workloads[0][2]  # bf16 where torch says the card supports it
    keys = [point_key("tinylm", mode, 1024)] + [it["key"] for it in plan.sizes]

    def record(c, d, L):
        n = tinylm_params(d, L, seq)
        g, a, k = 6.0 * batch * seq * n, 12.0 * batch * seq * seq * d * L, 130 + 50 * L
        busy = 1.5 * g / rate + a / rate + 16 * n / bw + 4e-6 * k
        t = max(30e-6 * k, busy + 1e-6 * k)
        rec = {"child": c, "order_position": 0, "median_seconds": t,
               "timed_seconds": [t] * 12, "timed_step_indices": list(range(3, 15))}
        if c == 0:
            rec["flops"] = {"gemm": g, "attn": a}
        if c == 2:
            rec["device_steps"] = [{"index": 20, "busy_seconds": busy, "kernels": k,
                                    "span_seconds": t, "queued_gap_seconds": 1e-6}]
        return {"record": rec, "params": n, "tokens_per_step": batch * seq,
                "shape": {"batch": batch, "seq": seq, "d": d, "L": L}}

    per_child = [{key: record(c, d, L) for key, (d, L, _) in zip(keys, dims)}
                 for c in range(3)]
    gemm = {mode: GemmProbe(dtype=mode, n=8192, flop_per_call=2 * 8192**3,
                              warmup_calls=3, seconds=[2 * 8192**3 / rate] * 3,
                              median_seconds=2 * 8192**3 / rate, flops_per_second=rate,
                              max_rel_error=1e-3, reference="fp64", settings={})}
    copy = CopyProbe(buffer_bytes=2**30, bytes_per_call=2**31, warmup_calls=3,
                     seconds=[2**31 / bw] * 3, median_seconds=2**31 / bw, bytes_per_second=bw)
    memory = SimpleNamespace(laws=[SimpleNamespace(workload="tinylm", mode=mode,
                                                   bytes_per_param=16.0)])
    ctx = SimpleNamespace(req=CertifyRequest(), plan=plan, per_child=per_child, results=[],
                          env=SimpleNamespace(device_memory_bytes=141 * 2**30, tf32_matmul=False,
                                              float32_matmul_precision="highest",
                                              device_type="cuda"),
                          sections={"probes": SimpleNamespace(gemm=gemm, device_copy=copy),
                                    "memory": memory})
    sec = sizes_stage(ctx)["sizes"]
    assert [z.spec for z in sec.sizes] == ["tinylm@d512L8H8b8s1024", "tinylm@d1024L12H16b8s1024",
                                           "tinylm@d2048L8H32b8s1024"]
    law = sec.size_law
    assert law.sides == "profiled" and law.gemm_rate == rate and law.bandwidth == bw
    assert law.coefficients["gemm_flops"] == pytest.approx(1.5 / rate, rel=0.02)
    assert law.kernels_per_layer == pytest.approx(50) and law.issue_seconds == pytest.approx(30e-6)
    assert law.held_out.label == "tinylm@d2048L8H32b8s1024" and abs(law.held_out.rel_error) < 0.02
    assert sec.scaling.source.startswith("FLOPs counted") and sec.premise == "untested"
    assert sec.warnings == []
    # a sweep whose launch floor sits above the sizes' steps: said, and the law still fitted
    ctx.results = [SimpleNamespace(time=SimpleNamespace(floor_seconds=0.05))]
    sec = sizes_stage(ctx)["sizes"]
    assert sec.size_law is not None and "of the ladder's 3 sizes lie at 2x or more of the " \
        "sweep's launch floor (50 ms)" in sec.warnings[0]
