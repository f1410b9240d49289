"""The ``--distributed`` half of ``afford certify`` (not a command of its own): every rank
runs it under torchrun; only rank 0 writes and prints."""

from __future__ import annotations

from pathlib import Path

from afford.certification.request import CertifyRequest
from afford.certification.stage_distributed import DistOptions, certify_distributed
from afford.cli.common import err, interactive, out, print_json
from afford.core.errors import MeasurementError
from afford.core.provenance import run_label
from afford.figures.distributed_figures import busbw_peak, dp_scaling
from afford.figures.summary import summarize
from afford.report.distributed_tables import collectives_table, scaling_table, status_line
from afford.report.rich_table import labelled
from afford.report.terminal import certificate_table
from afford.schema.cert import Certificate, default_filename, save_measured


def run_distributed(req: CertifyRequest, out_path: Path | None, force: bool, as_json: bool,
                    timeout_seconds: float, dist_only: bool, measure) -> None:
    show = interactive() and not as_json

    def on_stage(stage: str) -> None:
        if show:
            err.print(f"distributed stage: {stage}")

    outcome = certify_distributed(req, DistOptions(timeout_seconds, dist_only), on_stage,
                                  sweep=lambda r: measure(r, show))
    if outcome.cert is None:
        return  # ranks other than 0 write nothing
    cert = outcome.cert
    path = out_path or Path(default_filename(cert))
    save_measured(cert, path, overwrite=force)
    if as_json:
        print_json(_summary_json(cert, path, outcome.error))
    else:
        _render(cert)
        out.print(f"certificate written to {path}")
    if outcome.error:
        raise MeasurementError(f"{outcome.error}. A partial certificate was written to {path}")
    if cert.status == "partial":
        raise MeasurementError("the measurement is incomplete: " + "; ".join(cert.failures)
                               + f". The partial certificate is written to {path}")


def _render(cert: Certificate) -> None:
    d = cert.distributed
    env = cert.environment
    run = run_label(env)
    if cert.workloads:
        out.print(certificate_table(summarize(cert), f"{env.device_name} ({env.device_type}), "
                                    f"{cert.protocol.precision} protocol, rank 0 sweep"))
    out.print(status_line(d), soft_wrap=True)
    table = collectives_table(d, run)
    if table is not None:
        out.print(table)
    if d.data_parallel:
        out.print(scaling_table(d, run))
    for w in cert.warnings:
        err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)


def _summary_json(cert: Certificate, path: Path, error: str | None) -> dict:
    d = cert.distributed
    scaling = {}
    for s in d.data_parallel:
        scaling[s.strategy] = {str(r.world_size): {
            "step_seconds": r.step_seconds, "efficiency": e,
            "exposed_comm_share": r.exposed_comm_share} for r, e in zip(s.runs, s.efficiency)}
    ar = busbw_peak(cert, "all_reduce")
    top = max((r.world_size for s in d.data_parallel if s.strategy == "ddp" for r in s.runs),
              default=0)
    mult = dp_scaling(cert, top) if top else None
    return {"schema": "afford.certify-distributed-summary/1", "certificate": str(path),
            "status": d.status, "error": error, "world_size": d.world_size,
            "backend": d.backend, "ranks_finished": d.ranks_finished,
            "ranks": [r.model_dump() for r in d.ranks],
            "all_reduce_busbw_peak": ar.model_dump() if ar else None,
            "ddp_throughput_multiplier_at_node": mult.model_dump() if mult else None,
            "scaling": scaling, "workloads": [w.name for w in cert.workloads],
            "warnings": cert.warnings}
