"""Is the memory afford prints the step's? The one memory answer (what ``afford size``,
``predict``, ``plan`` and ``preflight`` print:
:func:`afford.figures.memory_figures.memory_answer`) beside fresh-process truths, and the
issue's targets (a bench report, not a test).

    python3 benches/memory_answer_truth.py CERT TRUTH [CERT TRUTH ...] [--mode bf16]
        [--fraction 0.9]

TRUTH: either format ``benches/truth_report.py`` reads (:func:`truth_report.read_truths`:
a ``step_truth.py`` run, ``.gz`` too, or the recorded runs' JSON list, whose cases are
picked by the certificate's workload). Run from the folder the certificate's workload
names its config from, where it names one (``hf:cfg/NAME/config.json``).

Per shape: the truth's peak reserved, the printed figure, its error, where it came from,
whether it is marked extrapolated (and why), and ``fits`` against the certificate's device
memory x ``--fraction``. Summary: median and worst |error|, and the optimistic misses over
1 % that are not both marked extrapolated and a ``fits`` other than a plain yes (the
issue's target: none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def rows_for(cert_path: Path, truth_path: Path, mode: str | None, fraction: float
             ) -> list[dict]:
    from truth_report import read_truths  # benches/: the one reader of both truth formats

    from afford.core.provenance import module
    from afford.figures import memory_figures
    from afford.schema.cert import load_certificate

    cert = load_certificate(cert_path)
    name = cert.workloads[0].name
    cases = [t for t in read_truths(truth_path, name) if t.get("peak_reserved_bytes")]
    budget = module(fraction * cert.environment.device_memory_bytes, "B", "bench budget")
    out = []
    for c in cases:
        t0 = time.perf_counter()
        a = memory_figures.memory_answer(cert, name, {"batch": c["batch"], "seq": c["seq"]},
                                         mode, budget=budget)
        truth = c["peak_reserved_bytes"]
        out.append({"workload": name, "batch": c["batch"], "seq": c["seq"],
                    "truth": truth, "printed": float(a.figure.value),
                    "error": float(a.figure.value) / truth - 1, "source": a.source,
                    "extrapolated": a.extrapolated, "fits": a.fits, "reasons": a.reasons,
                    "seconds": time.perf_counter() - t0})
    return out


def unmarked(r: dict) -> bool:
    """An optimistic miss over 1 % that is not marked extrapolated with a fits other than
    a plain yes."""
    return r["error"] < -0.01 and not (r["extrapolated"] and r["fits"] != "yes")


def report(rows: list[dict]) -> str:
    lines = ["| workload | shape | truth GiB | printed GiB | error | source | extrapolated | "
             "fits |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        why = "; ".join(r["reasons"]) if r["extrapolated"] else "no"
        lines.append(f"| {r['workload']} | {r['batch']} x {r['seq']} | "
                     f"{r['truth'] / 2**30:.3f} | {r['printed'] / 2**30:.3f} | "
                     f"{r['error']:+.2%} | {r['source']} | {why} | {r['fits']} |")
    errs = [abs(r["error"]) for r in rows]
    bad = [r for r in rows if unmarked(r)]
    lines += ["", f"{len(rows)} shapes: median |error| {statistics.median(errs):.2%}, worst "
              f"{max(rows, key=lambda r: abs(r['error']))['error']:+.2%}; optimistic misses "
              f"over 1 % not marked extrapolated with fits other than yes: {len(bad)}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", type=Path, help="CERT TRUTH [CERT TRUTH ...]")
    ap.add_argument("--mode", default=None)
    ap.add_argument("--fraction", type=float, default=0.9)
    a = ap.parse_args(argv)
    if len(a.pairs) % 2:
        ap.error("give CERT TRUTH pairs")
    rows = []
    for cert, truth in zip(a.pairs[::2], a.pairs[1::2]):
        rows += rows_for(cert, truth, a.mode, a.fraction)
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
