"""SIGKILL at random times: a loop under the guard (tests/track_child.py; 10 ms steps, a save
every 5 steps) is killed five times in a row, each run resuming from the marker the killed
one left. Every resume must load the checkpoint of step resume_step - 1 whole, never skip a
step (the marker never names a save that did not complete) and lose at most one save
interval of printed steps."""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SAVE_EVERY = 5
CHILD = Path(__file__).parent / "track_child.py"
SRC = Path(__file__).parent.parent / "src"


def start(folder: Path, *extra: str) -> tuple[subprocess.Popen, list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get(
        "PYTHONPATH", "")])}
    p = subprocess.Popen([sys.executable, str(CHILD), "--dir", str(folder), "--save-every",
                          str(SAVE_EVERY), *extra], stdout=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")),
                     daemon=True).start()
    return p, lines


def resumed(lines: list[str], deadline: float = 60.0) -> tuple[int, int, int]:
    t0 = time.monotonic()
    while not lines and time.monotonic() - t0 < deadline:
        time.sleep(0.01)
    _, r, step, total = lines[0].split()
    return int(r), int(step), int(total)


@pytest.mark.slow  # six real child processes, a few seconds
def test_sigkill_loses_at_most_one_save_interval(tmp_path):
    rng = random.Random(15)
    last_done = -1
    for kill in range(6):
        p, lines = start(tmp_path)
        r, step, total = resumed(lines)
        assert step == r - 1 and total == sum(range(r)), "the checkpoint is not step r - 1's"
        assert r - 1 <= last_done, "the marker names a step that was never trained"
        assert last_done - (r - 1) <= SAVE_EVERY, f"lost {last_done - (r - 1)} steps"
        if kill == 5:
            p.kill()
            break
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        time.sleep(0.05)  # the reader thread drains the pipe
        done = [int(x.split()[1]) for x in lines if x.startswith("done")]
        assert done, "the child was killed before its first step"
        last_done = done[-1]
    p.wait()
