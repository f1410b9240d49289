"""SIGKILL at random points, inside the framework's save too, for each integration of the loop
guard: the plain loop, a transformers ``Trainer`` and a Lightning ``Trainer``
(tests/track_child.py). A lineage of sessions on one folder: each session is killed at a
random moment (half the kills aimed into a checkpoint write: a random delay after the
session prints ``saving``), and the next one resumes from the marker the killed one left.
After every kill the next session checks that the marker's checkpoint loads and is exactly
the checkpoint of step ``resume_step - 1`` (its buffer holds the sum and count of the steps
trained), and the test checks that:

- the marker never names a step that was not trained, and a kill loses at most one save
  interval;
- the guard's report of the killed session (issue 32 item 7) says ``killed`` and counts the
  steps lost as the killed session's own output shows them (within one step: the print and
  the step log are two stores);
- its readings reached the ledger up to its last confirmed save (issue 33 item 4);
- the next session has swept the marker's interrupted temp files before it trains;
- a last session stops cleanly at its cap, and the ledger is whole.

The plain loop runs in fresh interpreters. The frameworks' sessions are forked from a
zygote that imported torch and the framework once (seconds per import on this machine);
each session is still a real process killed by a real SIGKILL. ``AFFORD_KILLS`` sets the
kills per integration: 12 by default, so the suite stays within minutes; the campaign the
issue asks for is ``AFFORD_KILLS=50`` (about 4 minutes on a 2-core box)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from afford.schema import ledger
from tests.paths import ROOT, SRC, TESTS

CHILD = TESTS / "track_child.py"
SAVE_EVERY = 5
KILLS = int(os.environ.get("AFFORD_KILLS", "12"))


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), str(ROOT), os.environ.get("PYTHONPATH", "")])}


class Output:
    """A session's output lines with the time each was seen."""

    def __init__(self, others: tuple[Path, ...] = ()) -> None:
        self.lines: list[tuple[float, str]] = []
        self.others = others  # the other ranks' output files, read only to explain a failure

    def others_tail(self) -> str:
        """The last lines each other rank wrote, for a failure's message."""
        return "".join(f"\n{p.name}: " + " | ".join(
            p.read_text(errors="replace").splitlines()[-5:]) for p in self.others
            if p.is_file())

    def feed(self, line: str) -> None:
        self.lines.append((time.monotonic(), line.rstrip("\n")))

    def first(self, word: str) -> list[str] | None:
        for _, line in self.lines:
            if line.split()[:1] == [word]:
                return line.split()
        return None

    def done(self) -> list[int]:
        """The steps the child said it finished; a line the kill cut short ("done " with its
        number unwritten) says nothing."""
        return [int(m.group(1)) for _, x in self.lines
                if (m := re.fullmatch(r"done (\d+)", x))]

    def in_save(self) -> bool:
        """Whether the last checkpoint write it began had not returned."""
        marks = [x for _, x in self.lines if x in ("saving", "written")]
        return bool(marks) and marks[-1] == "saving"


class Fresh:
    """Sessions in fresh interpreters (the plain loop)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def start(self, folder: Path, chunk: float | None = None):
        extra = [] if chunk is None else ["--chunk", str(chunk)]
        p = subprocess.Popen([sys.executable, str(CHILD), "run", self.kind, str(folder),
                              *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=_env())
        out = Output()
        threading.Thread(target=lambda: [out.feed(x) for x in iter(p.stdout.readline, "")],
                         daemon=True).start()
        return p.pid, out, p

    def wait(self, handle) -> None:
        handle.wait(timeout=120)

    def kill(self, pid: int, handle) -> None:
        os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        pass


class Zygote:
    """Sessions forked from one process that imported the framework (tests/track_child.py);
    for ``hf-ddp`` two ranks a session, rank 0's output followed, both killed (rank 0,
    the writer, first: a machine taken away)."""

    def __init__(self, kind: str, scratch: Path) -> None:
        self.scratch, self.n = scratch, 0
        self.p = subprocess.Popen([sys.executable, str(CHILD), "zygote", kind],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=_env())
        assert self.p.stdout.readline().strip() == "ready"

    def start(self, folder: Path, chunk: float | None = None):
        self.n += 1
        path = self.scratch / f"out-{self.n}.txt"
        extra = "" if chunk is None else f" --chunk {chunk}"
        self.p.stdin.write(f"run {folder} {path}{extra}\n")
        self.p.stdin.flush()
        pids = [int(x) for x in self.p.stdout.readline().split()[1:]]
        pid = pids[0]
        out = Output(tuple(Path(f"{path}.rank{r}") for r in range(1, len(pids))))
        self._ended = None

        def follow() -> None:
            while not path.exists():
                time.sleep(0.002)
            with open(path) as f:
                while True:
                    line = f.readline()
                    if line:
                        out.feed(line)
                    elif self._ended == pid:
                        return
                    else:
                        time.sleep(0.002)

        threading.Thread(target=follow, daemon=True).start()
        return pid, out, pids

    def wait(self, pids) -> None:
        line = self.p.stdout.readline().split()
        assert line[:2] == ["exit", str(pids[0])], line
        self._ended = pids[0]
        time.sleep(0.05)

    def kill(self, pid: int, pids) -> None:
        for p in pids:
            os.kill(p, signal.SIGKILL)

    def close(self) -> None:
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):  # a failed test left a session running
            self.p.kill()
            self.p.wait()


def _wait_for(out: Output, word: str, deadline: float = 120.0) -> list[str]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline:
        found = out.first(word)
        if found:
            return found
        error = out.first("error")
        assert error is None, " ".join(error) + out.others_tail()
        time.sleep(0.005)
    raise AssertionError(f"no {word!r} line in {deadline} s: {out.lines[-5:]}"
                         + out.others_tail())


def _kill_in_save(out: Output, rng: random.Random, writes: list[float]) -> None:
    """Kill a random delay after the next ``saving`` line (within the writes seen)."""
    seen = len([x for _, x in out.lines if x == "saving"])
    t0 = time.monotonic()
    while len([x for _, x in out.lines if x == "saving"]) == seen and \
            time.monotonic() - t0 < 30:
        time.sleep(0.0005)
    typical = sorted(writes)[len(writes) // 2] if writes else 0.01
    time.sleep(rng.uniform(0.0, 1.2 * typical))


def _write_seconds(out: Output) -> list[float]:
    begun, spans = None, []
    for t, line in out.lines:
        if line == "saving":
            begun = t
        elif line == "written" and begun is not None:
            spans.append(t - begun)
            begun = None
    return spans


def _lineage(runner, folder: Path, kills: int, seed: int) -> dict:
    rng = random.Random(seed)
    killed_done = last_done = -1
    last_resume, stats = 0, {"kills": 0, "in_save": 0, "lost": [], "adopted": 0,
                             "debris": 0}
    writes: list[float] = []
    t_start = time.monotonic()
    for k in range(kills + 1):
        final = k == kills
        # the last session's cap: 2 s leaves a second or more of steps before it stops
        pid, out, handle = runner.start(folder, chunk=2.0 if final else None)
        r = int(_wait_for(out, "resumed")[1])
        assert _wait_for(out, "resumed")[2] == "ok", " ".join(_wait_for(out, "resumed"))
        m = int(_wait_for(out, "marker")[1])
        left = [p.name for p in folder.glob(".resume.json.afford-*.tmp")]
        assert left == [], f"kill {k}: the marker's interrupted writes were not swept: {left}"
        how, lost, flushed = _wait_for(out, "previous")[1:]
        if k:
            assert r - 1 <= last_done, f"kill {k}: the marker names step {r - 1}, " \
                                       f"but only {last_done} was trained"
            lost_seen = killed_done - (r - 1)  # the killed session's own last step
            assert 0 <= lost_seen <= SAVE_EVERY, f"kill {k}: lost {lost_seen} steps"
            assert how == "killed", f"kill {k}: the previous session is reported {how}"
            assert abs(int(lost) - lost_seen) <= 1, (k, lost, lost_seen)
            if m > last_resume:  # it saved: its readings up to the marker's save are kept
                assert int(flushed) >= m - 1, (k, flushed, m)
            stats["adopted"] += r != m  # Lightning's last.ckpt one save past the marker
            stats["lost"].append(lost_seen)
        assert int(_wait_for(out, "first")[1]) == r
        if final:
            runner.wait(handle)
            assert out.first("end") is not None, out.lines[-5:]
            assert out.done()[0] == r
            break
        _wait_for(out, "done")
        assert out.done()[0] == r, f"kill {k}: resumed at step {out.done()[0]}, not {r}"
        if k % 2:
            _kill_in_save(out, rng, writes)
        else:
            # a random moment in the session's first 0.8 s of steps (was 1.5 s): some in its
            # first ledger flush (the plain loop's takes ~0.3 s after its first save), most
            # among the later steps and saves (a save every 5 steps)
            time.sleep(rng.uniform(0.05, 0.8))
        runner.kill(pid, handle)
        runner.wait(handle)
        time.sleep(0.02)
        stats["kills"] += 1
        stats["debris"] += len(list(folder.glob(".resume.json.afford-*.tmp")))
        stats["in_save"] += out.in_save()
        writes += _write_seconds(out)
        done = out.done()
        assert done, f"kill {k}: no step trained"
        killed_done, last_done, last_resume = done[-1], max(last_done, done[-1]), r
    stats["seconds"] = time.monotonic() - t_start
    return stats


def _check_end(folder: Path, stats: dict, name: str) -> None:
    rows = ledger.load(folder / "history.tsv")  # whole after every kill
    assert any(r.quantity.endswith("/warm_step_seconds") for r in rows)
    print(f"\n{name}: {stats['kills']} SIGKILLs ({stats['in_save']} inside a checkpoint "
          f"write; {stats['adopted']} resumed one save past the marker; {stats['debris']} "
          f"interrupted marker writes swept by the next session), at most "
          f"{max(stats['lost'])} steps lost, {stats['seconds']:.0f} s, "
          f"{len(rows)} ledger readings; load {os.getloadavg()[0]:.1f}")


def _run(runner, folder: Path, seed: int, name: str, kept: str | None = None) -> None:
    """``kept``: the glob of the checkpoints the framework keeps (2 of them, the child's
    keep), counted after the lineage's clean last session, killed sessions' files and all."""
    try:
        stats = _lineage(runner, folder, KILLS, seed=seed)
    finally:
        runner.close()
    _check_end(folder, stats, name)
    assert stats["in_save"] >= KILLS // 5  # the aimed kills do land inside writes
    if kept is not None:
        left = sorted(p.name for p in folder.glob(kept))
        assert len(left) == 2, f"keep=2, but {len(left)} checkpoints are left: {left}"
        named = json.loads((folder / "resume.json").read_text())["checkpoint"]
        assert Path(named).name in left


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow  # fresh interpreters: under 1 s a kill
def test_sigkill_the_plain_loop(tmp_path):
    _run(Fresh("loop"), tmp_path, 15, "plain loop")


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or
                    importlib.util.find_spec("accelerate") is None,
                    reason="needs transformers and accelerate (afford[hf])")
def test_sigkill_a_transformers_trainer(tmp_path):
    (tmp_path / "run").mkdir()
    _run(Zygote("hf", tmp_path), tmp_path / "run", 29, "transformers Trainer",
         kept="out/checkpoint-*")


# In the main lane. Under load (one of three runs in the second lane, 2026-12-06) a session's
# rank 0 read "Connection reset by peer": rank 1 had died resuming, on an EOFError from its
# rng_state_1.pth, torn by the kill in a folder afford judged complete. Since afford.track.hf's
# complete_checkpoint checks that every torch.save file is whole, six campaigns of 30 kills
# beside a busy loop passed. A failure names what the other ranks wrote last.
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or
                    importlib.util.find_spec("accelerate") is None,
                    reason="needs transformers and accelerate (afford[hf])")
def test_sigkill_a_transformers_trainer_under_ddp(tmp_path):
    """Two ranks (gloo) killed together: the marker, written by rank 0 alone, obeys the
    same bound, and the last session's stop is recorded on rank 0 whichever rank decided."""
    (tmp_path / "run").mkdir()
    _run(Zygote("hf-ddp", tmp_path), tmp_path / "run", 41, "transformers Trainer, DDP",
         kept="out/checkpoint-*")
    doc = json.loads((tmp_path / "run" / "resume.json").read_text())
    assert doc["state"] == "stopped"


@pytest.mark.apart  # the second lane (tests/second_lane.py): no timing asserted
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("lightning") is None,
                    reason="needs Lightning (afford[lightning])")
def test_sigkill_a_lightning_trainer(tmp_path):
    (tmp_path / "run").mkdir()
    _run(Zygote("lightning", tmp_path), tmp_path / "run", 33, "Lightning Trainer",
         kept="ckpt/step=*.ckpt")
