"""The Lightning callback under DDP: two CPU processes (gloo) under Lightning's own launcher
(tests/track_ddp_child.py). Both ranks stop after the same step (a stop on any rank stops
all), only rank zero writes the marker and the ledger, and the marker names the final save."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from afford.figures import ledger

CHILD = Path(__file__).parent / "track_ddp_child.py"
SRC = Path(__file__).parent.parent / "src"


@pytest.mark.slow  # two processes, a process group, about 10 s on a small box
@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs Lightning")
def test_ddp_ranks_stop_together_and_rank_zero_writes(tmp_path):
    """A 10 s chunk (was 15), counted from each rank's process start. On this 2-core box
    (load ~2) rank 0 trains its first step about 8.5 s after it started (its imports, then
    rank 1's launch), rank 1 about 4.5 s after its own start: rank 0 reaches the cap first
    while rank 1 has seconds left, so rank 1 stops at the same step only because a stop on
    any rank stops all."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(CHILD), str(tmp_path), "10"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = [x.split() for x in done.stdout.splitlines() if x.startswith("rank ")]
    assert done.returncode == 0 and len(lines) == 2, done.stdout + done.stderr
    stops = {int(x[1]): int(x[3]) for x in lines}
    writes = {int(x[1]): int(x[5]) for x in lines}
    assert stops[0] == stops[1] and writes == {0: 1, 1: 0}
    doc = json.loads((tmp_path / "resume.json").read_text())
    assert (doc["state"], doc["last_saved_step"]) == ("stopped", stops[0])
    assert doc["checkpoint"].endswith(f"step={stops[0] + 1}.ckpt")
    rows = ledger.load(tmp_path / "history.tsv")
    assert len([r for r in rows if r.quantity.endswith("first_step_seconds")]) == 1
