"""A rich progress bar for ``afford.certify(..., progress=RichProgress())`` in a notebook or a
script: the API reports typed :class:`afford.certify.Progress` events to any callable; this
one draws them (points timed over points to time, the child and point being timed, the
elapsed time) on stderr, as ``afford certify`` does on a terminal. ``done`` can pass
``total`` when certify measures noisy points once more.

::

    with RichProgress() as bar:
        cert = afford.certify(["tinylm"], precision="quick", progress=bar)
"""

from __future__ import annotations

from typing import Any


class RichProgress:
    """A callable for certify's ``progress``; a context manager that ends the bar."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(),
                            console=console or Console(stderr=True, markup=False),
                            transient=True)
        self.task: Any = None

    def __call__(self, p: Any) -> None:
        """One event (an :class:`afford.certify.Progress`)."""
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task("resolving", total=None)
        if p.event == "plan":
            self.bar.update(self.task, total=p.total, description="measuring")
        elif p.event == "begin":
            self.bar.update(self.task, description=f"child {p.child}: {p.key}")
        elif p.event == "point":
            self.bar.update(self.task, completed=p.done)

    def close(self) -> None:
        self.bar.stop()

    def __enter__(self) -> "RichProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
