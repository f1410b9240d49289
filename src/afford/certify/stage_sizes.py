"""Throughput across model sizes: the ``sizes`` certify stage (``afford certify --sizes``).

``tinylm`` is timed at several widths and depths (head dim 64 where the width allows) at
one batch x seq per device class, by the ordinary child protocol: every size in every
child, each child in its own shuffled order, step 0 and the warm-up apart. The law is step
seconds against the parameter count, fitted over resident sizes with both forms of
:func:`afford.fit.time.throughput.fit_throughput` (R^2, leave-one-out). The smallest and the
largest size are timed once more with the step marked into forward, backward and optimizer
(the ``+phases`` step option) to test the premise the ladder's extrapolation rests on
(:mod:`afford.fit.time.phases`).
"""

from __future__ import annotations

from collections.abc import Callable

from afford.certify.sweep import assemble_point, point_key
from afford.fit.time.phases import growth, phase_child, phase_split, premise
from afford.fit.time.throughput import fit_throughput
from afford.measure.children import Event, run_children
from afford.measure.timing import TimingRule, rule_for
from afford.schema.laws import Excluded
from afford.schema.point import Point
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
PHASE_NOTE = ("forward, backward and optimizer marked on the child's clock inside each warm "
              "step (end of zero_grad, of the forward, of the backward, of optimizer.step: "
              "four extra marks per step); timed steps only, medians of child medians")


def size_configs(device_class: str) -> list[TinyLMConfig]:
    batch, seq, dims = SIZES[device_class]
    return [TinyLMConfig(d=d, L=L, H=H, seq=seq, batch=batch, sweep=(seq,))
            for d, L, H in dims]


def sizes_stage(ctx) -> dict:
    """The certify stage: ``{"sizes": SizesSection}`` in the sweep's first dtype mode."""
    mode = ctx.plan.workloads[0][2] if ctx.plan.workloads else "fp32"
    section = measure_sizes(size_configs(ctx.plan.device_class), mode=mode,
                            device=ctx.plan.device, device_class=ctx.plan.device_class,
                            rule=rule_for(ctx.req.precision), children=ctx.req.children,
                            seed=ctx.req.seed, device_memory=ctx.env.device_memory_bytes,
                            on_event=_progress_only(ctx.on_event))
    return {"sizes": section}


def _progress_only(on_event: Callable[[Event], None]) -> Callable[[Event], None]:
    """Pass 'begin' events (what is being measured) but not 'point' ones, whose count the
    sweep's progress bar was sized for."""
    return lambda e: on_event(e) if e.get("event") == "begin" else None


def measure_sizes(configs: list[TinyLMConfig], *, mode: str, device: str, device_class: str,
                  rule: TimingRule, children: int, seed: int, device_memory: int | None,
                  on_event: Callable[[Event], None] = lambda e: None) -> SizesSection:
    """Time every size (and the phase split at the smallest and largest) and fit the law."""
    if len({(c.batch, c.seq) for c in configs}) != 1:
        raise ValueError("every size must share one batch x seq")
    batch, seq = configs[0].batch, configs[0].seq
    specs = [size_spec(c) for c in configs]
    split = [specs[0] + "+phases", specs[-1] + "+phases"] if len(specs) > 1 else []
    items = [{"key": point_key(s, mode, seq), "workload": s, "mode": mode, "value": seq}
             for s in specs + split]
    per_child = run_children(items, children=children, device=device,
                             device_class=device_class, rule=rule, seed=seed,
                             on_event=on_event)

    def events(spec: str) -> list[Event]:
        return [c[point_key(spec, mode, seq)] for c in per_child]

    sizes = [SizePoint(spec=s, d=c.d, L=c.L, H=c.H,
                       params=_params(p, c), point=p)
             for s, c in zip(specs, configs)
             for p in [assemble_point(seq, events(s), device_memory)]]
    law, notes = fit_sizes(sizes)
    splits = [_split(s, events(s)) for s in split]
    rows = growth(splits[0], splits[1]) if len(splits) == 2 else []
    verdict, finding = premise(rows, splits[0].params if splits else None,
                               splits[-1].params if splits else None)
    notes += [f"phase split of {p.spec}: {p.error}" for p in splits if p.error]
    return SizesSection(mode=mode, batch=batch, seq=seq, tokens_per_step=batch * seq,
                        sizes=sizes, law=law, phases=splits, growth=rows, premise=verdict,
                        finding=finding, phase_note=PHASE_NOTE, warnings=notes)


def _params(p: Point, c: TinyLMConfig) -> int:
    return p.params if p.params is not None else tinylm_params(c.d, c.L, c.seq)


def fit_sizes(sizes: list[SizePoint]):
    """The law over resident sizes (step seconds vs params); exclusions kept with reasons."""
    used = [s for s in sizes if s.point.usable and s.params]
    excluded = [Excluded(value=float(s.params or 0), reason=s.point.excluded_reason
                         or "not measured") for s in sizes if s not in used]
    if len(used) < 2:
        return None, [f"only {len(used)} resident size(s): no size law fitted"]
    law = fit_throughput("params", [float(s.params) for s in used],  # type: ignore[arg-type]
                         [s.point.median_seconds for s in used], excluded)  # type: ignore[misc]
    return law, list(law.warnings)


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
