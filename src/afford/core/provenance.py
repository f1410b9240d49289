"""Where every number came from.

docs/DESIGN.md section 3, rule 5: every number afford prints carries a provenance tag, and the
renderers refuse a bare number. Rule 6: a correction strikes a value, it never deletes it.
Rule 9: a probe that could not run says so (:class:`NotExecutable`), never a blank or a zero.

The tags:

- ``MEASURED``  read off a named box in a named run (``source`` names the run / quantity);
- ``FITTED``    predicted by a law (``source`` names the law and its R^2);
- ``MODULE``    computed by a named function from other numbers (``source`` names it);
- ``INHERITED`` carried from a cited source (``source`` is the citation);
- ``ASSUMED``   not measured; ``source`` is the reason.

Impossible is refused: a figure no measurement can be (inf or NaN, a negative time or size, a
share above 100 %, e.g. an MFU of 285 %) is never shown as a figure. :func:`impossible` names
why; the renderers show it as a failed measurement with that cause and the figure's source,
which names its inputs, as they refuse an untagged number. A share is a fraction of a whole
(unit :data:`SHARE`: MFU, a fixed share of a step, a utilisation), unlike a ``ratio`` (an error,
a share of a budget) that may pass 100 %.
"""

import math
from enum import Enum
from typing import Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from afford.core.units import format_bytes, format_count, format_duration, format_gpu_hours


class Tag(str, Enum):
    MEASURED = "MEASURED"
    FITTED = "FITTED"
    MODULE = "MODULE"
    INHERITED = "INHERITED"
    ASSUMED = "ASSUMED"


Scalar = Union[float, int, str, bool, None]


class Tagged(BaseModel):
    """A value with its unit and provenance. The only kind of number a renderer accepts."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    value: Scalar
    unit: str = ""
    tag: Tag
    source: str = Field(description="run/quantity (MEASURED), law and R^2 (FITTED), "
                        "function (MODULE), citation (INHERITED) or reason (ASSUMED)")
    extrapolated: bool = Field(False, description="FITTED outside the fitted range")
    provisional: bool = Field(False, description="derived from a data source not pinned")
    low: float | None = Field(None, description="the band's low end, where the figure is a "
                              "range (a host-bound step: the floor differs from process to "
                              "process); None: a point")
    high: float | None = Field(None, description="the band's high end (with ``low``)")

    @model_validator(mode="after")
    def _band_holds_the_value(self) -> "Tagged":
        """A band has both ends, in order, around a numeric value (within a part in 1e9)."""
        if (self.low is None) != (self.high is None):
            raise ValueError("a band needs both its low and its high end")
        if self.low is None:
            return self
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"a band needs a numeric figure, not {v!r}")
        slack = 1e-9 * max(abs(self.low), abs(self.high), abs(v))
        if not self.low - slack <= v <= self.high + slack:
            raise ValueError(f"band {self.low:.6g}..{self.high:.6g} does not hold {v:.6g}")
        return self

    @model_serializer(mode="wrap")
    def _point_without_band(self, handler):
        """A point is written as before bands existed: ``low`` and ``high`` only where set."""
        out = handler(self)
        if isinstance(out, dict) and self.low is None:
            out.pop("low", None)
            out.pop("high", None)
        return out

    @property
    def band(self) -> tuple[float, float] | None:
        return None if self.low is None else (self.low, self.high)

    def with_band(self, low: float, high: float) -> "Tagged":
        """The same figure with a band (a copy: Tagged is frozen)."""
        return Tagged.model_validate({**self.model_dump(), "low": low, "high": high})

    def __str__(self) -> str:
        """As a person reads it: ``41.30 ms (36.20..48.10 ms) [FITTED, extrapolated]``, the
        value at the precision the tables print (:func:`value_text`), its band where it has
        one (:func:`band_text`), the tag spelled out, and whether it is extrapolated or
        provisional; an impossible figure as ``FAILED: <why>``."""
        why = impossible(self)
        if why is not None:
            return f"FAILED: {why} [{self.tag.value}]"
        marks = [self.tag.value] + ["extrapolated"] * self.extrapolated + \
            ["provisional"] * self.provisional
        return f"{value_text(self)}{band_text(self)} [{', '.join(marks)}]"


def measured(value: Scalar, unit: str, source: str) -> Tagged:
    return Tagged(value=value, unit=unit, tag=Tag.MEASURED, source=source)


def fitted(value: Scalar, unit: str, source: str, *, extrapolated: bool = False) -> Tagged:
    return Tagged(value=value, unit=unit, tag=Tag.FITTED, source=source,
                  extrapolated=extrapolated)


def module(value: Scalar, unit: str, source: str) -> Tagged:
    return Tagged(value=value, unit=unit, tag=Tag.MODULE, source=source)


def inherited(value: Scalar, unit: str, citation: str) -> Tagged:
    return Tagged(value=value, unit=unit, tag=Tag.INHERITED, source=citation)


def assumed(value: Scalar, unit: str, reason: str) -> Tagged:
    return Tagged(value=value, unit=unit, tag=Tag.ASSUMED, source=reason)


def run_label(run, what: str = "certify") -> str:
    """The run a figure was read off, for its source: ``"<device>, certify <date> UTC"``.
    ``run``: a certificate, or anything with ``device_name`` and ``started_at`` (its
    environment, a levers section)."""
    run = getattr(run, "environment", run)
    return f"{run.device_name}, {what} {run.started_at:%Y-%m-%d %H:%M} UTC"


class Struck(BaseModel):
    """A withdrawn or retracted value: kept, struck, with the reason and its successor."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    value: Tagged
    status: str = Field("withdrawn", pattern="^(withdrawn|retracted)$")
    reason: str = Field(min_length=1)
    superseded_by: str | None = None


class CannotRunHere(RuntimeError):
    """Raised by a measurement that cannot run on this device by design (a host link on a
    CPU, a workload without a batch to multiply): recorded NOT EXECUTABLE, not failed. Any
    other exception of a measurement is a failure of this run (a full disk), and says so."""


class NotExecutable(BaseModel):
    """A probe that could not run here, with the error text (rule 9)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    what: str
    reason: str
    status: str = "NOT EXECUTABLE"
    failed: bool = Field(False, description="True: its measurement was attempted and failed "
                         "(an error, a dead child); False: it cannot run here by design (no "
                         "CUDA, an op without a deterministic kernel)")


#: unit of a fraction of a whole, 0..1 (shown as a percent; above 1 it is impossible)
SHARE = "share"
TIME_UNITS = frozenset({"s", "GPU-s"})
HUGE = 1e300  # no measured quantity comes near; its percent or product overflows to inf
SIZE_UNITS = frozenset({"B", "params", "tokens", "steps", "FLOP", "FLOP/s", "B/s",
                        "tokens/s", "chunks", "copies"})


def impossible(t: Tagged) -> str | None:
    """Why ``t`` cannot be a figure of a measurement (None: it can be): not finite, a
    negative time or size, a share outside 0..100 %."""
    v = t.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if not math.isfinite(v):
        return f"not a finite number ({v})"
    if abs(v) >= HUGE:
        return f"a number beyond any measurement ({v:.3g})"
    if t.unit == SHARE and not 0.0 <= v <= 1.0:
        return f"a share of {v:.0%}, and no share of a whole is below 0 % or above 100 %"
    if v < 0 and t.unit in TIME_UNITS:
        return f"a negative time ({v:.4g} {t.unit})"
    if v < 0 and t.unit in SIZE_UNITS:
        return f"a negative {'size' if t.unit == 'B' else 'count'} ({v:.4g} {t.unit})"
    return None


def require_tagged(x: object, where: str = "") -> Tagged:
    """Return ``x`` if it is :class:`Tagged`; raise ``TypeError`` for a bare number.

    Renderers call this on every number they print (rule 5).
    """
    if isinstance(x, Tagged):
        return x
    at = f" in {where}" if where else ""
    raise TypeError(f"untagged number {x!r}{at}: every printed number needs a provenance tag")


# ---------------------------------------------------------------- a figure as text


def value_text(t: Tagged) -> str:
    """The value in its unit, at the precision a person reads (``41.30 ms``, ``1.39 MiB``,
    ``181k tokens/s``, ``12.50%``): the one formatting of a figure, for the terminal's
    tables (:func:`afford.report.terminal.fmt` adds the tag letter) and ``str(tagged)``."""
    v, unit = t.value, t.unit
    if v is None:
        return "-"
    if isinstance(v, (str, bool)):
        return f"{v} {unit}".strip() if unit not in ("", "points") else str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if unit == "s":
        return format_duration(v)
    if unit == "GPU-s":
        return format_gpu_hours(v)
    if unit == "B":
        return format_bytes(v)
    if unit in ("FLOP/s", "B/s"):
        return format_rate(v, unit)
    if unit == "x":
        return f"{v:.1f}x"
    if unit in ("ratio", SHARE):
        return f"{v:.2%}"
    if unit == "tokens/s":
        return f"{format_count(v)} tokens/s"
    if unit in ("params", "tokens", "steps", "FLOP"):
        return format_count(v)
    unit = SINGULAR.get(unit, unit) if v == 1 else unit  # "1 session", not "1 sessions"
    if isinstance(v, int):
        return f"{v:d} {unit}".strip()
    return f"{v:.4g} {unit}".strip()


#: a counted unit's singular, for a count of one
SINGULAR = {"sessions": "session", "weeks": "week", "writes": "write", "chunks": "chunk",
            "copies": "copy", "sequences": "sequence", "children": "child", "days": "day"}


def band_text(t: Tagged) -> str:
    """`` (33.17..48.20 ms)``: the band's ends in the figure's unit (said once where both
    ends share it); empty for a point."""
    if t.band is None:
        return ""
    whole = isinstance(t.value, int) and not isinstance(t.value, bool)  # a count's ends too
    lo, hi = (value_text(t.model_copy(update={"value": int(v) if whole else v, "low": None,
                                              "high": None})) for v in t.band)
    lo_num, _, lo_unit = lo.rpartition(" ")
    hi_num, _, hi_unit = hi.rpartition(" ")
    if lo_num and lo_unit == hi_unit:
        return f" ({lo_num}..{hi_num} {hi_unit})"
    return f" ({lo}..{hi})"


def format_rate(v: float, unit: str) -> str:
    """``7.62e14, "FLOP/s"`` -> ``"762 TFLOP/s"``; ``4.24e12, "B/s"`` -> ``"4.24 TB/s"``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"
