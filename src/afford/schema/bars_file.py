"""``afford.bars/1`` (n-gram bars on a pinned held-out window) and ``afford.milestones/1``
(a ladder of rungs), with the result ``afford milestones --json`` prints.

A bar is a number on a window, so the window is part of the bar: every :class:`Bar` carries
its window's SHA-256 and a bars file holds the window's offset, length, hash and how it was
cut (fixed bytes, or eval_batches x batch x seq_len with the arithmetic written out). Data
not pinned in a manifest (``afford pin``) make every bar of the file provisional (DESIGN
section 3, rule 8), and the file says so at the top and in every figure.
"""

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from afford.core.provenance import Tagged
from afford.core.units import MAX_COUNT, UnitError, whole
from afford.schema.envelope import Envelope, load_envelope, save_envelope
from afford.schema.quantities import Bytes, Capacity, Count, Dim, Duration, Ratio, Timestamp

BARS_SCHEMA = "afford.bars/1"
LADDER_SCHEMA = "afford.milestones/1"
RESULT_SCHEMA = "afford.milestones-result/1"
BPB_UNIT = "bit/B"
FIXED, BATCHES = "fixed bytes", "eval_batches x batch x seq_len"

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256")]
WindowId = Annotated[str, Field(pattern=r"^[0-9a-f]{12,64}$", description="a window's SHA-256 "
                                "or its first 12+ hex digits")]


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid",
                              populate_by_name=True)


class DataRef(_Model):
    """The data the bars were counted on, and whether a manifest pins them."""

    path: str = Field(description="as given on the command line")
    sha256: Sha256
    size_bytes: Bytes
    pinned: bool
    manifest: str | None = Field(None, description="the manifest looked up")
    source: str | None = Field(None, description="the manifest's name for these data")


class WindowRef(_Model):
    """The held-out window: where, how long, its hash, and how it was cut."""

    sha256: Sha256
    offset_bytes: Bytes
    length_bytes: Capacity
    spec: str = Field(description="the --heldout spec as given")
    cut: Literal["fixed bytes", "eval_batches x batch x seq_len"]
    eval_batches: Dim | None = None
    batch: Dim | None = None
    seq_len: Dim | None = None
    arithmetic: str = Field(description="e.g. '10 x 10 x 1024 = 102,400 bytes'")
    bytes_path: str | None = Field(None, description="where the window's bytes were written "
                                   "(afford bars --window-out): what a trainer evaluates on")

    @model_validator(mode="after")
    def _batches(self) -> "WindowRef":
        if self.cut == BATCHES:
            dims = (self.eval_batches, self.batch, self.seq_len)
            if None in dims or math.prod(dims) != self.length_bytes:
                raise ValueError("a batches window is eval_batches x batch x seq_len bytes")
        return self


class OrderHashing(_Model):
    order: Dim
    slots: Count
    direct: bool = Field(description="indexed by the gram itself: exact")
    occupied: Count
    occurrences: Count = Field(description="grams of this order in the training part")
    dropped: Count = Field(description="occurrences not counted: their slot had another owner")
    dropped_share: Ratio


class Counting(_Model):
    """How the training part was counted."""

    method: Literal["exact", "streaming"]
    seconds: Duration = Field(description="wall time of counting (not scoring)")
    buckets: Dim | None = Field(None, description="streaming: slots per hashed order")
    table_bytes: Bytes | None = None
    hashing: list[OrderHashing] = []
    approximation: str | None = Field(None, description="streaming: what hashing changes")


class Bar(_Model):
    """One baseline: its order, smoothing, bits per byte, and the window it was scored on."""

    order: int = Field(ge=1, le=7)
    smoothing: Literal["kneser-ney", "add-k"]
    bpb: Tagged
    window_sha256: Sha256
    bits: Ratio
    bytes_scored: Capacity
    discounts: list[Ratio] = Field([], description="Kneser-Ney: D per level 1..order")
    k: Ratio | None = Field(None, description="add-k: the k")
    warnings: list[str] = []

    @field_validator("bpb")
    @classmethod
    def _unit(cls, v: Tagged) -> Tagged:
        if v.unit != BPB_UNIT or not isinstance(v.value, (int, float)):
            raise ValueError(f"a bar is a number in {BPB_UNIT}")
        return v

    @property
    def label(self) -> str:
        return f"{self.smoothing}:{self.order}"


class BarsFile(Envelope):
    schema_id: Literal["afford.bars/1"] = Field(BARS_SCHEMA, alias="schema")
    created_at: Timestamp
    afford_version: str
    command: str
    data: DataRef
    window: WindowRef
    train_bytes: Capacity
    train_segments: list[tuple[Bytes, Bytes]] = Field(description="(offset, length) outside the "
                                                  "window; no n-gram spans the window")
    counting: Counting
    provisional: bool = Field(description="the data are not pinned: every bar is provisional")
    bars: list[Bar]
    warnings: list[str] = []

    @model_validator(mode="after")
    def _consistent(self) -> "BarsFile":
        if self.provisional == self.data.pinned:
            raise ValueError("provisional must be exactly 'the data are not pinned'")
        for b in self.bars:
            if b.window_sha256 != self.window.sha256:
                raise ValueError(f"bar {b.label} was scored on window {b.window_sha256[:12]}, "
                                 f"not this file's {self.window.sha256[:12]}")
            if b.bpb.provisional != self.provisional:
                raise ValueError(f"bar {b.label}: provisional must follow the data's pin")
        return self

    def bar(self, label: str) -> Bar:
        """The bar ``smoothing:order`` (``kneser-ney:5``, ``kn:5``, ``add-k:1``)."""
        s, _, o = label.partition(":")
        s = {"kn": "kneser-ney", "addk": "add-k"}.get(s, s)
        found = [b for b in self.bars if b.smoothing == s and str(b.order) == o.strip()]
        if not found:
            have = ", ".join(b.label for b in self.bars)
            raise KeyError(f"no bar {label!r} here (bars: {have})")
        return found[0]


def load_bars(path: str | Path) -> BarsFile:
    return load_envelope(path, BarsFile, BARS_SCHEMA)


def save_bars(doc: BarsFile, path: str | Path, *, overwrite: bool) -> Path:
    return save_envelope(doc, path, overwrite=overwrite)


# ---------------------------------------------------------------- the ladder (TOML)


def _count(v):
    if v is None:
        return v
    try:
        return whole(v, "a count", low=1, high=MAX_COUNT)
    except UnitError as exc:
        raise ValueError(f"{exc} (a positive whole count, e.g. 7.5M)") from None


class Rung(_Model):
    """One rung: a run's eval readings against a bar, or against another run's curve."""

    name: str = Field(min_length=1)
    run: str = Field(min_length=1, description="the run whose eval readings are judged")
    bar: str | None = Field(None, description="smoothing:order of the bars file, e.g. kn:5")
    beats_run: str | None = Field(None, description="a curve rung: the run to beat at equal "
                                  "tokens")
    bars: str | None = Field(None, description="an afford.bars/1 file for this rung "
                             "(default: the ladder's); relative to the ladder file")
    window: WindowId | None = Field(None, description="a curve rung's window without a "
                                    "bars file")
    params: int | float | str | None = Field(None, description="model size, e.g. 7.5M")
    tokens: int | float | str | None = Field(None, description="tokens the rung needs "
                                             "(default 20 x params, Chinchilla)")

    @field_validator("params", "tokens")
    @classmethod
    def _counts(cls, v):
        return _count(v)

    @model_validator(mode="after")
    def _kind(self) -> "Rung":
        if (self.bar is None) == (self.beats_run is None):
            raise ValueError("a rung has exactly one of bar (a bar to beat) or beats_run "
                             "(a curve to beat at equal tokens)")
        if self.beats_run is not None and self.beats_run == self.run:
            raise ValueError("beats_run names the run itself")
        return self

    @property
    def kind(self) -> str:
        return "bar" if self.bar is not None else "curve"


class Ladder(_Model):
    schema_id: Literal["afford.milestones/1"] = Field(LADDER_SCHEMA, alias="schema")
    bars: str | None = Field(None, description="the afford.bars/1 file rungs read bars from")
    rungs: list[Rung] = Field(min_length=1)


# ---------------------------------------------------------------- results


class EvalReading(_Model):
    """One eval reading of a run: step index, tokens seen, BPB, and the window it was on."""

    run: str = Field(min_length=1)
    step: Count
    tokens: Dim
    bpb: Ratio = Field(gt=0)
    window: WindowId
    source: str = Field(description="where it was read: ledger id or log file:line")


class RungResult(_Model):
    name: str
    kind: Literal["bar", "curve"]
    run: str
    status: Literal["PASSED", "NOT YET"]
    provisional: bool = Field(False, description="the bar is on data not pinned")
    window_sha256: str
    bar: Tagged | None = Field(None, description="bar rungs: the bar's BPB")
    bar_label: str | None = None
    reading: Tagged | None = Field(None, description="the run's BPB the verdict rests on")
    baseline: Tagged | None = Field(None, description="curve rungs: the other curve at the "
                                    "same tokens, interpolated")
    margin: Tagged | None = Field(None, description="bar (or baseline) - reading; > 0 beats")
    step: int | None = None
    tokens: Tagged | None = Field(None, description="tokens at the reading (curve: compared at)")
    readings_used: int = 0
    readings_other_windows: int = 0
    params: Tagged | None = None
    tokens_needed: Tagged | None = None
    tokens_per_week: Tagged | None = None
    weeks_needed: Tagged | None = None
    reason: str = ""


class MilestonesResult(Envelope):
    schema_id: Literal["afford.milestones-result/1"] = Field(RESULT_SCHEMA, alias="schema")
    ladder: str
    plan: str | None = None
    rungs: list[RungResult]
    notes: list[str] = []
