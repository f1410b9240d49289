"""Reading the data a bar is counted on: the one module of :mod:`afford.bars` that does I/O.

A file is mapped, not read (``numpy.memmap``): the exact counter touches the training part
once to pack its keys, and the streaming counter reads it in chunks of ``chunk_bytes``, so a
file larger than memory never has to be resident.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

CHUNK_BYTES = 16 << 20


def open_bytes(path: str | Path) -> np.ndarray:
    """The file's bytes as a read-only uint8 array (memory-mapped; empty files allowed)."""
    p = Path(path)
    if p.stat().st_size == 0:
        return np.empty(0, np.uint8)
    return np.memmap(p, dtype=np.uint8, mode="r")


def chunks(data: np.ndarray, offset: int, length: int,
           chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """``data[offset:offset+length]`` in pieces of at most ``chunk_bytes`` (copied out)."""
    for s in range(offset, offset + length, chunk_bytes):
        yield np.array(data[s:min(s + chunk_bytes, offset + length)])
