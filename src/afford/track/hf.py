"""The loop guard as a transformers ``TrainerCallback`` (``afford[hf]``)::

    from afford.track.hf import AffordCallback
    cb = AffordCallback(plan="plan.json", ledger="history.tsv")
    trainer = Trainer(..., args=TrainingArguments(..., save_total_limit=2), callbacks=[cb])
    cb.attach(trainer)             # afford/* through trainer.log: TensorBoard, W&B, ... see them
    trainer.train(resume_from_checkpoint=cb.checkpoint)   # None in the first session

After each optimizer step (``on_step_end``; ``state.global_step`` counts completed steps, so
the step's index is global_step - 1) the guard records the step and sets
``control.should_save`` every save_every steps, and ``control.should_save`` with
``control.should_training_stop`` (and ``should_log``) before the cap. The resume marker is
written only from ``on_save``, which the Trainer calls once the checkpoint folder is
complete, naming that folder (``output_dir/checkpoint-<global_step>``): a kill during the
Trainer's save leaves the marker at the checkpoint before. Resume from ``cb.checkpoint``
rather than ``resume_from_checkpoint=True``: the Trainer writes into the checkpoint folder
directly, so after a kill its newest folder can be incomplete, and an incomplete folder
without ``trainer_state.json`` restarts training at step 0 without a word. When the Trainer
resumes from a complete checkpoint newer than the marker's (``resume_from_checkpoint=True``
after a kill that came once the Trainer had written its folder, before ``on_save``), the
guard adopts it at ``on_train_begin`` (:meth:`afford.track.Session.adopt`): the marker names
it and the previous session's steps lost are counted from it.

The guard's figures (:mod:`afford.track.metrics`, ``afford/...``) go into the logs of the
step. The Trainer hands one ``logs`` dict to its callbacks in turn, and places its report
integrations (``report_to``: TensorBoard, W&B, ...) before the user's callbacks, so an
``on_log`` of this callback comes too late for them. :meth:`attach` puts the figures into the
Trainer's own logging path instead: ``trainer.log`` adds them to ``logs`` before the Trainer
appends them to ``state.log_history`` and calls any callback, so every integration receives
them (under its own naming: TensorBoard's tag is ``train/afford/step``). Without ``attach``
the figures reach ``state.log_history`` and the callbacks after this one only, and a
``report_to`` that names an integration is warned about at the start.
Under ``torch.distributed`` every rank times its steps, a stop on any rank stops all (one
all-reduce of a flag per step) and is every rank's recorded stop (the marker says
``stopped`` whichever rank's guard decided), and only the main process writes the marker
and the ledger.
``on_train_end`` closes the session. transformers is imported only when the class is first
used.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from typing import Any

EXTRA = "pip install 'afford[hf]'"


def complete_checkpoint(output_dir: str | os.PathLike | None, global_step: int
                        ) -> str | None:
    """The folder ``output_dir/checkpoint-<global_step>`` when the Trainer finished writing
    it, else None. The main process writes ``trainer_state.json`` last (after the model, the
    optimizer and its RNG state), in place: the folder is complete when that file parses,
    names this step, no file of the folder was written after it (a later write into the
    folder, killed, left an older session's state beside a torn model), and every file
    ``torch.save`` wrote there (``*.pt``, ``*.pth``, ``*.bin``: zip archives) is whole. The
    last check is for data parallelism: each rank writes its own ``rng_state_<rank>.pth``,
    and nothing orders the other ranks' writes before the main process's state, so a kill
    can leave rank 1's file torn in a folder whose state was written after its last byte
    (the Trainer's resume then fails on it with an ``EOFError``)."""
    if global_step < 1 or output_dir is None:
        return None
    folder = os.path.join(os.fspath(output_dir), f"checkpoint-{global_step}")
    state = os.path.join(folder, "trainer_state.json")
    try:
        with open(state, encoding="utf-8") as f:
            doc = json.load(f)
        written = os.stat(state).st_mtime_ns
        files = list(os.scandir(folder))
        later = [e.name for e in files if e.stat().st_mtime_ns > written]
        torn = [e.name for e in files if e.name.endswith(TORCH_SAVED) and e.is_file()
                and not zipfile.is_zipfile(e.path)]
    except (OSError, ValueError):
        return None
    if later or torn or not isinstance(doc, dict) or doc.get("global_step") != global_step:
        return None
    return folder


TORCH_SAVED = (".pt", ".pth", ".bin")  # what the Trainer writes with torch.save: zip archives


def _rank_zero() -> bool:
    """Whether this process is the job's rank zero (torchrun's RANK; 0 when alone)."""
    try:
        return int(os.environ.get("RANK", "0")) == 0
    except ValueError:
        return True


def any_rank(flag: bool, device: Any) -> bool:
    """``flag`` on any rank of an initialised process group (one all-reduce of a flag);
    ``flag`` itself without one."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() or \
            dist.get_world_size() < 2:
        return flag
    import torch

    t = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _make_class() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError(f"afford.track.hf needs transformers, which is not installed here: "
                          f"{EXTRA}") from None
    from afford.track.driver import Driver

    class AffordCallback(TrainerCallback):
        """``AffordCallback(plan=...)`` (any :class:`afford.track.Session` keyword), or
        ``AffordCallback(guard=session)``."""

        def __init__(self, plan: Any = None, *, guard: Any = None, **session_kwargs: Any
                     ) -> None:
            self.driver = Driver(guard, plan=plan, **session_kwargs)
            self.attached = False  # attach(): the figures go through trainer.log

        @property
        def guard(self):
            """The session (made on first use: its marker says where to resume)."""
            return self.driver.begin(writes=_rank_zero())

        @property
        def checkpoint(self) -> str | None:
            """The checkpoint folder of the last confirmed save, for
            ``trainer.train(resume_from_checkpoint=...)``; None: start from scratch."""
            return self.guard.resume_checkpoint

        def attach(self, trainer: Any) -> Any:
            """Route the guard's figures through ``trainer.log``, the Trainer's own logging
            path, so that its report integrations receive them (module docstring); adds
            this callback to the Trainer if it is not there. Idempotent; returns
            ``trainer``."""
            if self not in trainer.callback_handler.callbacks:
                trainer.add_callback(self)
            if getattr(trainer.log, "afford_figures", None) is self:
                return trainer
            plain = trainer.log

            def log(logs, *args, **kwargs):
                if isinstance(logs, dict):
                    logs.update(self.driver.metrics())
                return plain(logs, *args, **kwargs)

            log.afford_figures = self
            trainer.log = log
            self.attached = True
            return trainer

        def on_train_begin(self, args, state, control, **kwargs):
            g = self.driver.begin(writes=state.is_world_process_zero)
            g.mark_loop_start()
            resumed = int(state.global_step)
            folder = complete_checkpoint(args.output_dir, resumed)
            if folder is not None:
                g.adopt(resumed - 1, folder)  # nothing when not newer than the marker's
            if g.writes:
                self._check_args(g, args)
            return control

        def _check_args(self, g, args) -> None:
            if args.save_total_limit == 1:
                g._warn("save_total_limit=1: the Trainer deletes the previous checkpoint "
                        "before afford can confirm the new one, so a kill in between leaves a "
                        "marker naming a deleted folder; keep 2 (the plan's checkpoints_kept)",
                        "limit")
            reporters = [r for r in (args.report_to or []) if r != "none"]
            if reporters and not self.attached:
                g._warn(f"report_to={reporters}: the Trainer's report integrations log before "
                        "this callback adds afford's figures, so they receive none; call "
                        "cb.attach(trainer) once the Trainer is made", "report_to")

        def on_step_end(self, args, state, control, **kwargs):
            answer = self.driver.end_of_step(int(state.global_step) - 1,
                                             agree=lambda stop: any_rank(stop, args.device))
            if answer is None:
                return control
            save, stop = answer
            if save or stop:
                control.should_save = True
            if stop:
                control.should_training_stop = True
                control.should_log = True
            return control

        def on_save(self, args, state, control, **kwargs):
            folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            self.driver.saved(int(state.global_step) - 1, folder)
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            figures = self.driver.metrics()
            if figures and logs is not None:
                logs.update(figures)
                last = state.log_history[-1] if state.log_history else None
                if isinstance(last, dict) and last.get("step") == state.global_step:
                    last.update(figures)
            return control

        def on_train_end(self, args, state, control, **kwargs):
            self.driver.end()
            return control

    return AffordCallback


def __getattr__(name: str) -> Any:
    if name == "AffordCallback":
        cls = _make_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
