"""Checkpoint I/O: atomic writes of a workload's model and optimizer state, and a reload.

A checkpoint is written as a training run should write one (docs/DESIGN.md section 5): to a temp
file in the target's folder, flushed and fsynced, then renamed over the target, then the
folder fsynced; a writer killed at any moment leaves the old file whole or the new one
whole. The time of a write is the whole of it: the device-to-host copy of the state (the
copy ``torch.save`` makes of every device tensor), serialisation, the disk, the fsyncs and
the rename. The copy is made once (:func:`host_state`, timed, synchronised) and its seconds
are added to each write from it, so the writes need the device no more: certify's probe
child frees the device first and writes beside the memory stage's child (disk and CPU
against a process measuring peak bytes, which time does not move). The median of several
writes is reported with the file's size; the file is then loaded back with
``torch.load(weights_only=True)`` and compared tensor by tensor with the state it was
written from.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from afford.core.io import fsync_dir
from afford.fit.stats import median

METHOD = ("{'model': state_dict, 'optimizer': state_dict} copied to host memory once (timed, "
          "added to each write), then torch.save to a temp file in the same folder, flush, "
          "fsync, os.replace, fsync folder; torch.load(weights_only=True)")


def write_checkpoint_atomic(state: Any, path: str | os.PathLike,
                            before_rename: Callable[[Path], None] | None = None) -> Path:
    """Write ``state`` to ``path`` atomically. ``before_rename(tmp)`` runs after the temp
    file is fsynced and before the rename (tests inject failures and kills there)."""
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)
    return target


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where two nested states differ (tensors by dtype, shape and value), or ``None``."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{where or 'state'}: a tensor against a {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{where}: {a.dtype}{tuple(a.shape)} against {b.dtype}{tuple(b.shape)}"
        return None if torch.equal(a.detach().cpu(), b.detach().cpu()) \
            else f"{where}: values differ"
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{where or 'state'}: keys {sorted(map(str, set(a) ^ set(b)))} differ"
        for k in a:
            diff = first_difference(a[k], b[k], f"{where}.{k}" if where else str(k))
            if diff:
                return diff
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: lengths {len(a)} and {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            diff = first_difference(x, y, f"{where}[{i}]")
            if diff:
                return diff
        return None
    return None if a == b else f"{where}: {a!r} against {b!r}"


MIN_WRITES = 2  # the least a probe writes: two writes show the spread between them
BUDGET_SECONDS = 4.0  # past this much writing, no further write starts (beyond MIN_WRITES)


def host_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer
               ) -> tuple[dict, float]:
    """The model's and optimizer's state with every tensor copied to host memory, and the
    seconds of the copy (device work synchronised before and after; on a CPU the tensors are
    the state's own and the copy costs nothing)."""
    _sync()
    t0 = time.perf_counter()
    state = _to_host({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    _sync()
    return state, time.perf_counter() - t0


def _to_host(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", copy=True)  # a copy on a CPU too: the state stays as taken
    if isinstance(x, dict):
        return {k: _to_host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_host(v) for v in x)
    return x


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def checkpoint_probe(state: dict, folder: str | os.PathLike, writes: int,
                     budget_seconds: float = BUDGET_SECONDS, copy_seconds: float = 0.0) -> dict:
    """Write the host ``state`` (:func:`host_state`) ``writes`` times, load it back once;
    the fields of :class:`~afford.schema.probes_section.CheckpointProbe` (less value and
    shape), each write's seconds with ``copy_seconds`` (the copy to host) added. A large
    state stops early: after ``MIN_WRITES`` writes, none starts once ``budget_seconds`` have
    been spent writing (a state of a few GB takes seconds a write, and a further write adds
    its seconds to certify and nothing the first ones did not show)."""
    target = Path(folder) / "afford-probe-checkpoint.pt"
    secs: list[float] = []
    try:
        for k in range(writes):
            if k >= MIN_WRITES and sum(secs) >= budget_seconds:
                break
            t0 = time.perf_counter()
            write_checkpoint_atomic(state, target)
            secs.append(copy_seconds + time.perf_counter() - t0)
        size = target.stat().st_size
        t0 = time.perf_counter()
        loaded = torch.load(target, map_location="cpu", weights_only=True)
        load_seconds = time.perf_counter() - t0
    finally:
        with contextlib.suppress(OSError):
            target.unlink()
    mismatch = first_difference(state, loaded)
    return {"directory": _shown(folder), "bytes": int(size),
            "write_seconds": secs, "median_write_seconds": median(secs),
            "device_to_host_seconds": copy_seconds,
            "load_seconds": load_seconds, "verified": mismatch is None, "mismatch": mismatch,
            "method": METHOD}


def _shown(folder) -> str:
    """The folder as the certificate shows it: relative to the working folder when inside it
    (a certificate travels; the absolute path of the machine it was made on says nothing)."""
    p = Path(folder).resolve()
    try:
        rel = p.relative_to(Path.cwd().resolve())
    except ValueError:
        return str(folder)
    return str(rel) if str(rel) != "." else ". (the folder certify ran in)"
