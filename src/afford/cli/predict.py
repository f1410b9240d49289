"""``afford predict CERT --batch B --seq S``: step time, tokens/s, steps per chunk and memory
at any shape of a certified workload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from afford.cli.common import alloc_conf_here, fraction_flag, guard, out, positive_int, print_json
from afford.cli.plan import PLATFORM_HELP
from afford.core.errors import InputError
from afford.core.published_constants import MODES
from afford.planning.prediction import predict
from afford.report.predict_tables import render_predict
from afford.schema.cert import load_certificate
from afford.schema.platform import load_platform


def command(
    cert_path: Annotated[Path, typer.Argument(
        metavar="CERT", help="A certificate written by `afford certify`.")],
    batch: Annotated[str, typer.Option("--batch", help="Batch size (sequences per step).")],
    seq: Annotated[str, typer.Option(
        "--seq", help="Sequence length: 2048, 4Ki (= 4096) or 4k (= 4000).")],
    workload: Annotated[Optional[list[str]], typer.Option(
        "--workload", "-w", help="Workload as named in the certificate (repeatable). "
        "Default: every workload with batch and sequence dimensions.")] = None,
    mode: Annotated[Optional[str], typer.Option(
        "--mode", help="dtype mode: fp32, bf16 or fp16. Default: every mode measured.")] = None,
    platform: Annotated[Optional[str], typer.Option(
        "--platform", "-p", help=PLATFORM_HELP + " Gives the chunk (steps per chunk) and the "
        "memory budget.")] = None,
    memory_fraction: Annotated[Optional[str], typer.Option(
        "--memory-fraction", help="Share of the device memory a run may use (0.90 or 90%). "
        "Default: the platform's, else afford's.")] = None,
    alloc_conf: Annotated[Optional[str], typer.Option(
        "--alloc-conf", help="PYTORCH_CUDA_ALLOC_CONF of the run (e.g. "
        "expandable_segments:True), as `afford size` takes it. Default: this shell's.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the prediction "
                                          "(afford.predict/1) as JSON.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Every warning and note in full (by default at most three "
        "lines of what matters for the answer; --json holds them all).")] = False,
) -> None:
    """Predicted warm step time, tokens per second, steps per chunk (with --platform) and
    memory at (batch, seq) for each workload of a certificate.

    The step is MEASURED where the certificate timed that very shape; else the step-time
    model's prediction (FITTED; * beyond the shapes the certificate measured), its source
    naming the model's form and held-out error; an older certificate without a step-time
    model falls back to its throughput law where only the sweep value differs. Memory is the
    measured peak there, else the one memory answer `afford size` gives (the allocator
    replay where the certificate trusts it, else the memory law; the larger budgeted where
    they disagree). A mode whose memory was measured and whose time was not gets its memory
    and says so. A NOISY certificate says so first.
    Exit codes: 0 predicted, 2 bad input.
    """
    with guard():
        b = positive_int(batch, "--batch")
        s = positive_int(seq, "--seq")
        if mode is not None and mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        frac = fraction_flag(memory_fraction, "--memory-fraction") \
            if memory_fraction is not None else None
        cert = load_certificate(cert_path)
        plat = load_platform(platform) if platform is not None else None
        result = predict(cert, batch=b, seq=s, workloads=workload, mode=mode, platform=plat,
                         memory_fraction=frac, alloc_conf=alloc_conf_here(alloc_conf))
        if as_json:
            print_json(result.model_dump(mode="json", by_alias=True))
            return
        out.print(render_predict(result, verbose))
