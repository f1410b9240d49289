"""The host's load at a moment: what else was running while a certificate measured.

A warm step on the launch floor is the host's time to issue it, so another tenant's load
moves it (docs/DESIGN.md section 4: the same tinylm shape's floor was 8-16 ms in different processes
on an H200). :func:`host_load` records the load average (``os.getloadavg``: runnable
processes over 1, 5 and 15 minutes, Linux/macOS) and, on CUDA, the other processes on the
device: NVML's compute processes (nvidia-ml-py, import-guarded; else ``nvidia-smi
--query-compute-apps``), this process and its descendants marked ``own``. What cannot be
read is ``None`` with the reason, never zero.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def is_own(pid: int, me: int | None = None) -> bool | None:
    """Whether ``pid`` is this process or one of its descendants; None when the pid is not
    visible here (NVML may report pids of another PID namespace)."""
    me = os.getpid() if me is None else me
    seen = 0
    cur: int | None = pid
    while cur and seen < 16:
        if cur == me:
            return True
        nxt = _ppid(cur)
        if nxt is None:
            return None if seen == 0 else False
        cur, seen = nxt, seen + 1
    return False


def _nvml_processes(index: int) -> list[tuple[int, int | None]]:
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return [(int(p.pid), int(p.usedGpuMemory) if p.usedGpuMemory is not None else None)
                for p in procs]
    finally:
        pynvml.nvmlShutdown()


def _smi_processes(index: int) -> list[tuple[int, int | None]]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise RuntimeError("neither nvidia-ml-py nor nvidia-smi is available")
    out = subprocess.run([exe, "-i", str(index), "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            mib = parts[1]
            rows.append((int(parts[0]), int(float(mib)) * 2**20 if mib.replace(".", "").isdigit()
                         else None))
    return rows


def gpu_processes(index: int) -> tuple[list[dict] | None, str | None]:
    """(the compute processes on CUDA device ``index``, or None; why None)."""
    errors = []
    for reader in (_nvml_processes, _smi_processes):
        try:
            rows = reader(index)
        except Exception as exc:  # NVML/nvidia-smi failures of every kind: say why
            errors.append(f"{reader.__name__.strip('_')}: {type(exc).__name__}: {exc}"[:300])
            continue
        return [{"pid": pid, "used_memory_bytes": used, "own": is_own(pid)}
                for pid, used in rows], None
    return None, "; ".join(errors)


def host_load(at: str, cuda_index: int | None) -> dict:
    """The fields of :class:`afford.schema.time.HostLoad` now."""
    try:
        load = tuple(float(x) for x in os.getloadavg())
    except (OSError, AttributeError):
        load = None
    procs, why = (None, "a CPU run: no device processes") if cuda_index is None \
        else gpu_processes(cuda_index)
    return {"at": at, "load_average": load, "cpu_count": os.cpu_count(),
            "gpu_processes": procs, "gpu_processes_error": why}


def others(load: dict) -> list[dict]:
    """The processes on the device that are not this certify's own (unknown ones count)."""
    return [p for p in load.get("gpu_processes") or [] if p.get("own") is not True]
