"""Parse and format human quantities; SI base units inside (docs/DESIGN.md section 2).

Counts: ``"7.5M"`` -> 7_500_000 (k, M, B/G, T are powers of 1000: decimal, so ``"4k"`` is
4000, not 4096); ``"4Ki"`` -> 4096 (Ki, Mi, Gi are powers of 1024: binary, for sequence lengths
and other powers of two). Commands echo the parsed count (``seq 4000``), so a slip shows.
Durations: ``"11h"``, ``"90s"``, ``"7d"``, ``"1h30m"``, ``"2w"`` -> seconds.
Bytes: ``"20GB"`` -> 20e9 (decimal), ``"16GiB"`` -> 16 * 2**30 (binary).
Fractions: ``"5%"`` -> 0.05, ``"0.05"`` -> 0.05.

Every parser raises :class:`UnitError` (a ``ValueError``) with the text it could not read.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from afford.core.errors import InputError

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"

_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12,
                 "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30}
_DURATION_SUFFIX = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
                    "d": 86400.0, "w": 604800.0, "ms": 1e-3}
_BYTE_SUFFIX = {
    "B": 1, "": 1,
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}


class UnitError(ValueError):
    """A quantity that could not be read."""


def parse_count(text: str | int | float) -> float:
    """``"7.5M"`` -> 7.5e6, ``"4k"`` -> 4000 (decimal), ``"4Ki"`` -> 4096 (binary); plain
    numbers pass through."""
    if isinstance(text, (int, float)):
        return _finite(text, text)
    m = re.fullmatch(_NUMBER + r"\s*(Ki|Mi|Gi|[kKMBGT]?)", str(text).strip())
    if not m:
        raise UnitError(f"cannot read {text!r} as a count (examples: 124M, 7.5M, 1B, 2048, "
                        "4k = 4000, 4Ki = 4096)")
    return _finite(float(m.group(1)) * _COUNT_SUFFIX[m.group(2)], text)


def parse_duration(text: str | int | float) -> float:
    """Seconds from ``"11h"``, ``"1h30m"``, ``"7d"``, ``"90s"`` or a bare number of seconds."""
    if isinstance(text, (int, float)):
        return _finite(text, text)
    s = str(text).strip().replace(" ", "")
    if re.fullmatch(_NUMBER, s):
        return _finite(float(s), text)
    parts = re.findall(_NUMBER + r"(ms|sec|min|s|m|h|d|w)", s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise UnitError(f"cannot read {text!r} as a duration (examples: 11h, 90s, 1h30m, 7d)")
    return _finite(sum(float(n) * _DURATION_SUFFIX[u] for n, u in parts), text)


def parse_bytes(text: str | int | float) -> int:
    """Bytes from ``"20GB"`` (decimal) or ``"16GiB"`` (binary); a bare number is bytes."""
    if isinstance(text, (int, float)):
        return int(_finite(text, text))
    m = re.fullmatch(_NUMBER + r"\s*([kKMGT]i?B|B)?", str(text).strip())
    if not m or (m.group(2) or "") not in _BYTE_SUFFIX:
        raise UnitError(f"cannot read {text!r} as a size (examples: 20GB, 16GiB, 512MiB)")
    return int(round(_finite(float(m.group(1)) * _BYTE_SUFFIX[m.group(2) or ""], text)))


def parse_number(text: str | int | float, what: str = "number") -> float:
    """A plain number (``6.49``, ``-3``, ``1e-3``) from a number or its text, finite; no
    unit. UnitError naming ``what`` for anything else (a list, ``nan``, ``6.49 bit``)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise UnitError(f"{what}: {_short(text)} is not a number")
    if isinstance(text, str):
        if not re.fullmatch(r"[-+]?" + _NUMBER, text.strip()):
            raise UnitError(f"{what}: {_short(text)} is not a number")
        text = float(text)
    v = _as_float(text)
    if not math.isfinite(v):
        raise UnitError(f"{what}: {_short(text)} is not a finite number")
    return v


def parse_fraction(text: str | int | float) -> float:
    """``"5%"`` -> 0.05; ``"0.05"`` -> 0.05."""
    if isinstance(text, (int, float)):
        return _finite(text, text)
    s = str(text).strip()
    m = re.fullmatch(_NUMBER + r"\s*(%?)", s)
    if not m:
        raise UnitError(f"cannot read {text!r} as a fraction (examples: 5%, 0.05)")
    value = float(m.group(1))
    return _finite(value / 100.0 if m.group(2) else value, text)


# The largest quantities afford accepts from a file or a flag: far beyond any real run, small
# enough that the plan's arithmetic (products, exponentials) stays finite.
MAX_SECONDS = 100 * 365.25 * 86400.0  # a century
MIN_SECONDS = 1e-9  # a nanosecond: no step, call or write afford times (or divides by) is shorter
MAX_BYTES = 2**70  # a zebibyte
MIN_DEVICE_BYTES = 2**20  # a device's memory: a mebibyte at least (a budget of it holds a byte)
MAX_COUNT = 1e18  # tokens, steps, parameters
MAX_DIM = 2**40  # a shape's dimension (batch, sequence, width, sweep value): no device holds more
MAX_RATE = 1e30  # FLOP/s, B/s: 1e15 times a current GPU's dense bf16 peak (~1e15 FLOP/s)
MAX_FLOPS = 1e40  # FLOPs of a step or a run
MAX_MAGNITUDE = 1e60  # any number in a file afford reads: products of a few stay finite
MIN_FRACTION = 1e-6  # the smallest share (of device memory) a flag may give: below, shares of
#                      it leave the floats
FIRST_DATE = datetime(1970, 1, 1, tzinfo=timezone.utc)  # dates afford reads lie in
LAST_DATE = datetime(9000, 1, 1, tzinfo=timezone.utc)   # [FIRST_DATE, LAST_DATE)


def bounded(value: float, what: str, *, low: float = 0.0, high: float = MAX_COUNT,
            low_open: bool = True) -> float:
    """``value`` if it is finite and in ``(low, high]`` (``[low, high]`` with
    ``low_open=False``); UnitError naming ``what`` otherwise. The one range check every
    number read from a file or a flag goes through."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnitError(f"{what}: {value!r} is not a number")
    v = _as_float(value)
    if not math.isfinite(v) and not isinstance(value, int):
        raise UnitError(f"{what}: {_short(value)} is not a finite quantity")
    if not math.isfinite(v) or v < low or (low_open and v == low) or v > high:
        side = "(" if low_open else "["
        raise UnitError(f"{what}: {_short(value)} is out of range {side}{low:g}, {high:g}]")
    return v


def whole(value: object, what: str, *, low: int = 1, high: float = MAX_COUNT) -> int:
    """``value`` as an int when it is a whole number in ``[low, high]`` (an int, a float
    with no fraction, or a count such as ``"4k"``); UnitError naming ``what`` otherwise:
    ``1.5`` is refused, never truncated to 1."""
    if isinstance(value, bool):
        raise UnitError(f"{what}: {value!r} is not a whole number")
    if isinstance(value, str):
        try:
            value = parse_count(value)
        except UnitError as exc:
            raise UnitError(f"{what}: {exc}") from None
    v = bounded(value, what, low=low, high=high, low_open=False)
    if v != math.floor(v):
        raise UnitError(f"{what}: {_short(value)} is not a whole number")
    return int(value) if isinstance(value, int) else int(v)


def check_date(value: datetime, what: str) -> datetime:
    """``value`` when it is a moment afford can compute with: time-zone aware (a naive one
    is taken as UTC) and from :data:`FIRST_DATE` up to :data:`LAST_DATE`; UnitError
    naming ``what`` otherwise (year 1 at +14:00 lies before year 1 in UTC)."""
    if not isinstance(value, datetime):
        raise UnitError(f"{what}: {value!r} is not a date")
    d = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    try:
        utc = d.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not FIRST_DATE <= utc < LAST_DATE:
        raise UnitError(f"{what}: {value.isoformat()} is out of range (from "
                        f"{FIRST_DATE:%Y-%m-%d} to {LAST_DATE:%Y-%m-%d})")
    return value


def _as_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer past the largest float (JSON and TOML allow one)
        return math.inf


def _short(value: object) -> str:
    """``value`` for a message: a number of hundreds of digits as its magnitude."""
    text = repr(value)
    return text if len(text) <= 40 else f"a number of {len(text)} digits"


def _finite(value: float, text: object) -> float:
    v = _as_float(value)
    if not math.isfinite(v):
        raise UnitError(f"{_short(text)} is not a finite quantity")
    return v


def format_count(n: float, digits: int = 3) -> str:
    """7_500_000 -> ``"7.5M"``; from 1e15 on, ``"6.75e+15"``."""
    if abs(n) >= 1e15:
        return f"{n:.{digits}g}"
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.{digits}g}{suffix}"
    return f"{n:.{digits}g}"


def format_bytes(n: float, binary: bool = True) -> str:
    """Bytes in GiB/MiB (binary) or GB/MB (decimal)."""
    units = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if binary else \
            (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))
    for suffix, scale in units:
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}"
    return f"{n:.0f} B"


def format_gpu_hours(seconds: float) -> str:
    """GPU time as a quota is written: ``108000`` -> ``"30 GPU-h"``, ``40080`` ->
    ``"11.13 GPU-h"`` (platforms state quotas in GPU-hours, not days)."""
    return f"{float(seconds) / 3600.0:.4g} GPU-h"


def format_duration(seconds: float) -> str:
    """Human duration: ``"2.50 ms"``, ``"1.23 s"``, ``"11h 00m"``, ``"3d 04h"``."""
    s = float(seconds)
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    if s < 120.0:
        return f"{s:.2f} s"
    if s < 3600.0:
        return f"{int(s // 60)}m {int(s % 60):02d}s"
    if s < 86400.0:
        return f"{int(s // 3600)}h {int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d {int(s % 86400 // 3600):02d}h"


def flag_number(flag: str, value: float | None, **limits) -> float | None:
    """A number flag checked by :func:`afford.core.units.bounded` (finite, in range); InputError
    naming the flag otherwise (exit 2). ``None`` (not given) passes."""
    if value is None:
        return None
    try:
        return bounded(value, flag, **limits)
    except UnitError as exc:
        raise InputError(str(exc)) from None
