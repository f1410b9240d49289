"""How much do processes differ on the launch floor, over recorded certificates (a bench
report, and the generator of ``src/afford/data/process_spread.toml``)?

    python3 benches/process_spread.py [--toml] [--exclude SUBSTRING ...] CERT [CERT ...]

For each CUDA certificate's workload whose step-time model has a host side: the variance of
the log step between the children (processes) at each host-bound point, pooled over those
points (:func:`afford.fit.stats.pooled_log_variance`), with its degrees of freedom. Over all
of them, the prior a certificate's own few processes are moderated with
(:func:`afford.fit.stats.spread_prior`, Smyth 2004). Beside it, the spread between
certificates of one workload repeated in one device call (:func:`session_spread`).
``--toml`` prints the data file's text; ``--exclude`` leaves out certificates whose path
contains a substring (to check that a run's own certificate does not decide its band).
``.gz`` files are read too; a file that is not a CUDA certificate is skipped.

Only the certificates' children are read: no fresh-process truth decides the prior, so the
truths of ``benches/band_coverage.py`` stay a test of it.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import statistics
import sys
from pathlib import Path


def _read(path: Path) -> dict | None:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        doc = json.loads(raw)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def groups_of(cert: dict) -> list[tuple[str, list[list[float]]]]:
    """Per workload with a host side: its host-bound points' children's medians."""
    return [(name, [meds for _, meds in labelled]) for name, labelled in labelled_groups(cert)]


def labelled_groups(cert: dict) -> list[tuple[str, list[tuple[str, list[float]]]]]:
    """Per workload with a host side: (shape label, its children's medians) at each of its
    host-bound points."""
    if (cert.get("environment") or {}).get("device_type") != "cuda":
        return []
    out = []
    for w in cert.get("workloads") or []:
        host = ((((w.get("time") or {}).get("model") or {}).get("sides") or {})
                .get("host") or {})
        labels = set(host.get("points") or [])
        if not labels:
            continue
        pts = [p for p in (w.get("points") or []) + (w.get("design_points") or [])
               if isinstance(p, dict)]
        groups, seen = [], set()
        for p in pts:
            label = f"{p.get('batch')} x {p.get('seq')}"
            if label not in labels or label in seen:
                continue
            meds = [c["median_seconds"] for c in p.get("children") or []
                    if c.get("median_seconds")]
            if len(meds) >= 2:
                groups.append((label, meds))
                seen.add(label)
        if groups:
            out.append((w.get("name", "?"), groups))
    return out


def session_spread(certs: list[tuple[str, dict]]) -> tuple[float, int, int]:
    """(variance, degrees of freedom, sets) of a certificate's mean log floor step between
    certificates of one workload at one host-bound shape on one machine (one folder: one
    device call), beyond what its children's own spread explains
    (:func:`afford.fit.stats.between_log_variance`): what a fresh process at another time
    adds to the spread between a certificate's children."""
    from afford.fit.stats import between_log_variance

    by: dict[tuple, dict[str, list[float]]] = {}
    for path, cert in certs:
        folder = str(Path(path).parent)
        for name, labelled in labelled_groups(cert):
            for label, meds in labelled:
                by.setdefault((folder, name, label), {})[path] = meds
    sets = [list(per.values()) for per in by.values() if len(per) >= 2]
    var, dof = between_log_variance(sets)
    return var, dof, len(sets)


def main(argv: list[str] | None = None) -> int:
    from afford.fit.stats import pooled_log_variance, spread_prior

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("certs", nargs="+", type=Path)
    ap.add_argument("--toml", action="store_true", help="print the data file's text")
    ap.add_argument("--exclude", action="append", default=[])
    a = ap.parse_args(argv)
    variances, certs, devices = [], set(), set()
    read: list[tuple[str, dict]] = []
    for path in sorted(set(a.certs)):
        if any(x in str(path) for x in a.exclude):
            continue
        cert = _read(path)
        if cert is None:
            continue
        read.append((str(path), cert))
        for _, groups in groups_of(cert):
            v, d = pooled_log_variance(groups)
            if d > 0 and v > 0.0:
                variances.append((v, d))
                certs.add(str(path))
                devices.add((cert.get("environment") or {}).get("device_name", "?"))
    if len(variances) < 3:
        print("fewer than 3 workloads with host-bound points' children", file=sys.stderr)
        return 2
    sd0, d0 = spread_prior(variances)
    sds = sorted(math.sqrt(v) for v, _ in variances)
    dof = "inf" if math.isinf(d0) else f"{d0:.4g}"
    s_var, s_dof, s_groups = session_spread(read)
    if a.toml:
        print(f"""# The spread of a launch-floor (host-bound) step between processes on a GPU: the
# prior a certificate's own children are moderated with when its floor's band is made
# (afford.fit.stats.process_band; Smyth 2004's empirical Bayes). Only certificates'
# children were read, never a fresh-process truth. Regenerate:
#   python3 benches/process_spread.py --toml lab/device-runs/*/cert*.json* \\
#       lab/device-runs/*/*/cert*.json*

[prior]
sd = {sd0:.4f}        # standard deviation of a log step between processes
dof = {dof}       # the degrees of freedom it weighs as (Smyth's d0)
# between certificates of one workload on one machine (one device call), minutes apart:
# what their mean floor step varies beyond their children's spread (a fresh process at
# another time adds it twice: its own, and the certificate's)
session_sd = {math.sqrt(s_var):.4f}
session_dof = {s_dof}      # over {s_groups} groups of repeated certificates
workloads = {len(variances)}
certificates = {len(certs)}
devices = {json.dumps(sorted(devices))}
date = "{datetime.date.today().isoformat()}"
citation = "benches/process_spread.py over {len(certs)} recorded CUDA certificates' \
host-bound points ({len(variances)} workloads)"
""")
        return 0
    print(f"{len(variances)} workloads of {len(certs)} certificates on {sorted(devices)}")
    print(f"per-workload sd between processes: median {statistics.median(sds):.1%}, "
          f"10 % {sds[len(sds) // 10]:.1%}, 90 % {sds[9 * len(sds) // 10]:.1%}")
    print(f"prior: sd0 {sd0:.2%}, d0 {dof}")
    print(f"between certificates minutes apart: sd {math.sqrt(s_var):.2%} ({s_dof} degrees of "
          f"freedom, {s_groups} groups)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
