"""The step clocks: host ``perf_counter``, CUDA events, and a fake one for tests.

The timing protocol (:mod:`afford.measure.timing`) times steps with them, and the ``+phases``
step option (:mod:`afford.workloads.tuned`) marks the phases inside a step with the same
clock. ``mark`` stamps a point in the step stream; ``sync`` waits for the device;
``between`` reads the seconds between two marks once synced.
"""

from __future__ import annotations

import time
from typing import Any, Protocol


class Clock(Protocol):
    """``mark`` stamps a point in the step stream; ``sync`` waits for the device;
    ``between`` reads the seconds between two marks once synced."""

    name: str

    def mark(self) -> Any: ...

    def sync(self) -> None: ...

    def between(self, a: Any, b: Any) -> float: ...


class HostClock:
    """``time.perf_counter`` for synchronous devices (the CPU)."""

    name = "host perf_counter around each step (synchronous device)"

    def mark(self) -> float:
        return time.perf_counter()

    def sync(self) -> None:
        return None

    def between(self, a: float, b: float) -> float:
        return b - a


class CudaClock:
    """CUDA events on the current stream; one host sync per block of steps."""

    name = "CUDA events around each step; torch.cuda.synchronize() once per block"

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def mark(self):
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def sync(self) -> None:
        self._torch.cuda.synchronize()

    def between(self, a, b) -> float:
        return a.elapsed_time(b) / 1e3


class FakeClock:
    """A clock for tests: time moves only when ``advance`` is called."""

    name = "fake"

    def __init__(self) -> None:
        self.t = 0.0
        self.syncs = 0

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def mark(self) -> float:
        return self.t

    def sync(self) -> None:
        self.syncs += 1

    def between(self, a: float, b: float) -> float:
        return b - a


def clock_for(device_type: str) -> Clock:
    """CUDA events on a CUDA device, the host clock otherwise."""
    return CudaClock() if device_type == "cuda" else HostClock()


def clock_name(device_type: str) -> str:
    """How steps on ``device_type`` are timed, as written into a result's protocol."""
    return CudaClock.name if device_type == "cuda" else HostClock.name
