"""The callbacks under data parallelism: two CPU processes (gloo), Lightning under its own
launcher and a transformers Trainer under torchrun (tests/track_ddp_child.py). Both ranks
stop after the same step (a stop on any rank stops all), only rank zero writes the marker
and the ledger, the marker names the final save, and it says ``stopped`` also when the stop
was decided on the other rank."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from afford.schema import ledger
from tests.paths import SRC, TESTS

CHILD = TESTS / "track_ddp_child.py"
HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None
HAS_TRAINER = importlib.util.find_spec("transformers") is not None and \
    importlib.util.find_spec("accelerate") is not None
# --ticks: rank r's fake clock moves 1 + r s a step; a 23 s chunk stops rank 1 after step 9
# (2 x 10 s + its next step, final save and margin > 23 s), where rank 0 alone goes to 20
TICKS_CHUNK, RANK1_STOP = "23", 9


def _run(kind: str, folder: Path, chunk: str, *extra: str) -> dict[int, tuple[int, int]]:
    """Both ranks' (stopped after step, writes) from the child's output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get(
        "PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    launch = [sys.executable] if kind == "lightning" else \
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone"]
    done = subprocess.run([*launch, str(CHILD), kind, str(folder), chunk, *extra], env=env,
                          capture_output=True, text=True, timeout=300, cwd=folder)
    # found anywhere in the output: the ranks share one pipe, and a line the other rank's
    # Trainer printed can land in the middle of one of ours
    lines = re.findall(r"rank (\d+) stopped_at (\d+) writes (\d+)", done.stdout)
    assert done.returncode == 0 and len(lines) == 2, done.stdout + done.stderr[-3000:]
    return {int(r): (int(s), int(w)) for r, s, w in lines}


def _check(folder: Path, ranks: dict[int, tuple[int, int]], checkpoint: str) -> int:
    stop = ranks[0][0]
    assert ranks[1][0] == stop and {r: w for r, (_, w) in ranks.items()} == {0: 1, 1: 0}
    doc = json.loads((folder / "resume.json").read_text())
    assert (doc["state"], doc["last_saved_step"]) == ("stopped", stop)
    assert doc["checkpoint"].endswith(checkpoint.format(stop + 1))
    rows = ledger.load(folder / "history.tsv")
    assert len([r for r in rows if r.quantity.endswith("first_step_seconds")]) == 1
    return stop


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow  # two processes, a process group, about 10 s on a small box
@pytest.mark.skipif(not HAS_LIGHTNING, reason="needs Lightning")
def test_ddp_ranks_stop_together_and_rank_zero_writes(tmp_path):
    """A 10 s chunk (was 15), counted from each rank's process start. On this 2-core box
    (load ~2) rank 0 trains its first step about 8.5 s after it started (its imports, then
    rank 1's launch), rank 1 about 4.5 s after its own start: rank 0 reaches the cap first
    while rank 1 has seconds left, so rank 1 stops at the same step only because a stop on
    any rank stops all."""
    _check(tmp_path, _run("lightning", tmp_path, "10"), "step={}.ckpt")


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow
@pytest.mark.skipif(not HAS_LIGHTNING, reason="needs Lightning")
def test_ddp_lightning_a_stop_decided_on_rank_one_is_recorded_as_stopped(tmp_path):
    """Rank 1's guard decides the stop; rank 0's marker says ``stopped`` (it said
    ``finished``) and names the final save."""
    stop = _check(tmp_path, _run("lightning", tmp_path, TICKS_CHUNK, "--ticks"),
                  "step={}.ckpt")
    assert stop == RANK1_STOP


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow  # torchrun, two processes importing transformers: 20-40 s on a small box
@pytest.mark.skipif(not HAS_TRAINER, reason="needs transformers and accelerate")
def test_ddp_hf_a_stop_decided_on_rank_one_is_recorded_as_stopped(tmp_path):
    """torchrun, gloo, 2 ranks: rank 1's guard decides the stop, both ranks stop after the
    same step, rank 0's marker says ``stopped`` and names the Trainer's final checkpoint
    folder."""
    stop = _check(tmp_path, _run("hf", tmp_path, TICKS_CHUNK, "--ticks"), "checkpoint-{}")
    assert stop == RANK1_STOP
    assert (tmp_path / "out" / f"checkpoint-{stop + 1}" / "trainer_state.json").is_file()
