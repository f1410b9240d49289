"""A cache of what afford derives from a certificate and would otherwise derive again on
every command: the allocator replay of a certificate made before its learned model was
stored (learning it takes seconds), and replays already run at a shape.

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
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from afford.core.errors import AffordError
from afford.core.io import atomic_write_bytes

OFF = "off"


def folder() -> Path | None:
    """The cache folder (not created); ``None`` when the cache is off."""
    own = os.environ.get("AFFORD_CACHE_DIR")
    if own is not None:
        return None if own.strip().lower() in (OFF, "") else Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
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


def _path(kind: str, name: str) -> Path | None:
    root = folder()
    return None if root is None else root / kind / f"{name}.json"


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
