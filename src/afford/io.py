"""Reading and writing afford's files.

Writes are atomic (docs/DESIGN.md section 5): a killed process leaves the old file whole or the new
one whole, never a torn one. Temp file in the same folder, fsync, rename, fsync folder.

Reads give one clear :class:`~afford.errors.InputError` naming the file (exit code 2), never
a traceback. Python 3.11+ reads TOML with the standard library's ``tomllib``; 3.10 with
``tomli`` (same API).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from afford.errors import InputError

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def read_text(path: str | os.PathLike, label: str) -> str:
    """The file's text; InputError ``"<label>: no such file"`` or ``"cannot read it"``."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{label}: cannot read it: {exc}") from None


def read_toml(path: str | os.PathLike, what: str) -> dict:
    """A TOML input file (``what``: "platform", "run", ...) as a dict."""
    label = f"{what} file {Path(path)}"
    return loads_toml(read_text(path, label), label)


def loads_toml(text: str, label: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{label}: not valid TOML: {exc}") from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, overwrite: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically. With ``overwrite=False`` an existing file is an
    :class:`InputError` (nothing a user wrote is overwritten without asking)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: the folder {folder} does not exist")
    if target.exists() and not overwrite:
        raise InputError(f"{target} already exists; pass --force to overwrite it, "
                         "or choose another path with --out")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)
    return target


def atomic_write_text(path: str | os.PathLike, text: str, *, overwrite: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def check_writable(path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Fail early (before a long measurement) when ``path`` cannot be written."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise InputError(f"cannot write {target}: the folder {folder} is not writable")
    if target.exists() and not overwrite:
        raise InputError(f"{target} already exists; pass --force to overwrite it, "
                         "or choose another path with --out")
    return target


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
