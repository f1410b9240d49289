"""A cache of what afford derives from a certificate and would otherwise derive again on
every command: the allocator replay of a certificate made before its learned model was
stored (learning it takes seconds), replays already run at a shape, and the certificate
itself as read (parsed, upgraded and validated: :func:`afford.schema.cert.load_certificate`).

Why on disk, beside no file of the user's: a certificate may sit in a read-only folder (a
shared lab folder, a mounted bucket), and nothing a user wrote is touched. Entries live in
``$AFFORD_CACHE_DIR``, else ``$XDG_CACHE_HOME/afford``, else ``~/.cache/afford``, one file
per entry, named by a hash of everything the entry is derived from (and the version of the
code that derives it), so an entry is never stale: a changed input is another name.
``AFFORD_CACHE_DIR=off`` turns the cache off.

A cache is an optimisation, never a source of truth: a missing, unreadable or corrupt entry
is recomputed, a failed write is ignored (the answer is the same, only slower), and writes
are atomic (:func:`afford.core.io.atomic_write_bytes`) so two commands writing one entry
leave one whole file.

Objects (:func:`write_object`) are pickled, and unpickling runs code: an object entry is
written readable and writable by its user alone, and read only when it still is (a regular
file, not a link, owned by the user reading it, writable by no one else); otherwise it is
recomputed. Such an entry is named by :func:`code_key` as well: a pickle holds instances of
classes, valid only for the code that defined them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import stat
import sys
from pathlib import Path

from afford.core.errors import AffordError
from afford.core.io import atomic_write_bytes
from afford.core.version import __version__

OFF = "off"


def folder(environ: dict[str, str] | None = None) -> Path | None:
    """The cache folder (not created); ``None`` when the cache is off. ``environ``: the
    environment to read (default this process's)."""
    env = os.environ if environ is None else environ
    own = env.get("AFFORD_CACHE_DIR")
    if own is not None:
        return None if own.strip().lower() in (OFF, "") else Path(own)
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afford"


def key(*parts: str | bytes) -> str:
    """A name for an entry derived from ``parts`` (each hashed with its length, so two
    splits of one text never collide)."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8") if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:40]


def _path(kind: str, name: str, suffix: str = ".json") -> Path | None:
    root = folder()
    return None if root is None else root / kind / f"{name}{suffix}"


def read(kind: str, name: str) -> str | None:
    """The entry's text, or ``None`` (absent, off, or unreadable)."""
    p = _path(kind, name)
    if p is None:
        return None
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def write(kind: str, name: str, text: str) -> bool:
    """Store the entry; ``False`` where it could not be (off, read-only, full disk)."""
    p = _path(kind, name)
    if p is None:
        return False
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(p, text.encode("utf-8"))
    except (OSError, AffordError):
        return False
    return True


OBJECT_SUFFIX = ".pickle"


@functools.lru_cache(maxsize=None)
def code_key(*folders: str) -> str:
    """A name for the code in ``folders`` of the package (each file's path, size and time of
    last change), with afford's and Python's versions: an entry derived by that code is
    another name once any of it changes, an edit included."""
    root = Path(__file__).parents[1]
    parts = [__version__, sys.version]
    for f in folders:
        for p in sorted((root / f).rglob("*")):
            if p.suffix in (".py", ".toml") and p.is_file():
                st = p.stat()
                parts.append(f"{p.relative_to(root).as_posix()}:{st.st_size}:{st.st_mtime_ns}")
    return key(*parts)


def read_object(kind: str, name: str) -> object | None:
    """The object :func:`write_object` stored, or ``None``: absent, off, unreadable, not
    this user's own (module docstring), or not unpickled (a corrupt entry)."""
    p = _path(kind, name, OBJECT_SUFFIX)
    if p is None:
        return None
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if not _own(os.fstat(f.fileno())):
                return None
            data = f.read()
    except OSError:
        return None
    try:
        return pickle.loads(data)
    except Exception:  # any failure to unpickle is a corrupt entry: recomputed
        return None


def _own(st: os.stat_result) -> bool:
    """A regular file of the user reading it that neither its group nor others may write."""
    if not stat.S_ISREG(st.st_mode):
        return False
    if not hasattr(os, "getuid"):  # Windows: no owner to compare; the folder is the user's
        return True
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def write_object(kind: str, name: str, obj: object) -> bool:
    """Store ``obj`` pickled, readable and writable by this user alone; ``False`` where it
    could not be (off, read-only, full disk, an object that does not pickle)."""
    p = _path(kind, name, OBJECT_SUFFIX)
    if p is None:
        return False
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(p, data, mode=0o600)
    except (OSError, AffordError, pickle.PicklingError, TypeError, AttributeError):
        return False
    return True
