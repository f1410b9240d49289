"""``afford certify`` in the library: the command's flags checked and made a request, the
certificate measured and written, and what the finished run means for the command's exit.

The command line (:mod:`afford.cli.certify`) parses the flags, calls :func:`certify_request`
and :func:`measure_and_write`, renders the :class:`WrittenCertificate` they return and sets
the exit code from it (``--distributed`` hands the request to
:mod:`afford.cli.certify_distributed`). Nothing here prints.

The measuring side (:mod:`afford.certify`, and torch with it) is imported inside the
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
from afford.workloads.names import check as check_names

if TYPE_CHECKING:
    from afford.certify.request import CertifyRequest
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
    ``False`` where not given) as a :class:`~afford.certify.request.CertifyRequest`, checked
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
    (:func:`afford.certify.request.device_defaults`: on a CPU with no workload either, the
    first look). ``command`` is the command line the certificate records."""
    if quick + adaptive + full > 1:
        raise InputError("--quick, --adaptive and --full contradict each other; choose one")
    check_names(workloads)  # torch-free: a typo is answered before torch loads
    from afford.certify.request import CertifyRequest, check_children, parse_sweep
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
    the precision and the workloads to a CPU: :func:`afford.certify.request.is_first_look`)."""

    cert: Certificate
    path: Path
    first_look: bool

    @property
    def noisy(self) -> bool:
        """The step-time verdict is NOISY (the certificate is written; the command exits 1)."""
        return is_noisy(self.cert)

    @property
    def halted(self) -> bool:
        """A gate the run checked failed: the gates' verdict is HALT (exit 1)."""
        return self.cert.gates is not None and self.cert.gates.verdict == "HALT"

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
    :func:`afford.certify.certify` without progress (the command passes it with its
    progress bar). A partial certificate, a refused workload, a NOISY verdict or a failed
    gate is returned, not raised: see :class:`WrittenCertificate`."""
    from afford.certify import certify
    from afford.certify.request import is_first_look
    from afford.schema.cert import default_filename, save_measured

    cert = (measure or certify)(req)
    path = out or Path(default_filename(cert))
    save_measured(cert, path, overwrite=force)
    return WrittenCertificate(cert, path, is_first_look(req.precision, req.workloads,
                                                        cert.environment.device_type))
