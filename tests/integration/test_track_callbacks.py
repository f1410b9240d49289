"""The guard inside framework trainers: the transformers ``TrainerCallback`` (its hooks with
the library's own control and state objects, and a real tiny ``Trainer``) and the Lightning
callback, which is Lightning's own ``ModelCheckpoint`` (real ``Trainer.fit`` runs on a CPU).
The marker is written only once the framework's checkpoint is complete; the frameworks'
logs receive the ``afford/`` figures; Lightning resumes with ``ckpt_path="last"``."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from afford.track import Budget, Session

HAS_TF = importlib.util.find_spec("transformers") is not None
HAS_ACCELERATE = importlib.util.find_spec("accelerate") is not None
HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None
BUDGET = Budget(chunk_seconds=20.0, save_every=5, write_seconds=1.0, step_seconds=1.0,
                run="cb")
UNCAPPED = Budget(chunk_seconds=None, save_every=None, write_seconds=0.0, step_seconds=1.0,
                  run="drift")  # no cap, no saves: a long run of warm steps
needs_tf = pytest.mark.skipif(not HAS_TF, reason="transformers is not installed "
                              "(pip install 'afford[hf]')")
needs_trainer = pytest.mark.skipif(not (HAS_TF and HAS_ACCELERATE), reason="a real Trainer "
                                   "needs transformers and accelerate")
needs_lightning = pytest.mark.skipif(not HAS_LIGHTNING, reason="Lightning is not installed "
                                     "(pip install 'afford[lightning]')")


class StepClock:
    """One fake second per optimizer step: the test advances it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _guard(tmp_path, clock, **kw):
    return Session(budget=BUDGET, clock=clock, marker=tmp_path / "resume.json",
                   elapsed_seconds=0.0, **kw)


def _marker(tmp_path) -> dict:
    return json.loads((tmp_path / "resume.json").read_text())


def test_hf_callback_needs_transformers(monkeypatch):
    import afford.track.hf as hf

    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.delitem(hf.__dict__, "AffordCallback", raising=False)
    with pytest.raises(ImportError, match=r"afford\[hf\]"):
        hf.AffordCallback  # noqa: B018


@needs_tf
def test_hf_marker_waits_for_on_save(tmp_path):
    """The save asked at on_step_end is not in the marker until the Trainer's on_save (the
    old callback confirmed it in should_stop, 0.3-1.0 s before the Trainer wrote it)."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from afford.track.hf import AffordCallback

    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    state, saves, stopped = TrainerState(), [], None
    cb.on_train_begin(args, state, TrainerControl())
    for _ in range(100):
        clock.t += 1.0
        state.global_step += 1
        control = cb.on_step_end(args, state, TrainerControl())
        if control.should_save:
            before = _marker(tmp_path)["last_saved_step"]
            assert before != state.global_step - 1  # asked, not yet written
            saves.append(state.global_step)
            clock.t += 1.0
            cb.on_save(args, state, control)
            doc = _marker(tmp_path)
            assert doc["last_saved_step"] == state.global_step - 1
            assert doc["checkpoint"] == str(tmp_path / "out" / f"checkpoint-{state.global_step}")
        if control.should_training_stop:
            assert control.should_log  # the stop is logged
            stopped = state.global_step
            break
    cb.on_train_end(args, state, TrainerControl())
    # after step 14 the clock reads 16 (two saves of 1 s); step 15 would save too:
    # 16 + 1 + 1 (its save) + 1 (final save) + max(1, 1) + 0.25 > 20, so stop at 14
    assert stopped == 14 and saves == [5, 10, 14]
    assert clock.t <= BUDGET.chunk_seconds
    doc = _marker(tmp_path)
    assert (doc["last_saved_step"], doc["state"]) == (stopped - 1, "stopped")


@needs_tf
def test_hf_a_stop_without_on_save_is_not_confirmed(tmp_path):
    """Killed (here: closed) between the stop and the Trainer's save: the marker stays at
    the save before."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from afford.track.hf import AffordCallback

    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    state, saved = TrainerState(), []
    cb.on_train_begin(args, state, TrainerControl())
    for _ in range(30):
        clock.t += 1.0
        state.global_step += 1
        control = cb.on_step_end(args, state, TrainerControl())
        if control.should_training_stop:
            break
        if control.should_save:
            cb.on_save(args, state, control)
            saved.append(state.global_step - 1)
    assert control.should_save  # the final save was asked ...
    cb.on_train_end(args, state, TrainerControl())  # ... and never reported written
    doc = _marker(tmp_path)
    assert doc["last_saved_step"] == saved[-1] < state.global_step - 1
    assert doc["resume_step"] == saved[-1] + 1


def _tiny_trainer(tmp_path, cb, extra=(), **args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64,
                                       n_positions=16))
    ids = torch.randint(0, 64, (64, 8))
    data = [{"input_ids": x, "labels": x} for x in ids]
    targs = TrainingArguments(**{**dict(output_dir=str(tmp_path / "out"), max_steps=60,
                                        per_device_train_batch_size=2, save_strategy="no",
                                        report_to=[], use_cpu=True, disable_tqdm=True,
                                        save_only_model=True), **args})
    return Trainer(model=model, args=targs, train_dataset=data, callbacks=[*extra, cb])


def _hf_tick(clock: StepClock, seconds: float = 1.0):
    """A TrainerCallback that advances ``clock`` by ``seconds`` per step, before the guard
    reads it."""
    from transformers import TrainerCallback

    class Tick(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            clock.t += seconds

    return Tick()


@needs_trainer
def test_a_tiny_trainer_stops_saves_and_logs(tmp_path):
    from afford.track.hf import AffordCallback

    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    trainer = _tiny_trainer(tmp_path, cb, extra=[_hf_tick(clock)], logging_strategy="steps",
                            logging_steps=3)
    trainer.train()
    done = trainer.state.global_step
    assert done < 60 and clock.t <= BUDGET.chunk_seconds + 1  # stopped by the guard
    folders = sorted(int(p.name.split("-")[1]) for p in (tmp_path / "out").glob("checkpoint-*"))
    assert folders == [5, 10, 15, done]
    doc = _marker(tmp_path)
    assert doc["last_saved_step"] == done - 1
    assert doc["checkpoint"] == str(tmp_path / "out" / f"checkpoint-{done}")
    logged = [e for e in trainer.state.log_history if "afford/step" in e]
    assert [e["afford/step"] for e in logged] == [e["step"] - 1 for e in logged]
    assert {e["step"] for e in logged} >= {3, 6, 9, done}  # the logging steps and the stop
    last = logged[-1]
    assert last["afford/stop"] == 1.0 and last["afford/last_saved_step"] < done - 1
    assert last["afford/chunk_seconds_left"] == pytest.approx(BUDGET.chunk_seconds - clock.t,
                                                              abs=1.5)
    assert all(e["afford/predicted_step_seconds"] == 1.0 for e in logged)
    assert cb.checkpoint is None  # this session started without a marker


@needs_trainer
def test_hf_adopts_a_complete_checkpoint_one_save_past_the_marker(tmp_path):
    """A kill after the Trainer wrote checkpoint-N and before on_save named it: the marker is
    a save behind. The Trainer's own idiom (resume_from_checkpoint=True) resumes from
    checkpoint-N, and the guard adopts it: the marker names it, the previous session's
    steps lost count from it, no 'training starts at step' warning."""
    from afford.track.hf import AffordCallback

    clock = StepClock()
    trainer = _tiny_trainer(tmp_path, AffordCallback(guard=_guard(tmp_path, clock)),
                            extra=[_hf_tick(clock)])
    trainer.train()
    done = trainer.state.global_step
    doc = _marker(tmp_path)
    behind = {**doc, "state": "running", "last_saved_step": 14,
              "checkpoint": str(tmp_path / "out" / "checkpoint-15")}
    (tmp_path / "resume.json").write_text(json.dumps(behind))
    clock2 = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock2))
    assert cb.checkpoint.endswith("checkpoint-15")  # the marker's, a save behind
    trainer2 = _tiny_trainer(tmp_path, cb, extra=[_hf_tick(clock2)], max_steps=done + 3)
    trainer2.train(resume_from_checkpoint=True)
    g = cb.guard
    assert g.indices[0] == done and g.resume_step == done
    assert g.previous.last_saved_step == done - 1 and g.previous.how == "killed"
    assert not any("training starts at step" in w for w in g.warnings)
    assert g.resume_checkpoint == str(tmp_path / "out" / f"checkpoint-{done}")
    assert _marker(tmp_path)["last_saved_step"] == trainer2.state.global_step - 1


def test_hf_a_checkpoint_folder_is_complete_once_its_trainer_state_names_its_step(tmp_path):
    from afford.track.hf import complete_checkpoint

    folder = tmp_path / "checkpoint-20"
    folder.mkdir()
    assert complete_checkpoint(tmp_path, 20) is None  # no trainer_state.json yet
    (folder / "trainer_state.json").write_text('{"global_step": 20, "log_hi')
    assert complete_checkpoint(tmp_path, 20) is None  # torn by a kill
    (folder / "trainer_state.json").write_text('{"global_step": 15}')
    assert complete_checkpoint(tmp_path, 20) is None  # another step's state
    (folder / "trainer_state.json").write_text('{"global_step": 20}')
    assert complete_checkpoint(tmp_path, 20) == str(folder)
    model = folder / "model.safetensors"
    model.write_bytes(b"torn")  # a later write into the folder, killed before the state
    state_ns = (folder / "trainer_state.json").stat().st_mtime_ns
    os.utime(model, ns=(state_ns + 10**9, state_ns + 10**9))
    assert complete_checkpoint(tmp_path, 20) is None
    os.utime(model, ns=(state_ns, state_ns))  # written before the state (or with it)
    assert complete_checkpoint(tmp_path, 20) == str(folder)
    assert complete_checkpoint(tmp_path, 0) is None


def test_hf_a_checkpoint_with_another_ranks_torn_rng_state_is_not_complete(tmp_path):
    """Under data parallelism rank 1 writes rng_state_1.pth while the main process writes
    its state: a kill can leave rank 1's file torn (a torch.save zip without its end) and
    older than trainer_state.json. The Trainer's resume would fail on it (EOFError), so the
    folder is not complete; whole, it is."""
    import zipfile

    from afford.track.hf import complete_checkpoint

    folder = tmp_path / "checkpoint-30"
    folder.mkdir()
    whole = folder / "rng_state_0.pth"
    with zipfile.ZipFile(whole, "w") as z:  # what torch.save writes: a zip archive
        z.writestr("archive/data.pkl", b"x" * 4096)
    other = folder / "rng_state_1.pth"
    other.write_bytes(whole.read_bytes()[:2048])  # killed mid-write: no end record
    (folder / "trainer_state.json").write_text('{"global_step": 30}')
    state_ns = (folder / "trainer_state.json").stat().st_mtime_ns
    for f in (whole, other):
        os.utime(f, ns=(state_ns - 10**9, state_ns - 10**9))  # written before the state
    assert complete_checkpoint(tmp_path, 30) is None
    other.write_bytes(whole.read_bytes())
    os.utime(other, ns=(state_ns - 10**9, state_ns - 10**9))
    assert complete_checkpoint(tmp_path, 30) == str(folder)


@needs_trainer
def test_hf_drift_is_warned_when_every_step_is_logged(tmp_path):
    """A real Trainer logging every step (so the guard's figures are read after every step)
    whose steps run 30 % slower than the plan's: the drift is warned."""
    from afford.track.hf import AffordCallback

    clock = StepClock()
    cb = AffordCallback(budget=UNCAPPED, clock=clock, marker=tmp_path / "resume.json",
                        elapsed_seconds=0.0)
    trainer = _tiny_trainer(tmp_path, cb, extra=[_hf_tick(clock, 1.3)],
                            logging_strategy="steps", logging_steps=1)
    trainer.train()
    logged = [e for e in trainer.state.log_history if "afford/drift" in e]
    assert len(logged) == 60 - 12  # every step from the tenth warm one
    assert logged[-1]["afford/drift"] == pytest.approx(0.3)
    assert [w for w in cb.guard.warnings if "30.0% slower" in w]


def _event_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} of the TensorBoard event files under ``folder`` (TFRecord
    framing: length, its CRC, the Event proto, its CRC)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, dict[int, float]] = {}
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        raw, pos = path.read_bytes(), 0
        while pos + 12 <= len(raw):
            (n,) = struct.unpack("<Q", raw[pos:pos + 8])
            event = Event.FromString(raw[pos + 12:pos + 12 + n])
            pos += 12 + n + 4
            for v in event.summary.value:
                out.setdefault(v.tag, {})[event.step] = v.simple_value
    return out


@needs_trainer
def test_hf_figures_reach_tensorboard_through_the_trainers_log(tmp_path, monkeypatch):
    """report_to="tensorboard": the event file holds afford's figures at the logged steps
    (TensorBoard's writer names every training key train/...). Before, the integration's
    on_log ran before afford's and TensorBoard received only the Trainer's own keys."""
    from afford.track.hf import AffordCallback

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    trainer = cb.attach(_tiny_trainer(tmp_path, cb, extra=[_hf_tick(clock)],
                                      logging_strategy="steps", logging_steps=3,
                                      report_to=["tensorboard"]))
    assert cb.attach(trainer) is trainer  # once is enough; twice changes nothing
    trainer.train()
    tags = _event_scalars(tmp_path / "tb")
    afford = {t for t in tags if t.startswith("train/afford/")}
    assert {"train/afford/step", "train/afford/drift", "train/afford/chunk_seconds_left",
            "train/afford/stop"} <= afford
    done = trainer.state.global_step
    assert tags["train/afford/step"] == {s: s - 1.0 for s in tags["train/afford/step"]}
    assert {3, 6, 9, done} <= set(tags["train/afford/step"])
    assert tags["train/afford/stop"][done] == 1.0 and tags["train/loss"]
    logged = [e for e in trainer.state.log_history if "afford/step" in e]
    assert {e["step"] for e in logged} == set(tags["train/afford/step"])
    assert not [w for w in cb.guard.warnings if "report_to" in w]


@needs_trainer
def test_hf_report_to_without_attach_is_warned(tmp_path, monkeypatch):
    from afford.track.hf import AffordCallback

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock))
    trainer = _tiny_trainer(tmp_path, cb, extra=[_hf_tick(clock)], report_to=["tensorboard"],
                            max_steps=4)
    trainer.train()
    assert [w for w in cb.guard.warnings if "report_to=['tensorboard']" in w and
            "cb.attach(trainer)" in w]


# ---------------------------------------------------------------- Lightning


def _lightning_model():
    import lightning.pytorch as L
    import torch

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)
            self.register_buffer("seen", torch.zeros(1))

        def training_step(self, batch, batch_idx):
            self.seen += 1
            return self.lin(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Model()


def _fit(tmp_path, clock, *, ckpt_path="last", max_steps=200, name="s", tick=1.0,
         budget=BUDGET, extra=(), **kw):
    import lightning.pytorch as L
    import torch
    from lightning.pytorch.loggers import CSVLogger

    from afford.track.lightning import AffordCallback

    class Tick(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            clock.t += tick

    kw.setdefault("keep", 2)
    cb = AffordCallback(budget=budget, dirpath=tmp_path / "ckpt", clock=clock,
                        marker=tmp_path / "resume.json", elapsed_seconds=0.0, **kw)
    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4)),
                                       batch_size=4)
    trainer = L.Trainer(max_steps=max_steps, callbacks=[Tick(), *extra, cb],
                        accelerator="cpu", devices=1, logger=CSVLogger(tmp_path, name=name),
                        log_every_n_steps=1, enable_progress_bar=False,
                        enable_model_summary=False)
    model = _lightning_model()
    trainer.fit(model, data, ckpt_path=ckpt_path)
    return cb, trainer, model


@needs_lightning
def test_lightning_is_its_own_model_checkpoint_configured_from_the_plan(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    from afford.track.lightning import AffordCallback

    cb = AffordCallback(budget=BUDGET, dirpath=tmp_path, keep=3, marker=None)
    assert isinstance(cb, ModelCheckpoint)
    # Lightning deletes nothing (save_top_k=-1): afford keeps the newest `keep` files
    assert (cb._every_n_train_steps, cb.save_top_k, cb.keep, cb.save_last, cb.monitor,
            cb.mode) == (5, -1, 3, True, "step", "max")


@needs_lightning
def test_lightning_stops_resumes_from_last_and_keeps_k_files(tmp_path):
    clock = StepClock()
    cb, trainer, model = _fit(tmp_path, clock)
    first = trainer.global_step
    assert trainer.should_stop and first < 200 and clock.t <= BUDGET.chunk_seconds
    doc = _marker(tmp_path)
    assert (doc["last_saved_step"], doc["state"]) == (first - 1, "stopped")
    assert doc["checkpoint"] == str(tmp_path / "ckpt" / f"step={first}.ckpt")
    # the next session resumes with ckpt_path="last" at the step of the last complete save
    for session in range(2):
        clock2 = StepClock()
        cb2, trainer2, model2 = _fit(tmp_path, clock2, name=f"s{session}")
        assert cb2.guard.indices[0] == cb2.guard.resume_step == doc["last_saved_step"] + 1
        assert cb2.guard.previous.how == "stopped"
        assert model2.seen.item() == trainer2.global_step  # one count per step, no step twice
        assert not any("training starts at step" in w for w in cb2.guard.warnings)
        doc = _marker(tmp_path)
    files = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert len(files) == 3 and "last.ckpt" in files  # keep=2 step files and last, not 6


def _debris(folder: Path, names: list[str], age_s: float) -> None:
    """Step files a killed session left (copies of a real checkpoint), ``age_s`` old."""
    import shutil
    import time

    some = next(folder.glob("step=*.ckpt"))
    for name in names:
        shutil.copy(some, folder / name)
        t = time.time() - age_s
        os.utime(folder / name, (t, t))


@needs_lightning
def test_lightning_keep_counts_the_files_of_killed_sessions(tmp_path):
    """Step files of killed sessions (a save past the marker, Lightning's -v copies of a
    step written twice) count against keep=2: at the start of the next session the folder
    is cut to the newest two and the marker's file (here the oldest), and after its saves
    to its own newest two. Lightning's own top-k never deleted them (the issue's run: five
    step files and last.ckpt with keep=2)."""
    _, trainer, _ = _fit(tmp_path, StepClock())
    done = trainer.global_step  # step=5, 10, 15, done and last.ckpt; the marker: done
    ckpt = tmp_path / "ckpt"
    _debris(ckpt, ["step=5-v1.ckpt", "step=10-v1.ckpt", f"step={done}-v1.ckpt"], 3600)
    marked = ckpt / f"step={done}.ckpt"
    os.utime(marked, (marked.stat().st_atime, marked.stat().st_mtime - 7200))  # the oldest
    import lightning.pytorch as L

    at_start = []

    class Peek(L.Callback):  # the folder when the first step begins
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            at_start.append(sorted(p.name for p in ckpt.glob("step=*.ckpt")))

    _, trainer2, _ = _fit(tmp_path, StepClock(), name="start", max_steps=done + 2,
                          extra=[Peek()])
    # the newest two (step=15 of the session, then the newest debris) and the marker's file
    assert at_start[0] == sorted(["step=15.ckpt", f"step={done}-v1.ckpt", marked.name])
    # the fit ended by max_steps past its last save: the step's own file, then last.ckpt
    assert _marker(tmp_path)["checkpoint"] == str(ckpt / f"step={done + 2}.ckpt")
    cb, trainer3, _ = _fit(tmp_path, StepClock(), name="next")
    saves = sorted(int(p.name.split("=")[1].split(".")[0].split("-")[0])
                   for p in ckpt.glob("step=*.ckpt"))
    assert len(saves) == 2 and saves[-1] == trainer3.global_step  # its own newest two
    assert _marker(tmp_path)["checkpoint"] == str(ckpt / f"step={saves[-1]}.ckpt")
    assert (ckpt / "last.ckpt").exists()
    assert set(cb.best_k_models) <= {str(p) for p in ckpt.glob("step=*.ckpt")}


@needs_lightning
def test_lightning_keep_never_deletes_the_marked_file(tmp_path):
    """keep=1: the previous file, which the marker names until the new save's last.ckpt is
    written, is deleted only after the marker has moved (Lightning's top-1 deleted it right
    after the new step file, before last.ckpt: a kill in between left a marker naming a
    deleted file)."""
    import lightning.pytorch as L

    seen = []
    plain = L.Trainer.save_checkpoint

    def watch(self, filepath, *a, **k):
        if Path(filepath).name == "last.ckpt" and self.global_step > 5:
            named = _marker(tmp_path)["checkpoint"]
            seen.append((Path(named).name, Path(named).exists()))
        return plain(self, filepath, *a, **k)

    L.Trainer.save_checkpoint = watch
    try:
        cb, trainer, _ = _fit(tmp_path, StepClock(), keep=1)
    finally:
        L.Trainer.save_checkpoint = plain
    assert seen and all(exists for _, exists in seen), seen
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step=*.ckpt")) == \
        [f"step={trainer.global_step}.ckpt"]


@needs_lightning
def test_lightning_logs_afford_figures_to_the_logger(tmp_path):
    cb, trainer, _ = _fit(tmp_path, StepClock())
    path = Path(trainer.logger.log_dir) / "metrics.csv"
    rows = list(csv.DictReader(path.open()))
    steps = [r for r in rows if r.get("afford/step")]
    assert len(steps) == trainer.global_step
    assert [float(r["afford/step"]) for r in steps] == list(range(trainer.global_step))
    assert float(steps[-1]["afford/stop"]) == 1.0 and float(steps[0]["afford/stop"]) == 0.0
    assert float(steps[-1]["afford/predicted_step_seconds"]) == 1.0
    assert float(steps[0]["afford/chunk_seconds_left"]) == pytest.approx(19.0)


@needs_lightning
def test_lightning_drift_is_warned_though_every_step_is_logged(tmp_path):
    """Lightning logs the guard's figures at every step; steps 30 % faster than the plan's
    are warned."""
    cb, trainer, _ = _fit(tmp_path, StepClock(), budget=UNCAPPED, tick=0.7, max_steps=40)
    assert trainer.global_step == 40
    assert cb.guard.drift == pytest.approx(-0.3)
    assert [w for w in cb.guard.warnings if "30.0% faster" in w]


@needs_lightning
def test_lightning_callback_state_rides_in_the_checkpoint(tmp_path):
    import torch

    clock = StepClock()
    cb, trainer, _ = _fit(tmp_path, clock)
    state = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)
    mine = [v for k, v in state["callbacks"].items() if "AffordCallback" in k]
    assert len(mine) == 1 and mine[0]["afford"]["run"] == "cb"
    assert mine[0]["afford"]["step"] == trainer.global_step - 1
    assert mine[0]["afford"]["writes"]  # the writes it timed
    cb2, _, _ = _fit(tmp_path, StepClock(), name="again", max_steps=trainer.global_step + 2)
    assert cb2._restored["step"] == trainer.global_step - 1
    assert set(mine[0]["afford"]["writes"]) <= set(cb2.guard.write_observed)


@needs_lightning
def test_lightning_warns_when_not_resumed_from_the_marker(tmp_path):
    _fit(tmp_path, StepClock())
    cb, trainer, _ = _fit(tmp_path, StepClock(), ckpt_path=None, name="fresh")
    assert any("training starts at step 0" in w and "last confirmed save is step" in w
               for w in cb.guard.warnings)


@needs_lightning
def test_lightning_marker_is_written_only_after_last_ckpt(tmp_path):
    """A write of last.ckpt that does not return (here it raises, as a kill would end it)
    leaves the marker at the save before, though the step file of that save is written."""
    import lightning.pytorch as L

    plain = L.Trainer.save_checkpoint

    def failing(self, filepath, *a, **k):
        if Path(filepath).name == "last.ckpt" and self.global_step == 10:
            raise OSError(28, "No space left on device")
        return plain(self, filepath, *a, **k)

    L.Trainer.save_checkpoint = failing
    try:
        with pytest.raises(OSError):
            _fit(tmp_path, StepClock())
    finally:
        L.Trainer.save_checkpoint = plain
    doc = _marker(tmp_path)
    assert (doc["last_saved_step"], doc["state"]) == (4, "crashed")
    assert "No space left" in doc["error"]
    assert (tmp_path / "ckpt" / "step=10.ckpt").exists()


def test_a_guard_that_does_not_write_leaves_no_file(tmp_path):
    """Another rank of a data-parallel job: it reads the marker and times its steps, and
    writes nothing."""
    clock = StepClock()
    g = _guard(tmp_path, clock, writes=False, ledger=tmp_path / "h.tsv")
    for i in range(12):
        clock.t += 1
        g.step(i)
        if g.should_save(i):
            g.saved(i)
    g.close()
    assert list(tmp_path.iterdir()) == []


def test_a_callback_takes_a_guard_or_a_plan_not_both(tmp_path):
    from afford.core.errors import InputError
    from afford.track.driver import Driver

    with pytest.raises(InputError, match="not both"):
        Driver(_guard(tmp_path, StepClock()), budget=BUDGET)
    g = _guard(tmp_path, StepClock())
    assert Driver(g).guard.confirm == "explicit"  # a framework saves after its hook


def test_hf_a_stop_on_any_rank_stops_every_rank(monkeypatch):
    """Under torch.distributed the HF callback all-reduces the stop flag (MAX): a rank whose
    own guard says go on still stops when another says stop; alone, its own answer."""
    import types

    import torch  # noqa: F401  (imported before its distributed module is replaced)

    import afford.track.hf as hf

    calls = []

    class OtherRankStops:
        ReduceOp = types.SimpleNamespace(MAX="max")

        def is_available(self):
            return True

        def is_initialized(self):
            return True

        def get_world_size(self):
            return 2

        def all_reduce(self, t, op):
            calls.append((int(t.item()), op))
            t.fill_(1)

    assert hf.any_rank(False, "cpu") is False  # no process group here
    monkeypatch.setitem(sys.modules, "torch.distributed", OtherRankStops())
    assert hf.any_rank(False, "cpu") is True and calls == [(0, "max")]


class _OtherRankStopsAt:
    """torch.distributed with a second rank whose guard says stop after step ``at``."""

    def __init__(self, at: int, state) -> None:
        import types

        self.at, self.state = at, state
        self.ReduceOp = types.SimpleNamespace(MAX="max")

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_world_size(self):
        return 2

    def all_reduce(self, t, op):
        if self.state.global_step - 1 >= self.at:
            t.fill_(1)


@needs_tf
def test_hf_a_stop_decided_on_another_rank_is_recorded_as_stopped(tmp_path, monkeypatch):
    """The writing rank's own guard would go on; the other rank's says stop after step 6:
    rank zero stops, asks the final save, confirms it at on_save, and its marker says
    ``stopped`` (it said ``finished``, as if the run had ended without a stop)."""
    import torch  # noqa: F401  (imported before its distributed module is replaced)
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from afford.track.hf import AffordCallback

    clock = StepClock()
    cb = AffordCallback(guard=_guard(tmp_path, clock, ledger=tmp_path / "h.tsv"))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    state = TrainerState()
    monkeypatch.setitem(sys.modules, "torch.distributed", _OtherRankStopsAt(6, state))
    cb.on_train_begin(args, state, TrainerControl())
    for _ in range(12):
        clock.t += 1.0
        state.global_step += 1
        control = cb.on_step_end(args, state, TrainerControl())
        if control.should_save:
            cb.on_save(args, state, control)
        if control.should_training_stop:
            break
    cb.on_train_end(args, state, TrainerControl())
    assert state.global_step == 7 and control.should_save and control.should_log
    doc = _marker(tmp_path)
    assert (doc["state"], doc["last_saved_step"]) == ("stopped", 6)
    assert cb.guard.stopped_at == pytest.approx(7.0)
    from afford.schema import ledger

    rows = ledger.load(tmp_path / "h.tsv")
    assert [r.value for r in rows if r.quantity.endswith("stop_elapsed_seconds")] == [7.0]


def test_a_stop_now_is_a_stop_and_asks_the_final_save(tmp_path):
    clock = StepClock()
    g = _guard(tmp_path, clock, confirm="explicit")
    g.stop_now("nothing trained yet")
    assert g.stopped_at is None  # before the first step: nothing to stop after
    for i in range(3):
        clock.t += 1.0
        g.step(i)
    g.stop_now("the user's signal")
    assert g.stopped_at == 3.0 and g.should_stop()
    g.saved(2, "ckpt-2")
    g.close()
    doc = _marker(tmp_path)
    assert (doc["state"], doc["last_saved_step"], doc["checkpoint"]) == ("stopped", 2, "ckpt-2")


@needs_lightning
def test_lightning_adopts_a_last_ckpt_one_save_past_the_marker(tmp_path):
    """A kill after Lightning wrote last.ckpt and before the marker named it: the marker is a
    save behind. ckpt_path="last" resumes from last.ckpt (complete), and the guard adopts it,
    naming the step's own file (last.ckpt is rewritten at the next save)."""
    _, trainer, _ = _fit(tmp_path, StepClock())
    done = trainer.global_step
    doc = _marker(tmp_path)
    behind = {**doc, "state": "running", "last_saved_step": doc["last_saved_step"] - 5,
              "checkpoint": str(tmp_path / "ckpt" / f"step={done - 5}.ckpt")}
    (tmp_path / "resume.json").write_text(json.dumps(behind))
    cb, trainer2, _ = _fit(tmp_path, StepClock(), name="next", max_steps=done + 3)
    g = cb.guard
    assert g.indices[0] == done and g.resume_step == done
    assert g.previous.last_saved_step == done - 1
    assert not any("training starts at step" in w for w in g.warnings)
    assert _marker(tmp_path)["checkpoint"].endswith(f"step={trainer2.global_step}.ckpt")
    assert g.resume_checkpoint == str(tmp_path / "ckpt" / f"step={done}.ckpt")
