"""Plans with N devices from a synthetic distributed section: values worked by hand, tags."""

from datetime import datetime, timezone

import pytest
import torch

from afford.certification.stage_distributed import assemble_collectives, assemble_dp
from afford.core.errors import InputError
from afford.core.provenance import Tag, measured
from afford.figures import distributed_figures as figures
from afford.fit.nodes.collectives_fit import fit_alpha_beta, ring_allreduce_seconds
from afford.measure import env as envmod
from afford.planning import scaling
from afford.schema.cert import Certificate, Protocol
from afford.schema.distributed_section import CollectivesSection, DistributedSection, RankInfo

GRAD_BYTES = 4_000_000


def _rec(strategy, w, rank, secs, nosync=None):
    rec = {"strategy": strategy, "world_size": w, "rank": rank, "mode": "fp32",
           "shape": {"batch": 4, "seq": 128, "d": 64, "L": 2, "H": 2}, "params": 1_000_000,
           "grad_bytes": GRAD_BYTES, "tokens_per_step": 512, "step0": 1.0,
           "first_loss": 5.55, "seconds": secs, "indices": list(range(3, 3 + len(secs))),
           "peak_rss_bytes": 400 * 2**20 + rank, "memory_source": "rss"}
    if nosync is not None:
        rec.update(nosync_seconds=nosync, nosync_indices=list(range(100, 100 + len(nosync))))
    return rec


def _payloads(steps: dict[int, float], n: int, strategy="ddp", nosync=0.09):
    """Per-rank payloads as the ranks send them: rank r is a member of every w > r."""
    out = []
    for r in range(n):
        runs = []
        for w in range(1, n + 1):
            if r < w and w in steps:
                # rank 0 is the slowest: the node's step is rank 0's median
                t = steps[w] * (1.0 if r == 0 else 0.99)
                runs.append(_rec(strategy, w, r, [t, t * 1.01, t * 0.99], [nosync] * 3))
            else:
                runs.append(None)
        out.append({"strategy": strategy, "runs": runs, "error": None})
    return out


def section(steps=None, n=4, collectives=None) -> DistributedSection:
    steps = steps or {1: 0.100, 2: 0.110, 3: 0.11333333333333334, 4: 0.115}
    dp = assemble_dp(_payloads(steps, n))
    return DistributedSection(
        status="complete", backend="gloo", world_size=n, local_world_size=n, nodes=1,
        timeout_seconds=60, precision="quick", torch_version=torch.__version__,
        ranks=[RankInfo(rank=r, local_rank=r, device="cpu") for r in range(n)],
        ranks_finished=list(range(n)), collectives=collectives, data_parallel=[dp])


def test_assemble_keeps_every_rank_and_takes_the_slowest():
    d = section()
    run = d.data_parallel[0].runs[1]  # world size 2
    assert run.world_size == 2 and len(run.rank_seconds) == 2
    assert run.rank_medians == pytest.approx([0.110, 0.110 * 0.99])
    assert run.step_seconds == pytest.approx(0.110)  # max over ranks, not a mean
    assert run.rank_peak_rss_bytes == [400 * 2**20, 400 * 2**20 + 1]
    assert run.exposed_comm_share == pytest.approx((0.110 - 0.09) / 0.110)
    assert d.data_parallel[0].efficiency == pytest.approx(
        [1.0, 0.1 / 0.11, 0.1 / 0.11333333333333334, 0.1 / 0.115])


def test_on_node_measured_multiplier_by_hand():
    s = figures.on_node(section(), 4)
    assert s.scope == "measured"
    assert s.step_seconds.tag == Tag.MEASURED and s.step_seconds.value == pytest.approx(0.115)
    assert s.throughput_multiplier.value == pytest.approx(4 * 0.100 / 0.115)
    assert s.step_ratio.value == pytest.approx(1.15)
    assert s.efficiency.value == pytest.approx(0.100 / 0.115)
    assert s.throughput_multiplier.tag == Tag.MEASURED


def test_on_node_fitted_where_a_world_size_is_missing():
    # t(w) = 0.1 + 0.02 * 2(w-1)/w at w = 1, 2, 4; w = 3 not run -> FITTED from the law
    steps = {1: 0.100, 2: 0.120, 4: 0.130}
    s = figures.on_node(section(steps), 3)
    assert s.scope == "fitted" and s.step_seconds.tag == Tag.FITTED
    assert s.step_seconds.value == pytest.approx(0.1 + 0.02 * 4 / 3)
    assert s.throughput_multiplier.tag == Tag.FITTED
    assert not s.step_seconds.extrapolated


def test_beyond_node_projection_is_module_from_assumed_inputs():
    d = section()
    s = scaling.scaling(d, 16, inter_node_bytes_per_second=25e9,
                        inter_node_latency_seconds=10e-6)
    expected = 0.09 + ring_allreduce_seconds(16, GRAD_BYTES, 10e-6, 25e9)  # no_sync + ring
    assert s.scope == "projected"
    assert s.step_seconds.tag == Tag.MODULE and s.step_seconds.value == pytest.approx(expected)
    assert s.throughput_multiplier.value == pytest.approx(16 * 0.100 / expected)
    assert s.throughput_multiplier.tag == Tag.MODULE
    assert all(a.tag == Tag.ASSUMED for a in s.assumptions)
    assert "not measured" in s.notes[0]


def test_beyond_node_latency_from_the_fitted_intra_node_ring():
    n, hop, B = 4, 3e-6, 50e9
    sizes = [2**20 * 4**k for k in range(4)]
    fit = fit_alpha_beta("all_reduce", n, sizes, [ring_allreduce_seconds(n, S, hop, B)
                                                  for S in sizes])
    coll = CollectivesSection(world_size=n, backend="gloo", dtype="float32", clock="host",
                              warmup_calls=3, samples=5, sample_seconds=0.01,
                              sizes_bytes=sizes, fits=[fit])
    s = scaling.beyond_node(section(collectives=coll), 8, inter_node_bytes_per_second=10e9)
    lat = s.assumptions[1]
    assert lat.tag == Tag.ASSUMED and lat.value == pytest.approx(hop)
    assert "optimistic" in lat.source


def test_beyond_node_without_a_latency_assumes_none_and_needs_a_bandwidth():
    # section() has no collectives: no hop latency fitted or stated, 0 s assumed (optimistic)
    s = scaling.beyond_node(section(), 8, inter_node_bytes_per_second=10e9)
    lat = s.assumptions[1]
    assert lat.value == 0.0 and lat.tag == Tag.ASSUMED and "optimistic" in lat.source
    # the ratio is against the one-device step as measured: t(1) = 0.100 s
    assert s.step_ratio.value == pytest.approx(s.step_seconds.value / 0.100)
    for bad in (0.0, -1.0):
        with pytest.raises(InputError, match="positive inter-node bandwidth"):
            scaling.beyond_node(section(), 8, inter_node_bytes_per_second=bad)


def test_beyond_node_at_one_device_is_a_projection_and_below_one_is_refused():
    one = scaling.beyond_node(section(), 1, inter_node_bytes_per_second=10e9)
    assert one is not None
    for bad in (0, -2):
        with pytest.raises(InputError, match="n >= 1"):
            scaling.beyond_node(section(), bad, inter_node_bytes_per_second=10e9)


def test_beyond_node_without_bandwidth_is_refused():
    with pytest.raises(InputError, match="inter-node bandwidth"):
        scaling.scaling(section(), 16)
    # the node's own size needs no bandwidth: it was measured
    on = scaling.scaling(section(), 4)
    assert on.scope == "measured" and on.step_seconds.value == pytest.approx(0.115)
    with pytest.raises(InputError):
        figures.on_node(section(), 9)


def test_scale_step_carries_the_ratio():
    s = figures.on_node(section(), 2)
    t = scaling.scale_step(measured(0.5, "s", "my model"), s)
    assert t.tag == Tag.MODULE and t.value == pytest.approx(0.5 * 1.1)
    assert "tinylm" in t.source


def test_fsdp_not_executable_is_kept():
    payloads = [{"strategy": "fsdp", "runs": [None], "error": "ImportError: no fully_shard"},
                {"strategy": "fsdp", "runs": [None], "error": "failed on another rank (x)"}]
    s = assemble_dp(payloads)
    assert s.runs == [] and s.not_executable.reason == "ImportError: no fully_shard"
    assert s.not_executable.status == "NOT EXECUTABLE"


def test_assemble_collectives_per_rank_and_busbw():
    pts = lambda f: [{"op": "all_reduce", "bytes": b, "iters": 2,  # noqa: E731
                      "seconds": [f * (1e-4 + b / 1e9)] * 3} for b in (4096, 65536, 2**20)]
    payloads = [{"points": pts(1.0), "not_executable": [], "clock": "host", "sizes": [1]},
                {"points": pts(1.1), "not_executable": [{"what": "reduce_scatter on gloo",
                                                         "reason": "unsupported"}],
                 "clock": "host", "sizes": [1]}]

    class Cfg:
        warmup_calls, samples, sample_seconds = 3, 3, 0.01

    c = assemble_collectives(payloads, 2, "gloo", Cfg)
    p = c.points[2]
    assert p.rank_medians == pytest.approx([1e-4 + 2**20 / 1e9, 1.1 * (1e-4 + 2**20 / 1e9)])
    assert p.seconds == pytest.approx(1.1 * (1e-4 + 2**20 / 1e9))  # slowest rank
    assert p.busbw_bytes_per_second == pytest.approx(p.algbw_bytes_per_second * 1.0)
    assert c.fits[0].r2 == pytest.approx(1.0)
    assert c.not_executable[0].what == "reduce_scatter on gloo"
    one = assemble_collectives(payloads[:1], 1, "nccl", Cfg)
    assert one.points[0].busbw_bytes_per_second is None and one.points[0].busbw_factor == 0.0


def _cert(d: DistributedSection) -> Certificate:
    env = envmod.capture(torch.device("cpu"), "test", datetime.now(timezone.utc))
    proto = Protocol(precision="quick", children=3, warmup_steps=2, warmup_seconds=0.05,
                     min_timed_steps=12, floor_seconds=0.1, max_floor_seconds=0.1,
                     target_rel_precision=0.01, clock="host")
    return Certificate(environment=env, protocol=proto, workloads=[], distributed=d)


def test_readings_accessors():
    cert = _cert(section())
    m = figures.dp_scaling(cert, 4)
    assert m.tag == Tag.MEASURED and m.value == pytest.approx(4 * 0.1 / 0.115)
    at2, at1 = figures.on_node(cert.distributed, 2), figures.on_node(cert.distributed, 1)
    assert at2.step_ratio.value == pytest.approx(1.1)
    assert at1.step_seconds.value == pytest.approx(0.1)
    assert figures.busbw_peak(cert) is None  # no collectives in this section
    bare = _cert(section()).model_copy(update={"distributed": None})
    assert figures.dp_scaling(bare, 2) is None


def test_section_round_trips_through_json(tmp_path):
    from afford.schema.cert import load_certificate, save_certificate

    cert = _cert(section())
    path = save_certificate(cert, tmp_path / "c.json")
    back = load_certificate(path)
    assert back.distributed == cert.distributed
