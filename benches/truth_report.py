"""How close are a certificate's predictions to the truth? The step time and memory that
``afford predict`` gives at each shape of a fresh-process truth, beside the truth and beside
the two estimates a user has without afford (a bench report, not a test).

    python3 benches/truth_report.py CERT TRUTH [CERT TRUTH ...] [--refit]
        [--ledger lab/history.tsv --commit SHA --date ISO] [--json OUT]

TRUTH: a ``benches/step_truth.py`` run (JSON lines, ``.gz`` read too), or a JSON list of
cases (``truth_method.py`` of the recorded runs: ``pipelined_s`` and its ``blocks``; the
cases of the certificate's model, named by a folder of its workload's name, ``hf:cfg/opt/
config.json`` -> ``opt``). ``--refit``: the step-time model and the memory laws rebuilt from
the certificate's raw readings by this afford, not the ones it stored.

Per shape: the truth (pipelined warm step, the spread of its own blocks, peak allocated and
reserved in a fresh process), afford's step as a plan reads it (measured where the
certificate timed that shape, else the model; a band where the host can bound the step) and
memory (the one memory answer: allocated and the printed reserved figure, which is the
budgeted one),
and the baselines:

- **roofline at 40 % MFU**: 6 N D over the datasheet's bf16 peak x 0.4 (N every parameter,
  D the step's tokens);
- **linear in tokens**: the certificate's measured step at its sweep's largest shape, times
  the token ratio.

Summary per workload and over all: at the shapes with a point (the device bounds the step:
the work regime) the median and worst |error| of each estimate; at the shapes with a band
(the floor) how many truths it holds, its width (high - low over the truth) against the
truth's own block spread ((max - min) / median of its blocks), and the truth's floor spread
across its fresh processes (each shape's truth per kernel, the certificate's kernel count);
the memory errors (reserved: the printed figure). ``--ledger``: each truth reading appended
to the run ledger with its provenance.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

MFU = 0.40  # the roofline baseline's assumed model FLOPs utilisation


def read_truths(path: Path, workload: str) -> list[dict]:
    """The truth's cases as ``{batch, seq, step_seconds, blocks, params, ...}``: a
    ``step_truth.py`` run's lines, or the entries of a JSON list whose ``model`` names a
    folder of ``workload`` (module docstring); cases that ran out of memory are left out."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        text = f.read()
    if text.lstrip().startswith("["):
        return [_case(t) for t in json.loads(text)
                if f"/{t['model']}/" in f"/{workload}/" and not t.get("oom")]
    lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    return [dict(t, blocks=[r["seconds"] for r in t["readings"]]) for t in lines
            if "step_seconds" in t]


def _case(t: dict) -> dict:
    return {"batch": t["batch"], "seq": t["seq"], "step_seconds": t["pipelined_s"],
            "blocks": t["blocks"], "params": t["nparam"], "readings": [],
            "peak_allocated_bytes": t.get("alloc_bytes"),
            "peak_reserved_bytes": t.get("reserved_bytes")}


def refit_certificate(cert):
    """The certificate with its step-time models and memory laws rebuilt from its raw
    readings by this afford (the design as it stored it; the ceilings its probes measured)."""
    from afford.certification.stage_memory import refit_section
    from afford.certification.stage_time import WorkloadDesign, fit_time_model

    out = []
    for r in cert.workloads:
        t = r.time
        if t is None:
            out.append(r)
            continue
        design = WorkloadDesign(r.name, r.mode, t.axes, t.batch_key, t.seq_key, t.base_batch,
                                (), tuple(t.design_notes))
        again = fit_time_model(r, design, cert.environment.device_type, remeasured=True,
                               first=t.first_verdict, gemm_rate=_gemm_rate(cert, r.mode))
        out.append(r.model_copy(update={"time": again.model_copy(
            update={"extension": t.extension})}))
    memory = refit_section(cert.memory) if cert.memory is not None else None
    return cert.model_copy(update={"workloads": out, "memory": memory})


def _gemm_rate(cert, mode: str) -> float | None:
    pr = cert.probes
    dtype = next((w.gemm_dtype for w in getattr(pr, "workloads", []) if w.mode == mode), None)
    return getattr(pr.gemm.get(dtype), "flops_per_second", None) if dtype else None


def rows_for(cert_path: Path, truth_path: Path, refit: bool = False) -> list[dict]:
    from afford.figures import memory_figures, probes_figures
    from afford.planning.prediction import predict
    from afford.schema.cert import load_certificate
    from afford.schema.time_law import predict_at

    cert = load_certificate(cert_path)
    if refit:
        cert = refit_certificate(cert)
    r = cert.workloads[0]
    m = r.time.model
    peak = probes_figures.datasheet_peak(cert, "bf16")
    top = max((p for p in r.points if p.median_seconds), key=lambda p: p.batch * p.seq)
    out = []
    for t in read_truths(truth_path, r.name):
        b, s = t["batch"], t["seq"]
        row = predict(cert, batch=b, seq=s).rows[0]
        step = row.row.step_seconds
        model = predict_at(m, batch=b, seq=s)
        ans = memory_figures.memory_answer(cert, r.name,
                                           {**(row.shape or {}), "batch": b, "seq": s}, r.mode)
        tokens = b * s
        kernels = m.sides.kernels_at(tokens, s) if m.sides is not None else None
        rec = {"workload": r.name, "B": b, "s": s, "tokens": tokens,
               "tokens_x_sweep": tokens / (top.batch * top.seq), "seq_x_sweep": s / max(
                   p.seq for p in r.points),
               "truth_step": t["step_seconds"], "truth_busy": t.get("busy_seconds"),
               "truth_blocks": t["blocks"], "kernels": kernels,
               "afford_step": step.value, "afford_tag": step.tag.value, "band": step.band,
               "regime": model.regime, "afford_busy": model.device_busy,
               "roofline": 6 * t["params"] * tokens / (MFU * peak.value) if peak else None,
               "linear": top.median_seconds * tokens / (top.batch * top.seq),
               "truth_allocated": t.get("peak_allocated_bytes"),
               "truth_reserved": t.get("peak_reserved_bytes"),
               "afford_allocated": ans.allocated.value if ans and ans.allocated else None,
               "afford_reserved": ans.reserved.value if ans and ans.reserved else None,
               "afford_budgeted": ans.figure.value if ans and ans.reserved else None,
               "memory_basis": ans.why if ans else "", "readings": t["readings"],
               "sides": t.get("sides") or []}
        out.append(rec)
    return out


def err(pred: float | None, truth: float | None) -> float | None:
    return None if pred is None or not truth else pred / truth - 1.0


def in_band(r: dict) -> bool:
    lo, hi = r["band"]
    return lo <= r["truth_step"] <= hi


def block_spread(r: dict) -> float:
    """The truth's own spread: (max - min) / median of its blocks."""
    b = r["truth_blocks"]
    return (max(b) - min(b)) / statistics.median(b)


def band_width(r: dict) -> float:
    """The band's width over the truth: (high - low) / truth."""
    lo, hi = r["band"]
    return (hi - lo) / r["truth_step"]


def summary(rows: list[dict]) -> dict:
    """Median and worst |error| per estimate at the shapes with a point (the work regime),
    the band's hits and width at the shapes with one (the floor), the memory errors."""
    work = [r for r in rows if r["band"] is None]
    band = [r for r in rows if r["band"] is not None]
    out: dict = {"shapes": len(rows), "point": len(work), "band": len(band)}
    for name in ("afford_step", "roofline", "linear"):
        e = [abs(err(r[name], r["truth_step"])) for r in work if r[name] is not None]
        out[name] = (statistics.median(e), max(e)) if e else None
    out["band_hits"] = sum(in_band(r) for r in band)
    out.update(_band_widths(band))
    out["afford_step_all"] = _med_worst([err(r["afford_step"], r["truth_step"]) for r in rows])
    for name, truth in (("afford_allocated", "truth_allocated"),
                        ("afford_reserved", "truth_reserved"),
                        ("afford_budgeted", "truth_reserved")):
        e = [err(r[name], r[truth]) for r in rows]
        e = [v for v in e if v is not None]
        out[name] = _med_worst(e)
        out[name + "_optimistic"] = max(0.0, -min(e)) if e else None
    return out


def _band_widths(band: list[dict]) -> dict:
    """The band's width against the truth's own spreads: its blocks' (within one fresh
    process) and its floor's across the fresh processes (truth per kernel, by workload)."""
    if not band:
        return {}
    widths = [band_width(r) for r in band]
    blocks = [block_spread(r) for r in band]
    across = []
    for name in sorted({r["workload"] for r in band}):
        per = [r["truth_step"] / r["kernels"] for r in band
               if r["workload"] == name and r["kernels"] and r["regime"] == "host"]
        if len(per) >= 2:
            across.append((max(per) - min(per)) / statistics.median(per))
    return {"band_width_median": statistics.median(widths), "band_width_worst": max(widths),
            "truth_block_spread_median": statistics.median(blocks),
            "band_within_2x_blocks": sum(w <= 2 * b for w, b in zip(widths, blocks)),
            "truth_floor_spread_across_processes": across}


def _med_worst(e: list[float | None]) -> tuple[float, float] | None:
    e = [abs(v) for v in e if v is not None]
    return (statistics.median(e), max(e)) if e else None


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def table(rows: list[dict]) -> str:
    head = ("| shape | tokens / sweep's | seq / sweep's | truth ms | its blocks | afford ms | "
            "error | band | roofline 40 % | linear | reserved err | allocated err |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        band = "-" if r["band"] is None else (
            f"{r['band'][0] * 1e3:.1f}-{r['band'][1] * 1e3:.1f} "
            f"{'in' if in_band(r) else 'OUT'} ({band_width(r):.0%} wide)")
        lines.append(
            f"| {r['B']} x {r['s']} | {r['tokens_x_sweep']:.2g}x | {r['seq_x_sweep']:.2g}x | "
            f"{r['truth_step'] * 1e3:.1f} | {block_spread(r):.0%} | "
            f"{r['afford_step'] * 1e3:.1f} {r['afford_tag'][0]} | "
            f"{_pct(err(r['afford_step'], r['truth_step']))} | {band} | "
            f"{_pct(err(r['roofline'], r['truth_step']))} | "
            f"{_pct(err(r['linear'], r['truth_step']))} | "
            f"{_pct(err(r['afford_reserved'], r['truth_reserved']))} | "
            f"{_pct(err(r['afford_allocated'], r['truth_allocated']))} |")
    return "\n".join(lines)


def ledger_rows(rows: list[dict], commit: str, date: datetime, device: str, torch: str,
                command: str, truths: bool = True, predictions: bool = False) -> list:
    """The truths (MEASURED) and, with ``predictions``, afford's memory answers at the same
    shapes (FITTED, ``afford/WORKLOAD/BxS/...``) as ledger readings."""
    from afford.schema import ledger

    out = []
    for r in rows:
        base = {"device": device, "torch": torch, "commit": commit, "date": date,
                "command": command.format(spec=r["workload"])}
        if predictions:
            for k, q in (("afford_allocated", "peak_allocated_bytes"),
                         ("afford_reserved", "peak_reserved_bytes"),
                         ("afford_budgeted", "budgeted_reserved_bytes")):
                if r[k] is not None:
                    out.append(ledger.new_reading(
                        quantity=f"afford/{r['workload']}/{r['B']}x{r['s']}/{q}", value=r[k],
                        unit="B", tag="FITTED", **base))
        if not truths:
            continue
        if not r["readings"]:  # a recorded truth without step indices: not a ledger reading
            continue
        where = f"truth/{r['workload']}/{r['B']}x{r['s']}"
        first, last = r["readings"][0]["steps"][0], r["readings"][-1]["steps"][1]
        out.append(ledger.new_reading(quantity=f"{where}/step_seconds", value=r["truth_step"],
                                      unit="s", tag="MEASURED",
                                      step_indices=f"{first}-{last}", **base))
        if r["sides"]:
            idx = [d["index"] for d in r["sides"]]
            out.append(ledger.new_reading(quantity=f"{where}/busy_step_seconds",
                                          value=r["truth_busy"], unit="s", tag="MEASURED",
                                          step_indices=f"{min(idx)}-{max(idx)}", **base))
        for k in ("truth_allocated", "truth_reserved"):
            if r[k]:
                out.append(ledger.new_reading(
                    quantity=f"{where}/peak_{k.split('_')[1]}_bytes", value=r[k], unit="B",
                    tag="MEASURED", **base))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", type=Path, help="CERT TRUTH, repeated")
    ap.add_argument("--ledger", type=Path)
    ap.add_argument("--commit", default="")
    ap.add_argument("--date")
    ap.add_argument("--json", type=Path, help="also write every row and summary here")
    ap.add_argument("--predictions", action="store_true", help="--ledger: afford's memory "
                    "answers (FITTED) only, the truths being in the ledger already")
    ap.add_argument("--refit", action="store_true",
                    help="judge the step-time models, memory laws and replays this afford "
                    "rebuilds from the certificate's raw records, not the ones it stored")
    a = ap.parse_args(argv)
    if len(a.pairs) % 2:
        ap.error("give CERT TRUTH pairs")
    every, doc = [], {}
    for cert, truth in zip(a.pairs[::2], a.pairs[1::2]):
        rows = rows_for(cert, truth, a.refit)
        every += rows
        s = summary(rows)
        doc[rows[0]["workload"]] = {"summary": s, "rows": rows}
        print(f"## {rows[0]['workload']} ({cert.name} against {truth.name})\n")
        print(table(rows) + "\n")
        print(json.dumps(s, indent=1) + "\n")
        if a.ledger:
            from afford.schema import ledger
            from afford.schema.cert import load_certificate

            env = load_certificate(cert).environment
            date = datetime.fromisoformat(a.date) if a.date else datetime.now()
            command = ("python3 benches/truth_report.py" + (" --refit" if a.refit else "")
                       + " CERT TRUTH (afford's answers from the certificate's readings, "
                       "computed on another machine)") if a.predictions else \
                "python3 benches/step_truth.py {spec} --cert CERT (fresh process per shape)"
            ledger.append(a.ledger, ledger_rows(
                rows, a.commit, date, env.device_name, env.torch_version, command,
                truths=not a.predictions, predictions=a.predictions))
    total = summary(every)
    doc["all"] = total
    print("## all workloads\n\n" + json.dumps(total, indent=1))
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
