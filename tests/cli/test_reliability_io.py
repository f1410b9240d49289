"""Atomic writes (issue 14, items 4 and 8): write failures are one line and exit 2 or 3,
afford's own debris is recognised and swept, files get the umask's mode, an overwritten
file keeps its own."""

import errno
import os
import stat
import time

import pytest

from afford.core import io, lock
from afford.core.errors import InputError, WriteError
from tests.reliability import add_args, cli, one_line_error

HOUR = 3600


def _age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def _fail(err):
    def raiser(*a, **k):
        raise OSError(err, os.strerror(err))
    return raiser


# ---------------------------------------------------------------- modes


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umasks_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        assert io.current_umask() == umask
        p = io.atomic_write_text(tmp_path / "a.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == mode


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_an_overwritten_file_keeps_its_mode(tmp_path, mode):
    p = tmp_path / "cert.json"
    p.write_text("old")
    p.chmod(mode)
    io.atomic_write_text(p, "new", overwrite=True)  # what --force does
    assert p.read_text() == "new" and stat.S_IMODE(p.stat().st_mode) == mode


def test_no_clobber_is_atomic_and_leaves_no_temp(tmp_path):
    p = tmp_path / "a.json"
    io.atomic_write_text(p, "first", overwrite=False)
    with pytest.raises(InputError, match="already exists"):
        io.atomic_write_text(p, "second", overwrite=False)
    assert p.read_text() == "first" and [x.name for x in tmp_path.iterdir()] == ["a.json"]


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("where", ["write", "fsync"])
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EDQUOT])
def test_a_write_failing_mid_way_is_a_write_error_and_the_old_file_stays(
        tmp_path, monkeypatch, where, err):
    p = tmp_path / "h.tsv"
    p.write_text("old\n")
    monkeypatch.setattr(os, where, _fail(err))
    with pytest.raises(WriteError, match=os.strerror(err)) as info:
        io.atomic_write_text(p, "new\n")
    monkeypatch.undo()
    assert info.value.exit_code == 3 and isinstance(info.value, OSError)
    assert p.read_text() == "old\n" and [x.name for x in tmp_path.iterdir()] == ["h.tsv"]


@pytest.mark.parametrize("err", [errno.EACCES, errno.EROFS, errno.EPERM])
def test_a_folder_that_cannot_be_written_is_bad_input(tmp_path, monkeypatch, err):
    monkeypatch.setattr(io.tempfile, "mkstemp", _fail(err))
    with pytest.raises(InputError, match=os.strerror(err)):
        io.atomic_write_text(tmp_path / "a.json", "{}")


def test_a_folder_as_the_file_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="it is a folder"):
        io.atomic_write_text(tmp_path, "{}")
    with pytest.raises(InputError, match="does not exist"):
        io.atomic_write_text(tmp_path / "no" / "a.json", "{}")


@pytest.mark.parametrize("cmd", ["history", "pin"])
def test_cli_disk_full_is_exit_3_in_one_line(tmp_path, monkeypatch, cmd):
    ledger, data, out = tmp_path / "h.tsv", tmp_path / "d.bin", tmp_path / "m.json"
    data.write_bytes(b"x")
    args = add_args(ledger, 0) if cmd == "history" else ["pin", str(data), "-o", str(out)]
    monkeypatch.setattr(os, "write", _fail(errno.ENOSPC))
    r = cli(*args)
    monkeypatch.undo()
    assert r.exit_code == 3, r.output
    assert one_line_error(r) and "No space left on device" in r.stderr
    # nothing written, no temp left: only the data and the (empty) lock file remain
    assert {p.name for p in tmp_path.iterdir()} - {".h.tsv.lock", ".m.json.lock"} == {"d.bin"}


@pytest.mark.parametrize("cmd", ["history", "pin"])
def test_cli_folder_as_output_or_missing_folder_is_exit_2_in_one_line(tmp_path, cmd):
    data = tmp_path / "d.bin"
    data.write_bytes(b"x")
    for target in (tmp_path, tmp_path / "no" / "such.out"):
        args = add_args(target, 0) if cmd == "history" else ["pin", str(data), "-o",
                                                               str(target)]
        r = cli(*args)
        assert r.exit_code == 2, r.output
        assert one_line_error(r), r.stderr


def test_cli_read_only_folder_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(io.tempfile, "mkstemp", _fail(errno.EROFS))
    r = cli(*add_args(tmp_path / "h.tsv", 0))
    assert r.exit_code == 2 and one_line_error(r) and "Read-only file system" in r.stderr


# ---------------------------------------------------------------- the lock


def test_a_lock_held_too_long_refuses_with_exit_2(tmp_path, monkeypatch):
    p = tmp_path / "h.tsv"
    assert cli(*add_args(p, 0)).exit_code == 0
    monkeypatch.setattr(lock, "LOCK_TIMEOUT_S", 0.2)
    with lock.locked(p):  # another open file description: flock conflicts as across processes
        t0 = time.monotonic()
        r = cli(*add_args(p, 1))
        waited = time.monotonic() - t0
    assert r.exit_code == 2 and one_line_error(r) and "being written by another" in r.stderr
    assert 0.2 <= waited < 2
    assert cli(*add_args(p, 1)).exit_code == 0  # released: it lands
    assert len(p.read_text().splitlines()) == 3


def test_the_lock_file_sits_beside_with_the_umasks_mode(tmp_path):
    p = tmp_path / "m.json"
    with lock.locked(p) as got:
        assert got == p
    lk = lock.lock_path(p)
    assert lk == tmp_path / ".m.json.lock" and lk.stat().st_size == 0
    assert stat.S_IMODE(lk.stat().st_mode) == 0o666 & ~io.current_umask()


# ---------------------------------------------------------------- debris


def test_stale_temps_are_swept_by_pattern_and_age(tmp_path):
    old_own = tmp_path / ".h.tsv.afford-abcd1234.tmp"
    young_own = tmp_path / ".cert.json.afford-zz99_x0q.tmp"
    old_legacy = tmp_path / ".a.json.k3j4h5g6.tmp"  # before temps carried .afford-
    foreign = [tmp_path / ".h.tsv.abc.tmp", tmp_path / "notes.afford-abcd1234.tmp",
               tmp_path / ".x.afford-ABCD1234.tmp", tmp_path / "h.tsv"]
    for p in [old_own, young_own, old_legacy, *foreign]:
        p.write_text("x")
    for p in [old_own, old_legacy, *foreign]:
        _age(p, 2 * HOUR)
    link = tmp_path / ".l.afford-abcd1234.tmp"
    link.symlink_to(tmp_path / "h.tsv")
    _age(link, 2 * HOUR)
    io.atomic_write_text(tmp_path / "a.json", "{}")  # a write sweeps its folder first
    left = {p.name for p in tmp_path.iterdir()}
    assert old_own.name not in left and young_own.name in left and link.name in left
    assert old_legacy.name not in left  # the legacy name of the file being written
    assert {p.name for p in foreign} <= left


def test_the_lock_holder_sweeps_its_own_files_temps_at_any_age(tmp_path):
    mine = tmp_path / ".h.tsv.afford-abcd1234.tmp"
    other = tmp_path / ".m.json.afford-abcd1234.tmp"
    young_legacy = tmp_path / ".h.tsv.abcd1234.tmp"
    for p in (mine, other, young_legacy):
        p.write_text("x")
    with lock.locked(tmp_path / "h.tsv"):
        pass
    assert not mine.exists() and other.exists() and young_legacy.exists()


def test_stale_probe_folders_are_swept_by_pattern_and_age(tmp_path):
    old = tmp_path / ".afford-probe-abcd1234"
    young = tmp_path / ".afford-probe-zz99_x0q"
    other = tmp_path / ".afford-probe-keep"
    outside = tmp_path / "elsewhere"
    for d in (old, young, other, outside):
        d.mkdir()
    (old / "afford-probe-checkpoint.pt").write_bytes(b"x" * 100)
    (outside / "precious").write_text("x")
    link = tmp_path / ".afford-probe-linkabcd"
    link.symlink_to(outside)
    for p in (old, other, link):
        _age(p, 2 * HOUR)
    removed = io.clean_stale_probes(tmp_path)
    assert removed == [old]
    assert young.exists() and other.exists() and (outside / "precious").exists()
    assert link.is_symlink()
