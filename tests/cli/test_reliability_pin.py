"""What a pin hashes (issue 14, item 7): links inside a folder are hashed as links and never
followed out; links leaving it, dangling links, unreadable entries and special files are
exit 2 naming the entry; nothing is skipped."""

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from afford.core.errors import InputError
from afford.schema import manifest as mf
from tests.reliability import cli, one_line_error


def _pin(*args):
    return cli("pin", *map(str, args))


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_bytes(b"one")
    (d / "sub" / "b.txt").write_bytes(b"two")
    (tmp_path / "outside.txt").write_bytes(b"not ours")
    (tmp_path / "outdir").mkdir()
    return d


def _h(b):
    return hashlib.sha256(b).hexdigest()


def test_a_link_inside_is_hashed_as_a_link_not_followed(data):
    (data / "link.txt").symlink_to("sub/b.txt")
    (data / "sublink").symlink_to("sub", target_is_directory=True)
    digest, size, n = mf.sha256_tree(data)
    lines = (f"a.txt\0{_h(b'one')}\nlink.txt\0link:sub/b.txt\nsub/b.txt\0{_h(b'two')}\n"
             "sublink\0link:sub\n")
    assert (digest, size, n) == (_h(lines.encode()), 6, 2)
    (data / "link.txt").unlink()
    (data / "link.txt").symlink_to("a.txt")  # retargeted: the pin sees it
    assert mf.sha256_tree(data)[0] != digest


def test_a_link_to_the_folder_itself_is_a_link_not_a_loop(data):
    (data / "self").symlink_to(".", target_is_directory=True)
    assert mf.sha256_tree(data)[2] == 2


@pytest.mark.parametrize("make", [
    lambda d: (d / "ext.txt").symlink_to(d.parent / "outside.txt"),
    lambda d: (d / "sub" / "ext.txt").symlink_to("../../outside.txt"),
    lambda d: (d / "extdir").symlink_to(d.parent / "outdir", target_is_directory=True),
    lambda d: (d / "up").symlink_to("..", target_is_directory=True),
])
def test_a_link_leaving_the_folder_is_refused_naming_it(data, make):
    make(data)
    r = _pin(data, "-o", data.parent / "m.json")
    assert r.exit_code == 2 and one_line_error(r), r.output
    assert "a link leaving the pinned folder" in r.stderr
    assert not (data.parent / "m.json").exists()


@pytest.mark.parametrize("make", [
    lambda d: (d / "gone").symlink_to("no-such-file"),
    lambda d: ((d / "l1").symlink_to("l2"), (d / "l2").symlink_to("l1")),
])
def test_a_dangling_or_looping_link_is_refused(data, make):
    make(data)
    with pytest.raises(InputError, match="leads nowhere"):
        mf.pin_path(data)


def test_a_fifo_is_refused_not_skipped(data):
    os.mkfifo(data / "sub" / "pipe")
    with pytest.raises(InputError, match=r"sub/pipe: not a file, folder or link"):
        mf.pin_path(data)


def test_a_path_given_as_a_link_is_resolved(data, tmp_path):
    (tmp_path / "data-link").symlink_to(data, target_is_directory=True)
    (tmp_path / "file-link").symlink_to(data / "a.txt")
    assert mf.pin_path(tmp_path / "data-link").sha256 == mf.pin_path(data).sha256
    assert mf.pin_path(tmp_path / "file-link").sha256 == _h(b"one")


def test_unreadable_entries_are_errors_not_skips(data, monkeypatch):
    """Simulated (this may run as root, for whom nothing is unreadable): a folder whose
    listing fails and a file whose open fails; see the next test for real permissions."""
    real_scandir = os.scandir

    def scandir(path="."):
        if Path(path) == data / "sub":
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r = _pin(data, "-o", data.parent / "m.json")
    assert r.exit_code == 2 and one_line_error(r) and "sub: cannot read it" in r.stderr
    monkeypatch.undo()

    def no_open(path, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(mf, "open", no_open, raising=False)
    for target in (data, data / "a.txt"):
        r = _pin(target, "-o", data.parent / "m.json")
        assert r.exit_code == 2 and one_line_error(r) and "cannot read it" in r.stderr


def _as_nobody(job):
    """Run ``job`` where permissions bite: as uid 65534 (nobody) in a forked child when
    this is root, else here. Returns what the job returned (a JSON-able value)."""
    if os.geteuid() != 0:
        return job()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.write(wfd, json.dumps(job()).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd) as fh:
        out = fh.read()
    os.waitpid(pid, 0)
    return json.loads(out)


@pytest.mark.parametrize("what", ["file", "folder", "top"])
def test_really_unreadable_entries_are_exit_2(what):
    base = Path(tempfile.mkdtemp(prefix="afford-rel-"))  # nobody must reach it
    try:
        base.chmod(0o777)
        d = base / "data"
        (d / "sub").mkdir(parents=True)
        (d / "a.txt").write_bytes(b"one")
        (d / "sub" / "b.txt").write_bytes(b"two")
        locked = {"file": d / "sub" / "b.txt", "folder": d / "sub", "top": d / "a.txt"}[what]
        locked.chmod(0)
        pinned = d / "a.txt" if what == "top" else d

        def job():  # the library, not the runner: typer imports lazily from root's site
            try:
                mf.pin_into(base / "m.json", [mf.pin_path(pinned)])
            except InputError as exc:
                return [exc.exit_code, str(exc)]
            return [0, ""]

        code, message = _as_nobody(job)
        assert code == 2 and "\n" not in message, message
        assert message.startswith(f"{locked}: cannot read it (Permission denied)")
        assert not (base / "m.json").exists()
    finally:
        for p in base.rglob("*"):
            p.chmod(0o755)
        shutil.rmtree(base)
