"""Print the probe figures of one or more certificates against the H200 references, render
the summary tables, and write TSV rows for lab/history.tsv (run by device_probes.sh).

usage: python lab/scripts/probes_report.py OUT_DIR CERT.json [CERT.json ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from afford import figures
from afford.core.provenance import NotExecutable
from afford.figures.probes_figures import summarize_probes
from afford.report.probes_tables import probes_device_table, probes_workload_table
from afford.report.probes_tables import probes_warmup_table as warmup_table
from afford.schema.cert import load_certificate

# docs/REFERENCES.md, one NVIDIA H200, torch 2.11, plain torch.matmul 8192^3, 2026-12-02
H200 = {"fp32": 50.7e12, "tf32": 401e12, "bf16": 762e12, "fp16": 743e12}
H200_COPY = 4.24e12


def gemm_lines(cert) -> list[str]:
    out = []
    for d, ref in H200.items():
        t = figures.gemm_rate(cert, d)
        g = cert.probes.gemm[d]
        if t is None:
            out.append(f"  GEMM {d:5s} NOT EXECUTABLE: {g.reason}")
            continue
        out.append(f"  GEMM {d:5s} {t.value / 1e12:8.1f} TFLOP/s  (H200 ref {ref / 1e12:.1f}: "
                   f"{t.value / ref - 1:+.1%})  max rel err {g.max_rel_error:.2e}  "
                   f"calls {[round(s * 1e3, 3) for s in g.seconds]} ms")
    bw = figures.copy_bandwidth(cert)
    out.append(f"  copy       {bw.value / 1e12:8.3f} TB/s     (H200 ref 4.24-4.3: "
               f"{bw.value / H200_COPY - 1:+.1%})" if bw else
               f"  copy NOT EXECUTABLE: {cert.probes.device_copy.reason}")
    return out


def workload_lines(cert) -> list[str]:
    out = []
    for w in cert.probes.workloads:
        v = w.verdict
        out.append(f"  {w.name} ({w.mode}) at {w.sweep_param}={w.value}: {v.label.upper()}")
        for r in v.reasons:
            out.append(f"      {r}")
        lad = w.ladder
        if not isinstance(lad, NotExecutable):
            out.append("      ladder: " + ", ".join(
                f"x{r.multiplier} {r.tokens_per_step} tok {r.median_seconds * 1e3:.3f} ms"
                if r.median_seconds else f"x{r.multiplier} {r.error}" for r in lad.rungs))
        u = w.utilisation
        out.append(f"      utilisation: {u.reason}" if isinstance(u, NotExecutable) else
                   f"      utilisation: {u.kept} samples kept, mean {u.mean}, "
                   f"low share {u.low_share} ({u.source})")
        for f in w.flops:
            if isinstance(f, NotExecutable):
                out.append(f"      FLOPs: NOT EXECUTABLE {f.reason}")
                continue
            rate = figures.gemm_rate(cert, w.gemm_dtype)
            peak = figures.datasheet_peak(cert, w.gemm_dtype)
            mfu = f.flops / f.step_seconds if f.step_seconds else None
            out.append(f"      FLOPs at {w.sweep_param}={f.value}: {f.flops:.4g}, step "
                       f"{(f.step_seconds or 0) * 1e3:.3f} ms, "
                       f"MFU vs measured {mfu / rate.value:.2%}" if mfu and rate else "")
            if mfu and peak:
                out[-1] += f", vs datasheet {mfu / peak.value:.2%}"
        c = w.checkpoint
        out.append(f"      checkpoint: {c.reason}" if isinstance(c, NotExecutable) else
                   f"      checkpoint: {c.bytes} B, writes {[round(s, 4) for s in c.write_seconds]}"
                   f" s, load {c.load_seconds:.4f} s, verified {c.verified}")
    return out


def tsv_rows(cert, label: str) -> list[str]:
    e = cert.environment
    when = f"{e.started_at:%Y-%m-%dT%H:%M:%SZ}"
    rows = []

    def add(figure: str, t) -> None:
        if t is not None:
            rows.append("\t".join([when, e.device_name, f"torch {e.torch_version}", label,
                                   figure, f"{t.value:.6g}", t.unit, t.tag.value, t.source]))

    for d in H200:
        add(f"gemm_{d}", figures.gemm_rate(cert, d))
    add("copy_bandwidth", figures.copy_bandwidth(cert))
    for k, t in figures.startup_seconds(cert).items():
        add(f"startup_{k}", t)
    for w in cert.probes.workloads:
        add(f"verdict_{w.name}", figures.boundness(cert, w.name, w.mode))
        add(f"checkpoint_seconds_{w.name}", figures.checkpoint_write_seconds(cert, w.name, w.mode))
        add(f"checkpoint_bytes_{w.name}", figures.checkpoint_bytes(cert, w.name, w.mode))
    add("probes_stage_wall", summarize_probes(cert).wall_seconds)
    return rows


def main(out_dir: str, paths: list[str]) -> int:
    con = Console(width=200)
    rows = []
    for path in paths:
        cert = load_certificate(path)
        e, p = cert.environment, cert.probes
        print(f"\n=== {path}: {e.device_name}, torch {e.torch_version}, certify "
              f"{e.elapsed_seconds:.1f} s, probes stage {p.wall_seconds:.1f} s ===")
        print("\n".join(gemm_lines(cert) + workload_lines(cert)))
        s = summarize_probes(cert)
        con.print(probes_device_table(s, "device probes"))
        con.print(probes_workload_table(s, "launch-boundness, FLOPs, MFU"))
        con.print(warmup_table(s, "step 0 vs warm, checkpoints"))
        for w in p.warnings:
            print(f"  warning: {w}")
        rows += tsv_rows(cert, Path(path).stem)
    tsv = Path(out_dir) / "probes_history.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    print(f"\n{len(rows)} rows for lab/history.tsv in {tsv}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
