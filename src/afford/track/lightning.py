"""The loop guard as a Lightning ``Callback`` (``lightning`` or ``pytorch_lightning``)::

    from afford.track.lightning import AffordCallback
    trainer = L.Trainer(..., callbacks=[AffordCallback(plan="plan.json", dirpath="ckpt")])
    trainer.fit(model, ckpt_path=...)   # a checkpoint this callback wrote

After each optimizer step (``on_train_batch_end`` when ``trainer.global_step`` has moved:
micro-batches of gradient accumulation are not steps; the step's index is global_step - 1)
the guard records the step; every save_every steps and before the cap the callback writes
``trainer.save_checkpoint(dirpath/step-<index>.ckpt)``, keeps the last ``keep`` of them,
confirms the save in the resume marker, and before the cap sets ``trainer.should_stop``.
``on_train_end`` closes the session (ledger readings). Lightning is imported only when the
class is first used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXTRA = "pip install 'afford[lightning]'"


def _callback_base() -> type:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise ImportError("afford.track.lightning needs Lightning, which is not installed "
                              f"here: {EXTRA}") from None
    return Callback


def _make_class() -> type:
    from afford.track.driver import Driver

    class AffordCallback(_callback_base()):  # type: ignore[misc]
        """``AffordCallback(plan=..., dirpath="checkpoints", keep=2)`` (any
        :class:`afford.track.Session` keyword), or ``AffordCallback(guard=session, ...)``."""

        def __init__(self, guard: Any = None, *, dirpath: str | Path = "checkpoints",
                     keep: int = 2, **session_kwargs: Any) -> None:
            super().__init__()
            self.driver = Driver(guard, **session_kwargs)
            self.dirpath = Path(dirpath)
            self.keep = max(1, int(keep))
            self.written: list[Path] = []

        @property
        def guard(self):
            return self.driver.guard

        def on_train_start(self, trainer, pl_module) -> None:
            self.driver.begin()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            index = int(trainer.global_step) - 1
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            save, stop = self.driver.end_of_step(index, loss=loss)
            if save:
                self._save(trainer, index)
            if stop:
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module) -> None:
            self.driver.end()

        def checkpoint_path(self, index: int) -> Path:
            return self.dirpath / f"step-{index}.ckpt"

        def _save(self, trainer, index: int) -> None:
            self.dirpath.mkdir(parents=True, exist_ok=True)
            path = self.checkpoint_path(index)
            trainer.save_checkpoint(str(path))
            self.driver.saved(index)
            self.written.append(path)
            while len(self.written) > self.keep:
                old = self.written.pop(0)
                if old != path:
                    old.unlink(missing_ok=True)

    return AffordCallback


def __getattr__(name: str) -> Any:
    if name == "AffordCallback":
        cls = _make_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
