"""Figures computed from figures: a MODULE tag that keeps its inputs' caveats.

A figure derived from an extrapolated prediction is itself extrapolated; one derived from a
count whose data are not pinned is provisional (docs/DESIGN.md section 3, rules 3 and 8); one
that rests on an ASSUMED input says so in its source. One that no measurement can be (inf, a
negative time: :func:`afford.core.provenance.impossible`) names its inputs in its source,
value and provenance, so the renderer that refuses it says which input caused it.

Floors and ceilings of a ratio use a relative tolerance of 1e-9 so that a budget landing
exactly on a step (3600 s / 0.1 s) counts that step despite binary rounding; the error this
allows is at most a part in a billion of the budget (40 us in 11 h).
"""

from __future__ import annotations

import math

from afford.core.provenance import Scalar, Tag, Tagged, impossible

REL_TOL = 1e-9
ASSUMED_NOTE = "; rests on an ASSUMED input"


def derive(value: Scalar, unit: str, source: str, *inputs: Tagged | None) -> Tagged:
    """A MODULE figure; extrapolated / provisional when any input is."""
    ins = [t for t in inputs if t is not None]
    if any(t.tag is Tag.ASSUMED or t.source.endswith(ASSUMED_NOTE) for t in ins):
        source += ASSUMED_NOTE
    out = Tagged(value=value, unit=unit, tag=Tag.MODULE, source=source,
                 extrapolated=any(t.extrapolated for t in ins),
                 provisional=any(t.provisional for t in ins))
    if ins and impossible(out) is not None:
        named = "; ".join(f"{t.value!r} {t.unit} {t.tag.value} ({t.source})" for t in ins)
        out = out.model_copy(update={"source": f"{source}; from the inputs: {named}"})
    return out


def num(t: Tagged) -> float:
    """The figure's value as a float; ``ValueError`` when it holds none."""
    if t.value is None or isinstance(t.value, (str, bool)):
        raise ValueError(f"figure has no numeric value: {t.value!r} ({t.source})")
    return float(t.value)


def floor_div(a: float, b: float) -> int:
    """floor(a / b) for a >= 0, b > 0, counting a quotient within 1e-9 of an integer as it."""
    return _whole(a, b, math.floor)


def ceil_div(a: float, b: float) -> int:
    """ceil(a / b) for a >= 0, b > 0, counting a quotient within 1e-9 of an integer as it."""
    return _whole(a, b, math.ceil)


def _whole(a: float, b: float, direction) -> int:
    """a / b rounded by ``direction`` (floor or ceil), or to the nearest integer when the
    quotient is within 1e-9 of it (relative, at least absolute): float error, not a fraction.
    (Adding the tolerance before floor() moved a quotient of 5e12 by 5263 whole units.)"""
    if b <= 0:
        raise ValueError(f"divisor must be positive, got {b}")
    q = a / b
    nearest = round(q)
    return max(0, nearest if abs(q - nearest) <= REL_TOL * max(1.0, abs(q)) else direction(q))
