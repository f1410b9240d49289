"""Concurrent writers and killed writers (issue 14, items 1 and 8).

16 processes at a time append to one ledger (5 rounds) and pin into one manifest: every
write lands, every process exits 0. A writer SIGKILLed inside its write window, or at random
moments, leaves the old file whole or the new one whole, and only afford's own debris,
which the next write removes. The fast tests fork this process (real processes, real
``flock``, the CLI through its runner); the slow one runs ``python3 -m afford`` itself."""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest

from afford.core import io
from afford.schema import ledger
from afford.schema import manifest as mf
from tests.paths import SRC
from tests.reliability import add_args, cli, fork, fork_rounds, leftovers, main

WRITERS, ROUNDS = 16, 5
DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_16_concurrent_history_adds_over_5_rounds_lose_nothing(tmp_path):
    p = tmp_path / "h.tsv"
    codes = fork_rounds(WRITERS, ROUNDS, lambda i, k: main(*add_args(p, k * WRITERS + i)))
    assert codes == [[0] * WRITERS] * ROUNDS
    rows = ledger.load(p)
    assert sorted(r.command for r in rows) == sorted(f"writer {i}"
                                                     for i in range(WRITERS * ROUNDS))
    assert leftovers(tmp_path, {"h.tsv", ".h.tsv.lock"}) == set()


def test_16_concurrent_strikes_and_adds_keep_every_change(tmp_path):
    p = tmp_path / "h.tsv"
    for i in range(WRITERS):
        assert cli(*add_args(p, i)).exit_code == 0
    ids = [r.id for r in ledger.load(p)]

    def strike_then_add(i, _):
        return main("history", "strike", ids[i], "--reason", "test", "-f", str(p)) or \
            main(*add_args(p, 100 + i))

    assert fork_rounds(WRITERS, 1, strike_then_add) == [[0] * WRITERS]
    rows = ledger.load(p)
    assert len(rows) == 2 * WRITERS and {r.id for r in rows if r.struck} == set(ids)


def test_16_concurrent_pins_keep_every_source(tmp_path):
    out = tmp_path / "m.json"
    files = {(i, k): tmp_path / f"shard{k}-{i}.bin" for i in range(WRITERS) for k in range(2)}
    for f in files.values():
        f.write_bytes(os.urandom(64))
    codes = fork_rounds(WRITERS, 2, lambda i, k: main("pin", str(files[i, k]), "-o", str(out)))
    assert codes == [[0] * WRITERS] * 2
    m = mf.load(out)
    assert len(m.sources) == 2 * WRITERS and all(s.status == mf.PINNED for s in m.sources)
    assert {s.sha256 for s in m.sources} == {mf.sha256_file(f)[0] for f in files.values()}


# ---------------------------------------------------------------- kill -9


def _reading(i: int) -> ledger.Reading:
    return ledger.new_reading(device="cpu", command=f"killed writer {i}", value=i, unit="B",
                              quantity=f"k{i}/peak_rss_bytes", torch="2.0", commit="abc",
                              date=DATE)


def _seed(p, n=400):
    """A ledger big enough (~100 kB) that a good part of each append is the write."""
    ledger.append(p, [_reading(10**7 + i) for i in range(n)])  # apart from the others
    return {r.id for r in ledger.load(p)}


def _whole(p, before: set[str]) -> set[str]:
    """The ledger parses and holds the old readings, plus at most what was being added."""
    ids = {r.id for r in ledger.load(p)}
    assert before <= ids
    return ids


def _killed_at(stage: str, p):
    """In the child: append one reading and SIGKILL itself at ``stage`` of the write."""
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    real_write = os.write
    if stage == "mid-write":  # half the bytes are in the temp file
        os.write = lambda fd, data: (real_write(fd, bytes(data[:len(data) // 2])), die())
    elif stage == "before-rename":  # temp file complete and fsynced, not yet renamed
        os.replace = die
    elif stage == "before-dir-fsync":  # renamed, the folder not yet fsynced
        io.fsync_dir = die
    ledger.append(p, [_reading(10_000)])


@pytest.mark.parametrize("stage", ["mid-write", "before-rename", "before-dir-fsync"])
def test_a_writer_killed_inside_the_write_window_leaves_a_whole_ledger(tmp_path, stage):
    p = tmp_path / "h.tsv"
    before = _seed(p)
    pid = fork(lambda: _killed_at(stage, p))
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    after = _whole(p, before)
    new = after - before
    assert new == (set() if stage != "before-dir-fsync" else {_reading(10_000).id})
    debris = leftovers(tmp_path, {"h.tsv", ".h.tsv.lock"})
    if stage != "before-dir-fsync":
        assert len(debris) == 1 and debris.pop().startswith(".h.tsv.afford-")
    ledger.append(p, [_reading(20_000)])  # the next writer takes the lock and sweeps
    assert leftovers(tmp_path, {"h.tsv", ".h.tsv.lock"}) == set()
    assert _whole(p, after) - after == {_reading(20_000).id}


def _append_forever(p, start: int):
    for i in range(start, start + 100_000):
        ledger.append(p, [_reading(i)])


def test_writers_killed_at_random_moments_leave_a_whole_ledger(tmp_path):
    p = tmp_path / "h.tsv"
    ids = _seed(p)
    rng = random.Random(14)
    debris_seen = 0
    for k in range(12):
        pid = fork(lambda k=k: _append_forever(p, 1000 * (k + 1)))
        time.sleep(rng.uniform(0.02, 0.12))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        ids = _whole(p, ids)  # never torn, never shorter
        debris = leftovers(tmp_path, {"h.tsv", ".h.tsv.lock"})
        assert all(d.startswith(".h.tsv.afford-") and d.endswith(".tmp") for d in debris)
        debris_seen += bool(debris)
    ledger.append(p, [_reading(99_999)])
    assert leftovers(tmp_path, {"h.tsv", ".h.tsv.lock"}) == set()
    print(f"{debris_seen} of 12 kills landed inside a write")


def _payload(i: int) -> bytes:
    body = (f"{i}\n".encode() * 200_000)[:1_000_000]  # 1 MB: the write dominates the loop
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _is_whole(data: bytes) -> bool:
    digest, _, body = data.partition(b"\n")
    return hashlib.sha256(body).hexdigest().encode() == digest


def test_atomic_writes_killed_at_random_moments_leave_a_whole_file(tmp_path):
    p = tmp_path / "cert.json"
    io.atomic_write_bytes(p, _payload(0))
    rng = random.Random(8)
    debris_seen = 0
    for k in range(15):
        pid = fork(lambda k=k: [io.atomic_write_bytes(p, _payload(100 * k + j))
                                for j in range(1, 10_000)])
        time.sleep(rng.uniform(0.01, 0.08))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert _is_whole(p.read_bytes())
        debris = leftovers(tmp_path, {"cert.json"})
        assert all(d.startswith(".cert.json.afford-") and d.endswith(".tmp") for d in debris)
        debris_seen += bool(debris)
    assert debris_seen >= 3  # the kills did land inside the write window
    young = leftovers(tmp_path, {"cert.json"})
    io.atomic_write_bytes(p, _payload(1))  # a young temp may be a live writer's: kept
    assert leftovers(tmp_path, {"cert.json"}) == young
    for d in young:
        t = time.time() - 2 * io.STALE_SECONDS
        os.utime(tmp_path / d, (t, t))
    io.atomic_write_bytes(p, _payload(2))  # an hour later it is debris: swept
    assert leftovers(tmp_path, {"cert.json"}) == set() and _is_whole(p.read_bytes())
    print(f"{debris_seen} of 15 kills landed inside a write")


# ---------------------------------------------------------------- the real CLI, slow


REAL_ROUNDS = 2


@pytest.mark.slow
def test_16_real_cli_processes_over_2_rounds_lose_nothing(tmp_path):
    """``python3 -m afford history add``, 16 at a time, 2 rounds: 32 interpreters, each
    started for its one write (half a second of CPU each, so a round's 16 reach their writes
    together on 2 cores). The 5-round campaign runs above in forked writers through the same
    entry; here the interpreters are real, and 2 rounds of them (was 5: most of a minute)
    suffice: with the ledger's lock made a no-op, every one of 7 such rounds lost writes
    (each kept 7 to 14 of its 16)."""
    p = tmp_path / "h.tsv"
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    codes = []
    for k in range(REAL_ROUNDS):
        procs = [subprocess.Popen([sys.executable, "-m", "afford", *add_args(p, k * WRITERS + j)],
                                  env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE) for j in range(WRITERS)]
        for proc in procs:
            _, err = proc.communicate(timeout=600)
            codes.append(proc.returncode)
            assert proc.returncode == 0, err.decode()
    rows = ledger.load(p)
    print(json.dumps({"writers": WRITERS, "rounds": REAL_ROUNDS, "exit_0": codes.count(0),
                      "readings_kept": len(rows)}))
    assert len(rows) == WRITERS * REAL_ROUNDS
