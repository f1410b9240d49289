"""The held-out window: which bytes a bar is measured on, and how they were cut.

A bar is a number *on a window*: the same counter gives 2.57 BPB on one window and 2.3 on
another, so a bar without its window is not a bar (docs/DESIGN.md section 3, rule 8; the
scale-ladder note's correction: "the fixed 100 KB window" was eval_batches x batch x seq_len
bytes, 102,400 at batch 10 and 20,480 at batch 2). The window is cut from the data by a spec:

- ``last:LEN`` / ``first:LEN``: the last / first LEN bytes (LEN as in ``100KB``, ``1MiB``,
  ``102400``);
- ``OFFSET:LEN``: LEN bytes from byte OFFSET (both sizes, e.g. ``5MB:100KB``);
- ``batches:EVAL_BATCHESxBATCHxSEQ``: a trainer's eval window, EVAL_BATCHES x BATCH x SEQ bytes
  (``batches:10x10x1024`` = 102,400 bytes), taken from the end; ``@first`` or ``@OFFSET``
  after it takes it from the start or from byte OFFSET.

The training part is every byte outside the window (one or two segments: no n-gram spans the
hole). Pure: sizes in, offsets out; :func:`sha256_hex` hashes bytes it is handed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from afford.core.units import MAX_BYTES, UnitError, parse_bytes, whole

FIXED = "fixed bytes"
BATCHES = "eval_batches x batch x seq_len"
GRAMMAR = ("last:LEN, first:LEN, OFFSET:LEN (e.g. 5MB:100KB), or "
           "batches:EVAL_BATCHESxBATCHxSEQ[@first|@OFFSET] (e.g. batches:10x10x1024)")


class WindowError(ValueError):
    """A held-out spec that cannot be read or does not fit the data."""


@dataclass(frozen=True)
class HeldoutSpec:
    """A parsed ``--heldout`` spec. ``anchor``: ``"last"``, ``"first"`` or a byte offset."""

    text: str
    length: int
    anchor: str | int
    cut: str = FIXED
    eval_batches: int | None = None
    batch: int | None = None
    seq_len: int | None = None

    @property
    def arithmetic(self) -> str:
        """``"10 x 10 x 1024 = 102,400 bytes"`` for a batches spec; ``"102,400 bytes"``."""
        if self.cut == BATCHES:
            return f"{self.eval_batches} x {self.batch} x {self.seq_len} = {self.length:,} bytes"
        return f"{self.length:,} bytes"


@dataclass(frozen=True)
class Window:
    """Where the window lies in data of ``data_bytes`` bytes, and the training segments."""

    spec: HeldoutSpec
    offset: int
    length: int
    data_bytes: int

    @property
    def train_segments(self) -> tuple[tuple[int, int], ...]:
        """(offset, length) of the training part: the data outside the window, non-empty."""
        parts = ((0, self.offset), (self.offset + self.length,
                                    self.data_bytes - self.offset - self.length))
        return tuple(p for p in parts if p[1] > 0)

    @property
    def train_bytes(self) -> int:
        return self.data_bytes - self.length


def _size(text: str, what: str, spec: str) -> int:
    try:
        n = parse_bytes(text)
    except UnitError:
        raise WindowError(f"--heldout {spec!r}: cannot read {text!r} as {what}; "
                          f"write {GRAMMAR}") from None
    return n


def parse_heldout(text: str) -> HeldoutSpec:
    """Read a held-out spec (see the module docstring); WindowError when malformed."""
    s = text.strip()
    head, sep, rest = s.partition(":")
    if not sep or not rest:
        raise WindowError(f"--heldout {text!r}: write {GRAMMAR}")
    if head == "batches":
        return _parse_batches(rest, text)
    if head in ("last", "first"):
        spec = HeldoutSpec(text=s, length=_size(rest, "a length", text), anchor=head)
    else:
        spec = HeldoutSpec(text=s, length=_size(rest, "a length", text),
                           anchor=_size(head, "an offset", text))
    if spec.length <= 0:
        raise WindowError(f"--heldout {text!r}: the window must hold at least one byte")
    return spec


def _parse_batches(rest: str, text: str) -> HeldoutSpec:
    dims, _, at = rest.partition("@")
    m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*[xX*]\s*(\d+)\s*", dims)
    if not m:
        raise WindowError(f"--heldout {text!r}: batches takes EVAL_BATCHESxBATCHxSEQ, e.g. "
                          "batches:10x10x1024")
    try:  # whole numbers, each at most MAX_BYTES: 5000 digits is no batch (int() refused it)
        eb, b, sq = (whole(g, "each", high=MAX_BYTES) for g in m.groups())
    except UnitError:
        raise WindowError(f"--heldout {text!r}: eval batches, batch and seq_len are positive "
                          "whole numbers") from None
    at = at.strip()
    anchor: str | int = "last" if at in ("", "last") else "first" if at == "first" else \
        _size(at, "an offset", text)
    return HeldoutSpec(text=text.strip(), length=eb * b * sq, anchor=anchor, cut=BATCHES,
                       eval_batches=eb, batch=b, seq_len=sq)


def cut(spec: HeldoutSpec, data_bytes: int) -> Window:
    """Place ``spec`` in data of ``data_bytes`` bytes; WindowError when it does not fit or
    leaves no training bytes."""
    if spec.anchor == "last":
        offset = data_bytes - spec.length
    elif spec.anchor == "first":
        offset = 0
    else:
        offset = int(spec.anchor)
    if offset < 0 or offset + spec.length > data_bytes:
        raise WindowError(f"--heldout {spec.text!r}: a window of {spec.arithmetic} at offset "
                          f"{max(offset, 0):,} does not fit in {data_bytes:,} bytes of data")
    if spec.length >= data_bytes:
        raise WindowError(f"--heldout {spec.text!r}: the window is all the data; nothing is "
                          "left to count on")
    return Window(spec=spec, offset=offset, length=spec.length, data_bytes=data_bytes)


def sha256_hex(data) -> str:
    """SHA-256 of the window's bytes (anything with the buffer protocol)."""
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()
