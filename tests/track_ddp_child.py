"""Data-parallel training on two CPU processes (gloo) with afford's callback, for
tests/integration/test_track_ddp.py::

    python tests/track_ddp_child.py lightning DIR CHUNK [--ticks]   # Lightning's launcher
    python -m torch.distributed.run --nproc-per-node=2 --standalone \\
        tests/track_ddp_child.py hf DIR CHUNK [--ticks]               # a transformers Trainer

Lightning's launcher runs this script again for rank 1. Without ``--ticks`` the guards run
on the real clock, the cap counted from each rank's process start. With ``--ticks`` each
rank's guard runs on a fake clock that advances ``1 + rank`` seconds per step (no cap time
before the first step), so rank 1 reaches the cap first, after half the steps rank 0 would
take: a stop only rank 1's guard decides. Each rank prints ``rank R stopped_at STEP writes
W`` at the end: the step it stopped after, and whether its guard writes (rank zero only).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import torch

from afford.track import Budget


class StepClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def guard_kwargs(folder: Path, chunk: float, clock: StepClock | None) -> dict:
    timing = {} if clock is None else {"clock": clock, "elapsed_seconds": 0.0}
    return dict(budget=Budget(chunk_seconds=chunk, save_every=10, write_seconds=0.01,
                              step_seconds=0.005 if clock is None else 1.0, run="ddp"),
                marker=folder / "resume.json", ledger=folder / "history.tsv", **timing)


def lightning_run(folder: Path, chunk: float, clock: StepClock | None) -> None:
    import lightning.pytorch as L

    from afford.track.lightning import AffordCallback

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def training_step(self, batch, batch_idx):
            return self.lin(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class Tick(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            clock.t += 1.0 + trainer.global_rank

    cb = AffordCallback(dirpath=folder / "ckpt", **guard_kwargs(folder, chunk, clock))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4096, 16)),
                                       batch_size=4)
    trainer = L.Trainer(max_steps=10**6, callbacks=[Tick(), cb] if clock else [cb],
                        accelerator="cpu", devices=2, strategy="ddp", logger=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(), data)
    say(trainer.global_rank, trainer.global_step - 1, cb.guard.writes)


def hf_run(folder: Path, chunk: float, clock: StepClock | None) -> None:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from afford.track.hf import AffordCallback

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def forward(self, x, labels=None):
            return {"loss": self.lin(x).pow(2).mean()}

    class Tick(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            clock.t += 1.0 + args.process_index

    cb = AffordCallback(**guard_kwargs(folder, chunk, clock))
    torch.manual_seed(0)
    data = [{"x": x} for x in torch.randn(4096, 16)]
    args = TrainingArguments(output_dir=str(folder / "out"), max_steps=400,
                             per_device_train_batch_size=4, save_strategy="no",
                             save_total_limit=2, report_to=[], use_cpu=True,
                             ddp_backend="gloo", disable_tqdm=True,
                             remove_unused_columns=False, dataloader_num_workers=0)
    trainer = Trainer(model=Model(), args=args, train_dataset=data,
                      callbacks=[Tick(), cb] if clock else [cb])
    trainer.train(resume_from_checkpoint=cb.checkpoint)
    say(args.process_index, trainer.state.global_step - 1, cb.guard.writes)


def say(rank: int, stopped_at: int, writes: bool) -> None:
    # one write, the newline included, so the other rank's output cannot split it
    os.write(1, f"rank {rank} stopped_at {stopped_at} writes {int(writes)}\n".encode())


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["lightning", "hf"])
    ap.add_argument("dir")
    ap.add_argument("chunk", type=float)
    ap.add_argument("--ticks", action="store_true")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    clock = StepClock() if a.ticks else None
    {"lightning": lightning_run, "hf": hf_run}[a.kind](Path(a.dir), a.chunk, clock)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1:])
