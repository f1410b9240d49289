"""Levers, measured: A/B pairs on one workload, in one run, by the ordinary child protocol.

Each lever is a pair of variants of the same workload at the same sweep value; B is A with
the lever applied (docs/DESIGN.md section 4, "Levers"):

- ``bf16``: fp32 vs bf16 autocast;
- ``fused``: AdamW foreach vs fused (``+foreach`` / ``+fused``);
- ``compile``: eager vs ``torch.compile`` (``+compile``; compile time lands in step 0);
- ``cudagraphs``: eager vs the whole step captured in one CUDA graph (``+cudagraphs``);
- ``batch2`` / ``batch4``: batch x1 vs x2 / x4, compared in tokens per second;
- a user arm (``afford levers --arm NAME=SPEC``): the workload vs another workload ``SPEC``
  (``pkg.module:factory`` or any workload name) built at the same sweep value, e.g. the
  model with one component removed (the ladder note's ``--no-kda`` ablation). The arm runs
  in the same children as A, and its training step passes the same gradient check
  (:func:`afford.workloads.base.check_gradients`): an arm whose backward silently did not
  run (a parameter with no gradient) is NOT EXECUTABLE with that reason, never a speedup.

Every variant is timed in every child, each child in its own shuffled order, step 0 and
the warm-up apart; a lever's speedup is the median of the per-child ratios, with their
range (:mod:`afford.fit.time.speedup`). A lever that cannot apply here (CUDA graphs on a CPU,
``torch.compile`` without its compiler toolchain) is NOT EXECUTABLE with the reason and is
not run; one that raises when run is NOT EXECUTABLE with the error text. The base variant
also counts the FLOPs of one step (``+flops``) for MFU.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from afford.certification.sweep import assemble_point, point_key
from afford.core.errors import InputError, MeasurementError
from afford.core.provenance import NotExecutable
from afford.fit.time.speedup import per_child_speedups, summarize
from afford.fit.time.throughput import fit_linear_floor
from afford.measure import env as envmod
from afford.measure.children import Event, run_children
from afford.measure.timing import TimingRule, rule_for
from afford.schema.cert import Certificate
from afford.schema.levers_section import Lever, LeverRun, LeversSection, LeverVariant
from afford.schema.point import Point
from afford.workloads import resolve
from afford.workloads.base import Workload
from afford.workloads.clock import clock_name

LEVERS = ("bf16", "fused", "compile", "cudagraphs", "batch2", "batch4")
DESCRIPTIONS = {
    "bf16": "fp32 -> bf16 autocast",
    "fused": "AdamW foreach -> fused",
    "compile": "eager -> torch.compile (default mode)",
    "cudagraphs": "eager -> whole step in one CUDA graph (torch.cuda.graph)",
    "batch2": "batch x1 -> x2 (tokens per second)",
    "batch4": "batch x1 -> x4 (tokens per second)",
}


@dataclass(frozen=True)
class Pair:
    """A lever before it is measured: the two variants as (spec, mode)."""

    name: str
    a: tuple[str, str]
    b: tuple[str, str]
    metric: str
    arm: str | None = None

    @property
    def description(self) -> str:
        return DESCRIPTIONS.get(self.name) or f"A -> arm {self.arm}"


@dataclass(frozen=True)
class Arm:
    """A user arm: a name and the workload spec that replaces A in B."""

    name: str
    spec: str


_ARM_NAME = re.compile(r"[A-Za-z][\w.-]{0,39}")


def parse_arms(texts: list[str] | None) -> tuple[Arm, ...]:
    """``["no-kda=mypkg.model:without_kda"]`` -> (Arm("no-kda", "mypkg.model:without_kda"),).
    InputError for a malformed one, a name taken by a built-in lever, or a repeated name."""
    arms: list[Arm] = []
    for text in texts or []:
        name, eq, spec = (t.strip() for t in text.partition("="))
        if not eq or not spec:
            raise InputError(f"--arm {text!r}: write NAME=SPEC, e.g. "
                             "no-kda=mypkg.model:without_kda")
        if not _ARM_NAME.fullmatch(name):
            raise InputError(f"--arm {text!r}: a name is a letter then up to 39 letters, "
                             "digits, '_', '.' or '-'")
        if name in LEVERS or any(a.name == name for a in arms):
            raise InputError(f"--arm {text!r}: the name {name!r} is already taken")
        arms.append(Arm(name, spec))
    return tuple(arms)


def default_workloads(device_class: str) -> list[str]:
    return ["tinylm@q3"] if device_class == "large-gpu" else ["tinylm"]


def parse_levers(text: str | None) -> tuple[str, ...]:
    """``"bf16,fused"`` -> ("bf16", "fused"); all of them when ``text`` is empty."""
    if not text:
        return LEVERS
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    bad = [n for n in names if n not in LEVERS]
    if bad or not names:
        raise InputError(f"--levers {text!r}: unknown lever {bad[0] if bad else ''!r}; "
                         f"levers: {', '.join(LEVERS)}")
    return names


def pairs(spec: str, mode: str, chosen: tuple[str, ...], arms: tuple[Arm, ...] = ()
          ) -> list[Pair]:
    """The A/B pairs of ``chosen`` levers and of the user ``arms`` for workload ``spec``
    whose base mode is ``mode``. The base variant is ``spec+flops`` in ``mode`` (the count
    runs after timing); an arm's B is its own spec in ``mode``."""
    base = (f"{spec}+flops", mode)
    table = {
        "bf16": ((spec, "fp32") if mode != "fp32" else base,
                 base if mode == "bf16" else (spec, "bf16"), "step_seconds"),
        "fused": ((f"{spec}+foreach", mode), (f"{spec}+fused", mode), "step_seconds"),
        "compile": (base, (f"{spec}+compile", mode), "step_seconds"),
        "cudagraphs": (base, (f"{spec}+cudagraphs", mode), "step_seconds"),
        "batch2": (base, (f"{spec}+x2", mode), "tokens_per_second"),
        "batch4": (base, (f"{spec}+x4", mode), "tokens_per_second"),
    }
    return [Pair(n, table[n][0], table[n][1], table[n][2]) for n in chosen] + \
        [Pair(a.name, base, (a.spec, mode), "step_seconds", arm=a.spec) for a in arms]


def not_applicable(name: str, device_type: str) -> str | None:
    """Why lever ``name`` cannot run on this device, known before running; else ``None``."""
    if name == "cudagraphs" and device_type != "cuda":
        return f"CUDA graphs need a CUDA device; this certificate's device is {device_type}"
    if name == "compile":
        return compiler_missing(device_type)
    if name == "bf16" and device_type == "cuda":
        import torch

        if not torch.cuda.is_bf16_supported():
            return "this CUDA device does not support bf16 (torch.cuda.is_bf16_supported())"
    return None


def compiler_missing(device_type: str) -> str | None:
    """torch.compile's default backend (Inductor) needs Triton on CUDA and a C++ compiler
    on the CPU; ``None`` when the toolchain is there (it may still raise: then the run says)."""
    if device_type == "cuda":
        if importlib.util.find_spec("triton") is None:
            return "torch.compile (Inductor) needs Triton on CUDA; triton is not installed"
        return None
    cxx = os.environ.get("CXX")
    if (cxx and shutil.which(cxx)) or any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        return None
    return "torch.compile (Inductor) needs a C++ compiler on the CPU; none found on PATH"


def lever_value(w: Workload, device_class: str) -> int:
    """The sweep value a lever is measured at: the workload's own base shape where it names
    one (tinylm's seq), else the middle of its default sweep."""
    config = getattr(w, "config", None)
    if config is not None and hasattr(config, w.sweep_param):
        return int(getattr(config, w.sweep_param))
    sweep = w.default_sweep(device_class)
    return int(sweep[len(sweep) // 2])


def check_workloads(specs: list[str], device_class: str) -> list[tuple[str, int]]:
    """(spec, value) per workload; InputError for a spec with step options or unknown."""
    out = []
    for spec in dict.fromkeys(specs):
        if "+" in spec:
            raise InputError(f"--workload {spec!r}: give the workload without step options; "
                             "the levers add them")
        out.append((spec, lever_value(resolve(spec, device_class), device_class)))
    return out


@dataclass(frozen=True)
class LeverJob:
    """Everything a levers run needs (the ``afford levers`` flags, resolved)."""

    workloads: list[str]
    levers: tuple[str, ...]
    mode: str
    device: str
    device_type: str
    device_class: str
    device_name: str
    device_memory: int | None
    rule: TimingRule
    precision: str
    children: int
    seed: int
    clock: str
    torch_version: str
    command: str
    arms: tuple[Arm, ...] = ()


def check_arms(arms: tuple[Arm, ...], device_class: str) -> None:
    """Every arm names a workload afford can build (InputError otherwise), before any
    child starts."""
    for a in arms:
        try:
            resolve(a.spec, device_class)
        except InputError as exc:
            raise InputError(f"--arm {a.name}={a.spec}: {exc}") from None


def measure_levers(job: LeverJob, on_event: Callable[[Event], None] = lambda e: None
                   ) -> LeversSection:
    """Run every executable variant of every workload in one set of children."""
    started = datetime.now(timezone.utc)
    shapes = check_workloads(job.workloads, job.device_class)
    check_arms(job.arms, job.device_class)
    blocked = {n: r for n in job.levers if (r := not_applicable(n, job.device_type))}
    plans = {spec: pairs(spec, job.mode, job.levers, job.arms) for spec, _ in shapes}
    items: dict[str, dict] = {}
    for spec, value in shapes:
        for p in plans[spec]:
            for s, m in ([p.a] if p.name in blocked else [p.a, p.b]):
                key = point_key(s, m, value)
                items[key] = {"key": key, "workload": s, "mode": m, "value": value}
    per_child = run_children(list(items.values()), children=job.children, device=job.device,
                             device_class=job.device_class, rule=job.rule, seed=job.seed,
                             on_event=on_event)
    runs = [_run(spec, value, plans[spec], blocked, per_child, job) for spec, value in shapes]
    if not any(v.point and v.point.median_seconds for r in runs for v in r.variants):
        errors = {k.error for r in runs for v in r.variants if v.point
                  for k in v.point.children if k.error}
        raise MeasurementError("no lever variant could be timed: " +
                               "; ".join(sorted(errors))[:1500])
    return LeversSection(device_name=job.device_name, torch_version=job.torch_version,
                         started_at=started, command=job.command, precision=job.precision,
                         children=job.children, clock=job.clock, runs=runs)


def _run(spec: str, value: int, plan: list[Pair], blocked: dict[str, str],
         per_child: list[dict[str, Event]], job: LeverJob) -> LeverRun:
    variants: dict[str, LeverVariant] = {}
    for p in plan:
        for side, (s, m) in (("a", p.a), ("b", p.b)):
            key = point_key(s, m, value)
            if key in variants:
                continue
            label = f"{m} arm {p.name}" if side == "b" and p.arm else _label(s, m, spec)
            if side == "b" and p.name in blocked:
                variants[key] = LeverVariant(key=key, spec=s, mode=m, label=label,
                                             not_executable=NotExecutable(
                                                 what=p.description,
                                                 reason=blocked[p.name]))
                continue
            events = [c[key] for c in per_child]
            variants[key] = LeverVariant(key=key, spec=s, mode=m, label=label,
                                         point=assemble_point(value, events, job.device_memory))
    base_events = [c[point_key(f"{spec}+flops", job.mode, value)] for c in per_child
                   if point_key(f"{spec}+flops", job.mode, value) in c]
    flops, source, notes = _flops(base_events)
    levers = [_lever(p, variants, value) for p in plan]
    batch_law, share = batch_ladder(spec, job.mode, value, variants)
    shape = next((v.point.shape for v in variants.values() if v.point and v.point.shape
                  and "+x" not in v.spec), {})
    return LeverRun(workload=spec, value=value, shape=shape, mode=job.mode,
                    flops_per_step=flops, flops_source=source, variants=list(variants.values()),
                    levers=levers, batch_law=batch_law, fixed_share=share, warnings=notes)


def batch_ladder(spec: str, mode: str, value: int, variants: dict[str, LeverVariant]):
    """``t = F + c * tokens`` over batch x1, x2, x4 where all three were measured, and the
    fixed share F / t at x1 (docs/DESIGN.md section 4: a large share means launch-bound)."""
    pts = [variants.get(point_key(s, mode, value)) for s in
           (f"{spec}+flops", f"{spec}+x2", f"{spec}+x4")]
    ok = [v.point for v in pts if v is not None and v.point is not None
          and v.point.median_seconds and v.point.tokens_per_step
          and not v.point.excluded_reason]
    if len(ok) < 3:
        return None, None
    law = fit_linear_floor([p.tokens_per_step for p in ok],
                           [p.median_seconds for p in ok])
    return law, law.params["F"] / ok[0].median_seconds


def _label(s: str, mode: str, spec: str) -> str:
    opts = s[len(spec):].replace("+flops", "")
    return f"{mode}{opts or ' eager'}"


def _flops(events: list[Event]) -> tuple[float | None, str | None, list[str]]:
    reports = [e.get("report") or {} for e in events]
    counts = [r["flops_per_step"] for r in reports if r.get("flops_per_step")]
    if counts:
        src = next(r["flops_source"] for r in reports if r.get("flops_per_step"))
        return float(max(counts)), src, []
    errors = sorted({r["flops_error"] for r in reports if r.get("flops_error")})
    return None, None, [f"FLOPs not counted: {'; '.join(errors) or 'the base variant failed'}"]


def _medians(p: Point) -> dict[int, float]:
    return {k.child: k.median_seconds for k in p.children if k.median_seconds is not None}


def _lever(p: Pair, variants: dict[str, LeverVariant], value: int) -> Lever:
    a = variants[point_key(*p.a, value)]
    b = variants[point_key(*p.b, value)]
    common = dict(name=p.name, arm=p.arm, description=p.description, a=a.key, b=b.key,
                  metric=p.metric)
    for v in (b, a):
        if v.not_executable:
            return Lever(**common, not_executable=v.not_executable)
        if v.point is None or v.point.median_seconds is None or v.point.excluded_reason:
            why = (v.point.excluded_reason if v.point else None) or "not measured"
            return Lever(**common, not_executable=NotExecutable(
                what=f"{p.description} ({v.label})", reason=why))
    ratios = per_child_speedups(_medians(a.point), _medians(b.point), p.metric,
                                a.point.tokens_per_step, b.point.tokens_per_step)
    med, lo, hi = summarize(ratios)
    return Lever(**common, per_child=ratios, speedup=med, speedup_min=lo, speedup_max=hi)


def levers_stage(ctx) -> dict:
    """The certify stage (``afford certify --levers``): the default workload of the device
    class, all levers, in the sweep's first dtype mode."""
    env = ctx.env
    mode = ctx.plan.workloads[0][2] if ctx.plan.workloads else "fp32"
    job = LeverJob(workloads=default_workloads(ctx.plan.device_class), levers=LEVERS,
                   mode=mode, device=ctx.plan.device, device_type=env.device_type,
                   device_class=ctx.plan.device_class, device_name=env.device_name,
                   device_memory=env.device_memory_bytes, rule=rule_for(ctx.req.precision),
                   precision=ctx.req.precision, children=ctx.req.children, seed=ctx.req.seed,
                   clock=clock_name(env.device_type), torch_version=env.torch_version,
                   command=env.command)
    return {"levers": measure_levers(job, lambda e: ctx.on_event(e)
                                     if e.get("event") == "begin" else None)}


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
