"""Summarise a device_ladder.sh run: OUT/summary.md and OUT/history_rows.tsv.

history_rows.tsv: one reading per line, tab-separated, with its provenance:
date, device, torch, quantity, value, unit, tag, source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from afford.plan.lever_rows import lever_rows
from afford.schema.cert import load_certificate


def _v(t) -> str:
    return "-" if t is None or t.value is None else f"{t.value:.4g}"


def main(out: Path) -> int:
    cert_path = out / "cert-levers.json" if (out / "cert-levers.json").exists() \
        else out / "cert-sizes.json"
    if not cert_path.exists():
        print(f"no certificate under {out}")
        return 1
    cert = load_certificate(cert_path)
    env = cert.environment
    head = (f"{env.started_at:%Y-%m-%d}", env.device_name, env.torch_version)
    rows: list[tuple] = []
    md: list[str] = [f"# issue 7 on {env.device_name} (torch {env.torch_version})", ""]
    s = cert.sizes
    if s is not None:
        md += [f"## sizes ({s.mode}, batch x seq {s.batch}x{s.seq})", ""]
        for z in s.sizes:
            p = z.point
            md.append(f"- {z.spec}: N={z.params:,} step {p.median_seconds} s, spread "
                      f"{p.child_spread}, resident {p.resident} {p.excluded_reason or ''}")
            rows.append((f"sizes {z.spec} {s.mode} step_seconds", p.median_seconds, "s",
                         "MEASURED", "median of child medians"))
        if s.law:
            md.append(f"- law: {s.law.describe()}; LOO max {s.law.best.loo_max}")
            rows.append(("sizes law step_seconds vs params", s.law.formula(), "", "FITTED",
                         s.law.describe()))
        for ph in s.phases:
            md.append(f"- phases {ph.spec}: step {ph.step_seconds} fwd {ph.forward_seconds} "
                      f"bwd {ph.backward_seconds} opt {ph.optimizer_seconds} {ph.error or ''}")
        md += [f"- premise: {s.premise}: {s.finding}", ""]
        rows.append(("sizes premise (optimizer flat in N)", s.premise, "", "MEASURED", s.finding))
    ladder = out / "ladder.json"
    if ladder.exists():
        doc = json.loads(ladder.read_text())
        md += ["## ladder (7 d)", ""]
        for r in doc["rows"]:
            a, b = r["wall_a"], r["wall_b"]
            md.append(f"- N={r['params']:.3g}: (a) {a and a['value']} s "
                      f"{'extrapolated' if a and a['extrapolated'] else ''} | (b) "
                      f"{b and b['value']} s {r['wall_b_note']} | affordable "
                      f"{r['affordable'] and r['affordable']['value']}: {r['reason']}")
            if a:
                rows.append((f"ladder N={r['params']:.3g} wall_a", a["value"], "s", a["tag"],
                             a["source"]))
            if b:
                rows.append((f"ladder N={r['params']:.3g} wall_b", b["value"], "s", b["tag"],
                             b["source"]))
        md.append("")
    if cert.levers is not None:
        md += ["## levers", ""]
        for r in lever_rows(cert, cert.levers):
            if r.not_executable:
                md.append(f"- {r.workload} {r.description}: NOT EXECUTABLE: "
                          f"{r.not_executable.reason}")
                continue
            md.append(f"- {r.workload} {r.description}: A {_v(r.a_seconds)} s, "
                      f"B {_v(r.b_seconds)} s, speedup {_v(r.speedup)} "
                      f"[{_v(r.speedup_min)}, {_v(r.speedup_max)}], B step 0 "
                      f"{_v(r.b_step0)} s, FLOP/s {_v(r.achieved_a)} -> {_v(r.achieved_b)}, "
                      f"MFU {_v(r.mfu_a)} -> {_v(r.mfu_b)} {r.mfu_note}")
            rows.append((f"lever {r.workload} {r.lever} speedup", r.speedup.value, "x",
                         "MEASURED", r.speedup.source))
        for run in cert.levers.runs:
            if run.fixed_share is not None:
                md.append(f"- {run.workload} batch ladder F = {run.batch_law.params['F']:.4g} s, "
                          f"fixed share at x1 {run.fixed_share:.1%}")
                rows.append((f"lever {run.workload} batch fixed share", run.fixed_share,
                             "ratio", "MODULE", "t = F + c tokens over batch x1, x2, x4"))
    (out / "summary.md").write_text("\n".join(md) + "\n")
    with open(out / "history_rows.tsv", "w") as fh:
        for q, v, unit, tag, src in rows:
            fh.write("\t".join(map(str, (*head, q, v, unit, tag, src))) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "out")))
