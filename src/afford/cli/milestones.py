"""``afford milestones LADDER``: each rung PASSED or NOT YET, from a run's eval readings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.bars import unwrap
from afford.cli.common import guard, out, print_json
from afford.core.errors import InputError
from afford.core.io import read_json, read_text, read_toml

HELP = """Judge a ladder of milestones against runs' eval readings: each rung PASSED or NOT
YET, with the margin, the step and the token count.

\b
LADDER is TOML (afford.milestones/1):
  schema = "afford.milestones/1"
  bars = "bars.json"          # from afford bars --out: bars and window
  [[rungs]]
  name = "7.5M beats the 5-gram counter"
  run = "7.5M"                # whose eval readings
  bar = "kneser-ney:5"        # smoothing:order in the bars file (or kn:5)
  params = "7.5M"             # tokens = "150M" (default 20 x params)
  [[rungs]]
  name = "25M beats the 7.5M curve at equal tokens"
  run = "25M"
  beats_run = "7.5M"          # at equal tokens, never at equal steps

A rung may name its own bars file (bars = ...) or, for a curve rung, its window (window =
SHA256). Curves are compared at the smaller of their last token counts, each interpolated
linearly in log(tokens); never extrapolated.

Eval readings come from the history ledger (--history: a reading named
RUN/tokens=N/eval_bpb, in bit/B, with its one step index and the config fingerprint
window=SHA256) and from trainers' logs (--log RUN=PATH: TSV with a header, a JSON list or
JSON lines, columns step, tokens, bpb, window). An eval reading without its step index or
its window is refused (exit 2); readings on another window than the bar's are never
compared with it. --plan PLAN.json (afford plan --json) puts what the box affords a week
beside the tokens each rung needs.

Exit codes: 0 every rung PASSED, 1 some rung NOT YET, 2 bad input.
"""


def command(
    ladder: Annotated[Path, typer.Argument(help="The ladder (TOML, afford.milestones/1).")],
    history: Annotated[Optional[Path], typer.Option(
        "--history", help="The history ledger (TSV) to read eval readings from.")] = None,
    log: Annotated[Optional[list[str]], typer.Option(
        "--log", help="RUN=PATH: a trainer's eval log (TSV/JSON); PATH alone when the log "
        "has a run column. Repeatable.")] = None,
    plan: Annotated[Optional[Path], typer.Option(
        help="A plan (afford plan --json) for tokens a week.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdicts as JSON.")] = False,
) -> None:
    with guard():
        from afford.bars import milestone_verdicts as ms
        from afford.report.bars_tables import milestone_notes, milestones_table, plan_table
        from afford.schema import ledger
        from afford.schema.bars_file import Ladder, load_bars
        from afford.schema.envelope import validate

        lad = validate(read_toml(ladder, "ladder"), Ladder, f"ladder {ladder}")
        if history is None and not log:
            raise InputError("no eval readings: give --history LEDGER and/or --log RUN=PATH")
        readings, notes = [], []
        if history is not None:
            found, struck = ms.from_ledger(ledger.load(history), str(history))
            readings += found
            if struck:
                notes.append(f"{history}: {struck} struck eval reading(s) left out")
        for item in log or []:
            run, path = _log_arg(item)
            readings += ms.parse_log(_read(path), str(path), run)
        cache: dict[Path, object] = {}
        bars = []
        for rung in lad.rungs:
            name = rung.bars or lad.bars
            p = None if name is None else ladder.parent / name
            if p is not None and p not in cache:
                cache[p] = load_bars(p)
            bars.append(cache.get(p) if p is not None else None)
        per_week = None
        if plan is not None:
            per_week = ms.tokens_per_week(read_json(plan), str(plan))
        res = ms.evaluate(lad, str(ladder), bars, readings, per_week=per_week,
                          plan_name=str(plan) if plan else None)
        res = res.model_copy(update={"notes": res.notes + notes})
        if as_json:
            print_json(res.model_dump(mode="json", by_alias=True))
        else:
            out.print(milestones_table(res))
            for line in milestone_notes(res):
                out.print(line, soft_wrap=True)
            extra = plan_table(res)
            if extra is not None:
                out.print(extra)
        if any(r.status != "PASSED" for r in res.rungs):
            raise typer.Exit(1)


command.__doc__ = unwrap(HELP)


def _log_arg(item: str) -> tuple[str | None, Path]:
    run, sep, path = item.partition("=")
    if sep and (not run or not path):
        raise InputError(f"--log {item!r}: write RUN=PATH")
    return (run if sep else None), Path(path if sep else item)


def _read(path: Path) -> str:
    return read_text(path, str(path))
