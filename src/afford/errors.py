"""The two kinds of failure a user must tell apart (docs/DESIGN.md section 5, exit codes).

``InputError``: bad input or usage (exit 2). ``MeasurementError``: the measurement itself
failed (exit 3). Library code raises them with a message a person can act on; only ``cli/``
turns them into exit codes.
"""

from __future__ import annotations


class AffordError(Exception):
    exit_code = 1


class InputError(AffordError, ValueError):
    """Bad input: a malformed flag, file or workload. Exit code 2."""

    exit_code = 2


class MeasurementError(AffordError, RuntimeError):
    """The measurement could not be completed. Exit code 3."""

    exit_code = 3
