"""Print, from a certificate, the memory law's held-out check as a Markdown table:

measured vs afford vs the "4x model size" rule vs Korthikanti + 16 B/param, at every held-out
shape, with the issue's targets (allocated within 2 %, reserved within 3 % on a GPU).

By default every law is refitted from the certificate's raw per-shape readings by this
afford (:func:`afford.certification.stage_memory.refit_section`), so a certificate made by
an older fit shows what the current law predicts, and a last table sets the stored held-out
errors beside the refitted ones. ``--stored`` prints the certificate's own fit instead.

    python benches/memory_report.py CERT [--stored]
"""

from __future__ import annotations

import argparse
import sys

from afford.certification.stage_memory import refit_section
from afford.schema.cert import load_certificate

GiB = 2**30


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x / GiB:.3f}"


def _e(pred: float | None, meas: float | None) -> str:
    if pred is None or not meas:
        return "-"
    return f"{pred / meas - 1:+.1%}"


def law_table(law, targets: dict) -> list[str]:
    cuda = law.device_type == "cuda"
    what = "allocated" if cuda else "RSS increment"
    out = [f"### {law.workload} {law.mode} ({law.device_type})", "",
           f"- allocated law: {law.allocated.describe()}",
           f"- reserved law: {law.reserved.describe() if law.reserved else '-'}",
           f"- states {law.bytes_per_param:.3f} B/param; params = {law.params_p0:.0f} + "
           f"{law.params_per_s:.0f} s; batch linearity R^2 {law.batch_linearity_r2}",
           f"- one step vs loop: {law.loop.note if law.loop else '-'}; allocator growth after "
           f"step 1 {law.loop.max_growth_after_step1_bytes / 2**20:.1f} MiB" if law.loop else "",
           "", f"| shape B x s | role | measured {what} GiB | afford GiB (err) | measured "
           "reserved GiB | afford reserved GiB (err) | 4x model size GiB (err) | Korthikanti "
           "fused + 16 B/param GiB (err) | Korthikanti eq. 1 + 16 B/param GiB (err) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for h in law.heldout:
        f = h.formulas
        cells = [f"{h.dims['B']} x {h.dims['s']}", h.role + ("*" if h.extrapolated else ""),
                 _g(h.measured_bytes), f"{_g(h.predicted_bytes)} ({h.error:+.2%})",
                 _g(h.measured_reserved_bytes),
                 f"{_g(h.predicted_reserved_bytes)} ({h.reserved_error:+.2%})"
                 if h.reserved_error is not None else "-"]
        for key in ("four_x_model_size", "korthikanti_zero", "korthikanti_eq1_zero"):
            v = f.get(key)
            cells.append(f"{_g(v)} ({_e(v, h.measured_bytes)})" if v is not None else "-")
        out.append("| " + " | ".join(cells) + " |")
    out += ["", verdict_lines(law), ""]
    ok = _passes(law, targets)
    out.append(f"**held-out targets {targets}: {'MET' if ok else 'NOT MET'}**")
    return out + [""]


def _passes(law, targets: dict) -> bool:
    ta = targets.get(law.allocated.quantity)
    tr = targets.get("reserved")
    return bool(law.heldout) and all(
        (ta is None or abs(h.error) <= ta) and
        (tr is None or h.reserved_error is None or abs(h.reserved_error) <= tr)
        for h in law.heldout)


def verdict_lines(law) -> str:
    rows = ["| default | constant | default | fitted | effect at base | verdict | consequence |",
            "|---|---|---|---|---|---|---|"]
    for v in law.verdicts:
        dv = "-" if v.default_value is None else f"{v.default_value:.4g}"
        fv = "-" if v.fitted_value is None else f"{v.fitted_value:.4g}"
        rows.append(f"| {v.default_name} | {v.constant} | {dv} | {fv} | {v.effect:+.1%} | "
                    f"{v.status} {v.direction or ''} | {v.consequence} |")
    return "\n".join(rows)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2%}"


def comparison_lines(stored, refit) -> list[str]:
    """Held-out errors per shape: the certificate's stored fit against the refit."""
    out = ["## held-out errors: stored fit vs refit from the raw readings", "",
           "| law | shape B x s | role | allocated stored | allocated refit | reserved stored "
           "| reserved refit |", "|---|---|---|---|---|---|---|"]
    for old, new in zip(stored.laws, refit.laws):
        for h0, h1 in zip(old.heldout, new.heldout):
            out.append(f"| {new.workload} {new.mode} | {h1.dims['B']} x {h1.dims['s']} | "
                       f"{h1.role} | {_pct(h0.error)} | {_pct(h1.error)} | "
                       f"{_pct(h0.reserved_error)} | {_pct(h1.reserved_error)} |")
    out += ["", "| law | allocated law (refit) | reserved law (refit) |", "|---|---|---|"]
    for law in refit.laws:
        out.append(f"| {law.workload} {law.mode} | {law.allocated.describe()} | "
                   f"{law.reserved.describe() if law.reserved else '-'} |")
    return out + [""]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cert")
    ap.add_argument("--stored", action="store_true",
                    help="print the certificate's own fit, not a refit of its raw readings")
    args = ap.parse_args(argv[1:])
    cert = load_certificate(args.cert)
    stored = cert.memory
    if stored is None:
        print("no memory section in", args.cert)
        return 1
    mem = stored if args.stored else refit_section(stored)
    env = cert.environment
    how = "as stored in the certificate" if args.stored else \
        "refitted from the certificate's raw readings by this afford"
    print(f"## memory law: {env.device_name}, torch {env.torch_version}, "
          f"{env.started_at:%Y-%m-%d}; stage {mem.wall_seconds:.1f} s; "
          f"budget {mem.budget_fraction:g} x {mem.device_memory_bytes} B; {how}\n")
    ok = True
    for law in mem.laws:
        print("\n".join(law_table(law, mem.targets)))
        ok = ok and _passes(law, mem.targets)
    for n in mem.not_executable:
        print(f"NOT EXECUTABLE: {n.what}: {n.reason}")
    for w in mem.warnings:
        print(f"warning: {w}")
    if not args.stored:
        print("\n" + "\n".join(comparison_lines(stored, mem)))
    print(f"ALL HELD-OUT TARGETS {'MET' if ok and mem.laws else 'NOT MET'}; "
          f"memory stage {mem.wall_seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
