"""Does the scale ladder's step hold beyond the sizes a certificate measured? Column (a)'s
per-step figure against steps timed in fresh processes (``benches/step_truth.py``) at
larger sizes (a bench report, not a test; a CPU suffices to read the files).

    python3 benches/ladder_truth.py CERT TRUTH.jsonl [-w FAMILY] [--json OUT]

Per truth line (a workload spec naming its width and depth, ``tinylm@d2048L24H32`` or
``hf:gpt_neox@d2048L16H16F8192V32000``, timed at one batch x seq): the ladder's rung at the
truth's parameter count and shape, its step and the device's busy time beside the truth's
(pipelined warm step, profiled busy time), the factor beyond the largest size the law was
fitted on, the error the law states there, and whether the truth lies within it. A family
other than tinylm is the truth spec's own (``hf:gpt_neox``) unless ``-w`` names one.

The truth must be of the same machine as the certificate: a truth from another device is
reported, with a warning at the top, but says nothing of the law's error (devices are not
pooled, docs/DESIGN.md section 3, rule 7). A truth at another batch x seq than the law's is
skipped with the reason.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

SHAPE = re.compile(r"@d([0-9]+)L([0-9]+)(?:H([0-9]+))?")


def family_of(spec: str) -> str:
    """``hf:gpt_neox@d2048L16...`` -> ``hf:gpt_neox``; ``tinylm@d1024L24H16`` -> tinylm."""
    return spec.partition("@")[0]


def rows_for(cert_path: Path, truth_path: Path, workload: str | None = None
             ) -> tuple[list[dict], list[str]]:
    from afford.schema.cert import load_certificate

    cert = load_certificate(cert_path)
    out, notes = [], []
    for line in truth_path.read_text().splitlines():
        got = row_for(cert, json.loads(line), workload)
        (notes if isinstance(got, str) else out).append(got)
    return out, notes


def row_for(cert, t: dict, workload: str | None) -> dict | str:
    """One truth against the ladder's rung at its parameters and shape; a string: why not."""
    from afford.core.errors import InputError
    from afford.core.published_constants import load_scaling
    from afford.planning.ladder_steps import Entry, ceilings, rung_step, step_source
    from afford.planning.scale_ladder import default_mode

    m = SHAPE.search(t.get("spec", ""))
    if "step_seconds" not in t or m is None:
        return f"{t.get('spec')}: no step, or no width and depth, in the truth"
    family = workload or family_of(t["spec"])
    mode = t.get("mode") or default_mode(cert, family)
    try:
        ceil, _, _ = ceilings(cert, family, mode, load_scaling())
        src = step_source(cert, family, mode, ceil)
    except InputError as exc:
        return f"{t['spec']}: {exc}"
    if src.law is None:
        return f"{t['spec']}: no step from the ladder ({src.lacks})"
    if (src.batch, src.seq) != (t["batch"], t["seq"]):
        return (f"{t['spec']}: timed at {t['batch']}x{t['seq']}, the law is at "
                f"{src.batch}x{src.seq}: skipped")
    d, L, H = (int(g) if g else None for g in m.groups())
    device = cert.environment.device_name
    got = rung_step(src, Entry(float(t["params"]), d, L, H), ceil.bytes_per_param, device)
    sides = src.law.predict(got.work)
    err = got.seconds.value / t["step_seconds"] - 1.0
    stated = got.error.value if got.error is not None else None
    return {"spec": t["spec"], "family": src.workload, "params": t["params"],
            "truth_device": t.get("device"), "same_machine": t.get("device") == device,
            "beyond": got.beyond, "truth_step": t["step_seconds"],
            "ladder_step": got.seconds.value, "error": err,
            "truth_busy": t.get("busy_seconds"), "ladder_busy": sides.busy,
            "regime": sides.regime, "stated_error": stated,
            "within_stated": None if stated is None else abs(err) <= stated,
            "stated_source": got.error.source if got.error is not None else ""}


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def table(rows: list[dict]) -> str:
    head = ("| truth | params | beyond | truth ms | ladder ms | error | truth busy ms | "
            "ladder busy ms | stated error | within |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        busy = f"{r['truth_busy'] * 1e3:.1f}" if r["truth_busy"] else "-"
        lines.append(
            f"| {r['spec']} | {r['params'] / 1e6:.0f}M | "
            f"{'x%.2g' % r['beyond'] if r['beyond'] else 'within'} | "
            f"{r['truth_step'] * 1e3:.1f} | {r['ladder_step'] * 1e3:.1f} | {_pct(r['error'])} | "
            f"{busy} | {r['ladder_busy'] * 1e3:.1f} | "
            f"{'±%.0f%%' % (r['stated_error'] * 100) if r['stated_error'] is not None else '-'}"
            f" | {'-' if r['within_stated'] is None else ('yes' if r['within_stated'] else 'NO')}"
            " |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    e = [abs(r["error"]) for r in rows]
    return {"truths": len(rows), "median_abs_error": statistics.median(e) if e else None,
            "worst_abs_error": max(e) if e else None,
            "within_stated": sum(bool(r["within_stated"]) for r in rows),
            "same_machine": all(r["same_machine"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cert", type=Path)
    ap.add_argument("truth", type=Path)
    ap.add_argument("-w", "--workload", help="the family to scale (default: each truth's)")
    ap.add_argument("--json", type=Path, help="also write the rows and the summary here")
    a = ap.parse_args(argv)
    rows, notes = rows_for(a.cert, a.truth, a.workload)
    s = summary(rows)
    if rows and not s["same_machine"]:
        print("WARNING: the truths were timed on another device than the certificate's "
              f"({', '.join(sorted({str(r['truth_device']) for r in rows}))}): the errors "
              "below compare two machines and say nothing of the law's\n")
    print(table(rows) + "\n")
    for n in notes:
        print(f"- {n}")
    print(json.dumps(s, indent=1))
    if a.json:
        a.json.write_text(json.dumps({"summary": s, "rows": rows, "notes": notes}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
