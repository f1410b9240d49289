"""Milestones: has a run beaten its bars yet? (pure: readings and bars in, verdicts out)

A ladder (``afford.milestones/1``) holds rungs. A *bar rung* is passed by the first eval
reading of its run, on the bar's own window, whose BPB is below the bar; a *curve rung*
("20-30M beats the 7.5M curve at equal tokens") compares two runs' curves at equal tokens,
never at equal steps: two runs with different batches see different tokens per step, and a
comparison at equal steps credits the larger batch with data it was given, not with what it
learned. Each verdict is PASSED or NOT YET with the margin, the step and the token count.

The rules this module enforces (each with a test):

- **An eval reading carries its step index, its token count and its window** (the SHA-256 of
  the window's bytes, or its first 12+ hex digits). One without its step or window is
  refused, not skipped: a BPB on an unknown window cannot be set against any bar.
- **Two windows are never compared.** A rung reads only the readings on its bar's window;
  readings on other windows are counted and said, never used.
- **Curves are compared at equal tokens**, T = the smaller of the two curves' last token
  counts, each curve interpolated linearly in log(tokens) between its neighbouring readings
  (BPB curves are smooth in log tokens); never extrapolated.

In the history ledger (:mod:`afford.schema.ledger`, ``afford history add``) an eval reading is a
line whose quantity is ``RUN/tokens=N/eval_bpb`` (N tokens seen at that step), value the BPB
in ``bit/B``, step indices the one step, and config fingerprint ``window=SHA256``: the
fingerprint is what makes two readings comparable, and for an eval reading that is the window.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence

from pydantic import ValidationError

from afford.core.errors import InputError
from afford.core.io import loads_json
from afford.core.provenance import Tagged, inherited, measured, module
from afford.core.units import UnitError, parse_number, whole
from afford.planning.result import read_plan
from afford.schema import ledger
from afford.schema.bars_file import (
    BPB_UNIT,
    BarsFile,
    EvalReading,
    Ladder,
    MilestonesResult,
    Rung,
    RungResult,
)

CHINCHILLA_TOKENS_PER_PARAM = 20  # Hoffmann et al. 2022, "Training Compute-Optimal LLMs"
EVAL_SUFFIX = "eval_bpb"
_EVAL_QUANTITY = re.compile(r"^(?P<run>.+)/tokens=(?P<tokens>\d+)/eval_bpb$")
_WINDOW_FP = re.compile(r"^window=(?P<sha>[0-9a-f]{12,64})$")
_ALIASES = {"window_sha256": "window", "val_bpb": "bpb", "eval_bpb": "bpb"}


# ---------------------------------------------------------------- readings


def eval_quantity(run: str, tokens: int) -> str:
    return f"{run}/tokens={int(tokens)}/{EVAL_SUFFIX}"


def eval_ledger_reading(run: str, step: int, tokens: int, bpb: float, window: str,
                        **fields) -> ledger.Reading:
    """An eval reading as a ledger line (``fields``: device, command, date, commit, ...)."""
    return ledger.new_reading(quantity=eval_quantity(run, tokens), value=float(bpb),
                              unit=BPB_UNIT, step_indices=str(int(step)),
                              config_fingerprint=f"window={window}", **fields)


def is_eval_quantity(quantity: str) -> bool:
    return quantity.rsplit("/", 1)[-1] == EVAL_SUFFIX


def from_ledger(rows: Sequence[ledger.Reading], where: str) -> tuple[list[EvalReading], int]:
    """(eval readings of the ledger, how many struck ones were left out); InputError for an
    eval reading without its tokens, its step index or its window."""
    out, struck = [], 0
    for r in rows:
        if not is_eval_quantity(r.quantity):
            continue
        if r.struck:
            struck += 1
            continue
        label = f"{where}: reading {r.id} ({r.quantity})"
        m = _EVAL_QUANTITY.match(r.quantity)
        if m is None:
            raise InputError(f"{label}: an eval reading is named RUN/tokens=N/{EVAL_SUFFIX} "
                             "(N: tokens seen at that step)")
        steps = ledger.parse_step_indices(r.step_indices) if r.step_indices else {}
        flat = [s for group in steps.values() for s in group]
        if len(flat) != 1:
            raise InputError(f"{label}: an eval reading without its step index is refused "
                             "(give the one step it was taken at, e.g. --steps 1200)")
        w = _WINDOW_FP.match(r.config_fingerprint)
        if w is None:
            raise InputError(f"{label}: an eval reading without its window is refused (config "
                             "fingerprint window=SHA256 of the held-out window's bytes)")
        if r.unit != BPB_UNIT:
            raise InputError(f"{label}: an eval reading is in {BPB_UNIT}, not {r.unit!r}")
        try:
            tokens = whole(m["tokens"], "tokens")
        except UnitError as exc:
            raise InputError(f"{label}: {exc}") from None
        out.append(_reading(dict(run=m["run"], step=flat[0], tokens=tokens,
                                 bpb=r.value, window=w["sha"], source=f"{where}:{r.id}"),
                            label))
    return out, struck


def _reading(fields: dict, label: str) -> EvalReading:
    try:
        return EvalReading(**fields)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"])
        raise InputError(f"{label}: {where}: {e['msg'].removeprefix('Value error, ')}") \
            from None


def parse_log(text: str, where: str, run: str | None = None) -> list[EvalReading]:
    """Eval readings from a trainer's log: TSV with a header row, a JSON list of objects
    (or ``{"readings": [...]}``), or JSON lines. Columns: step, tokens, bpb, window (or
    window_sha256), and run unless ``run`` names it."""
    s = text.strip()
    if not s:
        raise InputError(f"{where}: empty log")
    rows = _json_rows(s, where) if s[0] in "[{" else _tsv_rows(s, where)
    return [_log_row(row, f"{where}:{line}", run) for line, row in rows]


def _json_rows(s: str, where: str) -> list[tuple[int, dict]]:
    """A JSON list (or ``{"readings": [...]}``) or JSON lines, each read by the one bounded
    JSON reader (:func:`afford.core.io.loads_json`: size, nesting and numbers bounded)."""
    try:
        doc = loads_json(s, where)
    except InputError:
        lines = [(n, line) for n, line in enumerate(s.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise
        rows = [(n, loads_json(line, f"{where}:{n}")) for n, line in lines]  # JSON lines
    else:
        items = doc.get("readings") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            raise InputError(f"{where}: a JSON log is a list of readings or "
                             '{"readings": [...]}')
        rows = list(enumerate(items, 1))
    for n, row in rows:
        if not isinstance(row, dict):
            raise InputError(f"{where}:{n}: a reading is an object with step, tokens, bpb, "
                             "window")
    return rows


def _tsv_rows(s: str, where: str) -> list[tuple[int, dict]]:
    lines = [(n, line) for n, line in enumerate(s.splitlines(), 1)
             if line.strip() and not line.startswith("#")]
    if not lines:
        raise InputError(f"{where}: no header row and no readings")
    header = lines[0][1].split("\t")
    reader = csv.reader(io.StringIO("\n".join(line for _, line in lines[1:])), delimiter="\t")
    try:
        return [(n, dict(zip(header, cells))) for (n, _), cells in zip(lines[1:], reader)]
    except csv.Error as exc:  # a cell past csv's field limit, a stray NUL
        raise InputError(f"{where}: not a TSV log: {exc}") from None


def _log_row(row: dict, where: str, run: str | None) -> EvalReading:
    d = {_ALIASES.get(k.strip(), k.strip()): v for k, v in row.items()}
    present = {k: v for k, v in d.items() if v is not None and str(v).strip() != ""}
    if "step" not in present:
        raise InputError(f"{where}: an eval reading without its step index is refused "
                         "(a step column)")
    if "window" not in present:
        raise InputError(f"{where}: an eval reading without its window is refused (a window "
                         "column: the SHA-256 of the held-out window's bytes)")
    for need in ("tokens", "bpb"):
        if need not in present:
            raise InputError(f"{where}: an eval reading needs {need}")
    name = present.get("run", run)
    if name is None:
        raise InputError(f"{where}: which run? Give --log RUN=PATH or a run column")
    try:
        fields = dict(run=str(name), step=whole(present["step"], "step", low=0),
                      tokens=whole(present["tokens"], "tokens"),
                      bpb=parse_number(present["bpb"], "bpb"),
                      window=str(present["window"]).strip().lower(), source=where)
    except UnitError as exc:
        raise InputError(f"{where}: {exc}") from None
    return _reading(fields, where)


# ---------------------------------------------------------------- windows and curves


def same_window(a: str, b: str) -> bool:
    """Two window ids name the same window: equal, or one the other's prefix (12+ hex)."""
    return a.startswith(b) or b.startswith(a)


def on_window(readings: Sequence[EvalReading], run: str,
              window: str) -> tuple[list[EvalReading], int]:
    """(the run's readings on ``window``, how many of its readings are on other windows)."""
    mine = [r for r in readings if r.run == run]
    here = [r for r in mine if same_window(r.window, window)]
    return here, len(mine) - len(here)


def curve(readings: Sequence[EvalReading]) -> list[EvalReading]:
    """Readings sorted by tokens; InputError for two readings at the same token count."""
    out = sorted(readings, key=lambda r: (r.tokens, r.step))
    for a, b in zip(out, out[1:]):
        if a.tokens == b.tokens and a.bpb != b.bpb:
            raise InputError(f"run {a.run}: two eval readings at {a.tokens:,} tokens (steps "
                             f"{a.step} and {b.step}) with different BPB; a curve has one "
                             "value per token count")
    return out


def interpolate(points: Sequence[EvalReading], tokens: float) -> float | None:
    """BPB of a curve at ``tokens``, linear in log(tokens) between neighbouring readings;
    None outside the curve's range (never extrapolated)."""
    if not points or not points[0].tokens <= tokens <= points[-1].tokens:
        return None
    for a, b in zip(points, points[1:]):
        if a.tokens <= tokens <= b.tokens:
            if b.tokens == a.tokens:
                return a.bpb
            f = (math.log(tokens) - math.log(a.tokens)) / (math.log(b.tokens) -
                                                           math.log(a.tokens))
            return a.bpb + f * (b.bpb - a.bpb)
    return points[0].bpb  # a single reading, at exactly ``tokens``


# ---------------------------------------------------------------- verdicts


def _bpb(r: EvalReading) -> Tagged:
    return measured(r.bpb, BPB_UNIT, f"{r.run} eval at step {r.step}, {r.tokens:,} tokens, "
                    f"window {r.window[:12]} ({r.source})")


def judge_bar(rung: Rung, bars: BarsFile, readings: Sequence[EvalReading]) -> RungResult:
    """PASSED at the first reading (by step) below the bar on the bar's window; NOT YET with
    the best reading's margin (negative), or with no reading on that window."""
    bar = bars.bar(rung.bar or "")
    here, other = on_window(readings, rung.run, bar.window_sha256)
    base = dict(name=rung.name, kind="bar", run=rung.run, window_sha256=bar.window_sha256,
                bar=bar.bpb, bar_label=bar.label, provisional=bars.provisional,
                readings_used=len(here), readings_other_windows=other)
    if not here:
        return RungResult(status="NOT YET", reason=f"no eval reading of {rung.run} on window "
                          f"{bar.window_sha256[:12]}" + _other(other), **base)
    value = float(bar.bpb.value)
    passing = [r for r in sorted(here, key=lambda r: r.step) if r.bpb < value]
    r = passing[0] if passing else min(here, key=lambda r: (r.bpb, r.step))
    margin = module(value - r.bpb, BPB_UNIT, f"bar {bar.label} - {rung.run} at step {r.step}")
    return RungResult(status="PASSED" if passing else "NOT YET",
                      reading=_bpb(r), margin=_prov(margin, bars.provisional), step=r.step,
                      tokens=measured(r.tokens, "tokens", f"{rung.run} at step {r.step}"),
                      reason=("first reading below the bar" if passing else
                              "best reading so far") + _other(other), **base)


def _other(n: int) -> str:
    return f"; {n} reading(s) on other windows, not compared" if n else ""


def _prov(t: Tagged, provisional: bool) -> Tagged:
    return t.model_copy(update={"provisional": True}) if provisional else t


def judge_curve(rung: Rung, window: str, readings: Sequence[EvalReading],
                provisional: bool = False) -> RungResult:
    """The run's curve against ``beats_run``'s at equal tokens (see the module docstring)."""
    a_here, a_other = on_window(readings, rung.run, window)
    b_here, b_other = on_window(readings, rung.beats_run or "", window)
    a, b = curve(a_here), curve(b_here)
    base = dict(name=rung.name, kind="curve", run=rung.run, window_sha256=window,
                provisional=provisional, readings_used=len(a) + len(b),
                readings_other_windows=a_other + b_other)
    missing = [n for n, c in ((rung.run, a), (rung.beats_run, b)) if not c]
    if missing:
        return RungResult(status="NOT YET", reason=f"no eval reading of {' or '.join(missing)} "
                          f"on window {window[:12]}" + _other(a_other + b_other), **base)
    t = min(a[-1].tokens, b[-1].tokens)
    va, vb = interpolate(a, t), interpolate(b, t)
    if va is None or vb is None:
        return RungResult(status="NOT YET", reason=f"the curves do not overlap in tokens "
                          f"({rung.run}: {a[0].tokens:,}-{a[-1].tokens:,}, {rung.beats_run}: "
                          f"{b[0].tokens:,}-{b[-1].tokens:,}); never extrapolated", **base)
    at = next((r for r in a if r.tokens == t), None)
    how = "interpolated linearly in log tokens"
    reading = _bpb(at) if at else module(va, BPB_UNIT, f"{rung.run} at {t:,} tokens, {how}")
    baseline = module(vb, BPB_UNIT, f"{rung.beats_run} at {t:,} tokens, " + (
        "its reading" if any(r.tokens == t for r in b) else how))
    margin = module(vb - va, BPB_UNIT, f"{rung.beats_run} - {rung.run} at {t:,} tokens")
    return RungResult(status="PASSED" if vb > va else "NOT YET", reading=reading,
                      baseline=baseline, margin=_prov(margin, provisional),
                      step=at.step if at else None,
                      tokens=module(t, "tokens", "equal tokens: the smaller of the two curves' "
                                    "last token counts"),
                      reason="compared at equal tokens, never at equal steps"
                      + _other(a_other + b_other), **base)


def plan_columns(rung: Rung, tokens_per_week: Tagged | None, ladder_name: str) -> dict:
    """Model size, tokens the rung needs, what the box affords a week, and weeks."""
    params = inherited(rung.params, "params", f"ladder {ladder_name}: {rung.name}") \
        if rung.params is not None else None
    if rung.tokens is not None:
        need = inherited(rung.tokens, "tokens", f"ladder {ladder_name}: {rung.name}")
    elif rung.params is not None:
        need = module(CHINCHILLA_TOKENS_PER_PARAM * int(rung.params), "tokens",
                      "20 tokens per parameter (Chinchilla, Hoffmann et al. 2022)")
    else:
        need = None
    weeks = None
    if need is not None and tokens_per_week is not None and tokens_per_week.value:
        weeks = module(float(need.value) / float(tokens_per_week.value), "weeks",
                       "tokens needed / tokens a week (plan)")
    return dict(params=params, tokens_needed=need, tokens_per_week=tokens_per_week,
                weeks_needed=weeks)


def tokens_per_week(plan: object, where: str) -> Tagged | None:
    """``quota.tokens_per_week`` of an ``afford.plan/1`` document, read as ``afford report
    --plan`` reads one (:func:`afford.planning.result.read_plan`); None: the plan has none."""
    quota = read_plan(plan, where).quota
    t = None if quota is None else quota.tokens_per_week
    if t is not None and not isinstance(t.value, (int, float)):
        raise InputError(f"{where}: quota.tokens_per_week {t.value!r} is not a number")
    return t


def evaluate(ladder: Ladder, ladder_name: str, bars: Sequence[BarsFile | None],
             readings: Sequence[EvalReading], *, per_week: Tagged | None = None,
             plan_name: str | None = None) -> MilestonesResult:
    """Judge every rung; ``bars[i]`` is rung i's bars file (None where it has none)."""
    out = []
    for rung, bf in zip(ladder.rungs, bars):
        if rung.kind == "bar":
            if bf is None:
                raise InputError(f"rung {rung.name!r}: a bar rung needs a bars file (bars = "
                                 "... in the ladder or the rung)")
            try:
                res = judge_bar(rung, bf, readings)
            except KeyError as exc:
                raise InputError(f"rung {rung.name!r}: {exc.args[0]}") from None
        else:
            res = judge_curve(rung, _curve_window(rung, bf), readings,
                              bf.provisional if bf is not None else False)
        out.append(res.model_copy(update=plan_columns(rung, per_week, ladder_name)))
    notes = [] if per_week is not None or plan_name is None else \
        [f"{plan_name}: the plan has no weekly quota, so no tokens a week"]
    return MilestonesResult(ladder=ladder_name, plan=plan_name, rungs=out, notes=notes)


def _curve_window(rung: Rung, bf: BarsFile | None) -> str:
    if bf is not None and rung.window is not None and \
            not same_window(rung.window, bf.window.sha256):
        raise InputError(f"rung {rung.name!r}: window {rung.window[:12]} is not the bars "
                         f"file's window {bf.window.sha256[:12]}; two windows are never "
                         "compared")
    if bf is not None:
        return bf.window.sha256
    if rung.window is None:
        raise InputError(f"rung {rung.name!r}: a curve rung needs its window (window = SHA256, "
                         "or a bars file)")
    return rung.window
