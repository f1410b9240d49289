"""Interrupted writes are swept (issue 33, item 4): a ``kill -9`` inside a write leaves
``.NAME.afford-XXXXXXXX.tmp`` beside NAME (277 KB for a report); the next write to the same
folder, by any writer (a report, a certificate, the loop guard's marker, the ledger), removes
it once it is older than the lock timeout. A temp its writer still holds is never removed,
however old. The writers here are real processes killed by a real SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.core import io
from tests import fuzz_inputs as fz
from tests.paths import SRC

PAYLOAD = 300_000  # bytes: a report's size
WRITER = """
import sys, time
from afford.core.io import atomic_write_bytes
target, size = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
k = 0
while True:
    k += 1
    atomic_write_bytes(target, (str(k) * size)[:size].encode())
"""
HOLDER = """
import os, sys, time
import afford.core.io as io
def slow(fd, data, mode):
    os.write(fd, data[:10])
    print("holding", flush=True)
    time.sleep(600)
io._fill = slow
io.atomic_write_bytes(sys.argv[1], b"x" * 100)
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), os.environ.get("PYTHONPATH", "")])}


def _temps(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.afford-*.tmp"))


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def kill_inside_writes(target: Path, rng: random.Random, tries: int = 40) -> list[Path]:
    """SIGKILL a real process writing ``target`` over and over until a kill lands inside
    a write (its temp left behind); the temps left."""
    for _ in range(tries):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(PAYLOAD)],
                                env=_env(), stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.2))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left = _temps(target.parent)
        if left:
            return left
    pytest.fail(f"no kill of {tries} landed inside a write of {target.name}")


def _report(folder: Path) -> None:
    cert = fz.write(folder, "cert.json", fz.to_json(fz.cert_doc()))
    r = CliRunner().invoke(app, ["report", str(cert), "-o", str(folder / "r2.md"), "--force"])
    assert r.exit_code == 0, r.output


def _certificate(folder: Path) -> None:
    from afford.schema.cert import Certificate, save_measured

    cert = Certificate.model_validate(fz.cert_doc())
    save_measured(cert, folder / "c2.json", overwrite=True)


def _marker(folder: Path) -> None:
    from afford.track import Session
    from afford.track.budget import Budget

    Session(budget=Budget(chunk_seconds=3600.0, save_every=None, write_seconds=1.0,
                          step_seconds=None), marker=folder / "other-resume.json",
                elapsed_seconds=0.0).close()


def _ledger(folder: Path) -> None:
    r = CliRunner().invoke(app, ["history", "add", "-f", str(folder / "h2.tsv"),
                                 "--quantity", "x/loss", "--value", str(time.monotonic_ns()),
                                 "--device", "d", "--command", "c", "--commit", "a",
                                 "--torch", "2"])
    assert r.exit_code == 0, r.output


NEXT_WRITE = {"report -o": (_report, "r.md"), "a certificate": (_certificate, "cert-a.json"),
              "the loop guard's marker": (_marker, "afford-resume.json"),
              "history add": (_ledger, "h.tsv")}


@pytest.mark.parametrize("writer", list(NEXT_WRITE))
def test_a_killed_writes_temp_is_swept_by_the_next_write_to_its_folder(tmp_path, writer):
    write, name = NEXT_WRITE[writer]
    left = kill_inside_writes(tmp_path / name, random.Random(len(name)))
    assert all(p.name.startswith(f".{name}.afford-") for p in left)
    assert all(p.stat().st_size <= PAYLOAD for p in left)
    write(tmp_path)  # a young temp may be a live writer's: kept
    assert set(_temps(tmp_path)) >= set(left)
    for p in left:
        _age(p, io.LOCK_TIMEOUT_S + 1)  # older than the lock timeout: a dead writer's
    write(tmp_path)
    assert _temps(tmp_path) == [], (writer, _temps(tmp_path))
    assert (tmp_path / name).exists() or writer == "the loop guard's marker"


def test_five_kills_leave_nothing_once_swept(tmp_path):
    """The campaign's count: 5 kills inside report writes left 1.4 MB; now the next write
    leaves none of it."""
    target = tmp_path / "report.md"
    rng = random.Random(5)
    left: set[Path] = set()
    for _ in range(5):
        left |= set(kill_inside_writes(target, rng))
        for p in left:
            if p.exists():
                _age(p, io.LOCK_TIMEOUT_S + 1)
    io.atomic_write_text(tmp_path / "report.md", "next report")
    assert _temps(tmp_path) == [] and target.read_text() == "next report"


def test_a_temp_its_writer_still_holds_is_never_swept(tmp_path):
    """A live writer's temp (a real process inside its write, on a slow disk) stays
    however old it looks; once the process is killed, the next write sweeps it."""
    target = tmp_path / "slow.json"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], env=_env(),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "holding"
        (held,) = _temps(tmp_path)
        _age(held, 10 * io.STALE_SECONDS)
        io.atomic_write_text(tmp_path / "other.json", "{}")
        assert held.exists()
        assert io.clean_temps_of(target, max_age_s=0) == [] and held.exists()
    finally:
        proc.kill()
        proc.wait()
    io.atomic_write_text(tmp_path / "other.json", "{}")
    assert not held.exists()
