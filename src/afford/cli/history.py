"""``afford history add | strike | show``: the append-only ledger of readings."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import guard, interactive, out, print_json
from afford.core.errors import InputError
from afford.core.provenance import Tag
from afford.core.units import UnitError, check_date
from afford.figures import cert_readings
from afford.report.history_tables import history_table
from afford.schema import ledger

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="The history ledger (TSV, one reading a line): "
                  "add readings, strike them with a reason (never deleted), show them.")

FileOpt = Annotated[Path, typer.Option("--file", "-f", help="The ledger (TSV).")]
DEFAULT_FILE = Path("history.tsv")


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""


def _git_head() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                           timeout=5)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def _date(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        d = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--date {text!r}: write it as ISO 8601, e.g. 2026-12-02T10:31:00Z") \
            from None
    d = d if d.tzinfo else d.replace(tzinfo=timezone.utc)
    try:
        return check_date(d, f"--date {text!r}")
    except UnitError as exc:
        raise InputError(str(exc)) from None


def _value(text: str) -> int | float:
    try:
        return int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError:
        raise InputError(f"--value {text!r} is not a number") from None


@app.command("add")
def add(
    file: FileOpt = DEFAULT_FILE,
    cert: Annotated[Optional[Path], typer.Option(
        help="Append this certificate's headline readings (warm and step-0 seconds with "
        "their step indices, peak memory, law exponent and R^2, probes).")] = None,
    quantity: Annotated[Optional[str], typer.Option(
        help="Name of one reading, e.g. tinylm/bf16/seq=512/warm_step_seconds.")] = None,
    value: Annotated[Optional[str], typer.Option(help="Its value, in SI units.")] = None,
    unit: Annotated[str, typer.Option(help="s, B, FLOP/s, ...")] = "",
    tag: Annotated[Tag, typer.Option(help="Provenance tag.")] = Tag.MEASURED,
    steps: Annotated[str, typer.Option(
        help="Step indices it timed: 3-14, or c0:3-14;c1:3-17 per child. Required for a "
        "reading of a step (a quantity ending in step_seconds; a measured time of a step, "
        "e.g. step_time in ms; a measured throughput, e.g. tokens/s); a warm step time "
        "never includes step 0 (record that as step0_seconds).")] = "",
    device: Annotated[Optional[str], typer.Option(help="The device it was read on.")] = None,
    torch_version: Annotated[Optional[str], typer.Option(
        "--torch", help="torch version (default: the installed one).")] = None,
    commit: Annotated[Optional[str], typer.Option(
        help="Commit (default: git HEAD here).")] = None,
    command: Annotated[Optional[str], typer.Option(
        help="The run it was read off (with --cert: default the certificate's command).")] = None,
    config: Annotated[str, typer.Option(help="Config fingerprint.")] = "",
    date: Annotated[Optional[str], typer.Option(help="ISO 8601 (default: now, UTC).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ids added as JSON.")] = False,
) -> None:
    """Append readings to the ledger (created with its header if absent). Exit 2 on a
    reading that breaks a rule (a step time without step indices, a warm step time at step
    0) or a path that cannot be written; 3 when the write failed mid-way (disk full).
    Concurrent adds all land: each holds the ledger's lock (.NAME.lock beside it)."""
    with guard():
        if cert is not None:
            if quantity is not None or value is not None:
                raise InputError("--cert appends a certificate's readings; do not combine it "
                                 "with --quantity/--value")
            from afford.schema.cert import load_certificate

            added = cert_readings.append_certificate(file, load_certificate(cert), command or "")
        else:
            added = ledger.append(file, [_one(quantity, value, unit, tag, steps, device,
                                              torch_version, commit, command, config, date)])
        if as_json:
            print_json({"schema": "afford.history-added/1", "file": str(file),
                        "ids": [r.id for r in added]})
            return
        out.print(f"{len(added)} reading(s) appended to {file}")


def _one(quantity, value, unit, tag, steps, device, torch_version, commit, command, config,
         date) -> ledger.Reading:
    missing = [n for n, v in (("--quantity", quantity), ("--value", value),
                              ("--device", device), ("--command", command)) if not v]
    if missing:
        raise InputError(f"a reading needs {', '.join(missing)} (or use --cert CERT.json)")
    return ledger.new_reading(
        date=_date(date), device=device, quantity=quantity, value=_value(value), unit=unit,
        tag=tag, step_indices=steps,
        torch=_torch_version() if torch_version is None else torch_version,
        commit=_git_head() if commit is None else commit, command=command,
        config_fingerprint=config)


@app.command("strike")
def strike(
    reading_id: Annotated[str, typer.Argument(help="The id of the reading to strike.")],
    reason: Annotated[str, typer.Option(help="Why (required).")] = "",
    retract: Annotated[bool, typer.Option(
        "--retract", help="Retracted (it was wrong) rather than withdrawn.")] = False,
    superseded_by: Annotated[str, typer.Option(
        help="The id of the reading that replaces it.")] = "",
    file: FileOpt = DEFAULT_FILE,
) -> None:
    """Strike a reading: it stays in the ledger, struck, with the reason. Never deletes."""
    with guard():
        r = ledger.strike(file, reading_id, reason=reason,
                          status="retracted" if retract else "withdrawn",
                          superseded_by=superseded_by)
        out.print(f"{r.id} {r.status}: {r.reason}")


@app.command("show")
def show(
    file: FileOpt = DEFAULT_FILE,
    quantity: Annotated[Optional[str], typer.Option(
        help="Only quantities containing this text.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the readings as JSON.")] = False,
) -> None:
    """Show the ledger; struck readings struck, with status and reason."""
    with guard():
        rows = [r for r in ledger.load(file) if quantity is None or quantity in r.quantity]
        if as_json:
            print_json({"schema": ledger.LEDGER_SCHEMA, "file": str(file),
                        "readings": [r.model_dump(mode="json") for r in rows]})
            return
        out.print(history_table(rows, f"{file}: {len(rows)} reading(s)",
                                plain=not interactive()))
