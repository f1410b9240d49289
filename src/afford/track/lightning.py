"""The loop guard as Lightning's own ``ModelCheckpoint`` (``lightning`` or
``pytorch_lightning``)::

    from afford.track.lightning import AffordCallback
    cb = AffordCallback(plan="plan.json", dirpath="checkpoints", keep=2, ledger="history.tsv")
    trainer = L.Trainer(..., callbacks=[cb])
    trainer.fit(model, ckpt_path="last")       # or ckpt_path=cb.checkpoint

The callback *is* a ``ModelCheckpoint``, configured from the plan: ``every_n_train_steps``
= the plan's save_every, ``save_last=True`` (so ``ckpt_path="last"`` finds ``last.ckpt``),
``monitor="step"``, ``mode="max"``. Lightning writes every file; afford decides when, and
which to delete: Lightning's ``save_top_k`` is off (-1) and, at the start and once the
marker names each new save, the callback keeps the newest ``keep`` step files of ``dirpath``
(:mod:`afford.track.retention`): files of killed sessions count, the marker's file and the
one resumed from are never deleted (Lightning's top-k counted only the files its restored
state listed, and deleted the previous file before the marker had moved). ``dirpath`` is a
local folder (the marker names files by path).
After each optimizer step (``on_train_batch_end`` when ``trainer.global_step`` has moved:
micro-batches of gradient accumulation are not steps; the step's index is global_step - 1)
the guard records the step and, before the cap, the callback saves at once (the step's file,
then ``last.ckpt``) and sets ``trainer.should_stop``. The resume marker is written when
Lightning's write of ``last.ckpt`` has returned, naming that step's own file (never
rewritten, so it stays whole whatever happens to ``last.ckpt`` later): a kill inside the save
leaves the marker, ``last.ckpt`` and the step files at the save before. (A kill after
``last.ckpt`` is written and before the marker is leaves ``last.ckpt`` one save ahead:
``ckpt_path="last"`` resumes from it, a complete checkpoint, and the guard adopts it:
:meth:`afford.track.Session.adopt`.)

The callback's state (:meth:`state_dict`) rides in each checkpoint: its run, session and
step, and the checkpoint writes it timed, which the resumed session's write estimate starts
from. The guard's figures (:mod:`afford.track.metrics`) go to the logger through
``self.log`` under ``afford/`` at every step (``rank_zero_only``). Under DDP every rank
times its steps, a stop on any rank stops all (``reduce_boolean_decision``) and is every
rank's recorded stop, and only global rank zero writes the marker and the ledger.
Lightning is imported only when the class is first used.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("afford.track")
EXTRA = "pip install 'afford[lightning]'"
STATE_SCHEMA = "afford.callback/1"


def _lightning() -> tuple[type, type]:
    """(Callback, ModelCheckpoint) of ``lightning.pytorch``, else ``pytorch_lightning``."""
    try:
        from lightning.pytorch import Callback
        from lightning.pytorch.callbacks import ModelCheckpoint
    except ImportError:
        try:
            from pytorch_lightning import Callback
            from pytorch_lightning.callbacks import ModelCheckpoint
        except ImportError:
            raise ImportError("afford.track.lightning needs Lightning, which is not installed "
                              f"here: {EXTRA}") from None
    return Callback, ModelCheckpoint


def _make_class() -> type:
    from afford.track.driver import Driver
    from afford.track.retention import prune, step_file_pattern

    _, ModelCheckpoint = _lightning()

    class AffordCallback(ModelCheckpoint):
        """``AffordCallback(plan=..., dirpath="checkpoints", keep=2)`` (any
        :class:`afford.track.Session` keyword), or ``AffordCallback(guard=session, ...)``."""

        def __init__(self, plan: Any = None, *, guard: Any = None,
                     dirpath: str | Path = "checkpoints", keep: int = 2,
                     filename: str = "{step}", **session_kwargs: Any) -> None:
            self.driver = Driver(guard, plan=plan, **session_kwargs)
            self.keep = max(1, int(keep))
            self.step_files = step_file_pattern(filename, join=self.CHECKPOINT_JOIN_CHAR,
                                                extension=self.FILE_EXTENSION)
            # save_top_k=-1: Lightning deletes nothing; afford keeps the newest `keep` of
            # the folder once the marker has moved (_prune)
            super().__init__(dirpath=str(dirpath), filename=filename, monitor="step",
                             mode="max", save_top_k=-1, save_last=True,
                             every_n_train_steps=self.driver.budget.save_every or 0,
                             every_n_epochs=0)
            self._step_file: tuple[int, str] | None = None
            self._restored: dict | None = None

        @property
        def guard(self):
            return self.driver.guard

        @property
        def checkpoint(self) -> str | None:
            """The file of the last confirmed save, for ``trainer.fit(ckpt_path=...)``
            (``"last"`` finds the same step); None: start from scratch."""
            return self.driver.begin(writes=_rank_zero_env()).resume_checkpoint

        # ---------------------------------------------------------- Lightning's hooks

        def setup(self, trainer, pl_module, stage: str) -> None:
            super().setup(trainer, pl_module, stage)
            self.driver.begin(writes=trainer.is_global_zero)

        def on_train_start(self, trainer, pl_module) -> None:
            super().on_train_start(trainer, pl_module)
            g = self.driver.begin(writes=trainer.is_global_zero)
            g.mark_loop_start()
            mine = self._restored if self._restored and \
                self._restored.get("run") == g.budget.run else None
            if mine is not None:
                g.write_observed.extend(float(x) for x in mine.get("writes", []))
                if mine.get("step") == trainer.global_step - 1 and trainer.ckpt_path:
                    g.adopt(trainer.global_step - 1, self._file_of(trainer.global_step,
                                                                   trainer.ckpt_path))
            self._prune(trainer)  # what killed sessions left counts against keep

        def _prune(self, trainer) -> None:
            """Keep the newest ``keep`` step files of the folder, those of killed sessions
            counted, never the marker's file nor the one resumed from
            (:mod:`afford.track.retention`); global rank zero only."""
            g = self.driver.guard
            if not trainer.is_global_zero or g is None or self.dirpath is None:
                return
            gone = prune(self.dirpath, self.step_files, self.keep,
                         (g.checkpoint, g.marked_checkpoint, trainer.ckpt_path))
            for path in [p for p in self.best_k_models if not Path(p).is_file()]:
                self.best_k_models.pop(path)  # deleted here, or listed by a restored state
            if gone:
                log.info("afford.track: removed %d checkpoint file(s) beyond keep=%d: %s",
                         len(gone), self.keep, ", ".join(Path(p).name for p in gone))

        def _file_of(self, global_step: int, fallback: str) -> str:
            """The step's own file among the kept ones (``last.ckpt`` is rewritten at the
            next save; the marker must name a file that keeps this step)."""
            for path, score in self.best_k_models.items():
                if int(score) == global_step and Path(path).is_file():
                    return str(path)
            return str(fallback)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            answer = self.driver.end_of_step(
                int(trainer.global_step) - 1, loss=loss,
                agree=lambda stop: trainer.strategy.reduce_boolean_decision(stop, all=False))
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            if answer is None:
                return
            if answer[1]:
                if self._last_global_step_saved != trainer.global_step:
                    found = self._monitor_candidates(trainer)
                    self._save_topk_checkpoint(trainer, found)
                    self._save_last_checkpoint(trainer, found)
                trainer.should_stop = True
            for name, value in self.driver.metrics().items():
                pl_module.log(name, value, on_step=True, on_epoch=False, prog_bar=False,
                              logger=True, rank_zero_only=True)

        def on_train_end(self, trainer, pl_module) -> None:
            """Lightning writes ``last.ckpt`` at the end of a fit that saved nothing; the
            step's own file is written first, as at every save, so that the marker names a
            file that stays whole (``last.ckpt`` is rewritten at the next session's save)."""
            if self.save_last and not self._last_checkpoint_saved and \
                    not self._should_skip_saving_checkpoint(trainer):
                found = self._monitor_candidates(trainer)
                self._save_topk_checkpoint(trainer, found)
                self._save_last_checkpoint(trainer, found)
            super().on_train_end(trainer, pl_module)
            self.driver.end()

        def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
            super().on_exception(trainer, pl_module, exception)
            self.driver.end(error=f"{type(exception).__name__}: {exception}")

        def _save_checkpoint(self, trainer, filepath: str) -> None:
            """Lightning's write; once ``last`` of a step is written the save is complete
            and the marker names that step's own file."""
            super()._save_checkpoint(trainer, filepath)
            step = int(trainer.global_step)
            if not Path(filepath).name.startswith(self.CHECKPOINT_NAME_LAST):
                self._step_file = (step, filepath)
                return
            named = self._step_file[1] if self._step_file and self._step_file[0] == step \
                else filepath
            self.driver.saved(step - 1, named)
            self._prune(trainer)

        # ---------------------------------------------------------- the callback's state

        def state_dict(self) -> dict[str, Any]:
            state = super().state_dict()
            g = self.driver.guard
            if g is not None:
                state["afford"] = {"schema": STATE_SCHEMA, "run": g.budget.run,
                                   "session": g.session_number,
                                   "step": g.indices[-1] if g.indices else None,
                                   "writes": sorted(g.write_observed)[-8:]}
            return state

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            mine = state_dict.get("afford")
            self._restored = mine if isinstance(mine, dict) and \
                mine.get("schema") == STATE_SCHEMA else None
            super().load_state_dict({k: v for k, v in state_dict.items() if k != "afford"})

    return AffordCallback


def _rank_zero_env() -> bool:
    """Rank zero by the launcher's environment (before Lightning has set its trainer up)."""
    try:
        for key in ("RANK", "GLOBAL_RANK", "SLURM_PROCID"):
            if key in os.environ:
                return int(os.environ[key]) == 0
        # Lightning's own launcher starts rank 1.. with LOCAL_RANK and NODE_RANK
        return int(os.environ.get("LOCAL_RANK", "0")) == 0 and \
            int(os.environ.get("NODE_RANK", "0")) == 0
    except ValueError:
        return True


def __getattr__(name: str) -> Any:
    if name == "AffordCallback":
        cls = _make_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
