"""The history ledger: an append-only TSV of readings, one a line (docs/DESIGN.md section 3,
rules 1, 5 and 6; section 5 "File formats").

Why a TSV: it is git-friendly (a new reading is a new line; a strike changes one line) and any
tool reads it. The first line is the header below; it is the format's version marker
(``afford.history/1`` is exactly these columns in this order; another header is refused).

Rules this module enforces, each with a test:

- **A reading of a step needs its step indices** (rule 1), decided by the unit and kind of the
  quantity, not by one spelling of its name: a *step reading* is (a) a quantity named
  ``...step_seconds`` / ``...step<N>_seconds`` (the name states a step time), whatever its tag;
  (b) a MEASURED time (unit s, ms, us, ns, s/step, ...) of a quantity that names a step in any
  spelling (``step_time``, ``time_per_step``, ``warm_step_ms``), or any MEASURED figure in a
  unit per step (s/step); (c) a MEASURED throughput of training work (unit tokens/s, samples/s,
  steps/s, it/s, ...), whatever its name (``tokens_per_second``): a rate of steps is read off
  steps. Such a reading without ``step_indices`` is refused; a name ending in ``seconds`` must
  have the unit ``s``.
- **Step 0 is never warm** (rule 1): a warm step reading (a step reading whose name says
  ``warm``) whose step indices include 0 is refused. Step 0 pays for compilation, allocation
  and caches; it is recorded on its own (``step0_seconds``) and the warm-up is reported apart.
- **A NOISY certificate stays marked**: every reading ``history add --cert`` takes from a
  certificate whose time verdict is NOISY is appended with status ``noisy`` and the reason (the
  certificate's NOISY reasons, the host load it recorded), and its source says so wherever it
  is shown; a noisy reading is current (not struck), and a strike keeps the NOISY reason beside
  its own.
- **Readings are only appended; a correction strikes, it never deletes** (rule 6). Striking
  sets ``status`` (withdrawn: replaced or no longer claimed; retracted: it was wrong), a
  ``reason`` (required) and optionally ``superseded_by`` (the id of another reading) on the
  struck line; every other line, and every other field of that line, stays byte for byte.
  A struck reading cannot be struck again or revived.
- Every write is atomic (:func:`afford.core.io.atomic_write_text`): a killed writer leaves the
  old ledger whole or the new one whole. Every read-modify-write (append, strike, create) holds
  the ledger's lock (:func:`afford.core.lock.locked`), so concurrent writers all land, or wait
  and are refused (exit 2) when the lock stays taken; none is lost.

Each reading has an ``id``: ``r`` + 10 hex digits of the SHA-256 of its content fields, so ids
do not collide when two branches append and are merged, and the same reading cannot be
appended twice.

Step indices are written compactly: ``3-14`` (steps 3 to 14), ``0,2,5-9``, and per child
process ``c0:3-14;c1:3-17;c2:3-12``. They are checked as ranges, never expanded
(``3-99999999999`` costs nothing); an index is a non-negative int64.
"""

import hashlib
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from afford.core.errors import InputError
from afford.core.io import atomic_write_text
from afford.core.lock import locked
from afford.core.provenance import Struck, Tag, Tagged
from afford.core.units import MAX_MAGNITUDE, UnitError, bounded, check_date

LEDGER_SCHEMA = "afford.history/1"
COLUMNS = ("id", "date", "device", "torch", "commit", "command", "quantity", "value", "unit",
           "tag", "step_indices", "config_fingerprint", "status", "reason", "superseded_by")
HEADER = "\t".join(COLUMNS)
STATUSES = ("current", "noisy", "withdrawn", "retracted")
LIVE = ("current", "noisy")  # not struck

_STEP_TIME = re.compile(r"(^|[/._:])step\d*_seconds$")
_NAMES_A_STEP = re.compile(r"(^|[^a-z])step(?!s_per|_count|s$)", re.IGNORECASE)
TIME_UNITS = frozenset({"s", "ms", "us", "µs", "ns", "min", "h"})
SIZE_UNITS = frozenset({"B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB"})
RATE_UNITS = frozenset({"tokens/s", "tok/s", "token/s", "samples/s", "sample/s",
                        "sequences/s", "examples/s", "steps/s", "step/s", "it/s",
                        "images/s", "batches/s"})
MAX_STEP_INDEX = 2**63 - 1  # an int64 step counter
MAX_EXPANDED_STEPS = 1_000_000  # parse_step_indices lists at most this many indices
_RANGE = r"\d{1,19}(?:-\d{1,19})?"
_GROUP = rf"(?:[A-Za-z][A-Za-z0-9_]*:)?{_RANGE}(?:,{_RANGE})*"
_STEPS = re.compile(rf"{_GROUP}(?:;{_GROUP})*")
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def is_step_time(quantity: str, unit: str | None = None, tag: Tag | None = None) -> bool:
    """True for a reading of a step, which must carry the index of the step(s) it read: a
    quantity named ``...step_seconds`` / ``...step<N>_seconds`` (any tag); or, MEASURED, a
    time of a quantity that names a step (``step_time`` in ms) or a throughput of training
    work (``tokens_per_second`` in tokens/s). ``unit`` and ``tag`` None: the name alone."""
    if _STEP_TIME.search(quantity):
        return True
    if tag is not Tag.MEASURED or unit is None:
        return False
    u = unit.strip().lower()
    if u in RATE_UNITS or u.endswith("/step"):  # a throughput, or a unit per step
        return True
    return u in TIME_UNITS and bool(_NAMES_A_STEP.search(quantity))


def is_warm_step_time(quantity: str, unit: str | None = None, tag: Tag | None = None) -> bool:
    """True for a warm step reading (a step reading whose name says warm): step 0 is never
    one."""
    return "warm" in quantity.lower() and is_step_time(quantity, unit, tag)


def parse_step_ranges(text: str) -> dict[str, list[tuple[int, int]]]:
    """``"c0:3-5;c1:3,4"`` -> ``{"c0": [(3, 5)], "c1": [(3, 3), (4, 4)]}``; ungrouped ->
    key ``""``. Checked without expanding the ranges.

    InputError for anything else (ranges must ascend, indices are non-negative int64)."""
    s = text.strip()
    if not _STEPS.fullmatch(s):
        raise InputError(f"step indices {text!r}: write them as 3-14, 0,2,5-9 or "
                         "c0:3-14;c1:3-17 (per child)")
    out: dict[str, list[tuple[int, int]]] = {}
    for group in s.split(";"):
        label, _, ranges = group.rpartition(":")
        if label in out:
            raise InputError(f"step indices {text!r}: the group {label or '(unlabelled)'} "
                             "appears twice")
        out[label] = _ranges(ranges, text)
    return out


def _ranges(ranges: str, text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for part in ranges.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if b > MAX_STEP_INDEX:
            raise InputError(f"step indices {text!r}: {b} is beyond any step counter "
                             f"(at most {MAX_STEP_INDEX})")
        if b < a or (spans and a <= spans[-1][1]):
            raise InputError(f"step indices {text!r}: ranges must ascend ({part!r})")
        spans.append((a, b))
    return spans


def parse_step_indices(text: str) -> dict[str, list[int]]:
    """``"c0:3-5;c1:3,4"`` -> ``{"c0": [3, 4, 5], "c1": [3, 4]}``; ungrouped -> key ``""``.

    InputError for anything :func:`parse_step_ranges` refuses, and for more than
    :data:`MAX_EXPANDED_STEPS` indices in all (use :func:`parse_step_ranges` for those)."""
    groups = parse_step_ranges(text)
    count = sum(b - a + 1 for spans in groups.values() for a, b in spans)
    if count > MAX_EXPANDED_STEPS:
        raise InputError(f"step indices {text!r}: {count} indices, more than the "
                         f"{MAX_EXPANDED_STEPS} that are listed one by one")
    return {label: [i for a, b in spans for i in range(a, b + 1)]
            for label, spans in groups.items()}


def format_step_indices(indices: list[int] | tuple[int, ...]) -> str:
    """[3, 4, 5, 9] -> ``"3-5,9"`` (sorted, duplicates dropped)."""
    xs = sorted(set(int(i) for i in indices))
    if not xs:
        raise ValueError("no step indices to format")
    parts, start, prev = [], xs[0], xs[0]
    for x in xs[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(parts)


class Reading(BaseModel):
    """One line of the ledger."""

    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, frozen=True, extra="forbid")

    id: str = Field(pattern=r"^r[0-9a-f]{10}$")
    date: datetime
    device: str = Field(min_length=1)
    torch: str = ""
    commit: str = ""
    command: str = Field(min_length=1, description="the run the reading was read off")
    quantity: str = Field(min_length=1, pattern=r"^\S+$")
    value: int | float
    unit: str = ""
    tag: Tag
    step_indices: str = ""
    config_fingerprint: str = ""
    status: Literal["current", "noisy", "withdrawn", "retracted"] = "current"
    reason: str = ""
    superseded_by: str = ""

    @field_validator("value")
    @classmethod
    def _unsigned_zero(cls, v: int | float) -> int | float:
        return 0.0 if v == 0 and isinstance(v, float) else v  # -0.0 reads "0", never "-0"

    @model_validator(mode="after")
    def _rules(self) -> "Reading":
        sized = self.unit.strip() in TIME_UNITS | SIZE_UNITS | RATE_UNITS
        try:  # a time, a size or a rate is never negative; any reading is finite
            bounded(self.value, "value", low=0.0 if sized else -MAX_MAGNITUDE,
                    high=MAX_MAGNITUDE, low_open=False)
            check_date(self.date, "date")
        except UnitError as exc:
            raise ValueError(f"{exc}" + (f" (a reading in {self.unit} is never negative)"
                                         if sized and self.value < 0 else "")) from None
        if is_step_time(self.quantity, self.unit, self.tag):
            if not self.step_indices:
                raise ValueError(f"{self.quantity} ({self.unit or 'no unit'}) is a reading of "
                                 "a step: a step time without the index of the step it timed "
                                 "is not a measurement of a step (give the step indices, "
                                 "e.g. 3-14 or c0:3-14;c1:3-17)")
            if self.quantity.endswith("seconds") and self.unit != "s":
                raise ValueError(f"{self.quantity} is a step time: its unit must be s, "
                                 f"not {self.unit!r}")
        if self.step_indices:
            groups = parse_step_ranges(self.step_indices)
            if is_warm_step_time(self.quantity, self.unit, self.tag) and any(
                    spans[0][0] == 0 for spans in groups.values()):
                raise ValueError(f"{self.quantity} is a warm step time at step index 0: "
                                 "step 0 is never warm (it pays for compilation, allocation "
                                 "and caches); record it as step0_seconds and give the warm "
                                 "steps' indices")
        if self.status == "current" and (self.reason or self.superseded_by):
            raise ValueError("a current reading has no reason or superseded_by")
        if self.status == "noisy" and self.superseded_by:
            raise ValueError("a noisy reading is current: it has no superseded_by")
        if self.status != "current" and not self.reason.strip():
            raise ValueError(f"a {self.status} reading needs its reason")
        return self

    @property
    def struck(self) -> bool:
        return self.status not in LIVE

    @property
    def noisy(self) -> bool:
        return self.status == "noisy"

    def tagged(self) -> Tagged:
        """The value as a renderer takes it: tagged, with the run it was read off (and, for
        a reading of a NOISY certificate, that it was NOISY and why)."""
        src = f"{self.quantity}, {self.device}, {self.command}, {self.date:%Y-%m-%d}"
        if self.step_indices:
            src += f", steps {self.step_indices}"
        if self.noisy:
            src += f"; NOISY certificate: {self.reason}"
        return Tagged(value=self.value, unit=self.unit, tag=self.tag, source=src)

    def shown(self) -> Tagged | Struck:
        """Tagged when current; :class:`~afford.core.provenance.Struck` (with reason) when not."""
        if not self.struck:
            return self.tagged()
        return Struck(value=self.tagged(), status=self.status, reason=self.reason,
                      superseded_by=self.superseded_by or None)


def _content_id(fields: dict) -> str:
    keys = ("date", "device", "torch", "commit", "command", "quantity", "value", "unit", "tag",
            "step_indices", "config_fingerprint")
    text = "\t".join(_cell(k, fields.get(k, "")) for k in keys)
    return "r" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def new_reading(*, date: datetime | None = None, **fields) -> Reading:
    """A current reading with its content id; InputError when it breaks a rule."""
    fields["date"] = (date or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(
        microsecond=0)
    fields.setdefault("tag", Tag.MEASURED)
    fields["tag"] = Tag(fields["tag"])
    try:
        return Reading(id=_content_id(fields), **fields)
    except ValidationError as exc:
        raise InputError(_first_error(exc, fields.get("quantity", "?"))) from None


def _first_error(exc: ValidationError, what: str) -> str:
    e = exc.errors()[0]
    where = ".".join(str(x) for x in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    return f"reading {what}: {where + ': ' if where else ''}{msg}"


# ---------------------------------------------------------------- the file


def _cell(name: str, value) -> str:
    if name == "date" and isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if name == "value" and isinstance(value, float):
        return repr(value)
    if isinstance(value, Tag):
        return value.value
    return "".join(_ESCAPES.get(ch, ch) for ch in str(value))


def _uncell(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _UNESCAPES.get(m.group(1), m.group(1)), text)


def to_line(r: Reading) -> str:
    return "\t".join(_cell(c, getattr(r, c)) for c in COLUMNS)


def from_line(line: str, where: str) -> Reading:
    cells = line.split("\t")
    if len(cells) != len(COLUMNS):
        raise InputError(f"{where}: {len(cells)} columns, expected {len(COLUMNS)} "
                         f"({', '.join(COLUMNS)})")
    raw = {c: _uncell(v) for c, v in zip(COLUMNS, cells)}
    value = raw["value"]
    try:
        raw["value"] = int(value) if re.fullmatch(r"-?\d+", value) else float(value)
    except ValueError:
        raise InputError(f"{where}: value {value!r} is not a number") from None
    try:
        r = Reading(**raw)
    except ValidationError as exc:
        raise InputError(f"{where}: {_first_error(exc, raw['quantity'])}") from None
    return r


def create(path: str | Path) -> Path:
    """A new ledger holding only the header; never overwrites an existing file."""
    with locked(path):
        return atomic_write_text(path, HEADER + "\n", overwrite=False)


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such ledger (create it with `afford history add`, which "
                         "starts a new one, or write the header line)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it: {exc}") from None
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        raise InputError(f"{path}: not an {LEDGER_SCHEMA} ledger: its first line must be the "
                         f"header {HEADER!r}")
    return lines


def _rows(p: Path, lines: list[str]) -> list[Reading]:
    rows = [from_line(line, f"{p}:{n}") for n, line in enumerate(lines[1:], 2) if line]
    seen: set[str] = set()
    for r in rows:
        if r.id in seen:
            raise InputError(f"{p}: the id {r.id} appears twice")
        seen.add(r.id)
    return rows


def load(path: str | Path) -> list[Reading]:
    """Every reading of the ledger, struck ones included, in file order. Takes no lock:
    writes are atomic renames, so this sees the ledger before or after a write."""
    p = Path(path)
    return _rows(p, _read_lines(p))


def append(path: str | Path, new: list[Reading]) -> list[Reading]:
    """Append readings (creating the ledger if absent); refuses a reading already there.
    Load, check and write happen under the ledger's lock: concurrent appends all land."""
    p = Path(path)
    for r in new:
        if r.struck:
            raise InputError(f"reading {r.id}: only current (or noisy) readings are "
                             "appended; strike afterwards with `afford history strike`")
    with locked(p):
        lines = _read_lines(p) if p.exists() else [HEADER]
        have = {r.id for r in _rows(p, lines)}
        for r in new:
            if r.id in have:
                raise InputError(f"{p}: reading {r.id} ({r.quantity} = {r.value}) is already "
                                 "in the ledger; a reading is appended once")
            have.add(r.id)
        body = [line for line in lines if line] + [to_line(r) for r in new]
        atomic_write_text(p, "\n".join(body) + "\n")
    return new


def strike(path: str | Path, reading_id: str, *, reason: str,
           status: str = "withdrawn", superseded_by: str = "") -> Reading:
    """Strike one reading: status, reason and successor change on its line, nothing else.
    Holds the ledger's lock from load to write."""
    if status not in ("withdrawn", "retracted"):
        raise InputError(f"strike status {status!r}: choose withdrawn or retracted")
    if not reason.strip():
        raise InputError("a strike needs a reason (--reason): a correction says why")
    p = Path(path)
    if not p.exists():
        _read_lines(p)  # the "no such ledger" error, before any lock file is made
    with locked(p):
        lines = _read_lines(p)
        struck, idx = _struck_line(p, lines, reading_id, reason, status, superseded_by)
        lines[idx] = to_line(struck)
        atomic_write_text(p, "\n".join(line for line in lines if line) + "\n")
    return struck


def _struck_line(p: Path, lines: list[str], reading_id: str, reason: str, status: str,
                 superseded_by: str) -> tuple[Reading, int]:
    ids = {r.id for r in _rows(p, lines)}
    if reading_id not in ids:
        raise InputError(f"{p}: no reading with id {reading_id!r}")
    if superseded_by and (superseded_by not in ids or superseded_by == reading_id):
        raise InputError(f"--superseded-by {superseded_by!r}: name another reading of this "
                         "ledger by its id (append the new reading first)")
    idx = next(i for i, line in enumerate(lines) if line.startswith(reading_id + "\t"))
    old = from_line(lines[idx], f"{p}:{idx + 1}")
    if old.struck:
        raise InputError(f"reading {reading_id} is already {old.status} ({old.reason}); a "
                         "strike is final")
    why = reason.strip() + (f" (recorded NOISY: {old.reason})" if old.noisy else "")
    struck = old.model_copy(update={"status": status, "reason": why,
                                    "superseded_by": superseded_by})
    Reading.model_validate(struck.model_dump())
    return struck, idx


# ---------------------------------------------------------------- certificates
