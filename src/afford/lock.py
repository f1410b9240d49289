"""One writer at a time for a file that is read, changed and written back (issue 14: 16
concurrent ``afford history add`` on one ledger kept 8 readings, all exiting 0).

Design: an advisory ``fcntl.flock`` on a sidecar file ``.NAME.lock`` beside ``NAME``, held
across the whole read-modify-write (load, merge, atomic write). Readers take no lock: every
write is an atomic rename, so a reader sees the old file or the new one.

- The kernel releases the lock when its holder dies, ``kill -9`` included, so a lock is
  never stale. The sidecar file stays (unlinking it would race with a waiter holding it
  open); it is empty and made with the umask's mode.
- A writer waits up to :data:`LOCK_TIMEOUT_S`, then is refused with an
  :class:`~afford.errors.InputError` (exit 2) that names the lock. Nothing is written.
- Having taken the lock, the holder removes the target's afford temp files at any age
  (:func:`afford.io.clean_temps_of`): every writer of the file holds this lock, so any
  such temp is a dead writer's.
- Scope: POSIX (Linux, macOS). On Linux ``flock`` over NFS is mapped to POSIX byte-range
  locks (kernel 2.6.12 and later); other network filesystems may lock only per machine.
  Windows is not a target: where ``fcntl`` is missing the lock is a no-op and concurrent
  writers can lose each other's changes, as before.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from afford.errors import InputError
from afford.io import clean_temps_of, folder_of, os_failure

try:
    import fcntl
except ImportError:  # Windows: see the module docstring
    fcntl = None  # type: ignore[assignment]

LOCK_TIMEOUT_S = 30.0  # seconds a writer waits for the lock before it is refused
_POLL_S = (0.002, 0.05)  # first and longest sleep between tries


def lock_path(target: str | os.PathLike) -> Path:
    t = Path(target)
    return folder_of(t) / f".{t.name}.lock"


def _acquire(fd: int, target: Path, lock: Path, timeout_s: float) -> None:
    deadline, pause = time.monotonic() + timeout_s, _POLL_S[0]
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError as exc:
            raise InputError(f"cannot lock {target} ({lock.name}): "
                             f"{exc.strerror or exc}") from None
        if time.monotonic() >= deadline:
            raise InputError(f"{target} is being written by another process: its lock "
                             f"{lock} was held for over {timeout_s:g} s; try again")
        time.sleep(pause)
        pause = min(pause * 2, _POLL_S[1])


@contextlib.contextmanager
def locked(path: str | os.PathLike, *, timeout_s: float | None = None) -> Iterator[Path]:
    """Hold the write lock of ``path`` for the body of the ``with``; yields ``path``.

    InputError (exit 2) when the folder is missing or unwritable, or the lock stays taken
    for ``timeout_s`` (default :data:`LOCK_TIMEOUT_S`)."""
    target = Path(path)
    folder = folder_of(target)
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: the folder {folder} does not exist")
    if fcntl is None:
        yield target
        return
    lock = lock_path(target)
    try:
        # read-only is enough for flock, so a lock another user created can be shared
        fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise os_failure(target, exc, f"opening its lock file {lock.name}") from None
    try:
        _acquire(fd, target, lock, LOCK_TIMEOUT_S if timeout_s is None else timeout_s)
        clean_temps_of(target, max_age_s=0)
        yield target
    finally:
        os.close(fd)  # releases the lock
