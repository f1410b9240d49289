"""Checkpoint I/O: atomic writes (a killed or failing writer leaves the old file whole),
the reload check, and the probe's figures."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from afford.measure.probes.checkpoint import (
    checkpoint_probe,
    first_difference,
    host_state,
    write_checkpoint_atomic,
)
from tests.paths import SRC


def state(fill: float, n: int = 1000) -> dict:
    return {"model": {"w": torch.full((n,), fill)}, "optimizer": {"step": 3, "lr": 1e-3}}


def test_a_failure_before_the_rename_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "ckpt.pt"
    write_checkpoint_atomic(state(1.0), target)

    def fail(tmp):
        assert tmp.exists() and tmp.parent == tmp_path  # the temp is whole, beside the target
        raise OSError("disk full (injected)")

    with pytest.raises(OSError, match="injected"):
        write_checkpoint_atomic(state(2.0), target, before_rename=fail)
    loaded = torch.load(target, weights_only=True)
    assert first_difference(state(1.0), loaded) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_the_new_file_replaces_the_old_whole(tmp_path):
    target = tmp_path / "ckpt.pt"
    write_checkpoint_atomic(state(1.0), target)
    write_checkpoint_atomic(state(2.0), target)
    assert first_difference(state(2.0), torch.load(target, weights_only=True)) is None


WRITER = textwrap.dedent("""
    import sys, torch
    from afford.measure.probes.checkpoint import write_checkpoint_atomic
    path = sys.argv[1]
    states = [{"w": torch.full((4_000_000,), float(v))} for v in (1, 2)]
    write_checkpoint_atomic(states[0], path)
    print("ready", flush=True)
    i = 1
    while True:                      # keep rewriting until killed
        write_checkpoint_atomic(states[i % 2], path)
        i += 1
""")


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.5])
def test_a_killed_writer_leaves_a_whole_file(tmp_path, delay):
    """SIGKILL a process that keeps rewriting a 16 MB checkpoint: whatever moment it dies,
    the file loads, and holds one of the two states whole."""
    target = tmp_path / "ckpt.pt"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    w = torch.load(target, weights_only=True)["w"]
    assert w.shape == (4_000_000,)
    assert bool((w == 1.0).all()) or bool((w == 2.0).all())


def test_first_difference_names_where_states_differ():
    a = {"model": {"w": torch.ones(3)}, "optimizer": {"param_groups": [{"lr": 0.1}]}}
    assert first_difference(a, {"model": {"w": torch.ones(3)},
                                "optimizer": {"param_groups": [{"lr": 0.1}]}}) is None
    b = {"model": {"w": torch.tensor([1.0, 1.0, 2.0])}, "optimizer": a["optimizer"]}
    assert first_difference(a, b) == "model.w: values differ"
    c = {"model": {"w": torch.ones(3, dtype=torch.float64)}, "optimizer": a["optimizer"]}
    assert "float64" in first_difference(a, c)
    d = {"model": a["model"], "optimizer": {"param_groups": [{"lr": 0.2}]}}
    assert first_difference(a, d) == "optimizer.param_groups[0].lr: 0.1 against 0.2"
    assert "keys" in first_difference(a, {"model": a["model"]})


def test_checkpoint_probe_writes_model_and_optimizer_and_verifies(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32)                 # 64*32 + 32 = 2080 parameters
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 64)).square().mean().backward()
    opt.step()
    got = checkpoint_probe(host_state(model, opt)[0], tmp_path, writes=2)
    params = 2080
    # weights + exp_avg + exp_avg_sq in fp32: 12 bytes a parameter, plus the archive
    assert 12 * params <= got["bytes"] <= 12 * params + 64 * 1024
    assert len(got["write_seconds"]) == 2 and got["median_write_seconds"] > 0
    assert got["verified"] is True and got["mismatch"] is None
    assert got["load_seconds"] > 0
    assert list(tmp_path.iterdir()) == []           # the probe removes its file


def test_a_large_state_stops_writing_at_the_budget_after_two_writes(tmp_path):
    model = torch.nn.Linear(64, 32)
    state, _ = host_state(model, torch.optim.AdamW(model.parameters()))
    assert len(checkpoint_probe(state, tmp_path, writes=5, budget_seconds=0.0)
               ["write_seconds"]) == 2
    assert len(checkpoint_probe(state, tmp_path, writes=5, budget_seconds=60.0)
               ["write_seconds"]) == 5
    assert len(checkpoint_probe(state, tmp_path, writes=1, budget_seconds=0.0)
               ["write_seconds"]) == 1
