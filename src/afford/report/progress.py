"""Certify's progress, drawn. :class:`RichProgress` is a rich progress bar for
``afford.certify(..., progress=RichProgress())`` in a notebook or a script: the API reports
typed :class:`afford.certification.Progress` events to any callable; this one draws them (points
timed over points to time, the child and point being timed, the elapsed time) on stderr, as
``afford certify`` does on a terminal. ``done`` can pass ``total`` when certify measures
noisy points once more. Off a terminal (a script's stderr sent to a log file, a batch job) a
live bar draws nothing at all, so there it writes the lines :class:`LineProgress` writes for
``afford certify`` instead (:class:`TypedLines`); a notebook still gets the bar.

::

    with RichProgress() as bar:
        cert = afford.certify(["tinylm"], precision="quick", progress=bar)

:class:`LineProgress` writes what a log keeps instead, for ``afford certify`` when it is not
on a terminal (a certify of many minutes must not leave its log empty until the end): one
line per stage as it begins, and in the sweep (and the time model's rounds of fresh
children) one line per workload as each child finishes it; every line with the elapsed
time, and, once a child has finished, an estimate of the stage's time left from this run's
own children (the stages after the sweep are not estimated before they run: their cost
differs too much from box to box to guess).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO


class RichProgress:
    """A callable for certify's ``progress``; a context manager that ends the bar. Off a
    terminal (and outside a notebook) it writes lines on the console's file instead. The
    bar counts the sweep's child-points over those planned; each later stage (the time
    model's rounds, probes, memory, gates) restarts the count without a total, since its
    points are not known ahead, so the count never passes its total (it once read 44/33)."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = console or Console(stderr=True, markup=False)
        self.lines = None if console.is_terminal or console.is_jupyter else \
            TypedLines(console.file)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                            transient=True)
        self.task: Any = None
        self.total: int | None = None
        self.count = 0

    def __call__(self, p: Any) -> None:
        """One event (an :class:`afford.certification.Progress`)."""
        if self.lines is not None:
            self.lines(p)
            return
        if p.event == "plan":
            self.planned(p.total)
        elif p.event == "stage":
            self.stage(p.key)
        elif p.event == "begin":
            self.begin(p.child, p.key)
        elif p.event == "point":
            self.point()

    def _start(self) -> None:
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task("resolving", total=None)

    def planned(self, total: int) -> None:
        """The sweep is resolved: ``total`` child-points to time."""
        self._start()
        self.total, self.count = total, 0
        self.bar.update(self.task, total=total, completed=0, description="measuring")

    def stage(self, key: str) -> None:
        """A stage begins: past the sweep, a fresh count without a total."""
        self._start()
        if key in ("sweep", "done"):
            return
        self.total, self.count = None, 0
        self.bar.reset(self.task, completed=0, description=key)
        next(t for t in self.bar.tasks if t.id == self.task).total = None  # rich: None = keep

    def begin(self, child: Any, key: str) -> None:
        self._start()
        self.bar.update(self.task, description=f"child {child}: {key}")

    def point(self) -> None:
        """A child timed a point; a fresh child measuring what a dead one left may pass the
        plan's total, which then grows with it."""
        self._start()
        self.count += 1
        if self.total is not None and self.count > self.total:
            self.total = self.count
        self.bar.update(self.task, completed=self.count, total=self.total)

    def print(self, text: str) -> None:
        """A line above the bar."""
        self.bar.console.print(text, soft_wrap=True)

    def close(self) -> None:
        if self.task is not None:
            self.bar.stop()

    def __enter__(self) -> "RichProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


STAGE_WORDS = {"sweep": "sweep: every shape timed in {children}independent children "
                         "(an estimate follows the first)",
               "time": "time model: fitted, extended past the floor and re-measured where "
                       "needed",
               "probes": "probes: device ceilings, launch-boundness, FLOPs, checkpoint I/O, "
                         "startup", "memory": "memory: the memory law and its held-out shapes",
               "gates": "gates: the init-loss gate (every gate with --gates)",
               "sizes": "sizes: tinylm at five sizes",
               "levers": "levers: measured A/B pairs"}


class LineProgress:
    """Certify's events as lines on ``stream`` (module docstring). ``plan`` and ``event``
    are certify's ``on_plan`` and ``on_event``; ``clock`` is injectable for tests."""

    def __init__(self, children: int | None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.children = children
        self.stream = stream
        self.clock = clock
        self.t0 = clock()
        self.stage: str | None = None
        self.stage_t0 = self.t0
        self.finished: list[float] = []  # when each child of the stage finished
        self.points: dict[Any, dict[str, int]] = {}  # child -> workload -> points timed

    def say(self, text: str) -> None:
        print(f"[{self.clock() - self.t0:5.0f} s] {text}", file=self.stream or sys.stderr,
              flush=True)

    def plan(self, plan: Any) -> None:
        """certify's plan: the workloads, their shapes, the children and the protocol."""
        shapes: dict[str, int] = {}
        for it in plan.items:
            name = f"{it['workload']} ({it['mode']})"
            shapes[name] = shapes.get(name, 0) + 1
        what = ", ".join(f"{k} {v} shapes" for k, v in shapes.items())
        self.say(f"certify on {plan.device}, {plan.precision} protocol: {what}; "
                 f"{self.children} children each")

    def event(self, e: dict) -> None:
        kind = e.get("event")
        if kind == "stage":
            self._stage(str(e.get("key")))
        elif kind == "point" and self.stage in ("sweep", "time"):
            name = _workload(str(e.get("key", "")))
            counts = self.points.setdefault(e.get("child"), {})
            counts[name] = counts.get(name, 0) + 1
        elif kind == "done" and self.stage in ("sweep", "time"):
            self._child_done(e.get("child"))

    def _stage(self, name: str) -> None:
        now = self.clock()
        ended = f"{self.stage} done in {now - self.stage_t0:.0f} s; " if self.stage else ""
        self.stage, self.stage_t0, self.finished, self.points = name, now, [], {}
        if name == "done":
            self.say(ended + f"measured in {now - self.t0:.0f} s")
            return
        words = STAGE_WORDS.get(name, name).format(
            children=f"{self.children} " if self.children else "")
        self.say(ended + words)

    def _child_done(self, child: Any) -> None:
        self.finished.append(self.clock())
        n = len(self.finished)
        each = (self.finished[-1] - self.stage_t0) / n
        if self.stage == "sweep" and self.children and n <= self.children:
            left = self.children - n
            where = f"child {n} of {self.children}"
            estimate = (f"about {each * left:.0f} s left in the sweep (its children took "
                        f"{each:.0f} s each)") if left else "the sweep's last child"
        else:  # the time model's rounds, or a fresh child for what a dead one left
            where = f"a fresh child ({n} so far)"
            estimate = f"{each:.0f} s a child"
        for name, count in self.points.pop(child, {}).items():
            self.say(f"{self.stage}: {where}: {name} {count} shapes timed; {estimate}")


class TypedLines:
    """The API's typed events (:class:`afford.certification.Progress`) as :class:`LineProgress`'s
    lines, for :class:`RichProgress` off a terminal. The typed events do not say how many
    children certify runs: the count is read off the first child to finish the sweep (each
    child times every point of the plan, so it is the plan's total over that child's
    points), which is when the first estimate is due."""

    def __init__(self, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lines = LineProgress(children=None, stream=stream, clock=clock)
        self.total = 0

    def __call__(self, p: Any) -> None:
        if p.event == "plan":
            self.total = p.total
            self.lines.say(f"certify: {p.total} points to time (its shapes in each child)")
            return
        lines = self.lines
        if p.event == "done" and lines.stage == "sweep" and lines.children is None:
            timed = sum(lines.points.get(p.child, {}).values())
            lines.children = max(1, round(self.total / timed)) if timed else None
        lines.event({"event": p.event, "key": p.key, "child": p.child})


def _workload(key: str) -> str:
    """``tinylm|fp32|64|b8`` (a point's key) -> ``tinylm (fp32)``."""
    spec, _, rest = key.partition("|")
    mode = rest.partition("|")[0]
    return f"{spec} ({mode})" if mode else spec
