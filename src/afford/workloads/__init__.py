"""The things afford measures: a registry of built-ins and user workloads.

Names: ``softmax``, ``scan``, ``tinylm``, a preset as ``tinylm@q3``, a tinylm size as
``tinylm@d256L4`` (see :func:`afford.workloads.tinylm.parse_size`), or a user workload as
``pkg.module:factory`` (see :mod:`afford.workloads.base` for the protocol), or a transformers
model as ``hf:gpt2`` (see :mod:`afford.workloads.hf_models`). Any of them
may carry step options after ``+`` (``tinylm@q3+compile``, ``softmax+fused+x2``; see
:mod:`afford.workloads.tuned`).

The package imports no torch until a workload is resolved or one of its torch names
(``Built``, ``Workload``, ``WorkloadRefused``, ``train_step``) is asked for, so the grammar
of the names (:mod:`afford.workloads.names`) is checked in a process that has not loaded
torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from afford.core.errors import InputError
from afford.core.user_code import call, import_attr
from afford.workloads.names import (
    BUILTINS,
    DEFAULT,
    parse_options,
    tinylm_preset_error,
    unknown_workload,
)

if TYPE_CHECKING:
    from afford.workloads.base import Built, Workload, WorkloadRefused, train_step

__all__ = ["BUILTINS", "DEFAULT", "Built", "Workload", "WorkloadRefused", "resolve",
           "train_step"]

_BASE = ("Built", "Workload", "WorkloadRefused", "train_step")


def __getattr__(name: str) -> Any:
    """The torch names of :mod:`afford.workloads.base`, loaded on first use."""
    if name in _BASE:
        from afford.workloads import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve(spec: str, device_class: str, described: dict | None = None) -> Workload:
    """The workload a name stands for; :class:`InputError` with the choices if none.
    ``described``: an ``hf:`` spec's config as a child described it
    (:func:`afford.workloads.hf_models.describe`), so this process need not import
    transformers."""
    if spec.startswith("hf:"):  # its own + options (shape, LoRA) before Tuned's
        from afford.workloads.hf_models import resolve_hf

        return resolve_hf(spec, device_class, described)
    base, plus, options = spec.partition("+")
    if plus:
        from afford.workloads.tuned import Tuned

        try:
            return Tuned(resolve(base, device_class), parse_options(options))
        except ValueError as exc:
            raise InputError(f"workload {spec!r}: {exc}") from None
    if ":" in spec:
        return _load_user(spec)
    name, _, preset = spec.partition("@")
    if name == "softmax" and not preset:
        from afford.workloads.softmax import Softmax

        return Softmax(device_class=device_class)
    if name == "scan" and not preset:
        from afford.workloads.scan import Scan

        return Scan(device_class=device_class)
    if name == "tinylm":
        from afford.workloads.tinylm import TinyLM, default, parse_size

        if not preset:
            return TinyLM(device_class=device_class)
        try:
            return TinyLM(parse_size(preset, default(device_class)))
        except ValueError as exc:
            raise tinylm_preset_error(preset, exc) from None
    raise unknown_workload(spec)


def _load_user(spec: str) -> Workload:
    """``pkg.module:factory`` called (:mod:`afford.core.user_code`: imported from the working
    folder only where it is not installed; any failure one line, exit 2)."""
    from afford.workloads.base import Workload

    factory = import_attr(spec, "workload", "factory")
    if not callable(factory):
        raise InputError(f"workload {spec!r}: {spec.partition(':')[2]!r} is not callable")
    workload = call(factory, spec, "workload")
    if not isinstance(workload, Workload):
        raise InputError(f"workload {spec!r}: the factory returned {type(workload).__name__}, "
                         "not an afford.workloads.Workload (see afford.workloads.base)")
    return workload
