"""A guarded session's readings for the history ledger (:mod:`afford.ledger`).

Every step time carries its step indices (docs/DESIGN.md section 3, rule 1): the warm median with the
indices of the warm steps it was taken over; the session's first step (allocation,
compilation) with its own index, never as a warm reading. Peak memory (CUDA
``max_memory_allocated``, else the process's peak RSS) and the drift against the certificate's
prediction go beside them. Imported only when a session closes: the ledger module brings the
statistics stack with it.
"""

from __future__ import annotations

import hashlib
import re
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from afford.ledger import Reading


# a step's kind, as afford.track.session records it (session imports these from here)
FIRST, WARMUP, WARM, AFTER_SAVE = 0, 1, 2, 3
SessionLike = object  # an afford.track.session.Session (not imported: session imports this)


def session_readings(s: "SessionLike") -> list["Reading"]:
    from afford.ledger import format_step_indices, new_reading
    from afford.provenance import Tag

    if not s.indices:
        return []
    q = "track/" + re.sub(r"\s+", "_", s.budget.run)
    base = dict(device=device_name(s), torch=_torch_version(), command=_command(s),
                config_fingerprint=_fingerprint(s))
    warm = [(i, x) for i, x, k in zip(s.indices, s.seconds, s.kinds) if k == WARM]
    first = [(i, x) for i, x, k in zip(s.indices, s.seconds, s.kinds) if k == FIRST]
    rows = []
    if first:
        rows.append(dict(quantity=f"{q}/first_step_seconds", value=first[0][1], unit="s",
                         tag=Tag.MEASURED, step_indices=str(first[0][0])))
    if warm:
        med = statistics.median(x for _, x in warm)
        rows.append(dict(quantity=f"{q}/warm_step_seconds", value=med, unit="s",
                         tag=Tag.MEASURED,
                         step_indices=format_step_indices([i for i, _ in warm])))
        if s.budget.step_seconds:
            rows.append(dict(quantity=f"{q}/drift", value=med / s.budget.step_seconds - 1,
                             unit="ratio", tag=Tag.MODULE))
    peak = max(s.peak_bytes) if s.peak_bytes else 0
    if peak > 0:
        what = "peak_allocated_bytes" if s._cuda is not None else "peak_rss_bytes"
        rows.append(dict(quantity=f"{q}/{what}", value=int(peak), unit="B", tag=Tag.MEASURED))
    if s.stopped_at is not None:
        rows.append(dict(quantity=f"{q}/stop_elapsed_seconds", value=s.stopped_at, unit="s",
                         tag=Tag.MEASURED))
    return [new_reading(**base, **row) for row in rows]


def append_session(s: "SessionLike", path: str | Path) -> list["Reading"]:
    """Append the session's readings, leaving out any the ledger already holds."""
    from afford import ledger

    rows = session_readings(s)
    p = Path(path)
    have = {r.id for r in ledger.load(p)} if p.exists() else set()
    rows = [r for r in rows if r.id not in have]
    return ledger.append(p, rows) if rows else []


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
