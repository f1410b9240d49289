"""The kinds of failure a user must tell apart (docs/DESIGN.md section 5, exit codes).

``InputError``: bad input or usage, a bad path included (exit 2). ``MeasurementError``: the
measurement itself failed (exit 3). ``WriteError``: a write failed mid-way, after the path
was accepted (disk full, an I/O error; exit 3): the old file, if any, is left whole. Library
code raises them with a message a person can act on; only ``cli/`` turns them into exit
codes (:func:`afford.cli.common.guard` reads ``exit_code``).
"""

from __future__ import annotations


class AffordError(Exception):
    exit_code = 1


class InputError(AffordError, ValueError):
    """Bad input: a malformed flag, file or workload, or a path that cannot be written
    (missing folder, a folder where a file is wanted, no permission). Exit code 2."""

    exit_code = 2


class MeasurementError(AffordError, RuntimeError):
    """The measurement could not be completed. Exit code 3."""

    exit_code = 3


class WriteError(AffordError, OSError):
    """A write failed mid-way (ENOSPC, EDQUOT, EIO, ...): nothing was replaced. Exit code 3.

    An ``OSError`` too, so library callers that caught the raw error keep catching it."""

    exit_code = 3
