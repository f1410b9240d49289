"""``afford bars`` as a library call: read the data, cut the window, count, score, and write
the result as an ``afford.bars/1`` document (the one place that sequences them, as
:mod:`afford.certification` does for certificates; the math it calls is numpy-only and pure).

Exact or streaming: exact counting holds about :data:`EXACT_BYTES_PER_BYTE` bytes of memory
per training byte (packed keys, their sort, the run starts); ``method="auto"`` counts exactly
when that fits ``memory_bytes`` and streams through hashed tables sized to fit it otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import numpy as np

from afford.bars import count_exact, count_streaming, score
from afford.bars.hashed import HashedCounter
from afford.bars.smoothing import Score
from afford.bars.source import CHUNK_BYTES, chunks, open_bytes
from afford.bars.window import Window, WindowError, cut, parse_heldout, sha256_hex
from afford.core.errors import InputError, MeasurementError
from afford.core.io import atomic_write_bytes
from afford.core.provenance import module
from afford.core.version import __version__
from afford.schema import manifest as mf
from afford.schema.bars_file import (
    BPB_UNIT,
    Bar,
    BarsFile,
    Counting,
    DataRef,
    OrderHashing,
    WindowRef,
)

EXACT_BYTES_PER_BYTE = 32
DEFAULT_MEMORY = 4 << 30
APPROXIMATION = (
    "hashed counts: an order with more than {buckets:,} possible grams keeps {buckets:,} "
    "slots, each owned by the first gram hashed to it; a gram whose slot has another owner "
    "is not counted and reads as unseen (its share of occurrences is given per order), so "
    "counts are exact or short, never credited to a gram that was not seen; predictions "
    "are renormalised over the 256 bytes: each bar is the code length of a proper model "
    "counted on the training part only")


@dataclass(frozen=True)
class BarsRequest:
    data: Path
    heldout: str
    orders: tuple[int, ...]
    smoothings: tuple[str, ...] = ("kneser-ney", "add-k")
    k: float = 1.0
    discount: float | None = None
    method: Literal["auto", "exact", "streaming"] = "auto"
    memory_bytes: int = DEFAULT_MEMORY
    buckets: int | None = None
    manifest: Path | None = None
    window_out: Path | None = None
    command: str = "afford bars"


def streaming_buckets(max_order: int, memory_bytes: int) -> int:
    """The most slots per hashed order (a power of two, 2^16..2^30) whose tables stay within
    three quarters of ``memory_bytes``."""
    best = 1 << 16
    for e in range(16, 31):
        if table_bytes(max_order, 1 << e) <= 0.75 * memory_bytes:
            best = 1 << e
    return best


def table_bytes(max_order: int, buckets: int) -> int:
    """Bytes of a :class:`HashedCounter`'s tables: 24 a slot (int64 count, four uint32), and
    8 more (the owner's key) in a hashed order."""
    return sum(24 * min(256 ** k, buckets) + (8 * buckets if 256 ** k > buckets else 0)
               for k in range(0, max_order + 1))


def make_bars(req: BarsRequest, clock: Callable[[], float] = time.perf_counter) -> BarsFile:
    """Count the data outside the window, score the window, and describe both."""
    data = _open(req.data)
    try:
        window = cut(parse_heldout(req.heldout), len(data))
    except WindowError as exc:
        raise InputError(str(exc)) from None
    held = np.array(data[window.offset:window.offset + window.length])
    wsha = sha256_hex(held)
    if req.window_out is not None:
        atomic_write_bytes(req.window_out, held.tobytes())
    ref = _data_ref(req, len(data))
    n = max(req.orders)
    method = _method(req, window.train_bytes)
    t0 = clock()
    try:
        if method == "exact":
            stats = count_exact([data[o:o + m] for o, m in window.train_segments], n)
            counting = dict(method="exact")
        else:
            buckets = req.buckets or streaming_buckets(n, req.memory_bytes)
            counter = count_streaming(
                [chunks(data, o, m, CHUNK_BYTES) for o, m in window.train_segments], n, buckets)
            stats = counter.stats()
            counting = _hashing(counter)
    except MemoryError:
        raise MeasurementError(f"counting {window.train_bytes:,} bytes ran out of memory; "
                               "give --method streaming (or a smaller --memory)") from None
    counting["seconds"] = clock() - t0
    try:
        scores = score(stats, held, req.orders, req.smoothings, k=req.k,
                       discount=req.discount, renormalise=method == "streaming")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return BarsFile(
        created_at=datetime.now(timezone.utc).replace(microsecond=0),
        afford_version=__version__, command=req.command, data=ref,
        window=_window_ref(window, wsha, req.window_out), train_bytes=window.train_bytes,
        train_segments=list(window.train_segments), counting=Counting(**counting),
        provisional=not ref.pinned,
        bars=[_bar(s, wsha, ref, window, method) for s in scores],
        warnings=_warnings(ref, req))


def _open(path: Path) -> np.ndarray:
    if path.is_dir():
        raise InputError(f"{path}: a folder; DATA is one file of bytes (concatenate the "
                         "shards, and pin that file)")
    if not path.is_file():
        raise InputError(f"{path}: no such file (DATA is one file of bytes)")
    try:
        return open_bytes(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _method(req: BarsRequest, train_bytes: int) -> str:
    if req.method != "auto":
        return req.method
    return "exact" if EXACT_BYTES_PER_BYTE * train_bytes <= req.memory_bytes else "streaming"


def _data_ref(req: BarsRequest, size: int) -> DataRef:
    sha, _ = mf.sha256_file(req.data)
    manifest = req.manifest
    source = None
    if manifest is not None and manifest.exists():
        m = mf.load(manifest)
        source = next((s.name for s in m.sources if s.status == mf.PINNED and s.kind == "file"
                       and s.sha256 == sha), None)
    return DataRef(path=str(req.data), sha256=sha, size_bytes=size, pinned=source is not None,
                   manifest=str(manifest) if manifest is not None else None, source=source)


def _window_ref(w: Window, sha: str, path: Path | None) -> WindowRef:
    s = w.spec
    return WindowRef(sha256=sha, offset_bytes=w.offset, length_bytes=w.length, spec=s.text,
                     cut=s.cut, eval_batches=s.eval_batches, batch=s.batch, seq_len=s.seq_len,
                     arithmetic=s.arithmetic, bytes_path=str(path) if path else None)


def _hashing(c: HashedCounter) -> dict:
    rows = [OrderHashing(order=h.order, slots=h.slots, direct=h.direct, occupied=h.occupied,
                         occurrences=h.occurrences, dropped=h.dropped,
                         dropped_share=h.dropped_share)
            for h in c.hashing_report()]
    return dict(method="streaming", buckets=c.buckets, table_bytes=c.nbytes, hashing=rows,
                approximation=APPROXIMATION.format(buckets=c.buckets))


def _bar(s: Score, wsha: str, ref: DataRef, w: Window, method: str) -> Bar:
    how = (f"interpolated Kneser-Ney order {s.order}" if s.smoothing == "kneser-ney" else
           f"add-{s.k:g} order {s.order}")
    src = (f"afford.bars: {how}, {method} counts of {w.train_bytes:,} B of {Path(ref.path).name}"
           f" ({ref.sha256[:12]}), scored on window {wsha[:12]} ({w.spec.arithmetic})")
    bpb = module(s.bpb, BPB_UNIT, src)
    if not ref.pinned:
        bpb = bpb.model_copy(update={"provisional": True})
    return Bar(order=s.order, smoothing=s.smoothing, bpb=bpb, window_sha256=wsha, bits=s.bits,
               bytes_scored=s.bytes, discounts=list(s.discounts), k=s.k,
               warnings=list(s.warnings))


def _warnings(ref: DataRef, req: BarsRequest) -> list[str]:
    if ref.pinned:
        return []
    where = f"in {ref.manifest}" if ref.manifest else "(no manifest given or found)"
    return [f"{ref.path} ({ref.sha256[:12]}) is not pinned {where}: every bar here is "
            f"provisional (?). Pin it with `afford pin {ref.path}`."]


__all__ = ["BarsRequest", "make_bars", "streaming_buckets", "table_bytes"]
