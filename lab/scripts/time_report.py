"""The step-time model of a certificate, before and after (issue 19): every measured shape of
each workload (the sweep, the design's shapes across it, the held-out ones, any extension)
with its measured warm step, what the old throughput law predicts there (one axis, scaled by
batch / base batch off the sweep's batch: all a reader of the old law could do), what the
new model predicts, and both errors; held-out medians and worsts; the synced figure beside
the async one; the floor's uncertainty with the children's CPU diagnostics; where certify's
time went; the time verdict.

    PYTHONPATH=src python3 lab/scripts/time_report.py CERT [CERT ...] [--ledger lab/history.tsv
        --commit SHA]

``--ledger``: append the held-out errors (old and new) and certify's stage seconds to the
project's ledger, each reading naming the certificate's run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from afford.figures import ledger
from afford.figures.time_figures import old_law_at
from afford.schema.cert import load_certificate


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:8.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+7.1%}"


def rows(r):
    """(label, role, measured, old, new, extrapolated, synced, spread, ivcsw) per shape."""
    t = r.time
    m = t.model
    out = []
    for p in [*r.points, *r.design_points]:
        if not (p.resident and p.excluded_reason is None and p.median_seconds):
            out.append((_label(p), p.role, None, None, None, False, None, None, None,
                        p.excluded_reason))
            continue
        old = old_law_at(r, p.batch, p.seq, p.value if p.batch is None else None)
        new, extra = m.predict(batch=p.batch, seq=p.seq,
                               n=p.value if m.axes == "n" else None) if m else (None, False)
        switches = [k.involuntary_switches for k in p.children
                    if k.involuntary_switches is not None]
        out.append((_label(p), p.role, p.median_seconds, old[0] if old else None, new, extra,
                    p.synced_median_seconds, p.child_spread,
                    max(switches) if switches else None, None))
    return out


def _label(p) -> str:
    return f"{p.batch} x {p.seq}" if p.batch is not None else f"n={p.value}"


def report(path: Path) -> list[str]:
    cert = load_certificate(path)
    env = cert.environment
    lines = [f"# {path.name}: {env.device_name}, torch {env.torch_version}, "
             f"{cert.protocol.precision} protocol, {env.elapsed_seconds:.1f} s"]
    if env.stage_seconds:
        lines.append("stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in
                                            env.stage_seconds.items()))
    for h in cert.host_load or []:
        others = [p for p in h.gpu_processes or [] if p.get("own") is not True]
        lines.append(f"host load {h.at}: {h.load_average}; other device processes: "
                     f"{len(others) if h.gpu_processes is not None else h.gpu_processes_error}")
    if cert.time_verdict:
        v = cert.time_verdict
        lines.append(f"time verdict: {v.label} (re-measured {v.remeasured_points} point(s))"
                     + ("".join(f"\n  {why}" for why in v.reasons)))
    lines += where_time_went(cert)
    for r in cert.workloads:
        t = r.time
        if t is None or t.model is None:
            lines.append(f"\n## {r.name} ({r.mode}): no time model"
                         + (f": {t.not_fitted}" if t else ""))
            continue
        m = t.model
        lines += [f"\n## {r.name} ({r.mode}): {m.describe()}", f"chosen: {m.reason}",
                  f"features: {t.features}",
                  f"floor {_ms(t.floor_seconds).strip()} ms, floor points' spread "
                  f"{_pct(t.floor_spread).strip()}; verdict "
                  f"{t.verdict.label if t.verdict else '-'}"]
        lines += [f"note: {n}" for n in t.design_notes]
        if t.extension:
            lines.append(f"extension: {t.extension.shapes}, left the floor: "
                         f"{t.extension.left_floor}; {'; '.join(t.extension.notes)}")
        lines.append(f"{'shape':>12} {'role':>22} {'measured':>9} {'old law':>9} {'err':>8} "
                     f"{'new':>9} {'err':>8} {'synced':>9} {'spread':>7} {'ivcsw':>6}")
        old_err, new_err = [], []
        for lab, role, meas, old, new, extra, synced, spread, ivcsw, why in rows(r):
            if meas is None:
                lines.append(f"{lab:>12} {role:>22}  not measured: {why}")
                continue
            eo = old / meas - 1 if old else None
            en = new / meas - 1 if new else None
            if role.startswith("held_out"):
                old_err.append(abs(eo) if eo is not None else np.nan)
                new_err.append(abs(en))
            lines.append(f"{lab:>12} {role:>22} {_ms(meas)} {_ms(old)} {_pct(eo)} "
                         f"{_ms(new)}{'*' if extra else ' '}{_pct(en)} {_ms(synced)} "
                         f"{'-' if spread is None else f'{spread:6.1%}':>7} "
                         f"{ivcsw if ivcsw is not None else '-':>6}")
        if new_err:
            lines.append(f"held out: new median {np.median(new_err):.1%} worst "
                         f"{max(new_err):.1%}; old median {np.nanmedian(old_err):.1%} "
                         f"worst {np.nanmax(old_err):.1%} (all held-out shapes, floor ones "
                         "included; the verdict judges the work regime only)")
    return lines


def where_time_went(cert) -> list[str]:
    """The children's wall seconds by part of a point and by role, and what is left of the
    sweep's and the time stage's seconds for process start-up and switches."""
    parts = dict(step0=0.0, warmup=0.0, timed=0.0, synced=0.0, other=0.0)
    roles: dict[str, float] = {}
    walls = 0.0
    for r in cert.workloads:
        for p in [*r.points, *r.design_points]:
            for k in p.children:
                wall = k.wall_seconds or 0.0
                walls += wall
                known = (k.step0_seconds or 0.0) + sum(k.warmup_seconds) + sum(k.timed_seconds) \
                    + sum(k.synced_seconds)
                parts["step0"] += k.step0_seconds or 0.0
                parts["warmup"] += sum(k.warmup_seconds)
                parts["timed"] += sum(k.timed_seconds)
                parts["synced"] += sum(k.synced_seconds)
                parts["other"] += max(0.0, wall - known)
                role = "held_out" if p.held_out else p.role
                roles[role] = roles.get(role, 0.0) + wall
    stages = cert.environment.stage_seconds or {}
    spent = stages.get("sweep", 0.0) + stages.get("time", 0.0)
    return [
        "children's point seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
        + " (other: build, gc, FLOP count, memory reads)",
        "by role: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(roles.items())),
        f"sweep + time stages {spent:.1f} s, of which points {walls:.1f} s: "
        f"{spent - walls:.1f} s of child start-up, switches and fits"]


def ledger_rows(path: Path, commit: str) -> list:
    cert = load_certificate(path)
    env = cert.environment
    base = {"device": env.device_name, "torch": env.torch_version, "commit": commit,
            "command": f"{env.command} (lab/scripts/time_report.py)", "date": env.started_at}
    out = [ledger.new_reading(quantity=f"certify/stage/{k}/seconds", value=v, unit="s", **base)
           for k, v in (env.stage_seconds or {}).items()]
    for r in cert.workloads:
        m = r.time.model if r.time else None
        if m is None:
            continue
        for h in m.held_out:
            q = f"time/{r.name}/{r.mode}/held_out/{(h.label or '').replace(' ', '')}"
            out.append(ledger.new_reading(quantity=f"{q}/measured_seconds",
                                          value=h.measured_seconds, unit="s", **base))
            out.append(ledger.new_reading(quantity=f"{q}/new_error", value=h.rel_error,
                                          unit="ratio", tag="FITTED", **base))
            old = old_law_at(r, h.batch, h.seq, h.n)
            if old:
                out.append(ledger.new_reading(quantity=f"{q}/old_law_error",
                                              value=old[0] / h.measured_seconds - 1,
                                              unit="ratio", tag="FITTED", **base))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("certs", type=Path, nargs="+")
    ap.add_argument("--ledger", type=Path)
    ap.add_argument("--commit")
    ns = ap.parse_args()
    for path in ns.certs:
        print("\n".join(report(path)))
        print()
    if ns.ledger:
        if not ns.commit:
            sys.exit("--ledger needs --commit")
        added = ledger.append(ns.ledger, [r for p in ns.certs for r in ledger_rows(p, ns.commit)])
        print(f"{len(added)} readings appended to {ns.ledger}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
