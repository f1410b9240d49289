"""The same distributed path on CUDA with NCCL, at the world size the machine has (1 on
the lent H200): torchrun, collectives, DDP/FSDP, one certificate from rank 0."""

import os
import subprocess
import sys

import pytest
import torch

from afford.schema.cert import load_certificate
from tests.paths import SRC

pytestmark = [pytest.mark.cuda, pytest.mark.slow]


def test_nccl_certify_distributed_dist_only(tmp_path):
    n = torch.cuda.device_count()
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={n}",
                        "--standalone", "-m", "afford", "certify", "--distributed", "--quick",
                        "--dist-only", "--out", "c.json", "--json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    d = load_certificate(tmp_path / "c.json").distributed
    assert d.backend == "nccl" and d.world_size == n and d.status == "complete"
    assert [x.device for x in d.ranks] == [f"cuda:{i}" for i in range(n)]
    assert {p.op for p in d.collectives.points} == {"all_reduce", "all_gather", "reduce_scatter"}
    assert max(p.bytes for p in d.collectives.points) == 2**30
    for p in d.collectives.points:
        assert (p.busbw_bytes_per_second is None) == (n == 1)
    ddp = next(s for s in d.data_parallel if s.strategy == "ddp")
    assert [x.world_size for x in ddp.runs] == list(range(1, n + 1))
    assert all(b and b > 0 for b in ddp.runs[0].rank_peak_reserved_bytes)
    assert ddp.runs[0].mode == ("bf16" if torch.cuda.is_bf16_supported() else "fp32")
