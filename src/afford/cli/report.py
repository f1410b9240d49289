"""``afford report CERT... -o FILE.md|FILE.html``: the lab notebook of certificates, plans,
data hashes and history."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import err, guard, out
from afford.core.errors import InputError
from afford.core.io import atomic_write_text, check_writable, ensure_folder, read_json
from afford.planning.result import read_plan
from afford.report import html, markdown, plots
from afford.report.build import Inputs, build_report
from afford.report.rich_table import labelled
from afford.schema import ledger
from afford.schema import manifest as mf
from afford.schema.cert import load_certificate


def _plan(path: Path) -> tuple[str, object]:
    """The plan's JSON, refused unless it is an ``afford.plan/1`` document (a certificate,
    ``null`` or a list is not a plan)."""
    label = f"--plan {path}"
    doc = read_json(path, label)
    read_plan(doc, label)
    return str(path), doc


def command(
    certs: Annotated[Optional[list[Path]], typer.Argument(
        metavar="CERT...", help="Device certificates (one section each).")] = None,
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="FILE.md (Markdown) or FILE.html (self-contained, with plots).")
    ] = None,
    plan: Annotated[Optional[list[Path]], typer.Option(
        help="A plan as JSON (afford plan --json), repeatable: the cost model.")] = None,
    manifest: Annotated[Optional[Path], typer.Option(
        help="The data manifest (afford pin): data hashes first.")] = None,
    history: Annotated[Optional[Path], typer.Option(
        help="The history ledger (TSV): readings, struck ones struck.")] = None,
    expect: Annotated[Optional[list[str]], typer.Option(
        help="A device the report should cover (repeatable); one without a certificate "
        "gets an empty slot with the command to run there.")] = None,
    plots_dir: Annotated[Optional[Path], typer.Option(
        help="Also write every plot as SVG and PNG into this folder.")] = None,
    title: Annotated[str, typer.Option(help="The report's title.")] = "afford report",
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Render certificates (and plans, a manifest, a ledger) as Markdown or HTML.

    Every number carries its provenance tag; a device named with --expect (or by a plan's
    platform) but without a certificate gets an empty slot. Exit codes: 0 written, 2 bad
    input.
    """
    with guard():
        target = _target(out_path, force)
        inputs = _inputs(list(certs or []), list(plan or []), manifest, history,
                         tuple(expect or []))
        report = build_report(inputs, title=title)
        have_plots = plots.available()
        if plots_dir is not None:
            if not have_plots:
                raise InputError(f"--plots-dir: {plots.MISSING_NOTE}")
            plots.export(report.plots, ensure_folder(plots_dir, "--plots-dir"),
                         overwrite=force)
        if target.suffix.lower() == ".md":
            href = os.path.relpath(plots_dir, target.parent or ".") if plots_dir else None
            text = markdown.render(report, plots_href=href)
        else:
            text = html.render(report, draw=plots.svg if have_plots else None,
                               plots_note="" if have_plots else plots.MISSING_NOTE)
            if not have_plots:
                err.print(labelled("[yellow]note:[/]", plots.MISSING_NOTE))
        atomic_write_text(target, text, overwrite=force)
        out.print(f"report written to {target}")


def _target(out_path: Path | None, force: bool) -> Path:
    if out_path is None:
        raise InputError("say where to write the report: -o FILE.md or -o FILE.html")
    if out_path.suffix.lower() not in (".md", ".html", ".htm"):
        raise InputError(f"-o {out_path}: the report is Markdown (.md) or HTML (.html)")
    return check_writable(out_path, overwrite=force)


def _inputs(certs: list[Path], plans: list[Path], manifest: Path | None,
            history: Path | None, expect: tuple[str, ...]) -> Inputs:
    if not certs and not plans and not expect:
        raise InputError("nothing to report: give certificates (afford report CERT.json "
                         "-o report.html), --plan files, or --expect DEVICE")
    return Inputs(
        certs=tuple((str(p), load_certificate(p)) for p in certs),
        plans=tuple(_plan(p) for p in plans),
        manifest=(str(manifest), mf.recheck(mf.load(manifest), manifest)) if manifest else None,
        history=(str(history), tuple(ledger.load(history))) if history else None,
        expect=expect)
