"""GEMM and copy probes: exact FLOP and byte counts, the error measure, NOT EXECUTABLE
paths on the CPU; the CUDA paths behind the cuda marker (run on the lent GPU)."""

import pytest
import torch

from afford.core.provenance import NotExecutable
from afford.measure.probes.copy import copy_probe, host_copy_probe
from afford.measure.probes.gemm import gemm_probe, matmul_settings, max_rel_error
from afford.measure.probes.protocol import probe_protocol

CPU = torch.device("cpu")


def test_max_rel_error_is_relative_to_the_largest_reference_entry():
    a = torch.eye(2)
    b = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    c = b + torch.tensor([[0.0, 0.0], [0.0, 0.4]])
    assert max_rel_error(a, b, c, torch.tensor([0, 1])) == pytest.approx(0.1)  # 0.4 / 4
    assert max_rel_error(a, b, c, torch.tensor([0])) == 0.0                    # row 0 exact


def test_fp32_gemm_on_the_cpu():
    g = gemm_probe("fp32", CPU, n=64, warmup=1, reps=3, reference_rows=8)
    assert g["flop_per_call"] == 2 * 64**3 == 524_288
    assert len(g["seconds"]) == 3 and g["median_seconds"] > 0
    assert g["flops_per_second"] == pytest.approx(524_288 / g["median_seconds"])
    assert 0 < g["max_rel_error"] < 1e-5
    assert g["settings"] == {}


def test_bf16_gemm_error_is_of_bf16_order():
    g = gemm_probe("bf16", CPU, n=128, warmup=1, reps=2, reference_rows=16)
    assert 0 < g["max_rel_error"] < 2e-2      # bf16 keeps 8 bits of mantissa


@pytest.mark.parametrize("dtype,why", [("tf32", "a CPU has no TF32"),
                                       ("fp16", "not probed on the CPU")])
def test_cpu_gemm_not_executable_says_why(dtype, why):
    got = gemm_probe(dtype, CPU, n=64, warmup=1, reps=2, reference_rows=8)
    assert isinstance(got, NotExecutable) and why in got.reason
    assert got.what == f"GEMM {dtype}"


def test_copy_counts_bytes_read_and_written():
    c = copy_probe(CPU, buffer_bytes=2**20, warmup=1, reps=3)
    assert c["buffer_bytes"] == 2**20 and c["bytes_per_call"] == 2 * 2**20
    assert c["bytes_per_second"] == pytest.approx(2 * 2**20 / c["median_seconds"])


def test_protocol_sizes_follow_the_device():
    big = probe_protocol("adaptive", "cuda", "large-gpu")
    assert big.gemm_n == 8192 and big.copy_buffer_bytes == 2**30 and big.gemm_timed_calls == 10
    cpu = probe_protocol("quick", "cpu", "cpu")
    assert cpu.gemm_n == 1024 and cpu.ladder_multipliers == [1, 2, 4]
    assert cpu.startup_children == 3 and "perf_counter" in cpu.clock
    with pytest.raises(ValueError):
        probe_protocol("fast", "cpu", "cpu")


CUDA = torch.device("cuda")


@pytest.mark.cuda
def test_tf32_setting_is_restored():
    m = torch.backends.cuda.matmul
    attr = "fp32_precision" if hasattr(m, "fp32_precision") else "allow_tf32"
    before = getattr(m, attr)
    with matmul_settings("tf32", CUDA) as s:
        assert "tf32" in str(s).lower() or "True" in str(s)
    assert getattr(m, attr) == before
    with matmul_settings("fp32", CUDA):
        pass
    assert getattr(m, attr) == before


@pytest.mark.cuda
def test_cuda_gemm_probes_run_and_tf32_engages():
    got = {d: gemm_probe(d, CUDA, n=4096, warmup=2, reps=5, reference_rows=32)
           for d in ("fp32", "tf32", "bf16", "fp16")}
    for d, g in got.items():
        assert not isinstance(g, NotExecutable), (d, g)
        assert g["flops_per_second"] > 1e12, (d, g["flops_per_second"])
    assert got["fp32"]["max_rel_error"] < 1e-5
    assert got["tf32"]["max_rel_error"] > 10 * got["fp32"]["max_rel_error"]
    assert got["bf16"]["max_rel_error"] < 2e-2


@pytest.mark.cuda
def test_cuda_copy_probe():
    c = copy_probe(CUDA, buffer_bytes=256 * 2**20, warmup=2, reps=5)
    assert c["bytes_per_second"] > 1e11


@pytest.mark.cuda
def test_cuda_host_copy_probe_times_each_direction():
    from afford.schema.probes_section import HostCopyProbe

    c = host_copy_probe(CUDA, buffer_bytes=64 * 2**20, warmup=2, reps=5)
    h = HostCopyProbe(**c)
    # a PCIe 4 x16 link moves ~25 GB/s, PCIe 5 ~50, NVLink-C2C far more; a pageable or
    # unpinned copy would be well under 5 GB/s
    assert 5e9 < h.h2d_bytes_per_second < 1e12 and 5e9 < h.d2h_bytes_per_second < 1e12
    assert len(h.h2d_seconds) == len(h.d2h_seconds) == 5


def test_host_copy_probe_refuses_a_cpu_device():
    with pytest.raises(RuntimeError, match="no host link"):
        host_copy_probe(torch.device("cpu"), buffer_bytes=2**20, warmup=1, reps=1)
