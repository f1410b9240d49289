"""``afford bars DATA --heldout SPEC --order 1..5``: n-gram bits-per-byte baselines.

The command parses its flags, calls the library (:mod:`afford.bars.bars_command`: the flags
checked and made a request, the bars counted and written), and renders the bars."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import err, guard, out, print_json
from afford.report.rich_table import labelled

HELP = """Byte-level n-gram baselines (bits per byte) on a held-out window: the bars a model
must beat.

Counts are taken on the training part (every byte of DATA outside the window; no n-gram
spans the window) and scored on the window: interpolated Kneser-Ney (one discount per
order, D = n1/(n1+2 n2)) and add-k for comparison. Order 1 is the unigram counter (the "it
is learning language" line), order 5 the 5-gram counter.

The window is part of the bar: its SHA-256 is printed with every bar.

\b
--heldout SPEC:
  last:100KB        the last 100,000 bytes (sizes as 100KB, 1MiB, 102400)
  first:1MiB        the first 1,048,576 bytes
  5MB:100KB         100,000 bytes from byte 5,000,000 (OFFSET:LEN)
  batches:10x10x1024   a trainer's eval window: eval_batches x batch x
                       seq_len = 102,400 bytes, from the end
  batches:10x2x1024@first      the same from the start (@OFFSET: from OFFSET)

DATA is looked up by SHA-256 in the manifest (afford pin); on data not pinned every bar is
provisional, shown with '?'. Exact counting needs about 32 bytes of memory per training
byte; --method auto streams through hashed tables (bounded by --memory, the approximation
stated in the output) when that does not fit.

Exit codes: 0 bars computed, 2 bad input, 3 counting failed (out of memory).
"""


def command(
    data: Annotated[Path, typer.Argument(help="A file of bytes (the corpus).")],
    heldout: Annotated[str, typer.Option(help="The window: last:LEN, first:LEN, OFFSET:LEN "
                                         "or batches:EBxBxSEQ[@first|@OFFSET].")] = "last:100KB",
    order: Annotated[str, typer.Option(help="Orders: 1..5, 1,3,5 or 5.")] = "1..5",
    smoothing: Annotated[str, typer.Option(
        help="kneser-ney, add-k, or both comma-separated.")] = "kneser-ney,add-k",
    add_k: Annotated[float, typer.Option("--add-k", help="k of add-k (1 = Laplace).")] = 1.0,
    discount: Annotated[Optional[float], typer.Option(
        help="A fixed Kneser-Ney discount in (0, 1] for every level, instead of "
        "n1/(n1+2 n2).")] = None,
    method: Annotated[str, typer.Option(help="auto, exact or streaming.")] = "auto",
    memory: Annotated[str, typer.Option(help="Memory the counts may use, e.g. 4GiB.")] = "4GiB",
    buckets: Annotated[Optional[str], typer.Option(
        help="Streaming: slots per hashed order, 2^N or a count rounded down to a power "
        "of two. Default: the most that fit --memory.")] = None,
    manifest: Annotated[Path, typer.Option(
        help="The data manifest (afford pin) DATA's SHA-256 is looked up in.")] = Path(
            "afford.manifest.json"),
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Write the bars (afford.bars/1 JSON) here.")] = None,
    window_out: Annotated[Optional[Path], typer.Option(
        help="Write the window's bytes here: the exact bytes a trainer must evaluate on "
        "for its readings to be set against these bars.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out and "
                                        "--window-out.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the bars as JSON.")] = False,
) -> None:
    with guard():
        from afford.bars.bars_command import bars_request, count_and_write

        req = bars_request(data, heldout=heldout, order=order, smoothing=smoothing,
                           add_k=add_k, discount=discount, method=method, memory=memory,
                           buckets=buckets, manifest=manifest, window_out=window_out,
                           out=out_path, force=force, command="afford " + " ".join(sys.argv[1:]))
        with _counting(data, show=err.is_terminal and not as_json):
            doc = count_and_write(req, out_path, force)
        if as_json:
            print_json(doc.model_dump(mode="json", by_alias=True))
        else:
            _print_bars(doc, out_path)


def _counting(data: Path, show: bool):
    """A spinner on stderr while the bars are counted (``show``: on a terminal)."""
    return err.status(f"counting {data} ...") if show else contextlib.nullcontext()


def _print_bars(doc, out_path: Path | None) -> None:
    """The window's lines and the bars table on stdout, each distinct warning on stderr,
    and where the bars were written."""
    from afford.report.bars_tables import bars_lines, bars_table

    for line in bars_lines(doc):
        out.print(line, soft_wrap=True)
    out.print(bars_table(doc))
    for w in doc.warnings + _bar_warnings(doc):
        err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)
    if out_path is not None:
        out.print(f"bars written to {out_path}")


def unwrap(text: str) -> str:
    """Help text with each paragraph on one line (typer keeps single line breaks), except
    paragraphs marked ``\\b`` (kept as written)."""
    paras = text.strip().split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paras)


command.__doc__ = unwrap(HELP)


def _bar_warnings(doc) -> list[str]:
    """Each distinct warning of the bars once, with the bars it concerns."""
    seen: dict[str, list[str]] = {}
    for b in doc.bars:
        for w in b.warnings:
            seen.setdefault(w, []).append(b.label)
    return [f"{w} ({', '.join(labels)})" for w, labels in seen.items()]
