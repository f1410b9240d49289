"""GPU utilisation from NVML, sampled in a thread (nvidia-ml-py, import-guarded; where it is
not installed, the same NVML counters streamed by ``nvidia-smi``).

NVML's ``nvmlDeviceGetUtilizationRates`` reports, per device, the percent of time over the
past sample period during which one or more kernels was executing (``gpu``) and during
which device memory was being read or written (``memory``); the period is between 1 s and
1/6 s depending on the product (NVML API reference). nvidia-smi reads the same counters.

:class:`UtilisationSampler` calls a reader at a fixed rate (5-10 Hz) from a daemon thread
between :meth:`start` and :meth:`stop`; the reader is injected, so tests drive it with a
synthetic trace and no GPU.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from afford.core.provenance import NotExecutable

Reader = Callable[[], tuple[float, float]]  # () -> (gpu, memory), fractions 0..1
WHAT = "GPU utilisation (NVML)"


@dataclass
class UtilisationSampler:
    read: Reader
    hz: float = 10.0
    clock: Callable[[], float] = time.monotonic
    t_seconds: list[float] = field(default_factory=list)
    gpu: list[float] = field(default_factory=list)
    memory: list[float] = field(default_factory=list)
    error: str | None = None

    def __post_init__(self) -> None:
        if not 0 < self.hz <= 1000:
            raise ValueError(f"sampling rate {self.hz} Hz is out of range")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = self.clock()
        self._thread = threading.Thread(target=self._run, name="afford-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> "UtilisationSampler":
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self

    def _run(self) -> None:
        period = 1.0 / self.hz
        while not self._stop.is_set():
            tick = self.clock()
            try:
                g, m = self.read()
            except Exception as exc:  # NVML errors end the trace; the error is kept
                self.error = f"{type(exc).__name__}: {exc}"
                return
            self.t_seconds.append(tick - self._t0)
            self.gpu.append(float(g))
            self.memory.append(float(m))
            self._stop.wait(max(0.0, period - (self.clock() - tick)))


def nvml_reader(device_index: int, uuid: str | None = None, pci_bus_id: str | None = None
                ) -> tuple[Reader, str] | NotExecutable:
    """A reader for the CUDA device (found by UUID, then PCI bus id, then index) and a line
    naming it; or NotExecutable with the reason (no nvidia-ml-py, NVML error)."""
    try:
        import pynvml
    except ImportError:
        return NotExecutable(what=WHAT, reason="nvidia-ml-py is not installed "
                             "(pip install 'afford[nvml]' or nvidia-ml-py)")
    try:
        pynvml.nvmlInit()
        handle, how = _handle(pynvml, device_index, uuid, pci_bus_id)
        name = pynvml.nvmlDeviceGetName(handle)
    except Exception as exc:  # pynvml.NVMLError and friends
        return NotExecutable(what=WHAT, reason=f"NVML: {type(exc).__name__}: {exc}")
    name = name.decode() if isinstance(name, bytes) else str(name)

    def read() -> tuple[float, float]:
        u = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return u.gpu / 100.0, u.memory / 100.0

    return read, f"NVML nvmlDeviceGetUtilizationRates, {name} ({how})"


def _handle(pynvml, index: int, uuid: str | None, pci_bus_id: str | None):
    if uuid:
        try:
            text = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            return pynvml.nvmlDeviceGetHandleByUUID(text), f"by UUID {text}"
        except Exception:
            pass
    if pci_bus_id:
        try:
            return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id), f"by PCI bus id {pci_bus_id}"
        except Exception:
            pass
    return pynvml.nvmlDeviceGetHandleByIndex(index), \
        f"by index {index}: assumed NVML and CUDA order agree"


def not_on_cpu() -> NotExecutable:
    return NotExecutable(what=WHAT, reason="certify ran on the CPU; NVML reports NVIDIA GPUs "
                         "only")


class SmiStream:
    """``nvidia-smi --query-gpu=utilization.gpu,utilization.memory -lms P`` in the background;
    :meth:`read` returns its latest line as fractions. nvidia-smi reads the same NVML
    counters, so this is a fallback for a box without nvidia-ml-py, not another measure."""

    def __init__(self, exe: str, ident: str, period_ms: int = 100) -> None:
        self.proc = subprocess.Popen(
            [exe, f"--id={ident}", "--query-gpu=utilization.gpu,utilization.memory",
             "--format=csv,noheader,nounits", f"-lms={period_ms}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.last: tuple[float, float] | None = None
        self.first = threading.Event()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            try:
                self.last = (float(parts[0]) / 100.0, float(parts[1]) / 100.0)
            except (ValueError, IndexError):
                continue
            self.first.set()

    def read(self) -> tuple[float, float]:
        if self.last is None:
            raise RuntimeError("nvidia-smi reported no utilisation")
        return self.last

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def utilisation_source(device_index: int, uuid: str | None = None,
                       pci_bus_id: str | None = None
                       ) -> Iterator[tuple[Reader, str] | NotExecutable]:
    """nvidia-ml-py where installed, else an ``nvidia-smi`` stream, else NotExecutable with
    both reasons. The stream runs only inside the ``with`` block."""
    got = nvml_reader(device_index, uuid, pci_bus_id)
    exe = shutil.which("nvidia-smi")
    if not isinstance(got, NotExecutable) or exe is None:
        if isinstance(got, NotExecutable):
            got = NotExecutable(what=WHAT, reason=got.reason + "; and nvidia-smi is not on PATH")
        yield got
        return
    ident = (uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}") if uuid else \
        (pci_bus_id or str(device_index))
    stream = SmiStream(exe, ident)
    try:
        if not stream.first.wait(5.0):
            yield NotExecutable(what=WHAT, reason=got.reason + "; and nvidia-smi reported "
                                "nothing within 5 s")
            return
        yield stream.read, (f"nvidia-smi --query-gpu=utilization.gpu (NVML counters), "
                            f"--id={ident}; nvidia-ml-py absent")
    finally:
        stream.close()
