"""If certify profiled no point its first two children settled in the work regime, how far
would the step-time answers move? (A replay on recorded certificates, 2026-12-06.)

    python3 lab/scripts/derived_busy_replay.py DIR:CERT[:TRUTH] [DIR:CERT[:TRUTH] ...]

Per certificate: each workload's points that children 0 and 1 settle (medians within 1 %,
at least 2x the workload's smallest step: ``stage_time.settled_by_two``) lose their profiled
device side (busy time, kernels, gap), as they would under the protocol that does not
profile them; both versions are refitted by this afford (``truth_report.refit_certificate``).
Printed: the points stripped, the model's prediction moved at every measured shape (fitted
and held out) and, with a truth, the answer against the fresh-process truth both ways (work
regime: truth >= 1.4x the workload's floor, as ``benches/truth_report.py``).
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
import truth_report  # noqa: E402

TOL, WORK = 0.01, 2.0


def strip(doc: dict) -> int:
    n = 0
    for w in doc["workloads"]:
        pts = w["points"] + (w.get("design_points") or [])
        low = None
        for p in pts:
            for k in (p.get("children") or [])[:2]:
                m = k.get("median_seconds")
                if m:
                    low = m if low is None else min(low, m)
        for p in pts:
            kids = p.get("children") or []
            if len(kids) < 2:
                continue
            a, b = kids[0].get("median_seconds"), kids[1].get("median_seconds")
            if not a or not b or abs(a - b) > TOL * min(a, b) or min(a, b) < WORK * low:
                continue
            for key in ("device_busy_seconds", "device_busy_spread", "kernels_per_step",
                        "device_gap_seconds"):
                p[key] = None
            for k in kids:
                k["device_steps"] = []
            n += 1
    return n


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def predictions(cert) -> dict[tuple, float]:
    from afford.schema.time_law import predict_at

    out = {}
    for r in cert.workloads:
        m = r.time.model if r.time else None
        if m is None:
            continue
        for p in r.points + r.design_points:
            if p.batch and p.seq:
                out[(r.name, p.batch, p.seq)] = predict_at(m, batch=p.batch, seq=p.seq).seconds
    return out


def main(argv: list[str]) -> int:
    from afford.schema.cert import load_certificate

    here = Path.cwd()
    moved_all, err_a, err_b = [], [], []
    for arg in argv:
        folder, cert_name, *truth = arg.split(":")
        raw = (here / cert_name).read_bytes()
        doc = json.loads(gzip.decompress(raw) if cert_name.endswith(".gz") else raw)
        with tempfile.TemporaryDirectory() as tmp:
            a_path, b_path = Path(tmp) / "a.json", Path(tmp) / "b.json"
            a_path.write_text(json.dumps(doc))
            n = strip(doc)
            b_path.write_text(json.dumps(doc))
            truth_path = (here / truth[0]).resolve() if truth else None
            os.chdir(here / folder)
            try:
                a = truth_report.refit_certificate(load_certificate(a_path))
                b = truth_report.refit_certificate(load_certificate(b_path))
                pa, pb = predictions(a), predictions(b)
                moved = [abs(pb[k] / pa[k] - 1.0) for k in pa if k in pb]
                moved_all += moved
                line = (f"{Path(cert_name).name}: {n} points stripped; predictions moved "
                        f"median {statistics.median(moved):.2%}, worst {max(moved):.2%}"
                        if moved else f"{Path(cert_name).name}: no model")
                verdicts = [(r.name, r.time.verdict, s.time.verdict)
                            for r, s in zip(a.workloads, b.workloads)
                            if r.time and r.time.verdict and s.time and s.time.verdict]
                line += "; verdicts (held-out worst) " + ", ".join(
                    f"{w} {x.label} {_pct(x.held_out_worst)} -> {y.label} "
                    f"{_pct(y.held_out_worst)}" for w, x, y in verdicts)
                if truth_path is not None and n:
                    ra = truth_report.rows_for(a_path, truth_path, refit=True)
                    rb = truth_report.rows_for(b_path, truth_path, refit=True)
                    floor = min(r["truth_step"] for r in ra)
                    ea = [abs(r["afford_step"] / r["truth_step"] - 1) for r in ra
                          if r["truth_step"] >= 1.4 * floor]
                    eb = [abs(r["afford_step"] / r["truth_step"] - 1) for r in rb
                          if r["truth_step"] >= 1.4 * floor]
                    err_a += ea
                    err_b += eb
                    if ea:
                        line += (f"; work-regime truths ({len(ea)}): profiled median "
                                 f"{statistics.median(ea):.2%} worst {max(ea):.2%}, derived "
                                 f"median {statistics.median(eb):.2%} worst {max(eb):.2%}")
            finally:
                os.chdir(here)
        print(line)
    if moved_all:
        print(f"all: predictions moved median {statistics.median(moved_all):.3%}, 90th "
              f"{sorted(moved_all)[int(0.9 * (len(moved_all) - 1))]:.2%}, worst "
              f"{max(moved_all):.2%} over {len(moved_all)} shapes")
    if err_a:
        print(f"truths: profiled median {statistics.median(err_a):.2%} worst {max(err_a):.2%}; "
              f"derived median {statistics.median(err_b):.2%} worst {max(err_b):.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
