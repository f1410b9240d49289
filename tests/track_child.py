"""Training sessions under afford.track for the SIGKILL tests
(tests/integration/test_track_kill.py): the plain loop, a transformers ``Trainer`` and a
Lightning ``Trainer``, each resuming from what the guard's marker names.

The "model" proves its lineage: a buffer ``seen`` = (sum of the step indices trained, number
of steps trained) is advanced by every training step and saved in every checkpoint, so a
resumed session checks that the marker's checkpoint is exactly step ``resume_step - 1``'s
(``seen == (R (R - 1) / 2, R)``) and that no step was lost or trained twice.

Each session prints, one line each, flushed: ``resumed R ok`` (or ``resumed R BAD ...``),
``marker M`` (the marker's resume step), ``previous HOW LOST FLUSHED`` (how the session
before ended, as the guard reports it),
``first K`` (the first step it trains), ``done K`` after every step, ``saving`` / ``written``
around every checkpoint write, ``end`` when it returns.

    python tests/track_child.py run {loop,hf,lightning} DIR [--chunk S] [--save-every N]
    python tests/track_child.py zygote {hf,hf-ddp,lightning}   # imports once, then forks

The zygote reads ``run DIR OUT [--chunk S]`` lines on stdin, forks a session per line with
its stdout on the file OUT, answers ``pid P`` and, when the session ends (or is killed),
``exit P STATUS``. The forked session is a real process killed by a real SIGKILL; only the
interpreter start and the framework imports (seconds each) happen once, before the fork.
``hf-ddp`` forks two ranks per session with torchrun's environment (a gloo process group on
this machine, a free port each session): the Trainer under data parallelism, whose rank 0
alone writes the marker; its output is rank 0's, and a kill kills both ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

SAVE_EVERY = 5
WIDTH = 256  # a 256 x 256 linear layer with Adam: checkpoints of about 1 MB


def say(*parts) -> None:
    print(*parts, flush=True)


def budget(run: str, chunk: float | None, save_every: int):
    from afford.track import Budget

    return Budget(chunk_seconds=chunk, save_every=save_every, write_seconds=0.005,
                  step_seconds=0.002, run=run)


def report_previous(guard) -> None:
    p = guard.previous
    if p is None:
        say("previous none -1 -1")
    else:
        say("previous", p.how, -1 if p.steps_lost is None else p.steps_lost,
            -1 if p.flushed_step is None else p.flushed_step)


def announced(write):
    """``write`` (a framework's checkpoint write) between ``saving`` and ``written`` lines."""

    def wrapped(*a, **k):
        say("saving")
        write(*a, **k)
        say("written")

    return wrapped


def check_seen(seen, r: int) -> None:
    total, count = float(seen[0]), float(seen[1])
    ok = (total, count) == (r * (r - 1) / 2, float(r))
    say(f"resumed {r}", "ok" if ok else f"BAD seen=({total}, {count})")


# ---------------------------------------------------------------- the plain loop


def loop_session(folder: Path, chunk: float | None, save_every: int) -> None:
    import time

    from afford.core.io import atomic_write_text
    from afford.track import Session

    guard = Session(budget=budget("kill-loop", chunk, save_every),
                    marker=folder / "resume.json", ledger=folder / "history.tsv")
    r = guard.resume_step
    seen = [0.0, 0.0]
    if r > 0:
        seen = json.loads((folder / f"ckpt-{r - 1}.json").read_text())["seen"]
    say("marker", r)
    check_seen(seen, r)
    report_previous(guard)

    def save(step: int) -> str:
        say("saving")
        path = folder / f"ckpt-{step}.json"
        atomic_write_text(path, json.dumps({"step": step, "seen": seen}) + " " * 200_000)
        for old in sorted(folder.glob("ckpt-*.json"),
                          key=lambda p: int(p.stem.split("-")[1]))[:-2]:
            old.unlink()
        say("written")
        return str(path)

    say("first", r)
    for step in range(r, r + 10**7):
        time.sleep(0.002)  # the training step
        seen = [seen[0] + step, seen[1] + 1]
        guard.step(step)
        say("done", step)
        if guard.should_save(step):
            save(step)
        if guard.should_stop():
            guard.saved(step, save(step))
            break
    guard.close()


# ---------------------------------------------------------------- the models


def counter_module(torch):
    class Counter(torch.nn.Module):
        """One linear layer; ``seen`` counts the training steps (one forward each)."""

        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(WIDTH, WIDTH)
            self.register_buffer("seen", torch.zeros(2, dtype=torch.float64))

        def forward(self, x, labels=None):
            if self.training:
                with torch.no_grad():
                    self.seen[0] += self.seen[1]
                    self.seen[1] += 1
            return {"loss": self.lin(x).pow(2).mean()}

    return Counter


# ---------------------------------------------------------------- transformers


def hf_session(folder: Path, chunk: float | None, save_every: int) -> None:
    import torch
    from safetensors.torch import load_file
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from afford.track.hf import AffordCallback

    class Tick(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step - 1 == r:  # the guard has adopted what the Trainer resumed
                report_previous(cb.guard)
            say("done", state.global_step - 1)

    cb = AffordCallback(budget=budget("kill-hf", chunk, save_every),
                        marker=folder / "resume.json", ledger=folder / "history.tsv")
    m = cb.guard.resume_step
    say("marker", m)
    r, resume = newest_complete(folder / "out", m, cb.checkpoint)
    seen = load_file(str(Path(resume) / "model.safetensors"))["seen"] if r else [0, 0]
    if r not in (m, m + save_every):
        say(f"resumed {r} BAD the newest complete checkpoint is step {r}, the marker {m}")
    check_seen(seen, r)
    torch.manual_seed(0)
    data = [{"x": x} for x in torch.randn(64, WIDTH)]
    args = TrainingArguments(output_dir=str(folder / "out"), max_steps=10**7,
                             per_device_train_batch_size=4, save_strategy="no",
                             save_total_limit=2, logging_strategy="steps", logging_steps=5,
                             report_to=[], use_cpu=True, disable_tqdm=True,
                             remove_unused_columns=False, dataloader_num_workers=0,
                             ddp_backend="gloo" if "WORLD_SIZE" in os.environ else None)
    trainer = Trainer(model=counter_module(torch)(), args=args, train_dataset=data,
                      callbacks=[cb, Tick()])
    trainer._save_checkpoint = announced(trainer._save_checkpoint)
    say("first", r)
    trainer.train(resume_from_checkpoint=True if resume != cb.checkpoint else resume)
    logged = [e for e in trainer.state.log_history if "afford/step" in e]
    say("logged", len(logged))


def newest_complete(out: Path, marker_step: int, named: str | None) -> tuple[int, str | None]:
    """(resume step, folder): the Trainer's idiom, ``resume_from_checkpoint=True``, where
    its newest folder is complete (it may be one save past the marker: a kill after the
    Trainer wrote it, before on_save named it); the marker's folder otherwise (after a kill
    inside the write, ``True`` would load an incomplete folder)."""
    from transformers.trainer_utils import get_last_checkpoint

    from afford.track.hf import complete_checkpoint

    newest = get_last_checkpoint(str(out)) if out.is_dir() else None
    step = int(newest.rsplit("-", 1)[1]) if newest else 0
    if step > marker_step and complete_checkpoint(out, step) == newest:
        return step, newest
    return marker_step, named


# ---------------------------------------------------------------- Lightning


def lightning_session(folder: Path, chunk: float | None, save_every: int) -> None:
    import lightning.pytorch as L
    import torch
    from lightning.pytorch.loggers import CSVLogger

    from afford.track.lightning import AffordCallback

    Counter = counter_module(torch)

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Counter()

        def training_step(self, batch, batch_idx):
            return self.net(batch[0])["loss"]

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    class Tick(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step - 1 == r:  # the guard has read the resumed checkpoint
                report_previous(cb.guard)
            say("done", trainer.global_step - 1)

    cb = AffordCallback(budget=budget("kill-lightning", chunk, save_every),
                        dirpath=folder / "ckpt", keep=2, marker=folder / "resume.json",
                        ledger=folder / "history.tsv")
    cb.checkpoint  # noqa: B018  (the guard is made and reads the marker)
    m = cb.guard.resume_step
    say("marker", m)
    r, seen = 0, [0, 0]
    if m:
        # ckpt_path="last" resumes from last.ckpt: the marker's save, or one save on when a
        # kill came after last.ckpt was written and before the marker named it
        last = torch.load(folder / "ckpt" / "last.ckpt", map_location="cpu", weights_only=False)
        r = last["global_step"]
        seen = last["state_dict"]["net.seen"]
        named = torch.load(cb.checkpoint, map_location="cpu", weights_only=False)
        if r not in (m, m + save_every) or named["global_step"] != m:
            say(f"resumed {r} BAD last.ckpt is step {r}, the marker's file step "
                f"{named['global_step']}, the marker {m}")
    check_seen(seen, r)
    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, WIDTH)),
                                       batch_size=4)
    trainer = L.Trainer(max_steps=10**7, callbacks=[Tick(), cb], accelerator="cpu", devices=1,
                        logger=CSVLogger(folder / "logs"), log_every_n_steps=5,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.save_checkpoint = announced(trainer.save_checkpoint)
    say("first", r)
    trainer.fit(Model(), data, ckpt_path="last")


SESSIONS = {"loop": loop_session, "hf": hf_session, "hf-ddp": hf_session,
            "lightning": lightning_session}


# ---------------------------------------------------------------- the zygote


def prepare(kind: str) -> None:
    """Import what the sessions of ``kind`` use, and quiet the frameworks' banners."""
    import logging
    import warnings

    import afford.track  # noqa: F401

    if kind == "loop":
        return
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    if kind in ("hf", "hf-ddp"):
        import safetensors.torch  # noqa: F401
        import transformers
        import transformers.trainer  # noqa: F401

        transformers.logging.set_verbosity_error()
    elif kind == "lightning":
        import lightning.pytorch  # noqa: F401
        from lightning.pytorch.loggers import CSVLogger  # noqa: F401

        for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
            logging.getLogger(name).setLevel(logging.ERROR)
    import afford.schema.ledger  # noqa: F401
    import afford.track.hf  # noqa: F401
    import afford.track.lightning  # noqa: F401


def zygote(kind: str) -> int:
    """Fork a session per ``run`` line: one process, or for ``hf-ddp`` one per rank (rank
    0's output on OUT, rank r's on OUT.rank<r>); answers ``pid P0 [P1]`` and, once every
    rank has ended, ``exit P0 STATUS0 [STATUS1]``."""
    prepare(kind)
    say("ready")
    ranks = 2 if kind == "hf-ddp" else 1
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] != "run":
            continue
        a = session_args(parts[1:])
        env = rank_env(ranks)
        pids = [fork_session(kind, a, a.out if r == 0 else f"{a.out}.rank{r}", env[r])
                for r in range(ranks)]
        say("pid", *pids)
        say("exit", pids[0], *[os.waitpid(pid, 0)[1] for pid in pids])
    return 0


def rank_env(ranks: int) -> list[dict[str, str]]:
    """torchrun's environment for each rank of a job on this machine (a free port each
    session); nothing for one process."""
    if ranks == 1:
        return [{}]
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(ranks),
             "LOCAL_WORLD_SIZE": str(ranks), "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": str(port)} for r in range(ranks)]


def fork_session(kind: str, a: argparse.Namespace, out: str, env: dict[str, str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        os.environ.update(env)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = sys.stdout
        SESSIONS[kind](Path(a.dir), a.chunk, a.save_every)
        say("end")
    except BaseException as exc:  # the session's error, in its output
        print(f"error {type(exc).__name__}: {exc}", flush=True)
        code = 1
    finally:
        sys.stdout.flush()
        os._exit(code)


def session_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--chunk", type=float, default=None)
    ap.add_argument("--save-every", type=int, default=SAVE_EVERY)
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    if argv[0] == "zygote":
        return zygote(argv[1])
    kind, a = argv[1], session_args(argv[2:])
    prepare(kind)
    SESSIONS[kind](Path(a.dir), a.chunk, a.save_every)
    say("end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
