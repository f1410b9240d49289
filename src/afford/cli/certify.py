"""``afford certify``: measure this box and write a device certificate.

The command parses its flags, calls the library (:mod:`afford.api.certify_command`: the
flags checked and made a request, the certificate measured and written), renders the
summary and sets the exit code. The measuring side (:mod:`afford.certification`, and torch with
it) is imported when the command runs, not when the command line is built: ``afford
--help`` and the commands that only read certificates stay fast. The console script spawns
the first sweep child before even that (:mod:`afford._entry`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from afford.api.certify_command import (
    StageVerdict,
    WrittenCertificate,
    certify_request,
    is_noisy,
    measure_and_write,
)
from afford.cli.common import err, guard, interactive, out, print_json
from afford.core.provenance import measured, module
from afford.figures.noise import load_costs, summarize_noise
from afford.figures.probes_figures import probes_json, summarize_probes
from afford.figures.summary import summarize
from afford.figures.time_figures import summarize_times
from afford.fit.time.contention import MIN_FREE_POINT
from afford.report.ladder_tables import stage_lines
from afford.report.memory_tables import memory_summary_table
from afford.report.probes_tables import (
    probes_device_table,
    probes_warmup_table,
    probes_workload_table,
)
from afford.report.prose import prose
from afford.report.rich_table import labelled
from afford.report.terminal import certificate_table
from afford.report.time_model import held_out_table, model_lines

if TYPE_CHECKING:
    from afford.certification.request import CertifyRequest


def command(
    workload: Annotated[Optional[list[str]], typer.Option(
        "--workload", "-w", help="Workload to measure (repeatable): softmax, scan, tinylm, "
        "tinylm@q3, your own as pkg.module:factory, or a transformers model built from its "
        "config with random weights (offline; afford[hf]): hf:gpt2, hf:path/config.json, "
        "hf:llama@d768L12H12 (d hidden, L layers, H heads, K kv heads, V vocab, F ffn), "
        "+b8s1024 (batch 8, a seq sweep up to 1024), +lora=r16 (afford[lora]), "
        "+frozen=embeddings. A model type's defaults are the library's: hf:llama and "
        "hf:mistral are 7B-sized. Default: softmax, scan and tinylm (on a CPU with no "
        "--quick, --adaptive or --full: tinylm, a first look).")] = None,
    sweep: Annotated[Optional[list[str]], typer.Option(
        "--sweep", help="Sweep values as NAME=V1,V2,... where NAME is a workload's sweep "
        "parameter (s for softmax/scan, seq for tinylm) or n for every workload.")] = None,
    mode: Annotated[Optional[list[str]], typer.Option(
        "--mode", help="dtype mode (repeatable): fp32, bf16 or fp16 autocast. Default: bf16 on "
        "a CUDA card that supports it, else fp32.")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="A first look: a small fixed floor of timed work per point. The "
        "default on a CPU, where with no --workload it measures tinylm only.")] = False,
    adaptive: Annotated[bool, typer.Option(
        "--adaptive", help="0.25 s of timed work per point, extended to 1.5 s until the "
        "median is known to about 1 %. The default on a GPU.")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help="The strict protocol: 3.0 s of timed work per point per child.")] = False,
    children: Annotated[int, typer.Option(
        help="Independent child processes (at least 3).")] = 3,
    device: Annotated[Optional[str], typer.Option(
        help="cuda, cuda:1 or cpu. Default: cuda when present.")] = None,
    sizes: Annotated[bool, typer.Option(
        "--sizes", help="Time tinylm at five model sizes in children of their own, with the "
        "phase split (afford ladder; a GPU's default certify times three inside its "
        "sweep).")] = False,
    levers: Annotated[bool, typer.Option(
        "--levers", help="Also measure the levers (bf16, fused AdamW, torch.compile, CUDA "
        "graphs, batch x2/x4) on the default tinylm shape.")] = False,
    out_path: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Certificate path. Default: afford-cert-<device>-<time>.json "
        "here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print a JSON summary on stdout.")] = False,
    gates: Annotated[Optional[bool], typer.Option(
        "--gates/--no-gates", help="--gates: also the determinism audit and every gate "
        "(afford gate); default: the init-loss gate only; --no-gates: none.")] = None,
    distributed: Annotated[bool, typer.Option(
        "--distributed", help="Under torchrun: certify the node through torch.distributed "
        "(collectives, DDP/FSDP scaling); rank 0 writes one certificate.")] = False,
    dist_timeout: Annotated[float, typer.Option(
        "--dist-timeout", help="Seconds any collective may wait for a rank before the run "
        "fails (--distributed).")] = 300.0,
    dist_only: Annotated[bool, typer.Option(
        "--dist-only", help="With --distributed: skip the single-device sweep on rank 0.")] = False,
    memory: Annotated[bool, typer.Option(
        "--memory/--no-memory", help="Measure and validate the memory law (a few seconds; "
        "see `afford size`).")] = True,
    probes: Annotated[bool, typer.Option(
        "--probes/--no-probes", help="After the sweep, probe the device: GEMM and copy "
        "ceilings, launch-boundness, FLOPs and MFU, checkpoint I/O, startup costs.")] = True,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also print every point's precision warning and every "
        "reason of the time verdict (the certificate keeps them all; by default one line "
        "per workload names its worst point).")] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Exit 1 when a verdict does not pass: the step times NOISY, "
        "MISSED or UNJUDGED, the memory law rough at its held-out shapes, a gate failed (for CI; "
        "the certificate is written either way).")] = False,
    checkpoint_dir: Annotated[Optional[Path], typer.Option(
        "--checkpoint-dir", help="Folder the checkpoint probe writes to (a temporary file, "
        "removed after). Default: the current folder.")] = None,
) -> None:
    """Measure this box and write a device certificate.

    On a CPU, with no --quick, --adaptive or --full and no --workload, it is a first look:
    tinylm at the quick protocol (its goal: an answer within 90 s on an idle 2-core box);
    --full measures the default set at the strict protocol. Progress goes to stderr: a bar on a terminal,
    otherwise one line per stage and per workload with the elapsed time and an estimate.

    Every sweep point is timed in at least 3 independent child processes, each in its own
    shuffled order; step 0 and the warm-up are kept apart from the timed warm steps; the
    throughput law is fitted over resident points only; the step-time model is fitted over a
    small batch x sequence design and checked at held-out shapes. The last lines are the
    verdicts (time, memory, gates), each with its cause.

    Exit codes: 0 written and usable, whatever its verdicts (--strict: 1 when one does not
    pass), 2 bad input, 3 the measurement failed (a partial certificate is written).
    """  # noqa: E501 (typer keeps the docstring's line breaks: --help as it always read)
    with guard():
        req = certify_request(
            workloads=workload, sweeps=sweep, modes=mode, quick=quick, adaptive=adaptive,
            full=full, children=children, device=device, gates=gates, memory=memory,
            probes=probes, sizes=sizes, levers=levers, distributed=distributed,
            dist_only=dist_only, out=out_path, force=force, checkpoint_dir=checkpoint_dir,
            command="afford " + " ".join(sys.argv[1:]))
        if distributed:
            from afford.cli.certify_distributed import run_distributed

            run_distributed(req, out_path, force, as_json, dist_timeout, dist_only, _measure)
            return
        show = interactive() and not as_json
        done = measure_and_write(req, out_path, force, lambda r: _measure(r, show=show))
        if as_json:
            print_json(_summary_json(done))
        else:
            _print_summary(done, verbose)
        _exit(done, as_json, strict)


def _print_summary(done: WrittenCertificate, verbose: bool) -> None:
    """The certificate's summary: its table, stage times, probes, time model, memory law
    and warnings, where it was written, and the first look's hint."""
    cert = done.cert
    times = {(t.name, t.mode): t for t in summarize_times(cert)}
    out.print(certificate_table(summarize(cert), summary_title(cert), times))
    if cert.environment.stage_seconds:
        out.print(stage_line(cert))
    _print_probes(cert)
    _print_time(cert)
    if cert.memory is not None:
        out.print(memory_summary_table(cert))
    for line in stage_lines(cert.sizes, cert.levers):
        out.print(line, soft_wrap=True)
    if cert.gates is not None:
        _show_gates(cert)
    _print_warnings(cert, verbose)
    if verbose:
        _print_noisy_reasons(cert)
    out.print(f"certificate written to {done.path}")
    if done.first_look:
        out.print(first_look_line(), soft_wrap=True)
    if cert.status != "partial":
        print_verdicts(done.verdicts)


def _summary_json(done: WrittenCertificate) -> dict:
    """The --json summary (``afford.certify-summary/1``)."""
    cert = done.cert
    return {"schema": "afford.certify-summary/1", "certificate": str(done.path),
            "first_look": done.first_look,
            "elapsed_seconds": cert.environment.elapsed_seconds,
            "stage_seconds": cert.environment.stage_seconds,
            "workloads": [_row_json(r) for r in summarize(cert)], "warnings": cert.warnings,
            "gates": cert.gates.verdict if cert.gates else None,
            "verdicts": [{"stage": v.stage, "label": v.label, "passed": v.passed,
                          "cause": verdict_cause(v)} for v in done.verdicts],
            "probes": probes_json(cert), **time_json(cert)}


def _exit(done: WrittenCertificate, as_json: bool, strict: bool) -> None:
    """Exit 3 on a partial certificate, 2 on a refused workload (not with --json); else 0,
    whatever the verdicts say (the certificate is written and usable), or 1 under --strict
    when one did not pass. With --json a failed gate's rows go to stderr."""
    done.raise_if_partial()
    if not as_json:
        done.raise_if_refused()
    elif done.cert.gates is not None:
        from afford.cli.gate import print_problems

        print_problems(done.cert.gates)
    code = done.exit_code(strict)
    if code:
        raise typer.Exit(code)


def verdict_cause(v: StageVerdict) -> str:
    """A verdict's cause, its figures tagged."""
    return prose(v.cause, *v.figures)


def print_verdicts(verdicts: list[StageVerdict]) -> None:
    """The certificate's verdicts, one line each (the command's last lines): ``time
    verdict: NOISY: <cause>``."""
    for v in verdicts:
        style = "green" if v.passed and v.label in ("OK", "GO") else \
            "dim" if v.passed else "bold red"
        out.print(labelled(f"[{style}]{v.stage} verdict: {v.label}:[/]", verdict_cause(v)))

def _print_warnings(cert, verbose: bool) -> None:
    """The certificate's warnings on stderr; the point-by-point precision ones (two a point
    on a busy host) only with --verbose, else one line per workload with its worst point;
    those about a figure plans do not read (the sweep's throughput law where a step-time
    model answers) only with --verbose, else counted in one line."""
    noise = summarize_noise(cert)
    unread = unread_warnings(cert)
    for w in cert.warnings + (cert.memory.warnings if cert.memory else []):
        if verbose or (w not in noise.point_notes and w not in unread):
            err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)
    if not verbose and noise.point_notes and not is_noisy(cert):
        for line in noise.worst:
            err.print(labelled("[yellow]warning:[/]", line + " (--verbose: every point)"),
                      soft_wrap=True)
    hidden = sum(w in unread for w in cert.warnings)
    if hidden and not verbose:
        err.print(f"({hidden} warning(s) about the sweep's throughput law, which plans do not "
                  "read where a step-time model answers: --verbose)", soft_wrap=True)


def unread_warnings(cert) -> set[str]:
    """The warnings of each workload's throughput law where its step-time model answers
    instead (plans and predictions read the model), as the certificate spells them."""
    return {f"{r.name} ({r.mode}): {w}" for r in cert.workloads
            if r.law is not None and r.time is not None and r.time.model is not None
            for w in r.law.warnings}


def _print_noisy_reasons(cert) -> None:
    """With --verbose, every reason of a NOISY time verdict and the rule it broke (stderr);
    the verdict's line under the summary names the worst point and the cause."""
    if not is_noisy(cert):
        return
    v = cert.time_verdict
    err.print("the time verdict's reasons:", soft_wrap=True)
    for why in v.reasons:
        err.print(f"  {why}", soft_wrap=True)
    err.print(f"({v.rule}, after one re-measurement.)", soft_wrap=True)


def _show_gates(cert) -> None:
    """The gates the run checked: their tables on stdout, their problems on stderr."""
    from afford.cli.gate import render_sections

    render_sections(cert.determinism, cert.gates)


def summary_title(cert) -> str:
    """The summary's title, its wall time tagged."""
    env, p = cert.environment, cert.protocol
    elapsed = measured(env.elapsed_seconds, "s", "wall time of afford certify") \
        if env.elapsed_seconds is not None else "wall time not recorded"
    return prose("{} ({}), {} protocol, {} children, {}", env.device_name, env.device_type,
                 p.precision, str(p.children), elapsed)


def stage_line(cert) -> str:
    """``time by stage: sweep 110 s M, ...``: each stage's wall time, tagged."""
    stages = cert.environment.stage_seconds
    return prose("time by stage: " + ", ".join("{} {}" for _ in stages),
                 *(x for k, v in stages.items()
                   for x in (k, measured(v, "s", f"wall time of the {k} stage"))))


def _print_time(cert) -> None:
    for s in summarize_times(cert):
        for line in model_lines(s):
            out.print(line, soft_wrap=True)
        if s.held_out:
            out.print(held_out_table(s))
    for line in load_lines(cert):
        out.print(line, soft_wrap=True)


def load_lines(cert) -> list[str]:
    """Per workload on a CPU, what the load cost its steps (:func:`load_costs`), tagged."""
    lines = []
    for c in load_costs(cert):
        src = f"the children's accounting of {c.name}"
        head = prose("{}: its children's threads waited for a CPU {} to {} of their time; ",
                     c.name, measured(c.wait_low, "ratio", src),
                     measured(c.wait_high, "ratio", src)) if c.wait_low is not None else \
            f"{c.name}: the waits for a CPU were not recorded here; "
        if c.worst is None:
            lines.append(head + f"no point had {MIN_FREE_POINT} steps free of the load, so "
                         "the step on an idle box could not be told from it (re-run on an "
                         "idle machine)")
            continue
        p = c.worst
        lines.append(head + prose(
            f"the step on an idle box is read from its free steps at {c.free} of {c.points} "
            "points; where the load cost most ({}): {} idle, {} measured, the load {}",
            c.worst_label, measured(p.idle_seconds, "s", "median of the free steps"),
            measured(p.median_seconds, "s", "median of the children's medians"),
            module(p.load_seconds, "s", "measured - idle")))
    return lines


def time_json(cert) -> dict:
    """The time model's part of the --json summary."""
    v = cert.time_verdict
    rows = []
    for s in summarize_times(cert):
        rows.append({"workload": s.name, "mode": s.mode, "form": s.form, "reason": s.reason,
                     "verdict": s.verdict, "held_out": [
                         {"shape": h.shape, "role": h.role, "measured_seconds": h.measured.value,
                          "predicted_seconds": h.predicted.value, "error": h.error.value,
                          "extrapolated": h.predicted.extrapolated, "judged": h.judged}
                         for h in s.held_out]})
    return {"time_verdict": v.model_dump() if v else None, "time": rows}


def _print_probes(cert) -> None:
    s = summarize_probes(cert)
    if s.warmup:
        out.print(probes_warmup_table(s, "step 0 against warm, and checkpoint writes"))
    if cert.probes is None:
        return
    out.print(probes_device_table(s, f"device probes ({cert.probes.protocol.precision})"))
    out.print(probes_workload_table(s, "launch-boundness, FLOPs and MFU"))
    for w in s.warnings:
        err.print(labelled("[yellow]warning:[/]", w), soft_wrap=True)


def _row_json(r) -> dict:
    return {"workload": r.name, "mode": r.mode, "law": r.law,
            "r2": r.r2.value if r.r2 else None, "range": r.fitted_range,
            "resident": r.resident.value,
            "warm_seconds": r.warm_seconds.value if r.warm_seconds else None,
            "step0_over_warm": r.step0_over_warm.value if r.step0_over_warm else None}


def first_look_line() -> str:
    from afford.certification.request import FIRST_LOOK, FULL_HINT

    return (f"A first look (the default on a CPU): {', '.join(FIRST_LOOK)} at the quick "
            f"protocol; {FULL_HINT}.")


def _measure(req: CertifyRequest, show: bool):
    """certify with its progress on stderr: a bar on a terminal (``show``), else one line
    per stage and per workload (:class:`~afford.report.progress.LineProgress`). A CPU's
    first look says so as its plan is made."""
    from afford.certification import certify
    from afford.certification.request import is_first_look
    from afford.report.progress import LineProgress, RichProgress

    def announce(plan, say) -> None:
        if is_first_look(req.precision, req.workloads, plan.device.partition(":")[0]):
            say(first_look_line())

    if not show:
        lines = LineProgress(req.children, sys.stderr)

        def on_plan_lines(plan) -> None:
            announce(plan, lines.say)
            lines.plan(plan)

        return certify(req, on_event=lines.event, on_plan=on_plan_lines)
    with RichProgress(console=err) as bar:
        def on_plan(plan) -> None:
            announce(plan, bar.print)
            bar.planned(len(plan.items) * req.children)

        def on_event(event) -> None:
            kind = event["event"]
            if kind == "stage":
                bar.stage(str(event.get("key")))
            elif kind == "begin":
                bar.begin(event["child"], event["key"])
            elif kind == "point":
                bar.point()

        return certify(req, on_event=on_event, on_plan=on_plan)
