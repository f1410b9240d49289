"""``afford pin PATH... [--name NAME]``: pin data sources by hash into a manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import err, guard, out, print_json
from afford.core.errors import InputError
from afford.core.provenance import measured
from afford.report.rich_table import Table, labelled
from afford.report.terminal import fmt
from afford.schema import manifest as mf


def command(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Files or folders to pin (a folder gets a tree hash; links inside it are "
        "hashed as links and never followed out of it).")] = None,
    name: Annotated[Optional[str], typer.Option(
        help="The source's name as runs refer to it (one PATH or one --generator). "
        "Default: the file or folder name, or the generator spec.")] = None,
    generator: Annotated[Optional[str], typer.Option(
        help="Pin a data generator pkg.module:function by the hash of its code and "
        "--param values.")] = None,
    param: Annotated[Optional[list[str]], typer.Option(
        help="A generator parameter KEY=VALUE (repeatable).")] = None,
    out_path: Annotated[Path, typer.Option(
        "--out", "-o", help="The manifest; merged into when it exists.")] = Path(
            "afford.manifest.json"),
    force: Annotated[bool, typer.Option(
        "--force", help="Re-pin a source whose hash changed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Pin data sources by SHA-256 (streamed) into afford.manifest/1.

    The manifest is merged into: sources keep their first pin while unchanged; a source
    whose hash changed is refused without --force. A source that is not present is
    recorded UNPINNED (and anything derived from it is provisional). Concurrent pins into
    one manifest all land (a lock beside it, .NAME.lock).

    Links and unreadable entries: inside a folder nothing is followed or skipped. A link
    whose target stays inside the folder is hashed as a link (its target's path, relative
    to the folder); a link leaving the folder, a dangling link, an unreadable file or
    folder, a fifo, socket or device is refused with exit 2, naming it. A PATH given here
    that is itself a link is resolved.

    Exit codes: 0 all pinned, 1 written but some source UNPINNED, 2 bad input or a path
    that cannot be read or written, 3 the write failed mid-way (disk full, I/O error).
    """
    with guard():
        sources = _sources(list(paths or []), name, generator, list(param or []))
        manifest = mf.pin_into(out_path, sources, force=force)
        if as_json:
            print_json(manifest.model_dump(mode="json", by_alias=True))
        else:
            out.print(_table(manifest, str(out_path)))
        unpinned = [s for s in sources if s.status != mf.PINNED]
        for s in unpinned:
            err.print(labelled("[yellow]UNPINNED:[/]", f"{s.name}: {s.reason}"), soft_wrap=True)
        if unpinned:
            raise typer.Exit(1)


def _sources(paths: list[Path], name: str | None, generator: str | None,
             params: list[str]) -> list[mf.Source]:
    if not paths and generator is None:
        raise InputError("nothing to pin: give one or more PATHs, or --generator pkg.mod:func")
    if params and generator is None:
        raise InputError("--param belongs to a --generator")
    if name is not None and len(paths) + (generator is not None) != 1:
        raise InputError("--name names one source: give one PATH or one --generator with it")
    sources = [mf.pin_path(p, name) for p in paths]
    if generator is not None:
        sources.append(mf.pin_generator(generator, mf.parse_params(params), name))
    return sources


def _table(m: mf.Manifest, where: str) -> Table:
    table = Table(title=f"{where} ({mf.MANIFEST_SCHEMA})", title_justify="left")
    for col in ("name", "kind", "status", "sha256", "size"):
        table.add_column(col, overflow="fold")
    for s in m.sources:
        size = fmt(measured(s.size_bytes, "B", f"size of {s.path}")) \
            if s.size_bytes is not None else "-"
        table.add_row(s.name, s.kind, s.status if s.status == mf.PINNED
                      else f"UNPINNED: {s.reason}", s.sha256 or "-", size)
    return table
