"""Gather: certificates, plans, a manifest and a ledger -> one :class:`Report`.

The order is a lab notebook's: data hashes first, then each device certificate (or an *empty
slot* for a device that has none yet: its fields left empty and the exact command to run there,
never another device's numbers), the cost model (plans) and the ladder, then the history of
readings.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from afford.core.provenance import measured
from afford.planning.planner import on_unpinned
from afford.planning.result import PlanResult, Verdict
from afford.report import certificate as cs
from afford.report import plan_tables as render_plan
from afford.report import plotdata
from afford.report.generic import find_key, generic_section
from afford.report.model import Plot, Report, Section, Table
from afford.report.terminal import LEGEND
from afford.schema import manifest as mf
from afford.schema.cert import Certificate
from afford.schema.ledger import Reading

FULL_LEGEND = LEGEND + "; ? provisional (derived from a data source whose hash is not pinned)"


@dataclass(frozen=True)
class Inputs:
    """What to report on; each item with the label (path) it was read from."""

    certs: tuple[tuple[str, Certificate], ...] = ()
    plans: tuple[tuple[str, Any], ...] = ()
    manifest: tuple[str, mf.Manifest] | None = None
    history: tuple[str, tuple[Reading, ...]] | None = None
    expect: tuple[str, ...] = ()


def data_section(manifest: tuple[str, mf.Manifest] | None) -> Section:
    if manifest is None:
        return Section("Data", notes=(
            "No data manifest was given (--manifest): every count derived from a data "
            "source is provisional. Pin the sources with `afford pin PATH...`.",))
    label, m = manifest
    rows = tuple((s.name, s.kind, s.status if s.status == mf.PINNED else
                  f"UNPINNED: {s.reason}", s.sha256 or "",
                  measured(s.size_bytes, "B", f"size of {s.path}")
                  if s.size_bytes is not None else "-",
                  f"{s.pinned_at:%Y-%m-%d %H:%M} UTC") for s in m.sources)
    return Section("Data", notes=(f"Manifest {label} ({m.schema_id}).",), tables=(
        Table(columns=("source", "kind", "status", "sha256", "size", "pinned"), rows=rows),))


def matches(device_name: str, expected: str) -> bool:
    a, b = device_name.lower(), expected.lower()
    return a in b or b in a


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``X``, ``X | None``, ``list[X]``; None for a leaf."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def schema_tables(model: type[BaseModel] = Certificate) -> tuple[Table, ...]:
    """Every field of the certificate schema, two levels deep, with an empty value: one
    table per section, built from the schema itself so a new field shows up here."""
    top = Table(columns=("field", "value"), rows=tuple(
        (name, "") for name, f in model.model_fields.items()
        if _model_of(f.annotation) is None and name != "schema_id"), caption="certificate")
    out = [top] if top.rows else []
    for name, f in model.model_fields.items():
        sub = _model_of(f.annotation)
        if sub is not None:
            out.append(Table(columns=("field", "value"), rows=tuple(
                (f"{name}.{k}", "") for k in sub.model_fields), caption=name))
    return tuple(out)


def empty_slot(device: str, others: tuple[Certificate, ...]) -> Section:
    """Every field of a certificate, left empty, and the command that fills them."""
    names = list(dict.fromkeys(f"{r.name} ({r.mode})" for c in others for r in c.workloads))
    law = Table(columns=("workload", "law", "R^2", "fitted over", "warm step"),
                rows=tuple((n, "", "", "", "") for n in names or ["(default workloads)"]),
                caption="the throughput laws to read first")
    out = f"afford-cert-{plotdata.slug(device) or 'device'}.json"
    return Section(
        title=f"Device: {device} (no certificate yet)",
        notes=("No certificate of this device was given, so its fields are left empty: "
               "another device's numbers are never shown in its place. Every field of the "
               "certificate schema (afford.cert/1, `afford schema cert`) follows, empty; "
               "optional sections stay empty where their stage is not run. Run this on that "
               "device, then add the certificate to the report:",),
        command=f"afford certify --out {out}", tables=(law, *schema_tables()))


def plan_section(label: str, doc: Any, manifest: mf.Manifest | None) -> Section:
    """A plan (``afford plan --json``), shown from its tagged figures; provisional when it
    names a data source (``data_sources``/``data_source``) that is not pinned."""
    names = [n for v in find_key(doc, "data_sources") + find_key(doc, "data_source")
             for n in ([v] if isinstance(v, str) else v if isinstance(v, list) else [])
             if isinstance(n, str)]
    unpinned = [n for n in names if mf.status_of(manifest, n) != mf.PINNED]
    notes = (f"Plan {label}" + (f" ({doc['schema']})" if isinstance(doc, dict)
                                and "schema" in doc else "") + ".",)
    if unpinned:
        notes += (f"Provisional: derived from data source(s) not pinned: "
                  f"{', '.join(unpinned)} (pin them with `afford pin`).",)
    title = f"Cost model: {label}"
    plan = typed_plan(doc)
    if plan is None:
        return generic_section(title, doc, provisional=bool(unpinned), notes=notes)
    plan = on_unpinned(plan, tuple(unpinned))  # afford plan's rule: only what the data sizes
    subs = render_plan.plan_sections(plan)
    notes += render_plan.warning_notes(plan) + tuple(plan.notes) + tuple(
        f"Assumed (not measured here): {a}" for a in plan.assumptions)
    return Section(title, notes=notes, subsections=subs)


def typed_plan(doc: Any) -> PlanResult | None:
    """The plan in ``doc`` (an ``afford plan --json`` or ``afford preflight --json``
    document), or None for a document of another shape (shown field by field)."""
    for model in (PlanResult, Verdict):
        try:
            got = model.model_validate(doc)
        except ValidationError:
            continue
        return got.plan if isinstance(got, Verdict) else got
    return None


def history_section(history: tuple[str, tuple[Reading, ...]], devices: list[str]) -> Section:
    label, rows = history
    shown = [r for r in rows if not devices or any(matches(r.device, d) for d in devices)]
    table = Table(columns=("id", "date", "device", "quantity", "value", "steps", "status"),
                  rows=tuple((r.id, f"{r.date:%Y-%m-%d}", r.device, r.quantity, r.shown(),
                              r.step_indices or "-", r.status) for r in shown))
    notes = (f"Ledger {label}: readings of the devices in this report; struck readings stay, "
             "struck, with their reason.",)
    if len(shown) < len(rows):
        notes += (f"Readings of other devices are left out ({len(rows) - len(shown)}).",)
    return Section("History", notes=notes, tables=(table,))


def expected_devices(plans: tuple[tuple[str, Any], ...]) -> list[str]:
    """Devices the plans' platforms name (``platform.device`` or ``platform.devices``)."""
    out: list[str] = []
    for _, doc in plans:
        for platform in find_key(doc, "platform", depth=1):
            for v in find_key(platform, "device", 0) + find_key(platform, "devices", 0):
                out.extend([v] if isinstance(v, str) else
                           [x for x in v if isinstance(x, str)] if isinstance(v, list) else [])
    return out


def build_report(inputs: Inputs, title: str = "afford report") -> Report:
    sections = [data_section(inputs.manifest)]
    plots: list[Plot] = []
    certs = tuple(c for _, c in inputs.certs)
    for label, cert in inputs.certs:
        by_sub = plotdata.certificate_plots(cert)
        plots.extend(p for ps in by_sub.values() for p in ps)
        ids = {k: [p.id for p in ps] for k, ps in by_sub.items()}
        sections.append(cs.certificate_section(cert, label, ids))
    wanted = list(dict.fromkeys(list(inputs.expect) + expected_devices(inputs.plans)))
    for device in wanted:
        if not any(matches(c.environment.device_name, device) for c in certs):
            sections.append(empty_slot(device, certs))
    manifest = inputs.manifest[1] if inputs.manifest else None
    for label, doc in inputs.plans:
        s = plan_section(label, doc, manifest)
        lad = plotdata.ladder(doc, label)
        if lad is not None:
            plots.append(lad)
            s = Section(s.title, s.notes, s.tables, (lad.id,), s.command, s.subsections)
        sections.append(s)
    for _label, cert in inputs.certs:
        lad = plotdata.ladder(cert, cert.environment.device_name)
        if lad is not None:
            plots.append(lad)
            sections.append(Section(f"Ladder: {cert.environment.device_name}",
                                    plots=(lad.id,)))
    if inputs.history is not None:
        devices = [c.environment.device_name for c in certs] + wanted
        sections.append(history_section(inputs.history, devices))
    inputs_text = tuple(label for label, _ in inputs.certs) + \
        tuple(label for label, _ in inputs.plans) + \
        ((inputs.manifest[0],) if inputs.manifest else ()) + \
        ((inputs.history[0],) if inputs.history else ())
    return Report(title=title, inputs=inputs_text, sections=tuple(sections),
                  plots=tuple(plots), legend=FULL_LEGEND)
