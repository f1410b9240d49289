"""What certify is asked to do, checked before anything is timed.

:class:`CertifyRequest` is the ``afford certify`` flags as a typed request; :func:`resolve`
turns it into a :class:`Plan` (the workloads, modes and sweep values each child will time),
and every name or value a user typed that cannot be measured is an
:class:`~afford.core.errors.InputError` here. :func:`workload_values` is the one resolver of
workloads and sweep values, shared with the gates (:mod:`afford.certification.stage_gates`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from afford.certification.stage_sizes import ladder_items
from afford.certification.stage_time import plan_design
from afford.certification.sweep import point_key
from afford.core.errors import InputError
from afford.core.published_constants import MODES
from afford.core.units import MAX_DIM, UnitError, whole
from afford.measure.children import Event
from afford.schema.cert import WorkloadResult
from afford.workloads import DEFAULT
from afford.workloads import resolve as resolve_workload
from afford.workloads.base import Workload, validate_shape

MIN_CHILDREN = 3
MAX_CHILDREN = 64  # independent children: the protocol's 3 and far more than any use


@dataclass
class CertifyRequest:
    """What to certify. Empty ``workloads`` means the built-in default set; ``precision``
    None means the device's default (:func:`device_defaults`: a first look on a CPU)."""

    workloads: list[str] = field(default_factory=list)
    sweeps: dict[str, list[int]] = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)
    precision: str | None = "adaptive"
    children: int = MIN_CHILDREN
    device: str | None = None
    seed: int = 0
    command: str = ""
    gates: bool | None = None  # None: init-loss gate only; True: all gates + audit; False: none
    sizes: bool = False  # the sizes stage: tinylm across model sizes (stage_sizes)
    ladder_sizes: bool = True  # without --sizes: the ladder's few sizes inside a GPU's sweep
    levers: bool = False  # the levers stage: measured A/B pairs (stage_levers)
    memory: bool = True  # the memory-law stage (stage_memory)
    probes: bool = True  # the probes stage (stage_probes)
    checkpoint_dir: str | None = None  # where the probes write checkpoints; None: cwd
    time_design: bool = True  # the step-time design beside the sweep (stage_time)


@dataclass(frozen=True)
class Plan:
    """The resolved request: what each child will time. ``designs``: per workload (in the
    order of ``workloads``), the step-time design (:mod:`afford.certification.stage_time`), whose
    shapes beyond the sweep the children time with it."""

    device: str
    device_class: str
    workloads: list[tuple[str, Workload, str, list[int]]]  # (spec, workload, mode, values)
    designs: list = field(default_factory=list)
    precision: str = "adaptive"
    sizes: list[dict] = field(default_factory=list)  # the ladder's sizes (stage_sizes)

    @property
    def items(self) -> list[dict]:
        sweep = [{"key": point_key(spec, mode, v), "workload": spec, "mode": mode, "value": v}
                 for spec, _, mode, values in self.workloads for v in values]
        return sweep + [it for d in self.designs for it in d.items()] + self.sizes


@dataclass
class StageContext:
    """What a stage after the sweep sees. A stage returns certificate fields to set
    (e.g. ``{"probes": ProbesSection(...)}``) and may emit events for the progress bar."""

    req: CertifyRequest
    env: object  # afford.schema.cert.Environment
    plan: Plan
    results: list[WorkloadResult]
    on_event: Callable[[Event], None]
    sweep_starts: list[Event] = field(default_factory=list)  # the sweep children's start events
    ahead: dict = field(default_factory=dict)  # stage name -> its child, spawned ahead (CUDA)
    per_child: list[dict] = field(default_factory=list)  # the sweep's raw records per child
    sections: dict = field(default_factory=dict)  # the sections the stages before wrote
    device_free: Any = None  # a threading.Event a stage sets once it needs the device no more
    # called once with the measured GEMM ceiling (FLOP/s) of each sweep mode, as soon as the
    # probes have them (certify's step-time models are bounded by them meanwhile)
    on_ceilings: Callable[[dict[str, float]], None] | None = None


Stage = Callable[[StageContext], dict]


#: a CPU's first look: one workload at the quick protocol, so that a first answer comes
#: within 90 s on an idle 2-core box, where the default set at the adaptive protocol takes
#: many minutes
FIRST_LOOK = ("tinylm",)
FULL_HINT = ("the full certificate: afford certify --full (softmax, scan and tinylm, the "
             "strict protocol; many minutes on a small CPU), or --adaptive")


def device_defaults(req: CertifyRequest, device_type: str) -> CertifyRequest:
    """The request with what it left to the device filled in: on a CPU, neither a
    precision nor a workload asked for is the first look (:data:`FIRST_LOOK` at the quick
    protocol); otherwise the adaptive protocol over what was asked (the default set when
    nothing was). A GPU's default is unchanged."""
    if req.precision is not None:
        return req
    if device_type == "cpu" and not req.workloads:
        return replace(req, precision="quick", workloads=list(FIRST_LOOK))
    return replace(req, precision="adaptive")


def is_first_look(precision: str | None, workloads: list[str], device_type: str) -> bool:
    """Whether a request of this precision and these workloads is a CPU's first look."""
    return precision is None and not workloads and device_type == "cpu"


def default_mode(device_type: str) -> str:
    """bf16 autocast on a CUDA card that supports it, fp32 otherwise."""
    if device_type == "cuda":
        import torch

        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "fp32"


def resolve(req: CertifyRequest, device_type: str, device_class: str, device: str,
            described: dict[str, dict] | None = None) -> Plan:
    """Check everything a user typed before any time is spent; InputError otherwise.
    ``described``: ``hf:`` specs' configs as certify's early child described them
    (:func:`afford.measure.children.early_described`)."""
    check_children(req.children)
    for m in req.modes:
        if m not in MODES:
            raise InputError(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    modes = req.modes or [default_mode(device_type)]
    resolved = [(spec, w, mode, values)
                for spec, w, values in workload_values(req.workloads, req.sweeps, device_class,
                                                       described=described)
                for mode in modes]
    designs = [plan_design(spec, w, mode, values) for spec, w, mode, values in resolved] \
        if req.time_design else []
    sizes = ladder_items(resolved, device_class) \
        if req.ladder_sizes and not req.sizes and device_type == "cuda" else []
    return Plan(device=device, device_class=device_class, workloads=resolved, designs=designs,
                precision=req.precision or "adaptive", sizes=sizes)


def workload_values(specs: list[str], sweeps: dict[str, list[int]], device_class: str,
                    given: dict[str, list[int]] | None = None,
                    described: dict[str, dict] | None = None
                    ) -> list[tuple[str, Workload, list[int]]]:
    """(spec, workload, sweep values) per workload (the built-in default set when ``specs``
    is empty): the values ``given`` for the spec, else ``sweeps`` by the workload's sweep
    parameter, else ``sweeps["n"]``, else its default sweep. InputError for an unknown
    workload, a value its shape refuses, or a ``sweeps`` name no workload uses.
    ``described``: per ``hf:`` spec, its config as a child described it."""
    out = []
    used: set[str] = set()
    for spec in dict.fromkeys(specs or DEFAULT):
        w = resolve_workload(spec, device_class, (described or {}).get(spec))
        key = w.sweep_param if w.sweep_param in sweeps else "n"
        used.add(key)
        values = (given or {}).get(spec) or sweeps.get(key) or w.default_sweep(device_class)
        for v in values:
            try:
                validate_shape(w, v)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        out.append((spec, w, values))
    unused = set(sweeps) - used
    if unused:
        params = sorted({w.sweep_param for _, w, _ in out})
        raise InputError(f"--sweep {', '.join(sorted(unused))}=...: no selected workload sweeps "
                         f"that parameter (they sweep {', '.join(params)}; use n=... for all)")
    return out


MAX_SWEEP_VALUE = MAX_DIM  # far beyond any device's memory; above it a size overflows torch


PRECISIONS = ("quick", "adaptive", "full")


def build_request(workloads: list[str] | str | None = None, *,
                  sweeps: dict[str, list[int]] | list[str] | None = None,
                  modes: list[str] | str | None = None, precision: str = "adaptive",
                  children: int = MIN_CHILDREN, device: str | None = None,
                  gates: bool | None = None, memory: bool = True, probes: bool = True,
                  sizes: bool = False, levers: bool = False,
                  checkpoint_dir: str | None = None, command: str = "") -> CertifyRequest:
    """The request of :func:`afford.certification.run`'s arguments, checked as the command checks
    its flags before anything is measured (InputError): ``sweeps`` as ``{"seq": [128,
    256]}`` or ``["seq=128,256"]`` (one parser, :func:`parse_sweep`), a known precision, an
    existing checkpoint folder, a sane ``AFFORD_CHILD_TIMEOUT``."""
    from afford.measure.children import child_timeout

    child_timeout()
    if precision not in PRECISIONS:
        raise InputError(f"precision {precision!r}: choose from {', '.join(PRECISIONS)}")
    if isinstance(sweeps, dict):
        texts = [f"{k}={','.join(str(v) for v in vs)}" for k, vs in sweeps.items()]
    else:
        texts = list(sweeps or [])
    if checkpoint_dir is not None and not Path(checkpoint_dir).is_dir():
        raise InputError(f"checkpoint_dir {checkpoint_dir}: no such folder")
    check_children(children)
    return CertifyRequest(workloads=_names(workloads), sweeps=dict(parse_sweep(t) for t in texts),
                          modes=_names(modes), precision=precision, children=children,
                          device=device, gates=gates, memory=memory, probes=probes,
                          sizes=sizes, levers=levers,
                          checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
                          command=command)


def _names(given: list[str] | str | None) -> list[str]:
    return [given] if isinstance(given, str) else list(given or [])


def check_children(n: object) -> int:
    """``--children``: a whole number from :data:`MIN_CHILDREN` to :data:`MAX_CHILDREN`;
    InputError otherwise (``99999999999999999999`` would measure for ever)."""
    try:
        return whole(n, "--children", low=MIN_CHILDREN, high=MAX_CHILDREN)
    except UnitError as exc:
        raise InputError(f"{exc}: the protocol needs at least {MIN_CHILDREN} independent "
                         f"child processes; more than {MAX_CHILDREN} add hours, not "
                         "precision") from None


def parse_sweep(text: str) -> tuple[str, list[int]]:
    """``"seq=128,256,512"`` -> ("seq", [128, 256, 512]); InputError when malformed. Each
    value a whole number from 1 to :data:`MAX_SWEEP_VALUE` (``s=1.5`` is refused, never
    measured as ``s=1``; counts as ``4k`` are read as counts)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise InputError(f"--sweep {text!r}: write it as NAME=V1,V2,... (e.g. n=2048,4096)")
    try:
        values = [whole(v.strip(), f"--sweep {name}", high=MAX_SWEEP_VALUE)
                  for v in rest.split(",") if v.strip()]
    except UnitError as exc:
        raise InputError(f"{exc} (sweep values are positive integers, at most 2**40)") from None
    if not values:
        raise InputError(f"--sweep {text!r}: the values must be positive integers")
    if len(set(values)) != len(values):
        raise InputError(f"--sweep {text!r}: a value appears twice")
    return name, sorted(values)


