"""The API's progress (``afford.certify(..., progress=RichProgress())``) off a terminal: a
live bar draws nothing there (a script's stderr sent to a log stayed empty for the whole
certify), so it writes the lines ``afford certify`` writes off a terminal instead, with the
count of children read off the sweep's first child; on a terminal it stays a bar."""

from __future__ import annotations

import io

from rich.console import Console

from afford.certification import Progress
from afford.report.progress import RichProgress, TypedLines


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _certify(progress, clock: Clock | None = None) -> None:
    """A certify's typed events: 3 shapes in each of 3 children, then two stages."""
    def emit(event, key="", child="", done=0):
        progress(Progress(event, key, child, done, 9, 0.0))

    emit("plan")
    emit("stage", "sweep")
    done = 0
    for child in ("0", "1", "2"):
        for key in ("tinylm|fp32|32", "tinylm|fp32|64", "softmax|fp32|64"):
            emit("begin", key, child, done)
            done += 1
            emit("point", key, child, done)
        if clock is not None:
            clock.t += 10.0
        emit("done", "", child, done)
    emit("stage", "probes")
    emit("stage", "done")


def test_off_a_terminal_the_api_progress_writes_lines():
    log = io.StringIO()
    with RichProgress(Console(file=log, force_terminal=False, force_jupyter=False)) as bar:
        _certify(bar)
    lines = log.getvalue().splitlines()
    assert len(lines) == 10, lines  # it wrote nothing at all before
    assert lines[0].endswith("certify: 9 points to time (its shapes in each child)")
    assert "sweep: every shape timed in independent children" in lines[1]
    assert "child 1 of 3: tinylm (fp32) 2 shapes timed" in lines[2]
    assert "child 3 of 3: softmax (fp32) 1 shapes timed; the sweep's last child" in lines[-3]
    assert "sweep done in" in lines[-2] and "probes:" in lines[-2]
    assert "measured in" in lines[-1]


def test_the_lines_estimate_from_the_first_child():
    log, clock = io.StringIO(), Clock()
    _certify(TypedLines(log, clock=clock), clock)
    lines = log.getvalue().splitlines()
    assert lines[2] == ("[   10 s] sweep: child 1 of 3: tinylm (fp32) 2 shapes timed; about 20 s "
                        "left in the sweep (its children took 10 s each)")


def test_on_a_terminal_it_stays_a_bar():
    screen = io.StringIO()
    bar = RichProgress(Console(file=screen, force_terminal=True, force_jupyter=False))
    assert bar.lines is None
    with bar:
        _certify(bar)
    assert "certify:" not in screen.getvalue() and "child 1 of 3" not in screen.getvalue()
