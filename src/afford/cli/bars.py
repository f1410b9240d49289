"""``afford bars DATA --heldout SPEC --order 1..5``: n-gram bits-per-byte baselines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import err, flag_number, guard, out, print_json
from afford.core.errors import InputError
from afford.core.units import MAX_BYTES, UnitError, parse_bytes, parse_count, whole
from afford.report.rich_table import labelled

MAX_ADD_K = 1e6  # k of add-k: beyond it every byte is equally likely to the digits shown

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
        from afford.bars import SMOOTHINGS, parse_orders
        from afford.bars.record import BarsRequest, make_bars
        from afford.core.io import check_writable
        from afford.report.bars_tables import bars_lines, bars_table
        from afford.schema.bars_file import save_bars

        try:
            orders = parse_orders(order)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        smooth = tuple(s.strip() for s in smoothing.split(",") if s.strip())
        bad = [s for s in smooth if s not in SMOOTHINGS]
        if bad or not smooth:
            raise InputError(f"--smoothing {smoothing!r}: choose from {', '.join(SMOOTHINGS)}")
        if method not in ("auto", "exact", "streaming"):
            raise InputError(f"--method {method!r}: choose auto, exact or streaming")
        flag_number("--add-k", add_k, high=MAX_ADD_K)
        flag_number("--discount", discount, high=1.0)
        for p in (out_path, window_out):
            if p is not None:
                check_writable(p, overwrite=force)
        req = BarsRequest(data=data, heldout=heldout, orders=orders, smoothings=smooth,
                          k=add_k, discount=discount, method=method,  # type: ignore[arg-type]
                          memory_bytes=_bytes(memory, "--memory"),
                          buckets=_buckets(buckets), manifest=manifest,
                          window_out=window_out,
                          command="afford " + " ".join(sys.argv[1:]))
        if err.is_terminal and not as_json:
            with err.status(f"counting {data} ..."):
                doc = make_bars(req)
        else:
            doc = make_bars(req)
        if out_path is not None:
            save_bars(doc, out_path, overwrite=force)
        if as_json:
            print_json(doc.model_dump(mode="json", by_alias=True))
            return
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


def _bytes(text: str, flag: str) -> int:
    try:
        n = parse_bytes(text)
    except UnitError as exc:
        raise InputError(f"{flag}: {exc}") from None
    return int(flag_number(f"{flag} {text!r}", n, high=MAX_BYTES))


def _buckets(text: str | None) -> int | None:
    """Slots per hashed order: ``2^N`` or a count, rounded down to a power of two, from
    2^8 to 2^40 (a 64-bit hash keeps at most 2^63; 2^40 slots are terabytes)."""
    if text is None:
        return None
    t = text.strip()
    try:
        n = 2 ** whole(t[2:], "--buckets 2^N", low=0, high=64) if t.startswith("2^") \
            else whole(parse_count(t) // 1, "--buckets")
        n = whole(n, f"--buckets {text!r}", low=2**8, high=2**40)
    except UnitError as exc:
        raise InputError(str(exc)) from None
    return 1 << (n.bit_length() - 1)
