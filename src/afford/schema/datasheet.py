"""Datasheet peaks of known devices, read from ``afford/data/devices.toml`` (data with a
citation, never literals in code; docs/DESIGN.md section 2).

:func:`lookup` matches the device name torch reports against each row's patterns; the
longest matching pattern over all rows wins (most specific first), so "A100-SXM4-80GB"
beats "A100". An unknown device gives ``None`` and a warning: never a silent default
(nanochat shows MFU of an unknown GPU as undefined rather than borrowing an A100's peak).
"""

from functools import lru_cache
from pathlib import Path

from afford.core.io import tomllib
from afford.core.published_constants import DATA
from afford.schema.probes_section import GEMM_DTYPES, DatasheetPeaks

DEVICES_TOML = DATA / "devices.toml"


@lru_cache(maxsize=4)
def load_rows(path: Path = DEVICES_TOML) -> tuple[dict, ...]:
    with open(path, "rb") as fh:
        rows = tomllib.load(fh).get("device", [])
    for row in rows:
        for key in ("name", "match", "citation", "secondary"):
            if key not in row:
                raise ValueError(f"{path}: a device row lacks {key!r}: {row}")
    return tuple(rows)


def lookup(device_name: str, rows: tuple[dict, ...] | None = None
           ) -> tuple[DatasheetPeaks | None, str | None]:
    """(peaks, None) for a known device; (None, warning) for an unknown one."""
    name = device_name.lower()
    best: tuple[int, dict, str] | None = None
    for row in rows if rows is not None else load_rows():
        if any(x.lower() in name for x in row.get("exclude", [])):
            continue
        for pattern in row["match"]:
            if pattern.lower() in name and (best is None or len(pattern) > best[0]):
                best = (len(pattern), row, pattern)
    if best is None:
        return None, (f"no datasheet peaks for {device_name!r} in afford/data/devices.toml: "
                      "figures against the datasheet are not shown (add a row with its "
                      "citation)")
    _, row, pattern = best
    return DatasheetPeaks(
        device=row["name"], matched=pattern,
        flops_per_second={d: float(row[d]) for d in GEMM_DTYPES if d in row},
        bandwidth_bytes_per_second=float(row["bandwidth"]) if "bandwidth" in row else None,
        citation=row["citation"], secondary=bool(row["secondary"]),
        note=row.get("note", "")), None
