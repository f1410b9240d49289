"""One device certificate as report sections: environment, protocol, laws, points, memory,
residency, probes, determinism, gates, and any other section a later stage wrote.

Figures come from the certificate's own fields (tagged here, with the run they were read
off), from :mod:`afford.figures.cert_lookup` (a measured point's peaks) and, for sections
this module does not know, from :func:`afford.report.generic.generic_section`.
"""

from __future__ import annotations

import math

from afford.core.provenance import fitted, measured, module, run_label
from afford.figures import cert_lookup
from afford.figures.memory_figures import heldout_accuracy
from afford.report.gates_tables import (
    determinism_report_table,
    gate_rows_report_table,
    gates_report_table,
    noise_report_table,
)
from afford.report.generic import generic_section
from afford.report.host_load_tables import host_load_notes, host_load_table
from afford.report.model import Cell, Section, Table
from afford.report.probes_tables import probes_section
from afford.report.stage_sections import SECTIONS
from afford.report.time_model import time_section
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.point import Point

# Fields of the foundation's certificate; any other field is a later stage's section.
FOUNDATION_FIELDS = {"schema_id", "environment", "protocol", "workloads", "warnings",
                     "status", "failures",
                     "time_verdict"}  # the time verdict is shown in the step-time section
# Sections the report places by name (in this order); others follow under their own name.
NAMED_SECTIONS = ("memory", "probes", "determinism", "gates")


def _flag(v: bool | None) -> str:
    return "unknown" if v is None else ("on" if v else "off")


def environment(cert: Certificate) -> Table:
    e, run = cert.environment, run_label(cert)
    rows: list[tuple[str, Cell]] = [
        ("device", f"{e.device_name} ({e.device_type}, {e.device_class})"),
        ("device memory", measured(e.device_memory_bytes, "B",
                                   f"total memory of the device, {run}")
         if e.device_memory_bytes is not None else "unknown"),
        ("compute capability", e.compute_capability or "-"),
        ("multiprocessors", measured(e.multiprocessors, "", f"device properties, {run}")
         if e.multiprocessors is not None else "-"),
        ("driver", e.driver_version or "-"),
        ("CPU", e.cpu_model or "-"),
        ("OS", e.os), ("Python", e.python_version), ("torch", e.torch_version),
        ("CUDA / cuDNN", f"{e.cuda_version or '-'} / {e.cudnn_version or '-'}"),
        ("torch threads", measured(e.torch_num_threads, "", f"torch.get_num_threads, {run}")),
        ("TF32 matmul / cuDNN", f"{_flag(e.tf32_matmul)} / {_flag(e.tf32_cudnn)}"),
        ("float32 matmul precision", e.float32_matmul_precision),
        ("CUBLAS_WORKSPACE_CONFIG", e.cublas_workspace_config or "unset"),
        ("PYTORCH_CUDA_ALLOC_CONF", e.pytorch_cuda_alloc_conf or "unset"),
        ("git HEAD", (e.git_head or "-") + (" (dirty)" if e.git_dirty else "")),
        ("afford", e.afford_version), ("command", e.command),
        ("started", f"{e.started_at:%Y-%m-%d %H:%M:%S} UTC"),
        ("elapsed", measured(e.elapsed_seconds, "s", f"wall clock of certify, {run}")
         if e.elapsed_seconds is not None else "-"),
    ]
    return Table(columns=("field", "value"), rows=tuple(rows))


def protocol(cert: Certificate) -> Table:
    p = cert.protocol
    src = f"the {p.precision} timing rule (afford.measure.timing.rule_for)"
    rows: list[tuple[str, Cell]] = [
        ("precision", p.precision),
        ("independent children", module(p.children, "", "certify --children")),
        ("warm-up steps (at least)", module(p.warmup_steps, "steps", src)),
        ("warm-up time (at least)", module(p.warmup_seconds, "s", src)),
        ("timed warm steps (at least)", module(p.min_timed_steps, "steps", src)),
        ("timed work floor", module(p.floor_seconds, "s", src)),
        ("timed work cap", module(p.max_floor_seconds, "s", src)),
        ("target precision of a median", module(p.target_rel_precision, "ratio", src)),
        ("clock", p.clock), ("order", p.order), ("point value", p.point_value),
    ]
    if p.agreement:  # the children after the second skipped what the first two settled
        rows.append(("agreement", p.agreement))
    return Table(columns=("setting", "value"), rows=tuple(rows))


def _law_row(r: WorkloadResult, form: str) -> tuple[Cell, ...] | None:
    law = r.law
    f = law.power if form == "power" else law.floor_power
    if f is None:
        return None
    src = f"{r.name} {r.mode}: fit_throughput ({form}) over {len(law.x)} resident points"
    chosen = "chosen" if law.chosen == form else "kept"
    b = fitted(f.params["b"], "", src)
    per = f"s/{law.x_name}^{f.params['b']:.4g}"  # a coefficient: seconds per x^b
    if form == "power":
        scale = fitted(math.exp(f.params["a"]), per, f"exp(a), {src}")
        floor: Cell = "-"
        formula = f"t = exp(a) {law.x_name}^b"
    else:
        scale = fitted(f.params["c"], per, src)
        floor = fitted(f.params["F"], "s", src)
        formula = f"t = F + c {law.x_name}^b"
    loo = module(f.loo_max, "ratio", "max |leave-one-out relative error|") \
        if f.loo_max is not None else "-"
    rng = measured(f"{law.x_name} {law.x_min:g}..{law.x_max:g}", "",
                   f"resident points of {r.name} {r.mode}")
    return (f"{r.name} ({r.mode})", formula, chosen, scale, b, floor,
            module(f.r2, "", "R^2 in log space, fit_throughput"), loo, rng)


def laws(cert: Certificate) -> Table:
    rows = []
    for r in cert.workloads:
        if r.law is None:
            rows.append((f"{r.name} ({r.mode})", r.refused or "no law: fewer than 2 resident "
                         "points", "-", "-", "-", "-", "-", "-", "-"))
            continue
        rows.extend(row for row in (_law_row(r, "power"), _law_row(r, "floor_power")) if row)
    return Table(columns=("workload", "law", "", "exp(a) or c", "b", "F", "R^2",
                          "LOO max", "fitted over"), rows=tuple(rows),
                 caption="both forms are kept; the one with the smaller leave-one-out error "
                 "predicts")


def _residual(r: WorkloadResult, p: Point) -> Cell:
    if r.law is None or float(p.value) not in r.law.x:
        return "-"
    res = r.law.best.residuals[r.law.x.index(float(p.value))]
    return module(res, "ratio", f"{r.law.chosen} law / measured - 1")


def _resident_text(p: Point) -> str:
    if p.excluded_reason:
        return f"excluded: {p.excluded_reason}"
    return {True: "yes", False: "no", None: "unknown"}[p.resident]


def points(cert: Certificate, r: WorkloadResult) -> Table:
    run, rows = run_label(cert), []
    for p in r.points:
        where = f"{r.name} {r.mode} {r.sweep_param}={p.value}, {run}"
        alloc, reserved = cert_lookup.peak_bytes(cert, r.name, p.value, r.mode)

        def m(v, unit, what, where=where):
            return measured(v, unit, f"{what}, {where}") if v is not None else "-"

        rows.append((
            f"{p.value}", m(p.median_seconds, "s", "median of child medians"),
            module(p.child_spread, "ratio", "(max - min) / median of child medians")
            if p.child_spread is not None else "-",
            module(p.worst_precision, "ratio", "worst 95% CI half-width / median")
            if p.worst_precision is not None else "-",
            m(p.step0_seconds, "s", "median over children of step 0"),
            module(p.step0_over_warm, "x", "step 0 / warm median")
            if p.step0_over_warm is not None else "-",
            _residual(r, p), alloc or "-", reserved or "-", _resident_text(p)))
    return Table(columns=(r.sweep_param, "warm step", "child spread", "precision", "step 0",
                          "step0/warm", "residual", "peak allocated (CPU: RSS)", "peak reserved",
                          "resident"), rows=tuple(rows),
                 caption=f"{r.name} ({r.mode}): {r.description or r.source}")


def residency(cert: Certificate) -> Table | None:
    card = cert.environment.device_memory_bytes
    if not card:
        return None
    rows = []
    for r in cert.workloads:
        for p in r.points:
            alloc, reserved = cert_lookup.peak_bytes(cert, r.name, p.value, r.mode)
            held = reserved or alloc
            if held is None:
                if p.excluded_reason:
                    rows.append((f"{r.name} ({r.mode})", f"{r.sweep_param}={p.value}", "-",
                                 "-", f"NO: {p.excluded_reason}"))
                continue
            share = module(held.value / card, "ratio", "peak held / device memory")
            rows.append((f"{r.name} ({r.mode})", f"{r.sweep_param}={p.value}", held, share,
                         "yes" if held.value <= card else "NO"))
    cap = "reserved (allocated where reserved is not recorded) against the card"
    return Table(columns=("workload", "point", "peak held", "of the card", "fits"),
                 rows=tuple(rows), caption=cap)


FORMULAS = {"four_x_model_size": '"4x model size"',
            "korthikanti_zero": "Korthikanti fused + 16 B/param"}


def memory_laws(cert: Certificate) -> Table:
    """Per workload and mode: the fitted laws and how far off they were where held out."""
    run = run_label(cert)
    mem = cert.memory
    reserved = _has_reserved(cert)
    rows = []
    for law in mem.laws:
        alloc, res = heldout_accuracy(law, run)
        targets = mem.targets
        met = [alloc is not None and alloc.value <= targets.get("allocated",
                                                               targets.get("rss_increment", 1)),
               res is None or res.value <= targets.get("reserved", 1)]
        rows.append((law.workload, law.mode, law.allocated.describe(),
                     *((law.reserved.describe() if law.reserved else "-",) if reserved else ()),
                     alloc or "-", *((res or "-",) if reserved else ()),
                     "yes" if all(met) else "NO"))
    quantity = "RSS increment" if any(law.device_type == "cpu" for law in mem.laws) \
        else "allocated"
    return Table(columns=("workload", "mode", f"law of peak {quantity}",
                          *(("law of peak reserved",) if reserved else ()),
                          f"held-out max |error|, {quantity}",
                          *(("held-out max |error|, reserved",) if reserved else ()),
                          "targets met"), rows=tuple(rows),
                 caption=f"targets: {', '.join(f'{k} {v:.0%}' for k, v in mem.targets.items())}"
                         f"; stage {mem.wall_seconds:.1f} s")


def _has_reserved(cert: Certificate) -> bool:
    return any(law.reserved is not None for law in cert.memory.laws)


def memory_heldout(cert: Certificate) -> Table:
    """Every held-out shape: measured, afford's prediction and the default formulas."""
    run = run_label(cert)
    reserved = _has_reserved(cert)
    rows = []
    for law in cert.memory.laws:
        for h in law.heldout:
            shape = f"B {h.dims.get('B')} x s {h.dims.get('s')}" + \
                (" (beyond the sweep)" if h.extrapolated else "")
            where = f"{law.workload} {law.mode} {shape}, {run}"

            def pair(meas, pred, err, what, where=where, h=h):
                if meas is None or pred is None:
                    return "-", "-", "-"
                return (measured(meas, "B", f"peak {what}, {where}"),
                        fitted(pred, "B", f"memory law, peak {what}, {where}",
                               extrapolated=h.extrapolated),
                        module(err, "ratio", f"predicted / measured - 1, {what}, {where}"))

            formulas = tuple(module(h.formulas[k], "B", f"{label} at {where}")
                             if k in h.formulas else "-" for k, label in FORMULAS.items())
            what = "RSS increment" if law.device_type == "cpu" else "allocated"
            rows.append((law.workload, law.mode, h.role.removeprefix("heldout-"), shape,
                         *pair(h.measured_bytes, h.predicted_bytes, h.error, what),
                         *(pair(h.measured_reserved_bytes, h.predicted_reserved_bytes,
                                h.reserved_error, "reserved") if reserved else ()),
                         *formulas))
    return Table(columns=("workload", "mode", "held out", "shape", "measured", "afford",
                          "error", *(("measured reserved", "afford reserved", "error reserved")
                                     if reserved else ()),
                          *FORMULAS.values()), rows=tuple(rows),
                 caption="never fitted: one shape inside the sweep and two at twice its "
                         "largest seq and batch")


def memory_section(cert: Certificate, plots: tuple[str, ...]) -> Section:
    mem = cert.memory
    notes = tuple(mem.warnings) + tuple(f"{n.what}: {n.reason}" for n in mem.not_executable)
    tables = (memory_laws(cert), memory_heldout(cert)) if mem.laws else ()
    tables += tuple(t for t in (memory_replay(cert), memory_breakdown(cert)) if t is not None)
    return Section(title="Memory", notes=notes, tables=tables, plots=plots)


# ---- the allocator replay ------------------------------------------------------------


def memory_replay(cert: Certificate) -> Table | None:
    """Per workload and mode: the replay's validation at the traced shapes, its held-out
    errors beside the law's, and which predicts reserved better."""
    run = run_label(cert)
    rows = []
    for law in cert.memory.laws:
        rp = law.replay
        checks = [(c, "recorded") for c in rp.validation] + \
            [(c, "synthesised") for c in rp.synthesised] + \
            [(c, "held out") for c in rp.heldout] if rp else []
        for c, kind in checks:
            where = f"{law.workload} {law.mode} B {c.B} x s {c.s}, {run}"
            held = kind == "held out"
            what = "recorded history replayed" if kind == "recorded" else \
                "synthesised history replayed"
            role = c.role + (" (learned sizes)" if kind == "synthesised" else "")
            rows.append((law.workload, law.mode, role, f"{c.B} x {c.s}",
                         module(round(c.tokens_over_traced, 3), "x", "B*s / largest traced"),
                         measured(c.measured_reserved_bytes, "B", f"peak reserved, {where}"),
                         fitted(c.replay_reserved_bytes, "B", f"{what}, {where}"),
                         module(c.reserved_error, "ratio", f"replay / measured - 1, {where}"),
                         module(c.allocated_error, "ratio", f"replay / measured - 1, "
                                f"allocated, {where}"),
                         module(c.law_reserved_error, "ratio", f"law / measured - 1, {where}")
                         if c.law_reserved_error is not None else "-",
                         fitted(c.expandable_reserved_bytes, "B", f"replayed with "
                                f"expandable_segments:True, {where}")
                         if c.expandable_reserved_bytes is not None else "-",
                         ("better: " + law.replay.better if held and law.replay.better else
                          ("trusted" if law.replay.trusted else "NOT trusted"))))
    if not rows:
        return None
    return Table(columns=("workload", "mode", "shape role", "B x s", "tokens / traced",
                          "measured reserved", "replay reserved", "error reserved",
                          "error allocated", "law error reserved",
                          "replay reserved, expandable", "verdict"), rows=tuple(rows),
                 caption="allocator replay: traced shapes validate the replay of their own "
                         "history, and the learned sizes write that history back (learned "
                         "sizes); held-out shapes are predicted from a history synthesised "
                         "from the traced ones (never measured by it)")


def memory_breakdown(cert: Certificate) -> Table | None:
    """Where the memory goes at each law's base shape (its recorded peak)."""
    from afford.schema.memory_section import BREAKDOWN_CLASSES

    run = run_label(cert)
    rows = []
    for law in cert.memory.laws:
        b = law.replay.breakdown if law.replay else None
        if b is None:
            continue
        src = f"{law.workload} {law.mode} B {b.B} x s {b.s}: classes by lifetime at the " \
              f"allocated peak of the recorded history, {run}"
        rows.append((law.workload, law.mode, f"{b.B} x {b.s}",
                     *(module(v, "B", src) for v in b.classes().values()),
                     measured(b.reserved_bytes, "B", f"reserved at that moment, {src}")))
    if not rows:
        return None
    return Table(columns=("workload", "mode", "B x s", *BREAKDOWN_CLASSES, "reserved"),
                 rows=tuple(rows), caption="where the memory goes at the peak (bytes as the "
                 "allocator counts them: whole blocks); slack = reserved - allocated")


def gates_section(cert: Certificate) -> Section:
    """The gate table (COSTS 1.4 and 1.5), every row of every gate, the noise floor."""
    g = cert.gates
    tables = [gates_report_table(g), gate_rows_report_table(g)]
    tables += [t for t in (noise_report_table(g),) if t is not None]
    notes = tuple(f"{x.name}: {n}" for x in g.gates for n in x.notes)
    notes += tuple(f"{x.name}: tolerance {x.tolerance_source}" for x in g.gates)
    if g.readings.parity_not_executable is not None:
        n = g.readings.parity_not_executable
        notes += (f"NOT EXECUTABLE: {n.what}: {n.reason}",)
    return Section("Gates", notes=(f"Gates run on {g.device_name} ({g.device}), torch "
                                   f"{g.torch_version}, deterministic algorithms "
                                   f"{'on' if g.deterministic_algorithms else 'off'}: "
                                   f"verdict {g.verdict}.",) + notes, tables=tuple(tables))


def determinism_section(cert: Certificate) -> Section:
    d = cert.determinism
    return Section("Determinism", notes=tuple(d.warnings),
                   tables=(determinism_report_table(d),))


def host_load_section(cert: Certificate) -> Section:
    table = host_load_table(cert)
    return Section("Host load", notes=host_load_notes(cert),
                   tables=(table,) if table is not None else ())


DESIGNED = {"probes": probes_section, "gates": gates_section,
            "determinism": determinism_section}


def _named(cert: Certificate, key: str, plots: tuple[str, ...]) -> Section:
    title = key.capitalize()
    if getattr(cert, key, None) is None:
        note = (f"Not run: this certificate has no {key} section (the stage that writes "
                "it did not run, or this afford predates it).")
        if key == "memory":
            note = ("No memory law: this certificate has no memory section (the stage that "
                    "writes it did not run, or this afford predates it). The measured peaks "
                    "of every point are in the sweep tables and plotted here.")
        return Section(title=title, notes=(note,), plots=plots)
    if key == "memory":
        return memory_section(cert, plots)
    s = DESIGNED[key](cert)
    return Section(s.title, s.notes, s.tables, plots)


def stage_sections(cert: Certificate, plot_ids: dict[str, list[str]]) -> list[Section]:
    """Memory, probes, determinism, gates, then any other section, each when present."""
    out = [_named(cert, key, tuple(plot_ids.get(key, ()))) for key in NAMED_SECTIONS]
    extra = [k for k in type(cert).model_fields
             if k not in FOUNDATION_FIELDS and k not in NAMED_SECTIONS]
    for key in extra:
        if key == "host_load" and cert.host_load:
            out.append(host_load_section(cert))
        elif key in SECTIONS and getattr(cert, key, None) is not None:
            out.append(SECTIONS[key](cert))
        elif getattr(cert, key, None) is not None:
            out.append(generic_section(key.replace("_", " ").capitalize(), getattr(cert, key)))
    return out


def certificate_section(cert: Certificate, label: str, plot_ids: dict[str, list[str]]
                        ) -> Section:
    """The whole certificate; ``plot_ids`` maps a subsection title to its plots."""
    e = cert.environment
    subs = [Section("Environment", tables=(environment(cert),)),
            Section("Protocol", tables=(protocol(cert),)),
            Section("Throughput laws", tables=(laws(cert),),
                    plots=tuple(plot_ids.get("laws", ()))),
            time_section(cert),
            Section("Sweep points", tables=tuple(points(cert, r) for r in cert.workloads),
                    notes=("Every point is the median over independent child processes of "
                           "each child's median of timed warm steps; step 0 is apart.",))]
    subs.extend(stage_sections(cert, plot_ids)[:1])
    res = residency(cert)
    subs.append(Section("Residency", tables=(res,) if res else (),
                        notes=() if res else ("The device memory is unknown: residency "
                                              "against the card cannot be shown.",),
                        plots=tuple(plot_ids.get("residency", ()))))
    subs.extend(stage_sections(cert, plot_ids)[1:])
    if cert.warnings:
        subs.append(Section("Warnings", notes=tuple(cert.warnings)))
    partial = (("PARTIAL certificate: the measurement failed in part (certify exited 3); "
                "what is missing: " + "; ".join(cert.failures),)
               if cert.status == "partial" else ())
    return Section(title=f"Device: {e.device_name}", subsections=tuple(subs),
                   notes=(f"Certificate {label} ({cert.schema_id}), {e.device_type}, "
                          f"measured {e.started_at:%Y-%m-%d %H:%M} UTC.",) + partial)
