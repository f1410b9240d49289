"""``afford certify`` in the library: the command's flags checked and made a request, the
certificate measured and written, and what the finished run means for the command's exit.

The command line (:mod:`afford.cli.certify`) parses the flags, calls :func:`certify_request`
and :func:`measure_and_write`, renders the :class:`WrittenCertificate` they return and sets
the exit code from it (``--distributed`` hands the request to
:mod:`afford.cli.certify_distributed`). Nothing here prints.

The measuring side (:mod:`afford.certification`, and torch with it) is imported inside the
functions, after the checks that need no torch: a contradiction or a workload name that
does not read is answered before torch loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from afford.core.errors import InputError, MeasurementError
from afford.core.io import check_writable
from afford.core.provenance import Tagged, assumed, run_label
from afford.workloads.names import check as check_names

if TYPE_CHECKING:
    from afford.certification.request import CertifyRequest
    from afford.schema.cert import Certificate


def certify_request(*, workloads: list[str] | None = None, sweeps: list[str] | None = None,
                    modes: list[str] | None = None, quick: bool = False,
                    adaptive: bool = False, full: bool = False, children: int = 3,
                    device: str | None = None, gates: bool | None = None,
                    memory: bool = True, probes: bool = True, sizes: bool = False,
                    levers: bool = False, distributed: bool = False,
                    dist_only: bool = False, out: Path | None = None, force: bool = False,
                    checkpoint_dir: Path | None = None, command: str = "afford certify"
                    ) -> CertifyRequest:
    """The ``afford certify`` flags (each argument is the flag of its name, ``None`` or
    ``False`` where not given) as a :class:`~afford.certification.request.CertifyRequest`, checked
    before anything is measured.

    The checks run in this order and the first that fails is an InputError (exit 2): at
    most one of ``quick``, ``adaptive`` and ``full``; every workload name reads (torch-free:
    :func:`afford.workloads.names.check`); ``AFFORD_CHILD_TIMEOUT`` is sane; ``children``
    is in range; every sweep reads as ``NAME=V1,V2,...``; ``out`` can be written (an
    existing file only with ``force``); ``checkpoint_dir`` is an existing folder;
    ``dist_only`` only with ``distributed``. What only the device can tell (a sweep name no
    workload uses, a mode, the device itself) is checked when certify resolves the request.

    The precision is the one of ``quick``, ``full``, ``adaptive`` given; under
    ``distributed`` with none, adaptive; otherwise ``None``, which leaves it to the device
    (:func:`afford.certification.request.device_defaults`: on a CPU with no workload either, the
    first look). ``command`` is the command line the certificate records."""
    if quick + adaptive + full > 1:
        raise InputError("--quick, --adaptive and --full contradict each other; choose one")
    check_names(workloads)  # torch-free: a typo is answered before torch loads
    from afford.certification.request import CertifyRequest, check_children, parse_sweep
    from afford.measure.children import child_timeout

    child_timeout()  # a bad AFFORD_CHILD_TIMEOUT is exit 2 before anything is measured
    check_children(children)
    parsed = dict(parse_sweep(s) for s in sweeps or [])
    if out is not None:
        check_writable(out, overwrite=force)
    if checkpoint_dir is not None and not checkpoint_dir.is_dir():
        raise InputError(f"--checkpoint-dir {checkpoint_dir}: no such folder")
    if dist_only and not distributed:
        raise InputError("--dist-only goes with --distributed (under torchrun)")
    precision = "quick" if quick else "full" if full else \
        "adaptive" if adaptive or distributed else None
    return CertifyRequest(workloads=list(workloads or []), sweeps=parsed, modes=list(modes or []),
                          precision=precision, children=children, device=device, gates=gates,
                          memory=memory, probes=probes, sizes=sizes, levers=levers,
                          checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
                          command=command)


@dataclass(frozen=True)
class WrittenCertificate:
    """A certificate measured and written: the certificate (complete or partial), the path
    it was written to, and whether the run was a CPU's first look (the request left both
    the precision and the workloads to a CPU:
    :func:`afford.certification.request.is_first_look`)."""

    cert: Certificate
    path: Path
    first_look: bool

    @property
    def noisy(self) -> bool:
        """The step-time verdict is NOISY (the certificate is written and usable: the
        command exits 0, 1 under ``--strict``)."""
        return is_noisy(self.cert)

    @property
    def halted(self) -> bool:
        """A gate the run checked failed: the gates' verdict is HALT (exit 0, 1 under
        ``--strict``)."""
        return self.cert.gates is not None and self.cert.gates.verdict == "HALT"

    @property
    def verdicts(self) -> list[StageVerdict]:
        """The certificate's verdicts, time, memory and gates (:func:`verdicts`)."""
        return verdicts(self.cert)

    def exit_code(self, strict: bool = False) -> int:
        """0: the certificate is written and usable, whatever its verdicts say (they are
        its findings, and plans read them); with ``strict``, 1 when a verdict did not pass
        (a NOISY, MISSED or UNJUDGED time verdict, a memory law that misses its held-out aim, a
        failed gate), for a CI that gates on them. A partial certificate (3) and a refused
        workload (2) are raised before (:meth:`raise_if_partial`, :meth:`raise_if_refused`)."""
        return int(strict and not all(v.passed for v in self.verdicts))

    def raise_if_partial(self) -> None:
        """MeasurementError (exit 3) for a partial certificate (a workload without a usable
        point, a stage that failed, a gate that could not be evaluated), naming every
        failure and where the partial certificate was written; nothing for a complete one."""
        if self.cert.status == "partial":
            raise MeasurementError("the measurement is incomplete: "
                                   + "; ".join(self.cert.failures)
                                   + f". The partial certificate is written to {self.path}")

    def raise_if_refused(self) -> None:
        """InputError (exit 2) naming every workload the children refused to time (a step
        whose backward did not run, ...) and why; nothing when none was refused."""
        refused = [r for r in self.cert.workloads if r.refused]
        if refused:
            raise InputError("; ".join(f"workload {r.name} refused: {r.refused}"
                                       for r in refused))


def is_noisy(cert: Certificate) -> bool:
    """Whether the certificate's step-time verdict is NOISY."""
    return cert.time_verdict is not None and cert.time_verdict.label == "NOISY"


def measure_and_write(req: CertifyRequest, out: Path | None = None, force: bool = False,
                      measure: Callable[[CertifyRequest], Certificate] | None = None
                      ) -> WrittenCertificate:
    """Measure ``req`` and write the certificate, complete or partial, to ``out`` (default:
    ``afford-cert-<device>-<time>.json`` in the current folder; an existing file only with
    ``force``; a write that fails saves the measurement beside it and names where:
    :func:`afford.schema.cert.save_measured`). ``measure``: how to measure, default
    :func:`afford.certification.certify` without progress (the command passes it with its
    progress bar). A partial certificate, a refused workload, a NOISY verdict or a failed
    gate is returned, not raised: see :class:`WrittenCertificate`."""
    from afford.certification import certify
    from afford.certification.request import is_first_look
    from afford.schema.cert import default_filename, save_measured

    cert = (measure or certify)(req)
    path = out or Path(default_filename(cert))
    save_measured(cert, path, overwrite=force)
    return WrittenCertificate(cert, path, is_first_look(req.precision, req.workloads,
                                                        cert.environment.device_type))


@dataclass(frozen=True)
class StageVerdict:
    """One verdict of a certificate, with its cause: ``stage`` (time, memory or gates),
    ``label`` (time: OK, NOISY, UNJUDGED; memory: OK, ROUGH; gates: GO, HALT; any: NOT
    MEASURED), ``passed`` (what ``certify --strict`` gates on; a stage not measured passes:
    nothing was found wrong), and the cause as a template whose ``{}`` are ``figures``
    (tagged, or words), for a renderer's :func:`~afford.report.prose.prose`."""

    stage: str
    label: str
    passed: bool
    cause: str
    figures: tuple[Tagged | str, ...] = ()


def verdicts(cert: Certificate) -> list[StageVerdict]:
    """The certificate's three verdicts, each with its cause: the step times
    (:func:`time_verdict`), the memory law (:func:`memory_verdict`) and the gates
    (:func:`gates_verdict`). ``all(v.passed for v in verdicts(cert))`` is what ``afford
    certify --strict`` exits 0 on."""
    return [time_verdict(cert), memory_verdict(cert), gates_verdict(cert)]


def time_verdict(cert: Certificate) -> StageVerdict:
    """OK, NOISY (the host's recorded load and the worst point: the cause, as far as the
    certificate can tell it), MISSED (a held-out shape the model missed, reproduced: its
    own error) or UNJUDGED (the workloads judged at no held-out shape)."""
    from afford.figures.noise import summarize_noise
    from afford.figures.time_figures import noisy_reasons, verdict_label

    label = verdict_label(cert)
    if label is None:
        return StageVerdict("time", "NOT MEASURED", True, "the certificate has no step-time "
                            "model (made before it, or no workload has a batch and sequence)")
    v = cert.time_verdict
    if label in ("UNJUDGED", "MISSED"):  # unchecked, or the model's own error, reproduced
        why = noisy_reasons(cert) or (v.reasons if v is not None else [])
        return StageVerdict("time", label, False, "{}", ("; ".join(why),))
    again = v.remeasured_points if v is not None else 0
    if label == "OK":
        return StageVerdict("time", label, True, "the children agree at every point{}",
                            (f" ({again} re-measured once)" if again else "",))
    noise = summarize_noise(cert)
    worst = "; ".join(noise.worst) or "; ".join(noisy_reasons(cert)[:1])
    return StageVerdict("time", label, False, "{}. Cause: {}. Plans allow for the spread "
                        "(preflight: NO-GO only where it flips the decision)",
                        (worst, noise.load or "the host's load was not recorded"))


def memory_verdict(cert: Certificate) -> StageVerdict:
    """OK when the memory answer plans budget on (:func:`answer_error`: the allocator replay
    where the certificate trusts it, else the memory law) predicted every held-out shape
    (measured, never fitted) within the memory stage's tolerance; ROUGH when one did not
    (the worst is named); NOT MEASURED without a memory law."""
    m = cert.memory
    if m is None or not m.laws:
        why = "--no-memory" if m is None else "; ".join(
            f"{n.what}: {n.reason}" for n in m.not_executable) or "no transformer-shaped workload"
        return StageVerdict("memory", "NOT MEASURED", True, "{}", (why,))
    run = run_label(cert)
    judged = [(e, law) for law in m.laws for e in [answer_error(law, run)] if e is not None]
    if not judged:
        return StageVerdict("memory", "OK", True, "no held-out shape to judge it by")
    err, law = max(judged, key=lambda x: float(x[0].value))
    tol = assumed(m.tolerance, "ratio", "the memory stage's tolerance on a predicted peak")
    if float(err.value) <= m.tolerance:
        return StageVerdict("memory", "OK", True, "held-out error at most {} (tolerance {}; "
                            "worst: {} {})", (err, tol, law.workload, law.mode))
    return StageVerdict("memory", "ROUGH", False, "{} {} misses its held-out shapes by up to "
                        "{} (tolerance {}): plans budget on a rough figure there",
                        (law.workload, law.mode, err, tol))


def answer_error(law, run: str) -> Tagged | None:
    """The worst held-out error of the memory figure plans budget on: the allocator replay's
    reserved where the certificate trusts it, else the law's reserved (CUDA) or its peak
    RSS (a CPU), MEASURED; None without a held-out shape."""
    from afford.core.provenance import measured
    from afford.figures.memory_figures import heldout_accuracy
    from afford.figures.replay_figures import usable

    rp = law.replay
    if usable(law)[0] and rp.replay_worst_reserved_error is not None:
        return measured(abs(rp.replay_worst_reserved_error), "ratio", f"{law.workload} "
                        f"{law.mode}: allocator replay, max |error| of peak reserved over "
                        f"{len(rp.heldout)} held-out shapes; {run}")
    allocated, reserved = heldout_accuracy(law, run)
    return reserved or allocated


def gates_verdict(cert: Certificate) -> StageVerdict:
    """GO or HALT with the gates that passed or failed; NOT MEASURED with ``--no-gates``."""
    g = cert.gates
    if g is None:
        return StageVerdict("gates", "NOT MEASURED", True, "--no-gates")
    failed = [x.name for x in g.gates if x.status == "FAIL"]
    if failed or g.verdict == "HALT":
        return StageVerdict("gates", g.verdict, False, "{} failed: the figures of a run it "
                            "guards are meaningless until it passes",
                            (", ".join(failed) or "a gate",))
    passed = [x.name for x in g.gates if x.status == "PASS"]
    idle = [x.name for x in g.gates if x.status != "PASS"]
    return StageVerdict("gates", g.verdict, True, "{}{}", (
        (", ".join(passed) + " passed") if passed else "no gate could run here",
        f"; {', '.join(idle)} not executable here" if idle and passed else ""))
