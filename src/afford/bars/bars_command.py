"""``afford bars`` in the library: the command's flags checked and made a
:class:`~afford.bars.record.BarsRequest` (:func:`bars_request`), then the bars counted,
scored and written (:func:`count_and_write`).

The command line (:mod:`afford.cli.bars`) parses the flags, calls these, and renders the
:class:`~afford.schema.bars_file.BarsFile` they return. Nothing here prints.
"""

from __future__ import annotations

from pathlib import Path

from afford.bars import SMOOTHINGS, parse_orders
from afford.bars.record import BarsRequest, make_bars
from afford.core.errors import InputError
from afford.core.io import check_writable
from afford.core.units import MAX_BYTES, UnitError, flag_number, parse_bytes, parse_count, whole
from afford.schema.bars_file import BarsFile, save_bars

MAX_ADD_K = 1e6  # k of add-k: beyond it every byte is equally likely to the digits shown
METHODS = ("auto", "exact", "streaming")


def bars_request(data: Path, *, heldout: str = "last:100KB", order: str = "1..5",
                 smoothing: str = "kneser-ney,add-k", add_k: float = 1.0,
                 discount: float | None = None, method: str = "auto", memory: str = "4GiB",
                 buckets: str | None = None, manifest: Path | None = None,
                 window_out: Path | None = None, out: Path | None = None, force: bool = False,
                 command: str = "afford bars") -> BarsRequest:
    """The ``afford bars`` flags (each argument is the flag of its name, as typed) as a
    :class:`~afford.bars.record.BarsRequest`, checked before any byte is counted.

    The checks run in this order and the first that fails is an InputError (exit 2):
    ``order`` reads (:func:`afford.bars.parse_orders`); ``smoothing`` is a comma-separated
    non-empty list of :data:`afford.bars.SMOOTHINGS`; ``method`` is one of :data:`METHODS`;
    ``add_k`` is in (0, :data:`MAX_ADD_K`]; ``discount``, when given, in (0, 1]; ``out``
    and ``window_out`` can be written (an existing file only with ``force``); ``memory``
    is a size (:func:`memory_bytes`); ``buckets``, when given, a slot count
    (:func:`bucket_count`). The data, the window and the manifest are read when the bars
    are counted (:func:`afford.bars.record.make_bars`). ``command`` is the command line the
    bars file records."""
    try:
        orders = parse_orders(order)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    smooth = tuple(s.strip() for s in smoothing.split(",") if s.strip())
    bad = [s for s in smooth if s not in SMOOTHINGS]
    if bad or not smooth:
        raise InputError(f"--smoothing {smoothing!r}: choose from {', '.join(SMOOTHINGS)}")
    if method not in METHODS:
        raise InputError(f"--method {method!r}: choose auto, exact or streaming")
    flag_number("--add-k", add_k, high=MAX_ADD_K)
    flag_number("--discount", discount, high=1.0)
    for p in (out, window_out):
        if p is not None:
            check_writable(p, overwrite=force)
    return BarsRequest(data=data, heldout=heldout, orders=orders, smoothings=smooth,
                       k=add_k, discount=discount, method=method,
                       memory_bytes=memory_bytes(memory, "--memory"),
                       buckets=bucket_count(buckets), manifest=manifest,
                       window_out=window_out, command=command)


def count_and_write(req: BarsRequest, out: Path | None = None, force: bool = False
                    ) -> BarsFile:
    """The bars of ``req`` (:func:`afford.bars.record.make_bars`: the window's bytes written
    to ``req.window_out`` when given), and with ``out`` the bars file written there too (an
    existing file only with ``force``). InputError for data, a window or a manifest that
    cannot be read; MeasurementError when counting runs out of memory."""
    doc = make_bars(req)
    if out is not None:
        save_bars(doc, out, overwrite=force)
    return doc


def memory_bytes(text: str, flag: str = "--memory") -> int:
    """A memory size as typed (``4GiB``, ``512MB``, ``1048576``) in bytes, above 0 and at
    most :data:`afford.core.units.MAX_BYTES`; InputError naming ``flag`` otherwise."""
    try:
        n = parse_bytes(text)
    except UnitError as exc:
        raise InputError(f"{flag}: {exc}") from None
    return int(flag_number(f"{flag} {text!r}", n, high=MAX_BYTES))


def bucket_count(text: str | None) -> int | None:
    """Slots per hashed order: ``2^N`` or a count, rounded down to a power of two, from
    2^8 to 2^40 (a 64-bit hash keeps at most 2^63; 2^40 slots are terabytes); None when
    not given (the most that fit the memory). InputError otherwise."""
    if text is None:
        return None
    t = text.strip()
    try:
        n = 2 ** whole(t[2:], "--buckets 2^N", low=0, high=64) if t.startswith("2^") \
            else whole(parse_count(t) // 1, "--buckets")
        n = whole(n, f"--buckets {text!r}", low=2**8, high=2**40)
    except UnitError as exc:
        raise InputError(str(exc)) from None
    return 1 << (n.bit_length() - 1)


