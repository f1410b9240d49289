"""The host's load while a certificate was measured, as a report table: beside a NOISY time
verdict (the usual cause: other work sharing the CPU with the timed steps) and in its own
section. Renders :mod:`afford.figures.noise`; computes nothing.
"""

from __future__ import annotations

from afford.figures.noise import host_load_rows, load_line
from afford.report.model import Table
from afford.schema.cert import Certificate


def host_load_table(cert: Certificate) -> Table | None:
    rows = host_load_rows(cert)
    if not rows:
        return None
    return Table(("when", "load, 1 min", "5 min", "15 min", "cores", "1 min load / cores",
                  "busy", "other processes on the device"), tuple(
        (r.at, r.one, r.five, r.fifteen, r.cores, r.per_core, r.busy, r.device)
        for r in rows), "busy: a 1-minute load of half the cores or more")


def host_load_notes(cert: Certificate) -> tuple[str, ...]:
    """The one line on the load against the cores, and its fix (none where not recorded)."""
    line, _ = load_line(cert)
    return (f"Host load: {line}.",) if line else ()
