"""Real torch.distributed with gloo at world size 2, started by torchrun, end to end; and a
rank that dies or hangs (the test hook AFFORD_TEST_FAIL)."""

import json
import math
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.measure.distributed.runtime import detect_launch
from afford.schema.cert import load_certificate
from tests.paths import SRC


def torchrun(tmp_path, *args, fail: str | None = None, timeout=240):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    env.pop("AFFORD_TEST_FAIL", None)
    if fail:
        env["AFFORD_TEST_FAIL"] = fail
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone",
           "-m", "afford", "certify", "--distributed", "--quick", *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_detect_launch():
    assert detect_launch({}) is None
    launch = detect_launch({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert (launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == \
        (1, 2, 1, 2)


def test_distributed_without_torchrun_is_bad_input(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    r = CliRunner().invoke(app, ["certify", "--distributed"])
    assert r.exit_code == 2 and "torchrun --nproc-per-node" in r.output
    r = CliRunner().invoke(app, ["certify", "--dist-only"])
    assert r.exit_code == 2 and "--distributed" in r.output


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow
def test_gloo_world_size_2_end_to_end(tmp_path):
    r = torchrun(tmp_path, "--dist-only", "--out", "c.json", "--json", "--dist-timeout", "60")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)  # exactly one JSON document, from rank 0 only
    assert summary["status"] == "complete" and summary["ranks_finished"] == [0, 1]
    cert = load_certificate(tmp_path / "c.json")
    d = cert.distributed
    assert d.backend == "gloo" and d.world_size == 2 and d.status == "complete"
    assert d.env_flags["NCCL_NVLS_ENABLE"] == "0"
    assert [r.stages_finished for r in d.ranks] == [["collectives", "ddp", "fsdp"]] * 2
    assert {r.pid for r in d.ranks} and len({r.pid for r in d.ranks}) == 2
    # collectives: three ops over the CPU sizes, every rank's samples kept
    c = d.collectives
    assert {p.op for p in c.points} | {n.what.split()[0] for n in c.not_executable} == \
        {"all_reduce", "all_gather", "reduce_scatter"}
    for p in c.points:
        assert len(p.rank_seconds) == 2 and len(p.rank_seconds[0]) == c.samples
        assert p.seconds == max(p.rank_medians)
        assert p.busbw_factor == (1.0 if p.op == "all_reduce" else 0.5)
        assert p.busbw_bytes_per_second == pytest.approx(p.algbw_bytes_per_second * p.busbw_factor)
    assert any(f.op == "all_reduce" for f in c.fits)
    # DDP at world sizes 1 and 2, per-rank steps and memory, no_sync kept
    ddp = next(s for s in d.data_parallel if s.strategy == "ddp")
    assert [r.world_size for r in ddp.runs] == [1, 2]
    two = ddp.runs[1]
    assert len(two.rank_seconds) == 2 and len(two.rank_seconds[1]) == len(two.step_indices) >= 12
    assert two.rank_nosync_seconds is not None and two.exposed_comm_share is not None
    assert all(b and b > 0 for b in two.rank_peak_rss_bytes)
    assert all(abs(x - math.log(256)) < 0.1 for x in two.rank_first_loss)
    assert ddp.efficiency[0] == 1.0 and ddp.law is not None and ddp.law.exact
    fsdp = next(s for s in d.data_parallel if s.strategy == "fsdp")
    assert fsdp.runs or fsdp.not_executable is not None
    assert cert.workloads == [] and any("--dist-only" in w for w in cert.warnings)


@pytest.mark.slow
def test_rank0_sweep_joins_the_distributed_section(cpu_cert):
    """The sweep rank 0 runs after the group closed lands in the same certificate, its
    environment starting when the distributed stages started."""
    from datetime import timedelta

    import torch

    from afford.certification.request import CertifyRequest
    from afford.certification.stage_distributed import DistOptions, _with_sweep
    from tests.answers.test_plan_devices import section

    d = section()
    started = cpu_cert.environment.started_at - timedelta(seconds=30)
    seen = []

    def fake_sweep(req):
        seen.append(req.device)
        return cpu_cert

    cert = _with_sweep(CertifyRequest(precision="quick"), DistOptions(), torch.device("cpu"),
                       started, d, fake_sweep)
    assert seen == ["cpu"] and cert.distributed == d
    assert cert.workloads == cpu_cert.workloads
    assert cert.environment.started_at == started
    assert cert.environment.elapsed_seconds == pytest.approx(
        cpu_cert.environment.elapsed_seconds + 30, abs=1e-6)
    only = _with_sweep(CertifyRequest(precision="quick"), DistOptions(dist_only=True),
                       torch.device("cpu"), started, d, fake_sweep)
    assert only.workloads == [] and seen == ["cpu"]


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow
def test_dead_rank_gives_partial_certificate(tmp_path):
    r = torchrun(tmp_path, "--dist-only", "--out", "p.json", "--dist-timeout", "30",
                 fail="1:ddp:exit")
    assert r.returncode != 0
    assert "partial certificate was written" in r.stderr
    d = load_certificate(tmp_path / "p.json").distributed
    assert d.status == "partial" and d.error
    assert d.ranks_finished == []
    by_rank = {x.rank: x for x in d.ranks}
    assert by_rank[1].stages_finished == ["collectives"]  # it died at the start of ddp
    assert by_rank[1].error is None  # a dead rank reports nothing; rank 0 says so
    assert by_rank[0].stages_finished == ["collectives"]
    assert d.collectives is not None and d.data_parallel == []  # what every rank finished


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow
def test_hung_rank_times_out_into_partial_certificate(tmp_path):
    r = torchrun(tmp_path, "--dist-only", "--out", "h.json", "--dist-timeout", "6",
                 fail="1:collectives:hang")
    assert r.returncode != 0
    d = load_certificate(tmp_path / "h.json").distributed
    assert d.status == "partial" and "timeout" in d.error.lower()
    assert "in stage 'collectives'" in d.error
    assert d.timeout_seconds == 6
    assert {x.rank: x.stages_finished for x in d.ranks} == {0: [], 1: []}
    assert d.collectives is None and d.data_parallel == []
    assert "rank 1 stopped after 'start'" in r.stderr
    assert "partial certificate was written" in r.stderr
