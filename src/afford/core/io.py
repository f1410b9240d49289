"""Reading and writing afford's files.

Writes are atomic (docs/DESIGN.md section 5): a killed process leaves the old file whole or the
new one whole, never a torn one. Temp file in the same folder, fsync, rename, fsync folder.

What makes the rule hold in practice:

- **Debris is recognisable and swept.** Temp files are named ``.NAME.afford-XXXXXXXX.tmp``.
  Before a write, afford's own temps in the folder older than the lock timeout
  (:data:`LOCK_TIMEOUT_S`: those of a writer that was killed, ``kill -9`` during a report,
  a certificate or the loop guard's marker) are removed; nothing that does not match the
  pattern is touched, and a temp its writer still holds (an advisory lock on it while it
  is written) never is, whatever its age. :func:`clean_stale_probes` does the same for the
  checkpoint probe's ``.afford-probe-*`` folders, older than :data:`STALE_SECONDS`. A
  writer holding a file's lock (:mod:`afford.core.lock`) sweeps that file's temps at any age,
  since no other live writer can own one.
- **Modes.** A new file gets ``0666 & ~umask``, as ``open()`` would give it (not mkstemp's
  0600); an overwritten file keeps its mode.
- **Failures are one line and an exit code.** An ``OSError`` becomes an
  :class:`~afford.core.errors.InputError` (exit 2) when the path is bad (missing folder, a folder
  where a file goes, no permission, a read-only filesystem) and a
  :class:`~afford.core.errors.WriteError` (exit 3) when the write failed mid-way (disk full, an
  I/O error). Either way the old file is untouched and the temp file removed.

Reads give one clear :class:`~afford.core.errors.InputError` naming the file (exit code 2), never
a traceback. Python 3.11+ reads TOML with the standard library's ``tomllib``; 3.10 with
``tomli`` (same API).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from afford.core.errors import AffordError, InputError, WriteError
from afford.core.units import MAX_MAGNITUDE, UnitError, bounded

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks on the temps
    fcntl = None

STALE_SECONDS = 3600.0  # a checkpoint probe's folder this old is a dead probe's
LOCK_TIMEOUT_S = 30.0  # seconds a writer waits for a file's lock (afford.core.lock); no afford
#                        write takes so long, so an afford temp file this old is a dead
#                        writer's unless a live one still holds it (see _sweep)
TEMP_TAG = ".afford-"  # between the target's name and mkstemp's 8 random characters
_OWN_TEMP = re.compile(r"^\..+\.afford-[a-z0-9_]{8}\.tmp$")
_PROBE = re.compile(r"^\.afford-probe-[a-z0-9_]{8}$")
# errnos that say the path cannot be written at all (exit 2); any other errno while writing
# is a write that failed mid-way (exit 3)
_BAD_PATH = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM,
                       errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST,
                       errno.EINVAL})
MAX_INPUT_CHARS = 64 * 2**20  # characters of one JSON or TOML input file
MAX_DEPTH = 64  # nesting of one input file (afford's own files nest under 10)
_BRACKETS = re.compile(r"[\[\]{}]")
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV,
                            errno.EMLINK, errno.ENOSYS, errno.EACCES})


def os_failure(target: str | os.PathLike, exc: OSError, doing: str) -> AffordError:
    """The typed, one-line error for an ``OSError`` raised while ``doing`` a write."""
    why = exc.strerror or str(exc)
    if exc.errno in _BAD_PATH:
        return InputError(f"cannot write {target}: {why} ({doing})")
    return WriteError(f"writing {target} failed while {doing}: {why}; the old file, if any, "
                      "is unchanged")


def folder_of(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _exists_error(target: Path) -> InputError:
    return InputError(f"{target} already exists; pass --force to overwrite it, "
                      "or choose another path with --out")


def _check_target(target: Path, *, overwrite: bool) -> Path:
    folder = folder_of(target)
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: the folder {folder} does not exist")
    if target.is_dir():
        raise InputError(f"cannot write {target}: it is a folder; give the path of a file")
    if target.exists() and not overwrite:
        raise _exists_error(target)
    return folder


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else set
    and restored at once."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)
    os.umask(old)
    return old


def _mode_for(target: Path) -> int:
    """The mode the written file gets: an existing file's permission bits, else
    0666 & ~umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode) & 0o777
    except OSError:
        return 0o666 & ~current_umask()


def _fill(fd: int, data: bytes, mode: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # filesystems without modes; Windows
        os.fchmod(fd, mode)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _hold(fd: int) -> None:
    """Hold an advisory lock on the temp file being written (released when it is closed,
    or its process dies): a sweeper leaves a held temp alone whatever its age."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _held(path: str) -> bool:
    """Whether a live writer holds ``path`` (:func:`_hold`); False where there is no
    ``fcntl`` (the age alone then decides)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _publish(tmp: str, target: Path, *, overwrite: bool) -> None:
    """Rename ``tmp`` onto ``target``; without ``overwrite`` a hard link, which fails rather
    than replace a file that appeared meanwhile (plain check-and-rename where the filesystem
    has no hard links)."""
    if overwrite:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise _exists_error(target) from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if target.exists():
            raise _exists_error(target) from None
        os.replace(tmp, target)
        return
    with contextlib.suppress(OSError):
        os.unlink(tmp)

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib


STDIN = "-"  # a path argument that reads standard input instead of a file
_stdin_taken: list[str] = []  # the label of the input that read stdin, once per process


def read_text(path: str | os.PathLike, label: str) -> str:
    """The file's text (``-``: standard input, once per process); InputError
    ``"<label>: no such file"`` or ``"cannot read it"``."""
    if str(path) == STDIN:
        if _stdin_taken:
            raise InputError("'-' given twice: standard input can stand for one input "
                             "only")
        _stdin_taken.append(label)
        try:
            return sys.stdin.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{label}: cannot read standard input: {exc}") from None
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except (OSError, ValueError) as exc:  # not UTF-8; a path with a NUL byte (from a file)
        raise InputError(f"{label}: cannot read it: {exc}") from None


def read_toml(path: str | os.PathLike, what: str) -> dict:
    """A TOML input file (``what``: "platform", "run", ...) as a dict."""
    label = f"{what} file {Path(path)}"
    return loads_toml(read_text(path, label), label)


def _bounded(text: str, label: str, kind: str) -> None:
    """Refuse an input larger than :data:`MAX_INPUT_CHARS` or nested deeper than
    :data:`MAX_DEPTH` (counted as brackets opened and not closed, strings included: a
    generous upper bound that a real afford file never nears)."""
    if len(text) > MAX_INPUT_CHARS:
        raise InputError(f"{label}: {len(text)} characters; afford reads {kind} files of "
                         f"at most {MAX_INPUT_CHARS}")
    depth = 0
    for m in _BRACKETS.finditer(text):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise InputError(f"{label}: nested deeper than {MAX_DEPTH} levels; not an afford "
                             f"{kind} file")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number afford accepts (only finite numbers)")


def _numbers_bounded(doc: object, label: str, *, nonfinite: bool = False) -> None:
    """Every number in ``doc`` (parsed JSON or TOML) finite and of magnitude at most
    :data:`~afford.core.units.MAX_MAGNITUDE`: no real figure nears it, and products of a few such
    numbers stay finite; the schemas then bound each quantity by what it is. InputError
    naming the file and where the number is otherwise. ``nonfinite``: let ``nan`` and
    ``inf`` pass (TOML's, refused by the schema that reads the field, naming it)."""
    if _all_bounded(doc, nonfinite):  # the common case, without naming every number's place
        return
    stack: list[tuple[str, object]] = [("", doc)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{where}.{k}" if where else str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            if nonfinite and isinstance(v, float) and not math.isfinite(v):
                continue
            try:
                bounded(v, where or "the number", low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE,
                        low_open=False)
            except UnitError as exc:
                raise InputError(f"{label}: {exc}") from None


def _all_bounded(doc: object, nonfinite: bool) -> bool:
    """Whether every number of ``doc`` is finite and within MAX_MAGNITUDE (a quick pass; the
    caller names the first that is not)."""
    stack = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            if not -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE and \
                    not (nonfinite and not math.isfinite(v)):
                return False
        elif isinstance(v, int) and not isinstance(v, bool) and \
                not -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE:
            return False
    return True


def loads_json(text: str, label: str) -> object:
    """JSON text as Python data, bounded: size and nesting (:func:`_bounded`), numbers
    finite (``NaN``/``Infinity`` refused) and at most :data:`~afford.core.units.MAX_MAGNITUDE`
    (:func:`_numbers_bounded`), integers of at most 4300 digits (Python's own limit).
    InputError naming ``label`` otherwise, never a traceback. The one JSON reader: every
    JSON file afford reads (certificates, plans, manifests, bars, eval logs, the loop
    guard's marker) goes through it."""
    _bounded(text, label, "JSON")
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{label}: not an input afford reads: {exc}") from None
    _numbers_bounded(doc, label)
    return doc


def read_json(path: str | os.PathLike, label: str | None = None) -> object:
    """The JSON file at ``path`` through :func:`loads_json`; ``label`` names it in errors
    (default: its path)."""
    label = label or str(Path(path))
    return loads_json(read_text(path, label), label)


def loads_toml(text: str, label: str) -> dict:
    """TOML text as a dict, bounded as :func:`loads_json` (TOML's ``nan``/``inf`` are left
    to the schemas, which refuse them where a number is read; a number beyond
    :data:`~afford.core.units.MAX_MAGNITUDE` is refused here)."""
    _bounded(text, label, "TOML")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{label}: not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{label}: not an input afford reads: {exc}") from None
    _numbers_bounded(doc, label, nonfinite=True)
    return doc


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, overwrite: bool = True,
                       mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically. With ``overwrite=False`` an existing file is an
    :class:`InputError` (nothing a user wrote is overwritten without asking). ``mode``: the
    file's permission bits (default: an existing file's, else 0666 less the umask). Raises
    InputError (bad path, exit 2) or WriteError (failed mid-way, exit 3); never a raw
    OSError."""
    target = Path(path)
    folder = _check_target(target, overwrite=overwrite)
    clean_stale_temps(folder, legacy_of=target.name)
    mode = _mode_for(target) if mode is None else mode
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}{TEMP_TAG}", suffix=".tmp",
                                   dir=folder)
    except OSError as exc:
        raise os_failure(target, exc, "creating a temp file beside it") from None
    doing = "writing the temp file"
    try:
        try:
            _hold(fd)
            _fill(fd, data, mode)
        finally:
            os.close(fd)
        doing = "renaming the temp file onto it"
        _publish(tmp, target, overwrite=overwrite)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise os_failure(target, exc, doing) from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(folder)
    return target


def atomic_write_text(path: str | os.PathLike, text: str, *, overwrite: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def write_or_rescue(path: str | os.PathLike, text: str, *, overwrite: bool,
                    name: str) -> Path:
    """Write a measurement's ``text`` at ``path`` (:func:`atomic_write_text`). When that
    fails (the path went bad meanwhile, the disk filled up), the measurement is not lost:
    it is saved beside ``path`` as ``STEM.rescued-PID.SUFFIX``, else as ``name`` in the
    current folder, else in the temp folder; the error is raised again, of its kind
    (InputError exit 2, WriteError exit 3), its one line naming where the measurement is."""
    target = Path(path)
    try:
        return atomic_write_text(target, text, overwrite=overwrite)
    except (InputError, WriteError) as exc:
        failed = exc
    tag = f".rescued-{os.getpid()}"
    places = [target.with_name(f"{target.stem}{tag}{target.suffix or '.json'}"),
              Path.cwd() / name.replace(".json", f"{tag}.json"),
              Path(tempfile.gettempdir()) / name.replace(".json", f"{tag}.json")]
    for place in places:
        try:
            atomic_write_text(place, text, overwrite=False)
        except (AffordError, OSError):
            continue
        raise type(failed)(f"{failed}; the measurement is saved at {place}") from None
    raise type(failed)(f"{failed}; the measurement could not be saved anywhere (tried "
                       f"{', '.join(map(str, places))})") from None


def ensure_folder(path: str | os.PathLike, what: str) -> Path:
    """The folder ``path``, made (with its parents) if missing; InputError naming ``what``
    when it cannot be (a file is there, no permission), never an ``OSError``."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"{what} {folder}: a file is there, not a folder") from None
    except OSError as exc:
        raise os_failure(folder, exc, "making the folder") from None
    return folder


def check_writable(path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Fail early (before a long measurement) when ``path`` cannot be written."""
    target = Path(path)
    folder = _check_target(target, overwrite=overwrite)
    if not os.access(folder, os.W_OK):
        raise InputError(f"cannot write {target}: the folder {folder} is not writable")
    return target


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _unlink_quietly(path: str | os.PathLike) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _sweep(folder: str | os.PathLike, limit_for: Callable[[str], float | None],
           want: int) -> list[Path]:
    """Remove the entries of ``folder`` of file type ``want`` (S_IFREG, S_IFDIR) whose name
    gets an age limit from ``limit_for`` and whose mtime is at least that old. Never
    follows a link; best effort (an entry another process removed first is fine)."""
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        limit = limit_for(entry.name)
        if limit is None:
            continue
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_IFMT(st.st_mode) != want or now - st.st_mtime < limit:
                continue
            if want == stat.S_IFDIR:
                shutil.rmtree(entry.path)
            elif _held(entry.path):
                continue  # a live writer's, however old
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def clean_stale_temps(folder: str | os.PathLike, *, max_age_s: float | None = None,
                      legacy_of: str | None = None) -> list[Path]:
    """Remove afford's temp files (``.*.afford-XXXXXXXX.tmp``) in ``folder`` last modified
    ``max_age_s`` ago or earlier (default :data:`LOCK_TIMEOUT_S`) and held by no live
    writer; with ``legacy_of``, also that file's temps in the naming used before temps
    carried ``.afford-`` (``.NAME.XXXXXXXX.tmp``), when :data:`STALE_SECONDS` old. Regular
    files only."""
    max_age_s = LOCK_TIMEOUT_S if max_age_s is None else max_age_s
    legacy = re.compile(rf"\.{re.escape(legacy_of)}\.[a-z0-9_]{{8}}\.tmp") \
        if legacy_of is not None else None

    def limit_for(name: str) -> float | None:
        if _OWN_TEMP.match(name):
            return max_age_s
        if legacy is not None and legacy.fullmatch(name):
            return STALE_SECONDS
        return None

    return _sweep(folder, limit_for, stat.S_IFREG)


def clean_temps_of(target: str | os.PathLike, *, max_age_s: float = 0.0) -> list[Path]:
    """Remove the afford temp files of ``target`` alone (``.NAME.afford-XXXXXXXX.tmp``
    beside it). At age 0 only for a caller holding the file's lock (:mod:`afford.core.lock`):
    every writer of the file holds it, so every such temp is a dead writer's."""
    t = Path(target)
    prefix = f".{t.name}{TEMP_TAG}"

    def limit_for(name: str) -> float | None:
        return max_age_s if name.startswith(prefix) and _OWN_TEMP.match(name) else None

    return _sweep(folder_of(t), limit_for, stat.S_IFREG)


def clean_stale_probes(folder: str | os.PathLike, *,
                       max_age_s: float = STALE_SECONDS) -> list[Path]:
    """Remove the checkpoint probe's ``.afford-probe-XXXXXXXX`` folders in ``folder`` (made
    by ``tempfile.mkdtemp``) untouched for ``max_age_s``: a killed probe's. Real folders
    only, never a link; nothing else in ``folder`` is looked at."""
    return _sweep(folder, lambda name: max_age_s if _PROBE.match(name) else None,
                  stat.S_IFDIR)
