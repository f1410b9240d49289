"""The things afford measures: a registry of built-ins and user workloads.

Names: ``softmax``, ``scan``, ``tinylm``, a preset as ``tinylm@q3``, a tinylm size as
``tinylm@d256L4`` (see :func:`afford.workloads.tinylm.parse_size`), or a user workload as
``pkg.module:factory`` (see :mod:`afford.workloads.base` for the protocol), or a transformers
model as ``hf:gpt2`` (see :mod:`afford.workloads.hf`). Any of them
may carry step options after ``+`` (``tinylm@q3+compile``, ``softmax+fused+x2``; see
:mod:`afford.workloads.tuned`).
"""

from __future__ import annotations

from afford.errors import InputError
from afford.user_code import call, import_attr
from afford.workloads.base import Built, Workload, WorkloadRefused, train_step
from afford.workloads.scan import Scan
from afford.workloads.softmax import Softmax
from afford.workloads.tinylm import PRESETS, TinyLM, default, parse_size
from afford.workloads.tuned import Tuned, parse_options

BUILTINS = ("softmax", "scan", "tinylm")
DEFAULT = ("softmax", "scan", "tinylm")

__all__ = ["BUILTINS", "DEFAULT", "Built", "Workload", "WorkloadRefused", "resolve",
           "train_step"]


def resolve(spec: str, device_class: str) -> Workload:
    """The workload a name stands for; :class:`InputError` with the choices if none."""
    if spec.startswith("hf:"):  # its own + options (shape, LoRA) before Tuned's
        from afford.workloads.hf import resolve_hf

        return resolve_hf(spec, device_class)
    base, plus, options = spec.partition("+")
    if plus:
        try:
            return Tuned(resolve(base, device_class), parse_options(options))
        except ValueError as exc:
            raise InputError(f"workload {spec!r}: {exc}") from None
    if ":" in spec:
        return _load_user(spec)
    name, _, preset = spec.partition("@")
    if name == "softmax" and not preset:
        return Softmax(device_class=device_class)
    if name == "scan" and not preset:
        return Scan(device_class=device_class)
    if name == "tinylm":
        if not preset:
            return TinyLM(device_class=device_class)
        if preset in PRESETS:
            return TinyLM(PRESETS[preset]())
        try:
            return TinyLM(parse_size(preset, default(device_class)))
        except ValueError as exc:
            if preset[0] in "dLHbs" or any(preset.startswith(p) for p in PRESETS):
                raise InputError(str(exc)) from None
            raise InputError(f"unknown tinylm preset {preset!r}; presets: "
                             f"{', '.join(PRESETS)} (or a size such as tinylm@d256L4)") from None
    raise InputError(f"unknown workload {spec!r}. Built-ins: {', '.join(BUILTINS)} "
                     f"(presets: {', '.join('tinylm@' + p for p in PRESETS)}); a workload of "
                     "your own is named as pkg.module:factory")


def _load_user(spec: str) -> Workload:
    """``pkg.module:factory`` called (:mod:`afford.user_code`: imported from the working
    folder only where it is not installed; any failure one line, exit 2)."""
    factory = import_attr(spec, "workload", "factory")
    if not callable(factory):
        raise InputError(f"workload {spec!r}: {spec.partition(':')[2]!r} is not callable")
    workload = call(factory, spec, "workload")
    if not isinstance(workload, Workload):
        raise InputError(f"workload {spec!r}: the factory returned {type(workload).__name__}, "
                         "not an afford.workloads.Workload (see afford.workloads.base)")
    return workload
