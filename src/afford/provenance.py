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
"""

from __future__ import annotations

from enum import Enum
from typing import Union

from pydantic import BaseModel, ConfigDict, Field


class Tag(str, Enum):
    MEASURED = "MEASURED"
    FITTED = "FITTED"
    MODULE = "MODULE"
    INHERITED = "INHERITED"
    ASSUMED = "ASSUMED"


Scalar = Union[float, int, str, bool, None]


class Tagged(BaseModel):
    """A value with its unit and provenance. The only kind of number a renderer accepts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: Scalar
    unit: str = ""
    tag: Tag
    source: str = Field(description="run/quantity (MEASURED), law and R^2 (FITTED), "
                        "function (MODULE), citation (INHERITED) or reason (ASSUMED)")
    extrapolated: bool = Field(False, description="FITTED outside the fitted range")
    provisional: bool = Field(False, description="derived from a data source not pinned")

    def __str__(self) -> str:
        return " ".join(x for x in (f"{self.value}", self.unit, f"[{self.tag.value}]") if x)


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

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

    what: str
    reason: str
    status: str = "NOT EXECUTABLE"
    failed: bool = Field(False, description="True: its measurement was attempted and failed "
                         "(an error, a dead child); False: it cannot run here by design (no "
                         "CUDA, an op without a deterministic kernel)")


def require_tagged(x: object, where: str = "") -> Tagged:
    """Return ``x`` if it is :class:`Tagged`; raise ``TypeError`` for a bare number.

    Renderers call this on every number they print (rule 5).
    """
    if isinstance(x, Tagged):
        return x
    at = f" in {where}" if where else ""
    raise TypeError(f"untagged number {x!r}{at}: every printed number needs a provenance tag")
