"""Capture the environment a certificate was measured in."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch

from afford.core.errors import InputError
from afford.core.version import __version__ as afford_version
from afford.schema.cert import Environment

LARGE_GPU_BYTES = 40 * 2**30  # a card of 40 GiB or more gets the large-GPU default sweeps


def device_class(device_type: str, memory_bytes: int | None) -> str:
    if device_type == "cpu":
        return "cpu"
    return "large-gpu" if (memory_bytes or 0) >= LARGE_GPU_BYTES else "small-gpu"


def host_memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_state(cwd: str | os.PathLike | None = None) -> tuple[str | None, bool | None]:
    """HEAD and dirtiness of the repository at ``cwd`` (the user's project), if any."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, timeout=10)
        return head.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def nvml_driver_version() -> str | None:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def choose_device(requested: str | None = None) -> torch.device:
    """``cuda`` when present (or asked for), else ``cpu``."""
    if requested:
        try:
            device = torch.device(requested)
        except RuntimeError:
            device = None
        if device is None or device.type not in ("cpu", "cuda"):
            raise InputError(f"--device {requested!r}: choose cpu or cuda (or cuda:N)")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise InputError(f"--device {requested!r}: no CUDA device is visible to torch here")
        return device
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def capture(device: torch.device, command: str, started_at: datetime | None = None) -> Environment:
    """Everything a reader needs to know where a number was measured."""
    cuda = device.type == "cuda"
    props = torch.cuda.get_device_properties(device) if cuda else None
    memory = props.total_memory if props else host_memory_bytes()
    head, dirty = git_state(os.getcwd())
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return Environment(
        device_type="cuda" if cuda else "cpu",
        device_name=props.name if props else (cpu_model() or platform.machine() or "cpu"),
        device_class=device_class(device.type, memory),
        device_index=(device.index or 0) if cuda else None,
        compute_capability=f"{props.major}.{props.minor}" if props else None,
        device_memory_bytes=memory,
        multiprocessors=props.multi_processor_count if props else None,
        driver_version=nvml_driver_version() if cuda else None,
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count(),
        hostname=socket.gethostname() or None,
        os=platform.platform(),
        python_version=platform.python_version(),
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        cudnn_version=str(cudnn) if cudnn else None,
        torch_num_threads=torch.get_num_threads(),
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32 if cuda else None,
        tf32_cudnn=torch.backends.cudnn.allow_tf32 if cuda else None,
        float32_matmul_precision=torch.get_float32_matmul_precision(),
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        pytorch_cuda_alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        git_head=head,
        git_dirty=dirty,
        afford_version=afford_version,
        command=command,
        started_at=started_at or datetime.now(timezone.utc),
    )
