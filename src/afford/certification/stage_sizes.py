"""The training step across model sizes: the ``sizes`` certify stage.

``tinylm`` is timed at several widths and depths (head dim 64 where the width allows) at
one batch x seq per device class, by the ordinary child protocol: every size in every
child, each child in its own shuffled order, step 0 and the warm-up apart; the first child
counts each size's FLOPs and the last profiles its device side (busy time, kernels per
step), as the step-time design's shapes are (``stage_time.child_options``). The size law
(:mod:`afford.fit.time.size_law`: ``max(host, device + gap)``, each device coefficient
bounded by the probes' measured GEMM rate and bandwidth) and the family's scaling
(:mod:`afford.fit.time.size_work`) are fitted over the resident sizes.

Two ways in:

- by default on a GPU (:data:`LADDER_SIZES`), three sizes inside the sweep's own children
  (:func:`ladder_items`: no process of their own; the default tinylm's sweep point at the
  table's seq is the first of them), chosen so that two lie above the launch floor and
  width and depth each vary: the default certificate answers the ladder for a few seconds;
- ``afford certify --sizes``: five sizes in children of their own (:data:`SIZES`), and
  the smallest and the largest once more with the step marked into forward, backward and
  optimizer (the ``+phases`` step option; :mod:`afford.fit.time.phases`).
"""

from __future__ import annotations

from collections.abc import Callable

from afford.certification.stage_probes import gemm_dtype_for
from afford.certification.stage_time import child_options
from afford.certification.sweep import assemble_point, point_key
from afford.core.published_constants import load_scaling
from afford.fit.time.phases import growth, phase_child, phase_split, premise
from afford.fit.time.size_law import fit_sizes_section
from afford.fit.time.time_fit import WORK_OVER_FLOOR
from afford.measure.children import Event, run_children
from afford.measure.timing import TimingRule, rule_for
from afford.schema.point import Point
from afford.schema.probes_section import CopyProbe, GemmProbe
from afford.schema.sizes_section import PhaseSplit, SizePoint, SizesSection
from afford.workloads.tinylm import TinyLMConfig, size_spec, tinylm_params

# device class -> (batch, seq, [(d, L, H), ...]); about 1M to 200M parameters on a large
# GPU, 0.1M to 25M on a small one, tiny on a CPU. Five sizes, so that the floor + power
# form (four parameters' worth of points) still gets a leave-one-out check.
SIZES: dict[str, tuple[int, int, list[tuple[int, int, int]]]] = {
    "cpu": (2, 64, [(32, 1, 2), (48, 2, 2), (64, 2, 2), (96, 3, 2), (128, 4, 2)]),
    "small-gpu": (8, 256, [(64, 2, 1), (128, 4, 2), (256, 4, 4), (384, 6, 6), (512, 8, 8)]),
    "large-gpu": (8, 1024, [(128, 4, 2), (256, 6, 4), (512, 8, 8), (768, 12, 12),
                            (1024, 16, 16)]),
}
# device class -> (batch, seq, [(d, L, H), ...]): the ladder's sizes inside the default
# certify's sweep. The first is the default tinylm at the table's seq (a sweep point
# already); the other two should lie above the launch floor on an H200 (10 ms there; by the
# 2026-12-02 sizes certificate, d768 L12 and d1024 L16 stepped 27 and 33 ms, so d1024 L12
# about 30 and d2048 L8, 2x the FLOPs of d1024 L16, about 60: the stage checks against the
# floor its sweep measured) and vary depth (L8 -> L12) and width (d1024 -> d2048), the
# largest 2.7x the next in parameters, so the held-out check is an extrapolation.
LADDER_SIZES: dict[str, tuple[int, int, list[tuple[int, int, int]]]] = {
    "small-gpu": (8, 256, [(256, 4, 4), (512, 6, 8), (1024, 4, 16)]),
    "large-gpu": (8, 1024, [(512, 8, 8), (1024, 12, 16), (2048, 8, 32)]),
}
PHASE_NOTE = ("forward, backward and optimizer marked on the child's clock inside each warm "
              "step (end of zero_grad, of the forward, of the backward, of optimizer.step: "
              "four extra marks per step); timed steps only, medians of child medians")


def size_configs(device_class: str, table: dict | None = None) -> list[TinyLMConfig]:
    batch, seq, dims = (table or SIZES)[device_class]
    return [TinyLMConfig(d=d, L=L, H=H, seq=seq, batch=batch, sweep=(seq,))
            for d, L, H in dims]


def _in_sweep(workloads: list, c: TinyLMConfig, mode: str) -> str | None:
    """The key of the sweep point that times tinylm at ``c`` (the default tinylm at its
    seq), or None."""
    for spec, w, m, values in workloads:
        wc = getattr(w, "config", None)
        if (m == mode and isinstance(wc, TinyLMConfig) and wc.sweep_param == "seq"
                and c.seq in values and (wc.d, wc.L, wc.H, wc.batch) == (c.d, c.L, c.H,
                                                                          c.batch)):
            return point_key(spec, mode, c.seq)
    return None


def ladder_items(workloads: list, device_class: str) -> list[dict]:
    """The sweep's extra items for the ladder's sizes (:data:`LADDER_SIZES`) in the first
    mode: empty on a device class without them (a CPU's first look stays within its
    budget), or when no tinylm is certified (a user's own model is timed alone)."""
    if device_class not in LADDER_SIZES or not workloads or not any(
            isinstance(getattr(w, "config", None), TinyLMConfig) for _, w, _, _ in workloads):
        return []
    mode = workloads[0][2]
    out = []
    for c in size_configs(device_class, LADDER_SIZES):
        if _in_sweep(workloads, c, mode) is None:
            spec = size_spec(c)
            out.append({"key": point_key(spec, mode, c.seq), "workload": spec, "mode": mode,
                        "value": c.seq, "synced": False})  # the law reads no synced steps
    return out


def sizes_stage(ctx) -> dict:
    """The certify stage: ``{"sizes": SizesSection}`` in the sweep's first dtype mode: the
    ladder's sizes from the sweep's records (the default on a GPU), or five sizes measured
    here (``--sizes``)."""
    mode = ctx.plan.workloads[0][2] if ctx.plan.workloads else "fp32"
    ceil = _ceilings(ctx, mode)
    if not ctx.req.sizes:
        return {"sizes": sizes_from_sweep(ctx, mode, ceil)}
    section = measure_sizes(size_configs(ctx.plan.device_class), mode=mode,
                            device=ctx.plan.device, device_class=ctx.plan.device_class,
                            rule=rule_for(ctx.req.precision), children=ctx.req.children,
                            seed=ctx.req.seed, device_memory=ctx.env.device_memory_bytes,
                            on_event=_progress_only(ctx.on_event), ceilings=ceil)
    return {"sizes": section}


def _ceilings(ctx, mode: str) -> tuple[float | None, float | None, float]:
    """(GEMM rate of the mode's dtype, copy bandwidth, state bytes per parameter): the
    probes' measured ceilings where the probes stage ran before this one, and the memory
    law's counted bytes per parameter (else ZeRO's 16, Rajbhandari et al. 2020)."""
    sections = getattr(ctx, "sections", None) or {}
    probes, memory = sections.get("probes"), sections.get("memory")
    g = probes.gemm.get(gemm_dtype_for(mode, ctx.env)) if probes is not None else None
    c = probes.device_copy if probes is not None else None
    law = next((x for x in memory.laws if x.workload == "tinylm" and x.mode == mode), None) \
        if memory is not None else None
    bpp = law.bytes_per_param if law is not None and law.bytes_per_param else \
        load_scaling().state_bytes_per_param
    return (g.flops_per_second if isinstance(g, GemmProbe) else None,
            c.bytes_per_second if isinstance(c, CopyProbe) else None, bpp)


def sizes_from_sweep(ctx, mode: str, ceil: tuple[float | None, float | None, float]
                     ) -> SizesSection:
    """The ladder's sizes as the sweep's children measured them (:func:`ladder_items`)."""
    configs = size_configs(ctx.plan.device_class, LADDER_SIZES)
    per_child = ctx.per_child
    sizes = []
    for c in configs:
        key = _in_sweep(ctx.plan.workloads, c, mode) or point_key(size_spec(c), mode, c.seq)
        events = [kid[key] for kid in per_child if key in kid]
        if events:
            p = assemble_point(c.seq, events, ctx.env.device_memory_bytes)
            sizes.append(SizePoint(spec=size_spec(c), d=c.d, L=c.L, H=c.H,
                                   params=_params(p, c), point=p))
    return _section(sizes, mode, configs[0].batch, configs[0].seq, ceil,
                    warnings=_above_floor(ctx.results, sizes))


def _above_floor(results: list, sizes: list[SizePoint]) -> list[str]:
    """Whether two sizes lie in the work regime (a step at least ``WORK_OVER_FLOOR`` x the
    launch floor the sweep measured, the smallest warm step of any workload): the table was
    chosen so on an H200; another card says so here."""
    floors = [r.time.floor_seconds for r in results if r.time and r.time.floor_seconds]
    if not floors:
        return []
    floor = min(floors)
    above = [z.spec for z in sizes if z.point.usable
             and z.point.median_seconds >= WORK_OVER_FLOOR * floor]
    if len(above) >= 2:
        return []
    return [f"{len(above)} of the ladder's {len(sizes)} sizes lie at {WORK_OVER_FLOOR:g}x or "
            f"more of the sweep's launch floor ({floor * 1e3:.3g} ms): the law's device side "
            "rests on the profiled busy times under it"]


def _section(sizes: list[SizePoint], mode: str, batch: int, seq: int,
             ceil: tuple[float | None, float | None, float], **more) -> SizesSection:
    rate, bandwidth, bpp = ceil
    law, scaling, notes = fit_sizes_section("tinylm", sizes, batch=batch, seq=seq,
                                            gemm_rate=rate, bandwidth=bandwidth,
                                            bytes_per_param=bpp)
    return SizesSection(mode=mode, batch=batch, seq=seq, tokens_per_step=batch * seq,
                        sizes=sizes, size_law=law, scaling=scaling,
                        warnings=notes + more.pop("warnings", []), **more)


def _progress_only(on_event: Callable[[Event], None]) -> Callable[[Event], None]:
    """Pass 'begin' events (what is being measured) but not 'point' ones, whose count the
    sweep's progress bar was sized for."""
    return lambda e: on_event(e) if e.get("event") == "begin" else None


def measure_sizes(configs: list[TinyLMConfig], *, mode: str, device: str, device_class: str,
                  rule: TimingRule, children: int, seed: int, device_memory: int | None,
                  on_event: Callable[[Event], None] = lambda e: None,
                  ceilings: tuple[float | None, float | None, float] = (None, None, 16.0)
                  ) -> SizesSection:
    """Time every size (and the phase split at the smallest and largest) and fit the law
    within ``ceilings`` (GEMM rate, bandwidth, state bytes per parameter)."""
    if len({(c.batch, c.seq) for c in configs}) != 1:
        raise ValueError("every size must share one batch x seq")
    batch, seq = configs[0].batch, configs[0].seq
    specs = [size_spec(c) for c in configs]
    split = [specs[0] + "+phases", specs[-1] + "+phases"] if len(specs) > 1 else []
    items = [{"key": point_key(s, mode, seq), "workload": s, "mode": mode, "value": seq}
             for s in specs + split]
    cuda = device.startswith("cuda")
    per_child = run_children(items, children=children, device=device,
                             device_class=device_class, rule=rule, seed=seed,
                             on_event=on_event,
                             options_for=lambda c: child_options(c, 0, children, cuda))

    def events(spec: str) -> list[Event]:
        return [c[point_key(spec, mode, seq)] for c in per_child]

    sizes = [SizePoint(spec=s, d=c.d, L=c.L, H=c.H,
                       params=_params(p, c), point=p)
             for s, c in zip(specs, configs)
             for p in [assemble_point(seq, events(s), device_memory)]]
    splits = [_split(s, events(s)) for s in split]
    rows = growth(splits[0], splits[1]) if len(splits) == 2 else []
    verdict, finding = premise(rows, splits[0].params if splits else None,
                               splits[-1].params if splits else None)
    notes = [f"phase split of {p.spec}: {p.error}" for p in splits if p.error]
    return _section(sizes, mode, batch, seq, ceilings, phases=splits, growth=rows,
                    premise=verdict, finding=finding, phase_note=PHASE_NOTE, warnings=notes)


def _params(p: Point, c: TinyLMConfig) -> int:
    return p.params if p.params is not None else tinylm_params(c.d, c.L, c.seq)


def _split(spec: str, events: list[Event]) -> PhaseSplit:
    kids, meds, errors = [], [], []
    params = next((e.get("params") for e in events if e.get("params")), None)
    for e in events:
        rec = e["record"]
        phases = (e.get("report") or {}).get("phases")
        if rec.get("median_seconds") is None or not phases:
            errors.append(rec.get("error") or rec.get("refused") or "no phase timings")
            continue
        kids.append(phase_child(rec["child"], phases, rec["timed_step_indices"]))
        meds.append(rec["median_seconds"])
    error = "; ".join(sorted(set(errors)))[:1000] or None
    return phase_split(spec, params, kids, meds, error)
