"""A guarded session's readings for the history ledger (:mod:`afford.schema.ledger`), appended at
every confirmed save for the steps since the one before (so a killed session's readings up
to its last save are kept) and at the session's close for the rest.

Every step time carries its step indices (docs/DESIGN.md section 3, rule 1): the warm median
of each save interval with the indices of the warm steps it was taken over; the session's
first step (allocation, compilation) with its own index, never as a warm reading. Peak memory
(CUDA ``max_memory_allocated``, else the process's peak RSS; written when it grew) and the
drift against the certificate's prediction go beside them. The ledger module is imported at
the first flush, not with the guard.
"""

from __future__ import annotations

import hashlib
import re
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from afford.schema.ledger import Reading


# a step's kind, as afford.track.session records it (session imports these from here)
FIRST, WARMUP, WARM, AFTER_SAVE = 0, 1, 2, 3
SessionLike = object  # an afford.track.session.Session (not imported: session imports this)


def interval_readings(s: "SessionLike", start: int, end: int, *, final: bool = False
                      ) -> list["Reading"]:
    """The readings of the steps at positions ``start`` to ``end`` - 1 of the session: the
    session's first step (where it falls in them), the warm median over their warm steps
    with those steps' indices, its drift against the plan, the peak memory when it grew;
    with ``final``, the stop's elapsed seconds too."""
    from afford.core.provenance import Tag
    from afford.schema.ledger import format_step_indices, new_reading

    q = "track/" + re.sub(r"\s+", "_", s.budget.run)
    base = dict(device=device_name(s), torch=_torch_version(), command=_command(s),
                config_fingerprint=_fingerprint(s))
    span = range(start, end)
    warm = [(s.indices[i], s.seconds[i]) for i in span if s.kinds[i] == WARM]
    rows = []
    if start == 0 and end > 0 and s.kinds[0] == FIRST:
        rows.append(dict(quantity=f"{q}/first_step_seconds", value=s.seconds[0], unit="s",
                         tag=Tag.MEASURED, step_indices=str(s.indices[0])))
    if warm:
        med = statistics.median(x for _, x in warm)
        rows.append(dict(quantity=f"{q}/warm_step_seconds", value=med, unit="s",
                         tag=Tag.MEASURED,
                         step_indices=format_step_indices([i for i, _ in warm])))
        if s.budget.step_seconds:
            rows.append(dict(quantity=f"{q}/drift", value=med / s.budget.step_seconds - 1,
                             unit="ratio", tag=Tag.MODULE,
                             step_indices=format_step_indices([i for i, _ in warm])))
    peak = max(s.peak_bytes[start:end]) if end > start else 0
    if peak > max(s.peak_bytes[:start], default=0):
        what = "peak_allocated_bytes" if s._cuda is not None else "peak_rss_bytes"
        rows.append(dict(quantity=f"{q}/{what}", value=int(peak), unit="B", tag=Tag.MEASURED,
                         step_indices=f"{s.indices[start]}-{s.indices[end - 1]}"))
    if final and s.stopped_at is not None:
        rows.append(dict(quantity=f"{q}/stop_elapsed_seconds", value=s.stopped_at, unit="s",
                         tag=Tag.MEASURED))
    return [new_reading(**base, **row) for row in rows]


def flush(s: "SessionLike", path: str | Path, start: int, end: int, *, final: bool = False
          ) -> list["Reading"]:
    """Append the readings of positions ``start`` to ``end`` - 1 to the ledger at ``path``
    (created if absent); the readings appended."""
    from afford.schema import ledger

    rows = interval_readings(s, start, end, final=final)
    return ledger.append(Path(path), rows) if rows else []


def device_name(s: "SessionLike") -> str:
    if s._cuda is not None:
        try:
            return str(s._cuda.get_device_name())
        except Exception:  # a CUDA error here must not lose the readings
            return "cuda"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "")) if torch is not None else ""


def _command(s: "SessionLike") -> str:
    return s.command or ("afford.track: " + " ".join(sys.argv)).strip()


def _fingerprint(s: "SessionLike") -> str:
    b = s.budget
    text = f"{b.run}|{b.step_seconds}|{b.chunk_seconds}|{b.save_every}|{b.write_seconds}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
