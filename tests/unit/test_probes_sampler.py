"""The NVML utilisation sampler on a synthetic reader (no GPU), and the NOT EXECUTABLE
paths of the NVML reader: no nvidia-ml-py, an NVML error, the CPU."""

import sys
import threading
import types

import pytest

from afford.core.provenance import NotExecutable
from afford.measure.probes.nvml import UtilisationSampler, not_on_cpu, nvml_reader


def scripted(values, reached: threading.Event, after: int):
    calls = {"n": 0}

    def read():
        i = calls["n"]
        calls["n"] += 1
        if calls["n"] >= after:
            reached.set()
        return values[i % len(values)], 0.5 * values[i % len(values)]

    return read


def test_sampler_records_a_synthetic_trace_in_order():
    trace = [0.1, 0.2, 0.0, 0.05, 0.3]
    reached = threading.Event()
    s = UtilisationSampler(read=scripted(trace, reached, after=8), hz=200.0)
    s.start()
    assert reached.wait(5.0)
    s.stop()
    assert not s._thread.is_alive()
    n = len(s.gpu)
    assert n >= 8 and len(s.t_seconds) == len(s.memory) == n
    assert s.gpu == [trace[i % 5] for i in range(n)]
    assert s.memory == [0.5 * g for g in s.gpu]
    assert s.t_seconds == sorted(s.t_seconds) and s.t_seconds[0] >= 0.0
    assert s.error is None


def test_sampler_keeps_samples_before_a_reader_error_and_ends():
    calls = {"n": 0}

    def read():
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return 0.4, 0.1

    s = UtilisationSampler(read=read, hz=500.0)
    s.start()
    s._thread.join(5.0)
    s.stop()
    assert s.gpu == [0.4, 0.4, 0.4]
    assert "GPU_IS_LOST" in s.error


def test_sampler_rate_is_checked():
    with pytest.raises(ValueError):
        UtilisationSampler(read=lambda: (0.0, 0.0), hz=0.0)


def test_stop_without_start_is_harmless():
    s = UtilisationSampler(read=lambda: (0.0, 0.0)).stop()
    assert s.gpu == []


def test_no_nvidia_ml_py_is_not_executable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    got = nvml_reader(0)
    assert isinstance(got, NotExecutable)
    assert got.status == "NOT EXECUTABLE" and "nvidia-ml-py is not installed" in got.reason


def test_nvml_error_is_not_executable_with_its_text(monkeypatch):
    fake = types.ModuleType("pynvml")

    def init():
        raise RuntimeError("NVML Shared Library Not Found")

    fake.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    got = nvml_reader(0)
    assert isinstance(got, NotExecutable) and "Shared Library Not Found" in got.reason


def test_nvml_reader_finds_the_device_by_uuid_and_reads_fractions(monkeypatch):
    fake = types.ModuleType("pynvml")
    fake.nvmlInit = lambda: None
    seen = {}

    def by_uuid(text):
        seen["uuid"] = text
        return "handle"

    fake.nvmlDeviceGetHandleByUUID = by_uuid
    fake.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    fake.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=15, memory=3)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    read, source = nvml_reader(0, uuid="1234-abcd")
    assert seen["uuid"] == "GPU-1234-abcd"
    assert read() == (0.15, 0.03)
    assert "NVIDIA H200" in source and "UUID" in source


def test_cpu_has_no_nvml():
    ne = not_on_cpu()
    assert ne.status == "NOT EXECUTABLE" and "CPU" in ne.reason


def test_without_nvml_or_nvidia_smi_says_both(monkeypatch):
    from afford.measure.probes.nvml import utilisation_source

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", "/nonexistent")
    with utilisation_source(0) as src:
        assert isinstance(src, NotExecutable)
        assert "nvidia-ml-py is not installed" in src.reason and "nvidia-smi" in src.reason


def test_nvidia_smi_stream_is_the_fallback(monkeypatch, tmp_path):
    """A fake nvidia-smi printing utilisation lines stands in for the real one."""
    from afford.measure.probes.nvml import utilisation_source

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"
                    "while true; do echo '15, 3'; sleep 0.05; done\n")
    fake.chmod(0o755)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with utilisation_source(0, uuid="abcd") as src:
        read, source = src
        assert read() == (0.15, 0.03)
        assert "nvidia-smi" in source and "GPU-abcd" in source
    args = (tmp_path / "args").read_text()
    assert "--id=GPU-abcd" in args and "utilization.gpu" in args
