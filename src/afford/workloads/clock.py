"""The step clocks: host ``perf_counter``, CUDA events, and a fake one for tests.

The timing protocol (:mod:`afford.measure.timing`) times steps with them, and the ``+phases``
step option (:mod:`afford.workloads.tuned`) marks the phases inside a step with the same
clock. ``mark`` stamps a point in the step stream; ``wait`` waits until the device has
passed one mark (the work queued after it goes on); ``sync`` waits for the device to finish
everything queued; ``between`` reads the seconds between two marks the device has passed.
"""

from __future__ import annotations

import time
from typing import Any, Protocol


class Clock(Protocol):
    """``mark`` stamps a point in the step stream; ``wait`` waits until the device has
    passed a mark; ``sync`` waits for the device; ``between`` reads the seconds between two
    marks the device has passed."""

    name: str

    def mark(self) -> Any: ...

    def wait(self, mark: Any) -> None: ...

    def sync(self) -> None: ...

    def between(self, a: Any, b: Any) -> float: ...


class HostClock:
    """``time.perf_counter`` for synchronous devices (the CPU)."""

    name = "host perf_counter around each step (synchronous device)"

    def mark(self) -> float:
        return time.perf_counter()

    def wait(self, mark: float) -> None:
        return None

    def sync(self) -> None:
        return None

    def between(self, a: float, b: float) -> float:
        return b - a


class CudaClock:
    """CUDA events on the current stream, read on the device's timeline. ``wait`` is the
    event's own ``synchronize``: the host waits for that event only, while the work queued
    after it keeps the device busy."""

    name = ("CUDA events between consecutive steps, read on the device's timeline; the host "
            "reads a block of steps once the next block is queued (waiting on the block's "
            "last event), and synchronises once, at the end of the timed run")

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def mark(self):
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def wait(self, mark) -> None:
        mark.synchronize()

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
        self.waits: list[float] = []  # the marks waited for, in order

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def mark(self) -> float:
        return self.t

    def wait(self, mark: float) -> None:
        self.waits.append(mark)

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
