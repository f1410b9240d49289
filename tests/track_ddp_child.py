"""A Lightning ``Trainer.fit`` under DDP on two CPU processes (gloo) with afford's callback,
for tests/test_track_ddp.py. Lightning's launcher runs this script again for rank 1. Each rank
prints ``rank R stopped_at STEP writes W`` at the end: the step it stopped after, and whether
its guard writes (rank zero only)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import lightning.pytorch as L
import torch

from afford.track import Budget
from afford.track.lightning import AffordCallback


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def training_step(self, batch, batch_idx):
        return self.lin(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(folder: Path, chunk: float) -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    cb = AffordCallback(budget=Budget(chunk_seconds=chunk, save_every=10, write_seconds=0.01,
                                      step_seconds=0.005, run="ddp"),
                        dirpath=folder / "ckpt", marker=folder / "resume.json",
                        ledger=folder / "history.tsv")
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4096, 16)),
                                       batch_size=4)
    trainer = L.Trainer(max_steps=10**6, callbacks=[cb], accelerator="cpu", devices=2,
                        strategy="ddp", logger=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Model(), data)
    print(f"rank {trainer.global_rank} stopped_at {trainer.global_step - 1} "
          f"writes {int(cb.guard.writes)}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]))
