"""The host's load at a moment: what else was running while a certificate measured.

A warm step on the launch floor is the host's time to issue it, so another tenant's load
moves it (docs/DESIGN.md section 4: a warm step is close to max(host launch time, device
work)). :func:`host_load` records the load average (``os.getloadavg``: runnable
processes over 1, 5 and 15 minutes, Linux/macOS) and, on CUDA, the other processes on the
device: NVML's compute processes (nvidia-ml-py, import-guarded; else ``nvidia-smi
--query-compute-apps``), this process and its descendants marked ``own``. What cannot be
read is ``None`` with the reason, never zero.

:class:`UsageClock` is the CPU's step clock with the child's own accounting beside each
step: the process's CPU time and the time its threads waited, runnable,
for a CPU (Linux's per-thread ``schedstat``), from which :mod:`afford.fit.time.contention` tells
the step on an idle box from what the load cost.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from afford.workloads.clock import HostClock


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
    """The fields of :class:`afford.schema.time_section.HostLoad` now."""
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


TASKS = "/proc/self/task"


class UsageClock(HostClock):
    """``perf_counter`` around each step, as :class:`HostClock`, and the child's usage
    beside it: a mark is (end stamp, usage, start stamp), the usage read between the two
    stamps, so no timed interval includes the reading (a few microseconds: one ``pread``
    per thread of a file kept open). ``usage_between`` gives a step's process CPU seconds
    (all threads, ``time.process_time``) and the seconds its threads waited for a CPU
    (their ``schedstat`` run-queue delays summed; None where the kernel has no
    ``/proc/<pid>/task/<tid>/schedstat``). The threads are listed again at each ``wait``
    and ``sync`` (once a block), so threads started by the workload count from their first
    block."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self.refresh()

    def refresh(self) -> None:
        try:
            tids = os.listdir(TASKS)
        except OSError:
            return
        for tid in tids:
            if tid not in self._fds:
                try:
                    self._fds[tid] = os.open(f"{TASKS}/{tid}/schedstat", os.O_RDONLY)
                except OSError:
                    continue

    def _waits(self) -> dict[str, int] | None:
        if not self._fds:
            return None
        out = {}
        for tid, fd in list(self._fds.items()):
            try:
                out[tid] = int(os.pread(fd, 64, 0).split()[1])  # ns waited on a run queue
            except (OSError, IndexError, ValueError):  # the thread ended
                os.close(self._fds.pop(tid))
        return out

    def mark(self) -> tuple[float, tuple[float, dict[str, int] | None], float]:
        end = time.perf_counter()
        usage = (time.process_time(), self._waits())
        return end, usage, time.perf_counter()

    def wait(self, mark) -> None:
        self.refresh()

    def sync(self) -> None:
        self.refresh()

    def between(self, a, b) -> float:
        return b[0] - a[2]

    def usage_between(self, a, b) -> tuple[float, float | None]:
        """(process CPU seconds, seconds the threads waited for a CPU) from mark a to b."""
        (cpu0, w0), (cpu1, w1) = a[1], b[1]
        if w0 is None or w1 is None:
            return cpu1 - cpu0, None
        return cpu1 - cpu0, sum(w1[t] - w0[t] for t in w1 if t in w0) / 1e9

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
