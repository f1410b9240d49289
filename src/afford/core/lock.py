"""One writer at a time for a file that is read, changed and written back: without it,
concurrent read-modify-writes of one file (``afford history add`` on one ledger) each exit 0
while the last rename drops the others' readings.

Design: the :mod:`filelock` package's ``FileLock`` (an advisory ``fcntl.flock`` on POSIX,
``msvcrt.locking`` on Windows) on a sidecar file ``.NAME.lock`` beside ``NAME``, held across
the whole read-modify-write (load, merge, atomic write). Readers take no lock: every write is
an atomic rename, so a reader sees the old file or the new one. What afford adds:

- The kernel releases the lock when its holder dies, ``kill -9`` included, so a lock is
  never stale. The sidecar file stays (unlinking it would race with a waiter holding it
  open); it is empty and made with the umask's mode.
- A writer waits up to :data:`LOCK_TIMEOUT_S`, then is refused with an
  :class:`~afford.core.errors.InputError` (exit 2) that names the lock. Nothing is written.
- Having taken the lock, the holder removes the target's afford temp files at any age
  (:func:`afford.core.io.clean_temps_of`): every writer of the file holds this lock, so any
  such temp is a dead writer's.
- Scope: on Linux ``flock`` over NFS is mapped to POSIX byte-range locks (kernel 2.6.12 and
  later); other network filesystems may lock only per machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from afford.core.errors import InputError
from afford.core.io import LOCK_TIMEOUT_S, clean_temps_of, current_umask, folder_of, os_failure

POLL_S = 0.01  # seconds between two tries


def lock_path(target: str | os.PathLike) -> Path:
    t = Path(target)
    return folder_of(t) / f".{t.name}.lock"


@contextlib.contextmanager
def locked(path: str | os.PathLike, *, timeout_s: float | None = None) -> Iterator[Path]:
    """Hold the write lock of ``path`` for the body of the ``with``; yields ``path``.

    InputError (exit 2) when the folder is missing or unwritable, or the lock stays taken
    for ``timeout_s`` (default :data:`LOCK_TIMEOUT_S`)."""
    target = Path(path)
    folder = folder_of(target)
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: the folder {folder} does not exist")
    lock = lock_path(target)
    wait = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
    # a new FileLock per call: its flock conflicts with any other holder, this process too
    fl = FileLock(lock, timeout=wait, mode=0o666 & ~current_umask(), thread_local=False)
    try:
        fl.acquire(poll_interval=POLL_S)
    except Timeout:
        raise InputError(f"{target} is being written by another process: its lock {lock} "
                         f"was held for over {wait:g} s; try again") from None
    except OSError as exc:
        raise os_failure(target, exc, f"opening its lock file {lock.name}") from None
    try:
        clean_temps_of(target, max_age_s=0)
        yield target
    finally:
        fl.release()
