"""How often does the launch floor's band hold a fresh process's step, pooled over recorded
runs (a bench report, not a test)?

    python3 benches/band_coverage.py [--stored] [--rows] [--work] DIR:CERT:TRUTH [...]

Each triple: a folder to run in (a certificate naming its workload by a relative config
path, ``hf:cfg/opt/config.json``, is read from its own folder), a certificate (``.gz`` read
too) and its truth (``benches/step_truth.py`` lines or ``truth_method.py``'s list; see
``benches/truth_report.py``). The step-time model is rebuilt from each certificate's raw
readings by this afford (``truth_report.refit_certificate``) unless ``--stored``. Per run and
pooled: the floor truths the band holds, below and above it, the band's width over the truth
and the truth's own block spread ((max - min) / median of its blocks in one process);
pooled, whether the share held is what a band of its stated level would hold (binomial);
``--rows``: every floor truth too (its shape, afford's figure and band, the truth and its
blocks, and where a band missed it, by how much); ``--work``: the work regime's truths too
(the shapes afford predicts a point for, the device bounding the step): the median and worst
error of afford's figure, and with ``--rows`` each of them.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import truth_report  # noqa: E402  (the bench beside this one)

from afford.fit.stats import PROCESS_BAND_LEVEL  # noqa: E402


def _plain(path: Path, tmp: str) -> Path:
    """A ``.gz`` certificate decompressed into ``tmp`` (the loader reads text)."""
    if path.suffix != ".gz":
        return path
    out = Path(tmp) / path.stem
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def truth_rows(triple: str, refit: bool) -> list[dict]:
    folder, cert, truth = triple.split(":")
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, truth_path = _plain((here / cert).resolve(), tmp), (here / truth).resolve()
        os.chdir(here / folder)
        try:
            rows = truth_report.rows_for(cert_path, truth_path, refit)
        finally:
            os.chdir(here)
    return rows


def describe_work(rows: list[dict]) -> str:
    errs = [truth_report.err(r["afford_step"], r["truth_step"]) for r in rows]
    mw = truth_report._med_worst(errs)
    if mw is None:
        return "no work-regime truths"
    within = sum(abs(e) <= 0.05 for e in errs if e is not None)
    return (f"work regime: {len(rows)} truths, error median {mw[0]:.2%}, worst {mw[1]:.2%}, "
            f"within 5 %: {within}")


def work_line(r: dict) -> str:
    e = truth_report.err(r["afford_step"], r["truth_step"])
    return (f"  {r['B']:>3} x {r['s']:<5} {r['afford_tag']:<8} {1e3 * r['afford_step']:7.2f} ms; "
            f"truth {1e3 * r['truth_step']:.2f}: {e:+.1%}")


def describe(rows: list[dict]) -> str:
    if not rows:
        return "no floor truths"
    held = sum(truth_report.in_band(r) for r in rows)
    below = sum(r["truth_step"] < r["band"][0] for r in rows)
    widths = [truth_report.band_width(r) for r in rows]
    blocks = [truth_report.block_spread(r) for r in rows]
    within = sum(w <= 2 * b for w, b in zip(widths, blocks))
    return (f"holds {held} of {len(rows)} ({held / len(rows):.0%}; below {below}, above "
            f"{len(rows) - held - below}); width median {statistics.median(widths):.0%}, worst "
            f"{max(widths):.0%}; truth's block spread median {statistics.median(blocks):.0%}; "
            f"within 2x of it: {within}")


def against_level(rows: list[dict], level: float) -> str:
    """Whether the truths held are what a band of ``level`` would hold: the binomial
    probability of holding that many or fewer, and the Clopper-Pearson 95 % interval of the
    share held (exact; Clopper & Pearson 1934)."""
    from scipy.stats import beta, binom

    n, k = len(rows), sum(truth_report.in_band(r) for r in rows)
    if not n:
        return "no floor truths"
    lo = beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return (f"against the band's stated {level:.0%}: {k} or fewer of {n} held with probability "
            f"{binom.cdf(k, n, level):.2f}; share held {k / n:.1%}, Clopper-Pearson 95 % "
            f"interval {lo:.1%}-{hi:.1%}")


def row_line(r: dict) -> str:
    lo, hi = r["band"]
    t = r["truth_step"]
    miss = "" if truth_report.in_band(r) else (
        f"  below by {lo / t - 1:.1%}" if t < lo else f"  above by {t / hi - 1:.1%}")
    ms = [1e3 * x for x in (r["afford_step"], lo, hi, t, min(r["truth_blocks"]),
                            max(r["truth_blocks"]))]
    return (f"  {r['B']:>3} x {r['s']:<5} {r['afford_tag']:<8} {ms[0]:7.2f} ms, band "
            f"{ms[1]:.2f}-{ms[2]:.2f}; truth {ms[3]:.2f} (blocks {ms[4]:.1f}-{ms[5]:.1f}){miss}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("triples", nargs="+", help="DIR:CERT:TRUTH")
    ap.add_argument("--stored", action="store_true", help="the certificates' stored models")
    ap.add_argument("--rows", action="store_true", help="every floor truth, a line each")
    ap.add_argument("--work", action="store_true", help="the work regime's truths too")
    a = ap.parse_args(argv)
    pooled, pooled_work = [], []
    for triple in a.triples:
        every = truth_rows(triple, not a.stored)
        rows = [r for r in every if r["band"] is not None]
        work = [r for r in every if r["band"] is None and r["afford_step"] is not None]
        pooled += rows
        pooled_work += work
        print(f"{triple}: {describe(rows)}")
        if a.rows:
            print("\n".join(row_line(r) for r in rows))
        if a.work:
            print(f"  {describe_work(work)}")
            if a.rows:
                print("\n".join(work_line(r) for r in work))
    print(f"pooled: {describe(pooled)}")
    print(f"  {against_level(pooled, PROCESS_BAND_LEVEL)}")
    if a.work:
        print(f"pooled {describe_work(pooled_work)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
