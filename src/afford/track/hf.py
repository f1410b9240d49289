"""The loop guard as a transformers ``TrainerCallback`` (``afford[hf]``)::

    from afford.track.hf import AffordCallback
    trainer = Trainer(..., callbacks=[AffordCallback(plan="plan.json")])
    trainer.train(resume_from_checkpoint=...)   # the Trainer's own checkpoints

After each optimizer step (``on_step_end``; ``state.global_step`` counts completed steps, so
the step's index is global_step - 1) the guard records the step and sets
``control.should_save`` every save_every steps and ``control.should_save`` with
``control.should_training_stop`` before the cap; ``on_save`` (called once the Trainer's
checkpoint is written) confirms the save in the resume marker; ``on_train_end`` closes the
session (ledger readings). The Trainer resumes from its own checkpoint folders; the marker
names the step to expect there. transformers is imported only when the class is first used.
"""

from __future__ import annotations

from typing import Any

EXTRA = "pip install 'afford[hf]'"


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

        def __init__(self, guard: Any = None, **session_kwargs: Any) -> None:
            self.driver = Driver(guard, **session_kwargs)

        @property
        def guard(self):
            return self.driver.guard

        def on_train_begin(self, args, state, control, **kwargs):
            self.driver.begin()
            return control

        def on_step_end(self, args, state, control, **kwargs):
            save, stop = self.driver.end_of_step(int(state.global_step) - 1)
            if save:
                control.should_save = True
            if stop:
                control.should_training_stop = True
            return control

        def on_save(self, args, state, control, **kwargs):
            self.driver.saved(int(state.global_step) - 1)
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
