"""The guard inside framework trainers: a transformers TrainerCallback (a real tiny Trainer
when accelerate is installed, else the callback's hooks with the library's own control and
state objects) and a Lightning Callback (skipped without Lightning; its logic is also driven
through a stand-in ``lightning.pytorch`` module so that it runs everywhere)."""

import importlib
import importlib.util
import json
import sys
import types

import pytest

from afford.track import Budget, Session

HAS_TF = importlib.util.find_spec("transformers") is not None
HAS_ACCELERATE = importlib.util.find_spec("accelerate") is not None
HAS_LIGHTNING = (importlib.util.find_spec("lightning") is not None
                 or importlib.util.find_spec("pytorch_lightning") is not None)
BUDGET = Budget(chunk_seconds=20.0, save_every=5, write_seconds=1.0, step_seconds=1.0,
                run="cb")


class StepClock:
    """One fake second per optimizer step: the test advances it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _guard(tmp_path, clock):
    return Session(budget=BUDGET, clock=clock, marker=tmp_path / "resume.json",
                   elapsed_seconds=0.0)


def test_hf_callback_needs_transformers(monkeypatch):
    import afford.track.hf as hf

    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.delitem(hf.__dict__, "AffordCallback", raising=False)
    with pytest.raises(ImportError, match=r"afford\[hf\]"):
        hf.AffordCallback  # noqa: B018


@pytest.mark.skipif(not HAS_TF, reason="transformers is not installed (pip install "
                    "'afford[hf]')")
def test_hf_callback_hooks_set_the_controls(tmp_path):
    from transformers import TrainerControl, TrainerState

    from afford.track.hf import AffordCallback

    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    state, saves, stopped = TrainerState(), [], None
    cb.on_train_begin(None, state, TrainerControl())
    for _ in range(100):
        clock.t += 1.0
        state.global_step += 1
        control = cb.on_step_end(None, state, TrainerControl())
        if control.should_save:
            saves.append(state.global_step)
            clock.t += 1.0
            cb.on_save(None, state, control)
        if control.should_training_stop:
            stopped = state.global_step
            break
    cb.on_train_end(None, state, TrainerControl())
    # after step 14 the clock reads 16 (two saves of 1 s); step 15 would save too:
    # 16 + 1 + 1 (its save) + 1 (final save) + max(1, 1) + 0.25 > 20, so stop at 14
    assert stopped == 14 and saves == [5, 10, 14]
    assert clock.t <= BUDGET.chunk_seconds
    marker = json.loads((tmp_path / "resume.json").read_text())
    assert marker["last_saved_step"] == stopped - 1  # global_step counts completed steps


@pytest.mark.skipif(not (HAS_TF and HAS_ACCELERATE),
                    reason="a real Trainer needs transformers and accelerate "
                    "(pip install 'afford[hf]' accelerate)")
def test_a_tiny_trainer_stops_and_saves(tmp_path):
    import torch
    from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                              TrainingArguments)

    from afford.track.hf import AffordCallback

    clock = StepClock()

    class Tick(TrainerCallback):  # one fake second per step, before the guard reads it
        def on_step_end(self, args, state, control, **kw):
            clock.t += 1.0

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64,
                                       n_positions=16))
    ids = torch.randint(0, 64, (64, 8))
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=60,
                             per_device_train_batch_size=2, save_strategy="no",
                             logging_strategy="no", report_to=[], use_cpu=True,
                             disable_tqdm=True, save_only_model=True)
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[Tick(), cb])
    trainer.train()
    done = trainer.state.global_step
    assert done < 60 and clock.t <= BUDGET.chunk_seconds + 1  # stopped by the guard
    folders = sorted(int(p.name.split("-")[1]) for p in (tmp_path / "out").glob("checkpoint-*"))
    assert folders == [5, 10, 15, done]
    assert json.loads((tmp_path / "resume.json").read_text())["last_saved_step"] == done - 1


class FakeTrainer:
    def __init__(self) -> None:
        self.global_step = 0
        self.should_stop = False
        self.saved: list[str] = []

    def save_checkpoint(self, path: str) -> None:
        open(path, "w").write("ckpt")
        self.saved.append(path)


def _drive_lightning(cls, tmp_path):
    clock = StepClock()
    cb = cls(guard=_guard(tmp_path, clock), dirpath=tmp_path / "ckpt", keep=2)
    trainer = FakeTrainer()
    cb.on_train_start(trainer, None)
    while not trainer.should_stop and trainer.global_step < 100:
        clock.t += 1.0
        trainer.global_step += 1
        for micro in range(2):  # gradient accumulation: two batches per optimizer step
            cb.on_train_batch_end(trainer, None, {"loss": 1.0}, None, micro)
    cb.on_train_end(trainer, None)
    return cb, trainer, clock


def test_lightning_callback_logic_with_a_stand_in_module(tmp_path, monkeypatch):
    fake = types.ModuleType("lightning")
    fake.pytorch = types.ModuleType("lightning.pytorch")
    fake.pytorch.Callback = type("Callback", (), {})
    monkeypatch.setitem(sys.modules, "lightning", fake)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", fake.pytorch)
    import afford.track.lightning as lt

    monkeypatch.delitem(lt.__dict__, "AffordCallback", raising=False)
    cb, trainer, clock = _drive_lightning(lt._make_class(), tmp_path)
    last = trainer.global_step - 1
    assert trainer.should_stop and clock.t <= BUDGET.chunk_seconds
    assert [p.rsplit("/", 1)[1] for p in trainer.saved] == \
        ["step-4.ckpt", "step-9.ckpt", "step-14.ckpt", f"step-{last}.ckpt"]
    kept = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert kept == sorted(["step-14.ckpt", f"step-{last}.ckpt"])  # keep=2
    assert len(cb.guard.indices) == trainer.global_step  # one step per optimizer step
    assert json.loads((tmp_path / "resume.json").read_text())["last_saved_step"] == last


def test_lightning_callback_without_lightning_names_it(monkeypatch):
    import afford.track.lightning as lt

    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    monkeypatch.delitem(lt.__dict__, "AffordCallback", raising=False)
    with pytest.raises(ImportError, match="Lightning"):
        lt.AffordCallback  # noqa: B018


@pytest.mark.skipif(not HAS_LIGHTNING, reason="Lightning is not installed "
                    "(pip install 'afford[lightning]')")
def test_lightning_callback_subclasses_the_real_callback(tmp_path):
    import afford.track.lightning as lt

    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
    assert issubclass(lt.AffordCallback, Callback)
    cb, trainer, clock = _drive_lightning(lt.AffordCallback, tmp_path)
    assert trainer.should_stop and clock.t <= BUDGET.chunk_seconds
