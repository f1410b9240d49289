"""Platforms as data: where a run will train, each figure with its citation or its reason.

A platform file (TOML, ``afford.platform/1``) names its device(s), memory budget fraction,
session cap, margin, weekly quota, disk, and the startup components a certificate cannot
measure (package install, data attach). Every figure is an inline table with ``value`` and
exactly one of ``cite`` (a source: tagged INHERITED) or ``assumed`` (the reason: ASSUMED)::

    session_cap  = { value = "12h", cite = "Kaggle docs, Notebooks: technical specifications" }
    weekly_quota = { value = "none", assumed = "your own machine bills nothing" }
    disk         = { value = "unknown", assumed = "afford does not look at your disks" }

``none`` means there is no such limit; ``unknown`` that the limit exists but nobody publishes
it (the plan warns and leaves out what depends on it). Presets live in
``afford/data/platforms/``; any other path to a TOML file works too.
"""

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from afford.core.errors import InputError
from afford.core.io import STDIN, loads_toml, read_toml
from afford.core.provenance import Tagged, assumed, inherited
from afford.core.published_constants import (
    DATA,
    MEMORY_FRACTION,
    MEMORY_FRACTION_REASON,
    check_fraction,
)
from afford.core.units import (
    MAX_BYTES,
    MAX_SECONDS,
    MIN_DEVICE_BYTES,
    MIN_SECONDS,
    bounded,
    parse_bytes,
    parse_duration,
    parse_fraction,
)
from afford.schema.envelope import validate

PLATFORM_SCHEMA = "afford.platform/1"
DEFAULT_MARGIN_REASON = ("afford's default margin: one hour before the session cap for "
                         "startup and the final save")


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid", frozen=True,
                              populate_by_name=True)


class Figure(_Model):
    """A platform figure: ``value`` and either ``cite`` (INHERITED) or ``assumed`` (ASSUMED)."""

    kind: ClassVar[str] = "duration"
    sentinels: ClassVar[tuple[str, ...]] = ()

    value: str | float | int
    cite: str | None = Field(None, min_length=1, description="where the figure comes from")
    assumed: str | None = Field(None, min_length=1, description="why it is assumed")

    @field_validator("value", mode="before")
    @classmethod
    def _not_a_bool(cls, v: object) -> object:
        if isinstance(v, bool):  # before pydantic reads true as 1
            raise ValueError(f"{v!r} is not a quantity")
        return v

    @model_validator(mode="after")
    def _check(self) -> "Figure":
        if (self.cite is None) == (self.assumed is None):
            raise ValueError("give exactly one of cite (a source for the figure) or assumed "
                             "(the reason it is assumed)")
        self.si()
        return self

    @property
    def sentinel(self) -> str | None:
        """``"none"`` or ``"unknown"`` when the value is one of them, else ``None``."""
        if isinstance(self.value, str) and self.value.strip().lower() in ("none", "unknown"):
            return self.value.strip().lower()
        return None

    def si(self) -> float | None:
        """The value in SI units (seconds, bytes, a fraction); ``None`` for a sentinel."""
        if self.sentinel is not None:
            if self.sentinel not in self.sentinels:
                allowed = " or ".join(f"'{s}'" for s in self.sentinels) or "a quantity"
                raise ValueError(f"'{self.sentinel}' is not allowed here (give {allowed})")
            return None
        value = _PARSE[self.kind](self.value)
        _check_range(self.kind, value)
        return value

    def tagged(self) -> Tagged:
        v = self.si()
        unit = {"duration": "s", "bytes": "B", "fraction": "ratio"}[self.kind]
        if v is not None and self.kind == "bytes":
            v = int(v)
        if self.cite is not None:
            return inherited(v, unit, self.cite)
        return assumed(v, unit, self.assumed or "")


_PARSE = {"duration": parse_duration, "bytes": parse_bytes, "fraction": parse_fraction}


_HIGH = {"duration": MAX_SECONDS, "bytes": MAX_BYTES}


def _check_range(kind: str, value: float) -> None:
    if kind == "fraction":
        check_fraction(value)
        return
    bounded(value, "value", high=_HIGH[kind], low_open=False)


class Duration(Figure):
    kind: ClassVar[str] = "duration"


class _Positive(Figure):
    """A figure something is divided by: zero is refused (give 'none' for no limit), and so
    is a duration under a nanosecond (:data:`~afford.core.units.MIN_SECONDS`), whose shares leave
    the floats."""

    def si(self) -> float | None:
        v = super().si()
        least = MIN_SECONDS if self.kind == "duration" else 1
        if v is not None and v < least:
            raise ValueError(f"{self.value!r} must be positive (at least {least:g} "
                             f"{'s' if self.kind == 'duration' else 'byte'}; give 'none' or "
                             "'unknown' for no limit or an unknown one, where allowed)")
        return v


class Cap(_Positive):
    kind: ClassVar[str] = "duration"
    sentinels: ClassVar[tuple[str, ...]] = ("none",)


class Quota(_Positive):
    kind: ClassVar[str] = "duration"
    sentinels: ClassVar[tuple[str, ...]] = ("none", "unknown")


class Size(_Positive):
    kind: ClassVar[str] = "bytes"
    sentinels: ClassVar[tuple[str, ...]] = ("unknown",)


class DeviceMemory(Size):
    """A device's memory: a mebibyte at least (:data:`~afford.core.units.MIN_DEVICE_BYTES`), so
    that a budget of any fraction of it holds a byte."""

    def si(self) -> float | None:
        v = super().si()
        if v is not None and v < MIN_DEVICE_BYTES:
            raise ValueError(f"{self.value!r} is not a device's memory (at least "
                             f"{MIN_DEVICE_BYTES} bytes, a mebibyte)")
        return v


class Fraction(Figure):
    kind: ClassVar[str] = "fraction"


class StartupPart(Figure):
    """A startup component the certificate cannot measure; ``what`` says what it is."""

    kind: ClassVar[str] = "duration"
    what: str = ""


class Device(_Model):
    """The platform's device. Without ``name`` and ``match`` it is a what-if (a memory size
    only): any certificate's device is taken for it, and the plan says so."""

    name: str | None = Field(None, min_length=1, description="the device, as a person reads it")
    match: str | None = Field(None, min_length=1, description="a word (or words) that a "
                              "certificate's device name must contain; default: name")
    count: int = Field(1, ge=1, description="devices on the platform (a plan uses one)")
    memory: DeviceMemory | None = Field(None, description="memory of one device; default: the "
                                "certificate's measured figure")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        mem = f" of {self.memory.value}" if self.memory else ""
        return f"an unnamed device{mem}"

    def matches(self, device_name: str) -> bool | None:
        """Word match, case-insensitive: ``P100`` matches ``Tesla P100-PCIE-16GB``; ``None``
        when the platform names no device."""
        if not (self.match or self.name):
            return None
        pattern = r"(?<![0-9A-Za-z])" + re.escape(self.match or self.name) + r"(?![0-9A-Za-z])"
        return re.search(pattern, device_name, re.IGNORECASE) is not None


class Platform(_Model):
    schema_id: Literal["afford.platform/1"] = Field(PLATFORM_SCHEMA, alias="schema")
    name: str = Field(min_length=1)
    description: str = ""
    device: Device | None = Field(None, description="absent: the certificate's own device")
    budget_fraction: Fraction = Fraction(value=MEMORY_FRACTION, assumed=MEMORY_FRACTION_REASON)
    session_cap: Cap
    margin: Duration = Duration(value="1h", assumed=DEFAULT_MARGIN_REASON)
    weekly_quota: Quota
    disk: Size
    mtbf: Cap | None = Field(None, description="mean time between failures (preemptions)")
    startup: dict[str, StartupPart] = {}

    @model_validator(mode="after")
    def _margin_below_cap(self) -> "Platform":
        cap, margin = self.session_cap.si(), self.margin.si()
        if cap is not None and margin is not None and margin >= cap:
            raise ValueError(f"margin ({margin:g} s) must be shorter than session_cap "
                             f"({cap:g} s): no time would be left to train")
        if cap is not None and cap <= 0:
            raise ValueError("session_cap must be positive (or 'none')")
        return self


def presets() -> list[str]:
    folder = DATA / "platforms"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_platform(spec: str | Path) -> Platform:
    """A preset by name (``kaggle-p100``) or a TOML file by path (``-``: standard input);
    InputError otherwise."""
    path = Path(spec)
    if str(spec).endswith(".toml") or str(spec) == STDIN or path.is_file():
        return validate(read_toml(path, "platform"), Platform, f"platform file {path}")
    if str(spec) in presets():
        text = (DATA / "platforms" / f"{spec}.toml").read_text(encoding="utf-8")
        label = f"platform preset {spec}"
        return validate(loads_toml(text, label), Platform, label)
    raise InputError(f"unknown platform {str(spec)!r}: presets are {', '.join(presets())}; "
                     "or give the path to a platform TOML file")
