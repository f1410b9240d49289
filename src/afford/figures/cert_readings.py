"""A certificate's figures as ledger readings (``afford certify --history``, ``afford
history add CERT``): every timed point with its children's step indices, the laws, and what
the later stages expose (:mod:`afford.figures.probes_figures`,
:mod:`afford.figures.session_costs`), in the ledger's format
(:mod:`afford.schema.ledger`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from afford.core.provenance import Tag, Tagged
from afford.schema.cert import Certificate, WorkloadResult
from afford.schema.ledger import (
    Reading,
    append,
    format_step_indices,
    is_step_time,
    new_reading,
)
from afford.schema.point import Point


def _protocol(cert: Certificate) -> dict:
    """The protocol as fingerprinted; ``prewarmed_children`` only where some child was
    pre-warmed, and the step-time fields only where set, so certificates written without
    those fields keep their fingerprints."""
    proto = cert.protocol.model_dump(mode="json")
    for key in ("prewarmed_children", "step_semantics", "synced_child", "flops_child",
                "agreement", "precise_min_steps"):
        if not proto.get(key) and proto.get(key) != 0:
            proto.pop(key, None)
    return proto


def _fingerprint(cert: Certificate, r: WorkloadResult, p: Point | None) -> str:
    """12 hex digits of SHA-256 over what makes two readings comparable: device, torch,
    precision flags, protocol, workload, mode and shape (or the sweep, for a law)."""
    e = cert.environment
    doc = {"device": e.device_name, "torch": e.torch_version, "tf32": [e.tf32_matmul,
           e.tf32_cudnn], "matmul_precision": e.float32_matmul_precision,
           "cublas": e.cublas_workspace_config, "alloc": e.pytorch_cuda_alloc_conf,
           "protocol": _protocol(cert), "workload": r.name,
           "source": r.source, "mode": r.mode, "sweep_param": r.sweep_param,
           "shape": p.shape if p is not None else [q.value for q in r.points]}
    text = json.dumps(doc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _child_steps(p: Point, step0: bool) -> str:
    groups = [f"c{k.child}:" + ("0" if step0 else format_step_indices(k.timed_step_indices))
              for k in p.children
              if (k.step0_seconds is not None if step0 else k.timed_step_indices)]
    return ";".join(groups)


def _point_readings(cert: Certificate, r: WorkloadResult, p: Point, base: dict) -> list[dict]:
    q = f"{r.name}/{r.mode}/{r.sweep_param}={p.value}"
    fp = _fingerprint(cert, r, p)
    rows = [dict(quantity=f"{q}/warm_step_seconds", value=p.median_seconds, unit="s",
                 tag=Tag.MEASURED, step_indices=_child_steps(p, False))]
    if p.step0_seconds is not None:
        rows.append(dict(quantity=f"{q}/step0_seconds", value=p.step0_seconds, unit="s",
                         tag=Tag.MEASURED, step_indices=_child_steps(p, True)))
    for field in ("peak_allocated_bytes", "peak_reserved_bytes", "peak_rss_bytes"):
        if getattr(p, field) is not None:
            rows.append(dict(quantity=f"{q}/{field}", value=getattr(p, field), unit="B",
                             tag=Tag.MEASURED))
    return [{**base, "config_fingerprint": fp, **row} for row in rows]


def _law_readings(cert: Certificate, r: WorkloadResult, base: dict) -> list[dict]:
    if r.law is None:
        return []
    best, q = r.law.best, f"{r.name}/{r.mode}/law_{r.law.chosen}"
    fp = _fingerprint(cert, r, None)
    rows = [dict(quantity=f"{q}/exponent", value=best.params["b"], unit="", tag=Tag.FITTED),
            dict(quantity=f"{q}/r2", value=best.r2, unit="", tag=Tag.MODULE)]
    if "F" in best.params:
        rows.append(dict(quantity=f"{q}/floor_seconds", value=best.params["F"], unit="s",
                         tag=Tag.FITTED))
    if best.loo_max is not None:
        rows.append(dict(quantity=f"{q}/loo_max", value=best.loo_max, unit="ratio",
                         tag=Tag.MODULE))
    return [{**base, "config_fingerprint": fp, **row} for row in rows]


def _contract_readings(cert: Certificate, base: dict) -> list[dict]:
    """What the later stages expose (the probes' figures, checkpoints, startup). A figure
    a stage did not write is ``None`` there and is left out here."""
    from afford.figures import probes_figures, session_costs

    found: list[tuple[str, Tagged | None, str]] = []
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        found.append((f"gemm_{dtype}_flop_per_second", probes_figures.gemm_rate(cert, dtype), ""))
    found.append(("copy_bytes_per_second", probes_figures.copy_bandwidth(cert), ""))
    for r in cert.workloads:
        found.append((f"{r.name}/{r.mode}/checkpoint_write_seconds",
                      session_costs.checkpoint_write_seconds(cert, r.name, r.mode), ""))
        found.append((f"{r.name}/{r.mode}/checkpoint_bytes",
                      session_costs.checkpoint_bytes(cert, r.name, r.mode), ""))
    for name, t in session_costs.startup_seconds(cert).items():
        found.append((f"startup/{name}_seconds", t, "0" if name == "first_step" else ""))
    rows = []
    for quantity, t, steps in found:
        if t is None or isinstance(t.value, (str, bool)) or t.value is None:
            continue
        if is_step_time(quantity, t.unit, t.tag) and not steps:
            continue  # an index this function cannot know is never invented
        rows.append({**base, "quantity": quantity, "value": t.value, "unit": t.unit,
                     "tag": t.tag, "step_indices": steps})
    return rows


def noisy_reason(cert: Certificate) -> str:
    """Why a certificate is NOISY, for the ledger's reason column ('' when it is not): its
    NOISY reasons, then the host load it recorded (the usual cause)."""
    from afford.figures import time_figures as ft
    from afford.figures.noise import load_line

    if ft.verdict_label(cert) != "NOISY":
        return ""
    reasons = ft.noisy_reasons(cert) or ["its time verdict is NOISY"]
    load = load_line(cert)[0]
    return "; ".join(reasons + ([load.split(": ")[0]] if load else []))


def certificate_readings(cert: Certificate, command: str) -> list[Reading]:
    """The headline readings of a certificate: warm and step-0 seconds per resident point
    (with the timed step indices of every child), peak memory, the chosen law's exponent,
    R^2, floor and leave-one-out error, and what the later stages expose. Those of a
    NOISY certificate are ``noisy``, with its reason (:func:`noisy_reason`)."""
    e = cert.environment
    commit = (e.git_head or "") + ("-dirty" if e.git_dirty else "")
    base = dict(date=e.started_at, device=e.device_name, torch=e.torch_version,
                commit=commit, command=command or e.command)
    why = noisy_reason(cert)
    if why:
        base.update(status="noisy", reason=why)
    rows: list[dict] = []
    for r in cert.workloads:
        for p in r.points:
            if p.usable:
                rows.extend(_point_readings(cert, r, p, base))
        rows.extend(_law_readings(cert, r, base))
    rows.extend(_contract_readings(cert, base))
    return [new_reading(**row) for row in rows]


def append_certificate(path: str | Path, cert: Certificate, command: str = "") -> list[Reading]:
    """Append a certificate's headline readings to the ledger at ``path`` (created if
    absent). ``command`` names the run (default: the command stored in the certificate)."""
    return append(path, certificate_readings(cert, command))
