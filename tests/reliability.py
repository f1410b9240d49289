"""Helpers of the reliability tests (issue 14): the CLI through the runner, one-line errors,
and real processes made by fork, released together (a fork of this already-importing
process starts in milliseconds, where ``python3 -m afford`` takes seconds to import)."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path

import typer
from typer.testing import CliRunner

from afford.cli import app

runner = CliRunner()
COMMAND = typer.main.get_command(app)  # built once (~0.1 s), before any fork


def cli(*args: str):
    return runner.invoke(app, list(args))


def main(*args: str) -> int:
    """``afford ARGS`` run here as the entry point runs it (standalone: output to this
    process's stdout and stderr); its exit code. For forked writers: no runner set-up."""
    try:
        COMMAND.main(args=list(args), prog_name="afford")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


def add_args(ledger: Path, i: int) -> list[str]:
    """``history add`` of a distinct reading ``i`` (no git or torch lookups)."""
    return ["history", "add", "-f", str(ledger), "--quantity", f"w{i}/peak_rss_bytes",
            "--value", str(1000 + i), "--unit", "B", "--device", "cpu", "--command",
            f"writer {i}", "--torch", "2.0", "--commit", "abc",
            "--date", "2026-01-01T00:00:00Z"]


def one_line_error(r) -> bool:
    """The CLI's failure shape: one ``error:`` line on stderr, no traceback anywhere."""
    text = r.stderr.strip()
    return text.startswith("error:") and "\n" not in text and "Traceback" not in r.output


def fork_rounds(n: int, rounds: int, job: Callable[[int, int], int]) -> list[list[int]]:
    """``n`` processes run ``job(i, round)`` for each round, all released together; a
    round starts when every process has finished the one before. The exit codes of each
    round (in finishing order). The processes are forked once: a fork of a process that
    has imported torch costs tens of milliseconds here."""
    starts = [os.pipe() for _ in range(rounds)]
    done_r, done_w = os.pipe()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            _child(i, starts, done_r, done_w, job)  # never returns
        pids.append(pid)
    os.close(done_w)
    for r, _ in starts:
        os.close(r)
    codes = []
    for _, w in starts:
        os.close(w)  # EOF on every child's read: the round starts
        got = b""
        while len(got) < n and (chunk := os.read(done_r, n - len(got))):
            got += chunk
        codes.append(list(got))
    os.close(done_r)
    for pid in pids:
        os.waitpid(pid, 0)
    return codes


def _child(i: int, starts, done_r: int, done_w: int, job) -> None:
    try:
        os.close(done_r)
        for _, w in starts:
            os.close(w)
        for k, (r, _) in enumerate(starts):
            os.read(r, 1)
            try:
                code = int(job(i, k))
            except BaseException:
                traceback.print_exc()
                code = 98
            os.write(done_w, bytes([code & 0xFF]))
    finally:
        os._exit(0)


def fork(job: Callable[[], object]) -> int:
    """Start ``job`` in a child process at once; its pid (the child exits 0 after it)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            job()
        except BaseException:
            traceback.print_exc()
            code = 98
        finally:
            os._exit(code)
    return pid


def leftovers(folder: Path, keep: set[str]) -> set[str]:
    return {p.name for p in folder.iterdir()} - keep
