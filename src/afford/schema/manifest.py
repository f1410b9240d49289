"""``afford.manifest/1``: the data sources a run reads, pinned by hash (docs/DESIGN.md section 3,
rule 8: a count derived from a source whose hash is not pinned is provisional).

A source is one of:

- a **file**: SHA-256 of its bytes, streamed in 1 MiB blocks (a multi-GB file needs no more
  memory than a block), and its size;
- a **folder**: a tree hash, SHA-256 over the sorted lines ``<relative path>\\0<sha256>\\n``
  of every file under it, the total size and the file count (renaming a shard changes it);
  see "What a folder's hash covers" below;
- a **generator** ``pkg.mod:func`` with parameters: pinned by the SHA-256 of the source file
  of the module that defines it and of the canonical JSON of its parameters (the code and
  the parameters together decide the data it makes).

A source named but absent (no such file, a generator that does not import) is recorded
``UNPINNED`` with the reason; :func:`status_of` answers ``UNPINNED`` as well for a name the
manifest does not hold at all, so anything derived from it is shown as provisional.

What a folder's hash covers (a pin must never stay PINNED while what it stands for
changes). Inside a pinned folder nothing is followed and nothing is skipped:

- a regular file is hashed by its bytes;
- a symbolic link (to a file or a folder) whose target, fully resolved, lies inside the
  folder is hashed *as a link*: the line ``<relative path>\\0link:<target, relative to the
  folder>\\n``. It is not followed; its target is hashed where it lies;
- a link whose target lies outside the folder, or leads nowhere (dangling, a loop), is
  refused (InputError, exit 2) naming it: its content could change without the pin seeing
  it. Copy the data in, or pin the target on its own;
- a file or folder that cannot be read, and anything that is not a file, folder or link (a
  fifo, socket or device), is refused (exit 2) naming it.

The PATH given on the command line may itself be a link: the user named it, so it is
resolved. A folder without links hashes as it did before this policy.

Writing: :func:`pin_into` merges into an existing manifest. A source of the same name whose
hash is unchanged is kept as it was (with its first ``pinned_at``); one whose hash *changed*
is refused unless ``force`` (catching that change is what pinning is for); a file at the
path that is not a manifest is never overwritten. Writes are atomic, and the load, merge
and write hold the manifest's lock (:func:`afford.core.lock.locked`): concurrent ``afford pin``
runs all land. Hashing happens before the lock is taken.

Reading for a plan: :func:`pinned_sources` says which sources a manifest pins, read
leniently (any ``afford.manifest/*``), so a plan reads manifests of other versions too.

Checked where it is used: a pin says what the data *were*; ``plan``,
``preflight`` and ``report`` ask whether they still are (:func:`recheck`). Cheaply first: a
file's size and modification time (a folder's total size, file count and newest time of any
entry) against those recorded when it was pinned; only when one of them moved is the source
hashed again. A source whose hash changed, or that is no longer found (at its path, relative
to the working folder or else to the manifest's folder), or that can no longer be read, is
treated as UNPINNED with the reason; a touched file whose bytes are the same stays PINNED.
A manifest written before the time was recorded is checked against the time it was pinned
(a file modified since is hashed). Nothing is written back: ``afford pin --force`` re-pins.
"""

import hashlib
import inspect
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from afford.core.errors import InputError
from afford.core.io import loads_json, read_text
from afford.core.lock import locked
from afford.core.provenance import Tagged
from afford.core.user_code import UserCodeMissing, import_attr, split_spec
from afford.schema.envelope import Envelope, load_envelope, save_envelope
from afford.schema.quantities import Bytes, Count, Timestamp

MANIFEST_SCHEMA = "afford.manifest/1"
BLOCK = 1 << 20  # bytes read per step of the streamed hash
PINNED, UNPINNED = "PINNED", "UNPINNED"


class Source(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid")

    name: str = Field(min_length=1, description="how runs and plans name this source")
    kind: Literal["file", "folder", "generator"]
    status: Literal["PINNED", "UNPINNED"]
    path: str | None = Field(None, description="as given on the command line")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                               description="file bytes, tree hash, or generator pin")
    size_bytes: Bytes | None = None
    mtime_ns: int | None = Field(None, description="modification time when pinned (a "
                                 "folder: its newest entry's), for the cheap re-check")
    files: Count | None = Field(None, description="folders: files hashed")
    generator: str | None = Field(None, description="pkg.mod:func")
    params: dict[str, str] | None = None
    code_path: str | None = Field(None, description="generators: the module source hashed")
    code_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    reason: str | None = Field(None, description="why UNPINNED")
    pinned_at: Timestamp

    @model_validator(mode="after")
    def _pinned_by_a_hash(self) -> "Source":
        if self.status == PINNED and self.sha256 is None:
            raise ValueError(f"source {self.name!r} is PINNED without its sha256")
        return self


class Manifest(Envelope):
    schema_id: Literal["afford.manifest/1"] = Field(MANIFEST_SCHEMA, alias="schema")
    sources: list[Source] = []


def sha256_file(path: str | Path) -> tuple[str, int]:
    """(hex SHA-256, size in bytes) of a file, streamed in :data:`BLOCK`-byte reads."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _unreadable(path: str | Path, exc: OSError) -> InputError:
    return InputError(f"{path}: cannot read it ({exc.strerror or exc}); pin never skips an "
                      "entry: make it readable, or move it out of what is pinned")


def _hash_file(path: str | Path) -> tuple[str, int]:
    try:
        return sha256_file(path)
    except OSError as exc:
        raise _unreadable(path, exc) from None


def _link_line(path: str, real_root: str) -> str:
    """``link:<target relative to the folder>`` for a link that stays inside it."""
    target = os.path.realpath(path)
    if not os.path.exists(target):
        raise InputError(f"{path}: a link that leads nowhere (dangling or a loop); pin "
                         "hashes links only to what lies inside the folder: fix or remove it")
    if os.path.commonpath([real_root, target]) != real_root:
        raise InputError(f"{path}: a link leaving the pinned folder (to {target}); its content "
                         "could change without the pin seeing it: copy the data in, or pin "
                         "the target on its own")
    return "link:" + Path(os.path.relpath(target, real_root)).as_posix()


def _tree_entries(root: Path) -> list[tuple[tuple[str, ...], str, str | None]]:
    """(relative parts, full path, link line or None for a regular file) of every file and
    link under ``root``, nothing followed, nothing skipped (see the module docstring)."""
    real_root = os.path.realpath(root)
    found, stack = [], [()]
    while stack:
        rel = stack.pop()
        here = root.joinpath(*rel)
        try:
            entries = list(os.scandir(here))
        except OSError as exc:
            raise _unreadable(here, exc) from None
        for e in entries:
            parts = rel + (e.name,)
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as exc:
                raise _unreadable(e.path, exc) from None
            if stat.S_ISLNK(st.st_mode):
                found.append((parts, e.path, _link_line(e.path, real_root)))
            elif stat.S_ISDIR(st.st_mode):
                stack.append(parts)
            elif stat.S_ISREG(st.st_mode):
                found.append((parts, e.path, None))
            else:
                raise InputError(f"{e.path}: not a file, folder or link (a fifo, socket or "
                                 "device); pin hashes files only: move it out of the folder")
    return sorted(found)


def sha256_tree(folder: str | Path) -> tuple[str, int, int]:
    """(tree hash, total bytes, file count) of every regular file under ``folder``, links
    inside it hashed as links; InputError for anything the policy refuses."""
    root = Path(folder)
    h, total, n = hashlib.sha256(), 0, 0
    for parts, path, link in _tree_entries(root):
        if link is None:
            digest, size = _hash_file(path)
            total, n = total + size, n + 1
        else:
            digest = link
        h.update(f"{'/'.join(parts)}\0{digest}\n".encode("utf-8"))
    return h.hexdigest(), total, n


def tree_stat(folder: str | Path) -> tuple[int, int, int]:
    """(total bytes, file count, newest modification time in ns of any entry, folders and
    links included) of a folder, without reading a byte: the cheap half of :func:`recheck`
    (a renamed or removed shard moves its folder's time, an edited one its own)."""
    total, n, newest = 0, 0, os.stat(folder).st_mtime_ns
    stack = [str(folder)]
    while stack:
        for e in os.scandir(stack.pop()):
            st = e.stat(follow_symlinks=False)
            newest = max(newest, st.st_mtime_ns)
            if stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
            elif stat.S_ISREG(st.st_mode):
                total, n = total + st.st_size, n + 1
    return total, n, newest


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def pin_path(path: str | Path, name: str | None = None) -> Source:
    """A file or folder source; UNPINNED (with the reason) when it is not there; InputError
    when it, or anything in it, cannot be read or breaks the link policy."""
    p = Path(path)
    label = name or p.name or str(p)
    try:
        mode = os.stat(p).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:
        raise _unreadable(p, exc) from None
    if mode is not None and stat.S_ISREG(mode):
        mtime = os.stat(p).st_mtime_ns  # before the bytes: an edit while hashing moves it
        digest, size = _hash_file(p)
        return Source(name=label, kind="file", status=PINNED, path=str(path), sha256=digest,
                      size_bytes=size, mtime_ns=mtime, pinned_at=_now())
    if mode is not None and stat.S_ISDIR(mode):
        mtime = _tree_mtime(p)
        digest, size, n = sha256_tree(p)
        return Source(name=label, kind="folder", status=PINNED, path=str(path), sha256=digest,
                      size_bytes=size, files=n, mtime_ns=mtime, pinned_at=_now())
    why = "not present: no such file or folder" if mode is None else "not a file or folder"
    return Source(name=label, kind="file", status=UNPINNED, path=str(path), reason=why,
                  pinned_at=_now())


def _tree_mtime(folder: Path) -> int | None:
    try:
        return tree_stat(folder)[2]
    except OSError:
        return None  # sha256_tree names what cannot be read


def parse_params(items: Iterable[str]) -> dict[str, str]:
    """``["k=v", "n=3"]`` -> ``{"k": "v", "n": "3"}``; InputError when malformed."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {item!r}: write it as KEY=VALUE")
        if key.strip() in out:
            raise InputError(f"--param {key.strip()!r} given twice")
        out[key.strip()] = value
    return out


def pin_generator(spec: str, params: dict[str, str], name: str | None = None) -> Source:
    """A generator ``pkg.mod:func`` pinned by its module's source and its parameters;
    UNPINNED when it cannot be imported or its source cannot be read."""
    split_spec(spec, "--generator", "function")
    label = name or spec
    try:
        # a module that fails to import: InputError, exit 2; one that is not there: UNPINNED
        target = import_attr(spec, "--generator", "function")
        code_path = inspect.getsourcefile(target)
        if code_path is None:
            raise OSError("no source file")
        code_sha, _ = sha256_file(code_path)
    except (UserCodeMissing, OSError, TypeError) as exc:
        return Source(name=label, kind="generator", status=UNPINNED, generator=spec,
                      params=params, reason=f"cannot read the generator's code: {exc}",
                      pinned_at=_now())
    doc = json.dumps({"generator": spec, "code_sha256": code_sha, "params": params},
                     sort_keys=True)
    return Source(name=label, kind="generator", status=PINNED, generator=spec, params=params,
                  code_path=code_path, code_sha256=code_sha,
                  sha256=hashlib.sha256(doc.encode("utf-8")).hexdigest(), pinned_at=_now())


def load(path: str | Path) -> Manifest:
    return load_envelope(path, Manifest, MANIFEST_SCHEMA)


def merge(manifest: Manifest, new: list[Source], *, force: bool) -> Manifest:
    """Sources merged by name; a changed hash of a pinned source needs ``force``."""
    names = [s.name for s in new]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(f"two sources would be named {', '.join(sorted(dup))}; name them "
                         "apart (one path per --name)")
    by_name = {s.name: s for s in manifest.sources}
    for s in new:
        old = by_name.get(s.name)
        if old is not None and old.status == PINNED and old.sha256 == s.sha256 \
                and old.kind == s.kind:
            # unchanged: keep the first pin, with today's time for the cheap re-check
            by_name[s.name] = old.model_copy(update={"mtime_ns": s.mtime_ns})
            continue
        if old is not None and old.status == PINNED and not force:
            now = s.sha256[:12] if s.sha256 else f"UNPINNED ({s.reason})"
            raise InputError(f"source {s.name!r} was pinned as {old.sha256[:12]}... and is "
                             f"now {now}: the data changed. Pass --force to re-pin it, or "
                             "pin it under another --name")
        by_name[s.name] = s
    return Manifest(sources=sorted(by_name.values(), key=lambda s: s.name))


def pin_into(path: str | Path, sources: list[Source], *, force: bool = False) -> Manifest:
    """Merge ``sources`` into the manifest at ``path`` (created if absent); atomic write."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"cannot write {p}: it is a folder; give the path of a file (--out)")
    with locked(p):
        base = load(p) if p.exists() else Manifest()
        merged = merge(base, sources, force=force)
        save_envelope(merged, p, overwrite=True)
    return merged


def _locate(path: str, base: Path | None) -> Path | None:
    """A source's path as given when pinned: absolute as it is; relative, from the working
    folder, else from the manifest's folder (``base``); None where neither holds it."""
    p = Path(path)
    if p.is_absolute():
        return p if os.path.lexists(p) else None
    for root in (Path.cwd(), base):
        if root is not None and os.path.lexists(root / p):
            return root / p
    return None


def _short(sha: str | None) -> str:
    return f"{sha[:12]}..." if sha else "none"


def _file_change(s: Source, p: Path) -> str | None:
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        return f"{s.path} is no longer a file"
    same_time = st.st_mtime_ns == s.mtime_ns if s.mtime_ns is not None else \
        st.st_mtime <= s.pinned_at.timestamp()
    if st.st_size == s.size_bytes and same_time:
        return None
    digest, size = sha256_file(p)
    if digest == s.sha256:
        return None  # touched, same bytes
    return (f"{s.path}: {s.size_bytes} -> {size} bytes, sha256 {_short(s.sha256)} -> "
            f"{_short(digest)}")


def _folder_change(s: Source, p: Path) -> str | None:
    if not p.is_dir():
        return f"{s.path} is no longer a folder"
    size, n, newest = tree_stat(p)
    same_time = newest == s.mtime_ns if s.mtime_ns is not None else \
        newest <= s.pinned_at.timestamp() * 1e9
    if size == s.size_bytes and n == s.files and same_time:
        return None
    digest, size, n = sha256_tree(p)
    if digest == s.sha256:
        return None
    return (f"{s.path}: {s.files} -> {n} files, {s.size_bytes} -> {size} bytes, tree sha256 "
            f"{_short(s.sha256)} -> {_short(digest)}")


def _generator_change(s: Source) -> str | None:
    if not s.code_path or not os.path.exists(s.code_path):
        return f"its code {s.code_path} is no longer there"
    digest, _ = sha256_file(s.code_path)
    if digest == s.code_sha256:
        return None
    return f"its code {s.code_path} changed (sha256 {_short(s.code_sha256)} -> {_short(digest)})"


def source_change(s: Source, base: Path | None = None) -> str | None:
    """Why a PINNED source no longer stands for what was pinned (None: it still does):
    size and time first, the hash only when they moved (see the module docstring)."""
    if s.status != PINNED:
        return None
    try:
        if s.kind == "generator":
            return _generator_change(s)
        p = _locate(s.path or "", base)
        if p is None:
            return (f"not found at {s.path} (from the working folder or the manifest's): "
                    "it cannot be checked here")
        return _file_change(s, p) if s.kind == "file" else _folder_change(s, p)
    except (OSError, InputError) as exc:
        return f"cannot be read here ({getattr(exc, 'strerror', None) or exc})"


def rechecked(s: Source, base: Path | None = None) -> Source:
    """``s``, or ``s`` UNPINNED with the reason when its data changed since it was pinned."""
    why = source_change(s, base)
    if why is None:
        return s
    return s.model_copy(update={"status": UNPINNED, "reason": (
        f"changed since it was pinned {s.pinned_at:%Y-%m-%d %H:%M} UTC: {why}; what derives "
        f"from it is provisional until it is pinned again (afford pin --force)")})


def recheck(manifest: Manifest, path: str | Path | None = None) -> Manifest:
    """The manifest as its sources stand now: each PINNED source re-checked where it is
    used (``path``: the manifest's own, whose folder resolves relative paths)."""
    base = Path(path).parent if path is not None else None
    return manifest.model_copy(update={"sources": [rechecked(s, base)
                                                   for s in manifest.sources]})


def status_of(manifest: Manifest | None, name: str) -> str:
    """``PINNED`` or ``UNPINNED`` for a source a run or plan names (absent: UNPINNED)."""
    if manifest is None:
        return UNPINNED
    s = next((s for s in manifest.sources if s.name == name), None)
    return s.status if s is not None else UNPINNED


def provisional(value: Tagged, manifest: Manifest | None, names: Iterable[str]) -> Tagged:
    """``value`` marked provisional when any source it was derived from is not pinned."""
    if any(status_of(manifest, n) != PINNED for n in names):
        return value.model_copy(update={"provisional": True})
    return value


def pinned_sources(path: str | Path | None) -> dict[str, bool]:
    """Source name -> pinned, from a data manifest (``afford.manifest/1``, ``afford pin``),
    each source re-checked where it is used (:func:`check_pins`).

    A source counts as pinned when its entry carries a SHA-256 and a status other than
    UNPINNED, and its data have not changed since. Without a manifest every source is
    unpinned. (Read leniently: sources as a list of objects with ``name`` or as an object
    keyed by name.)
    """
    return check_pins(path).pinned


@dataclass(frozen=True)
class PinCheck:
    """Which sources a manifest pins as they stand now, and why each that changed since it
    was pinned is no longer pinned."""

    pinned: dict[str, bool]
    changed: dict[str, str]


def check_pins(path: str | Path | None) -> PinCheck:
    """The manifest at ``path`` read leniently, its pinned sources re-checked: one that
    validates as this version's source by :func:`rechecked`; one of another version is
    taken at its word."""
    if path is None:
        return PinCheck({}, {})
    p = Path(path)
    pinned, changed = {}, {}
    for s in _lenient_sources(p):
        name = str(s["name"])
        status = str(s.get("status", "")).upper()
        pinned[name] = bool(s.get("sha256")) and status != "UNPINNED"
        typed = _typed(s) if pinned[name] else None
        now = rechecked(typed, p.parent) if typed is not None else None
        if now is not None and now.status != PINNED:
            pinned[name], changed[name] = False, now.reason or ""
    return PinCheck(pinned, changed)


def _lenient_sources(p: Path) -> list[dict]:
    raw = loads_json(read_text(p, f"manifest {p}"), f"manifest {p}")
    if not isinstance(raw, dict) or not str(raw.get("schema", "")).startswith("afford.manifest/"):
        raise InputError(f"manifest {p}: not an afford data manifest (schema "
                         "'afford.manifest/1'; write one with afford pin)")
    sources = raw.get("sources", [])
    if isinstance(sources, dict):
        sources = [{"name": k, **v} for k, v in sources.items() if isinstance(v, dict)]
    return [s for s in sources if isinstance(s, dict) and "name" in s] \
        if isinstance(sources, list) else []


def _typed(raw: dict) -> Source | None:
    try:
        return Source.model_validate(raw)
    except ValueError:
        return None
