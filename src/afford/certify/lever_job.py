"""The levers run resolved on this box: :func:`lever_job` turns a certificate and the
``afford levers`` choices into the :class:`~afford.certify.stage_levers.LeverJob` that
:func:`~afford.certify.stage_levers.measure_levers` runs, after checking that this box is
the certificate's (devices are not pooled: docs/DESIGN.md section 3, rule 7)."""

from __future__ import annotations

from afford.certify.stage_levers import Arm, LeverJob, default_workloads
from afford.core.errors import InputError
from afford.measure import env as envmod
from afford.measure.timing import rule_for
from afford.schema.cert import Certificate
from afford.workloads.clock import clock_name


def lever_job(c: Certificate, workloads: list[str], chosen: tuple[str, ...], mode: str | None,
              precision: str, children: int, arms: tuple[Arm, ...] = (),
              command: str = "afford levers") -> LeverJob:
    """The job for certificate ``c`` on this box: the device of the certificate's type
    (cuda or cpu), ``workloads`` (default: tinylm@q3 on a large GPU, else tinylm), the
    ``chosen`` levers and user ``arms``, the base ``mode`` (default: the certificate's first
    workload's, else fp32), the timing rule of ``precision`` with ``children`` children and
    the certificate's seed; ``command`` is the command line the section records.
    InputError when the certificate is of a CUDA device and none is visible here, or when
    this box's device is not the certificate's."""
    e = c.environment
    device = envmod.choose_device("cuda" if e.device_type == "cuda" else "cpu")
    if device.type == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError(f"the certificate is of {e.device_name} (cuda) but no CUDA "
                             "device is visible here; levers are measured on the box itself")
    here = envmod.capture(device, command)
    if here.device_name != e.device_name:
        raise InputError(f"this box is {here.device_name}, the certificate is of "
                         f"{e.device_name}: devices are not pooled; certify this box first")
    return LeverJob(workloads=workloads or default_workloads(e.device_class), levers=chosen,
                    mode=mode or (c.workloads[0].mode if c.workloads else "fp32"),
                    device=str(device), device_type=device.type,
                    device_class=here.device_class, device_name=here.device_name,
                    device_memory=here.device_memory_bytes, rule=rule_for(precision),
                    precision=precision, children=children, seed=c.protocol.seed,
                    clock=clock_name(device.type), torch_version=here.torch_version,
                    command=here.command, arms=arms)
