"""A training loop under afford.track, for the SIGKILL test: the "model" is the sum of the
step indices it has trained on, checkpointed as JSON (the last two kept, atomic writes), so a
resumed run shows whether any step was lost or trained twice. Prints ``resumed R STEP SUM``
once, then ``done <step>`` after every step."""

import argparse
import json
import sys
import time
from pathlib import Path

from afford.io import atomic_write_text
from afford.track import Budget, Session


def save(folder: Path, state: dict) -> None:
    atomic_write_text(folder / f"ckpt-{state['step']}.json", json.dumps(state))
    ckpts = sorted(folder.glob("ckpt-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    for old in ckpts[:-2]:
        old.unlink()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--save-every", type=int, default=5)
    ap.add_argument("--step-seconds", type=float, default=0.01)
    ap.add_argument("--chunk", type=float, default=None)
    ap.add_argument("--max-steps", type=int, default=10**6)
    a = ap.parse_args()
    budget = Budget(chunk_seconds=a.chunk, save_every=a.save_every, write_seconds=0.005,
                    step_seconds=a.step_seconds, run="kill-test")
    guard = Session(budget=budget, marker=a.dir / "resume.json")
    start = guard.resume_step
    state = {"step": -1, "sum": 0}
    if start > 0:
        state = json.loads((a.dir / f"ckpt-{start - 1}.json").read_text())
    print(f"resumed {start} {state['step']} {state['sum']}", flush=True)
    for step in range(start, start + a.max_steps):
        time.sleep(a.step_seconds)  # the training step
        state = {"step": step, "sum": state["sum"] + step}
        guard.step(step)
        print(f"done {step}", flush=True)
        if guard.should_save(step):
            save(a.dir, state)
        if guard.should_stop():
            save(a.dir, state)
            break
    guard.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
