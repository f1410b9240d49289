"""What a session pays beside its warm steps, as a certificate measured it (the probes
stage's): its start-up (a fresh process, the imports, the CUDA context, the first step) and
one checkpoint (the atomic write's seconds, the file's bytes), each tagged MEASURED. Plans
charge these per session and per save (:mod:`afford.planning.planner`); ``None`` (or an empty
dict) where the probes stage did not run or could not measure them.
"""

from __future__ import annotations

from afford.core.provenance import NotExecutable, Tagged, measured, run_label
from afford.figures.cert_lookup import probes_section, workload_probes
from afford.schema.cert import Certificate
from afford.schema.probes_section import CheckpointProbe, counted_runs


def startup_seconds(cert: Certificate) -> dict[str, Tagged]:
    """Measured startup components by name: ``process`` (spawn to imports done, parent's
    clock), ``import_torch``, ``import_transformers`` (when installed), ``cuda_init`` (CUDA
    context, on a GPU), and ``first_step`` (the slowest step 0 of the sweep's largest
    resident points). Each a median over fresh children. Empty without the probes stage."""
    pr = probes_section(cert)
    s = pr.startup if pr else None
    if s is None or isinstance(s, NotExecutable):
        return {}
    n = len(counted_runs(s.runs))
    where = f"median of {n} fresh children" + \
        (f" ({len(s.runs) - n} of {len(s.runs)} left out: imports beside the parent's)"
         if n < len(s.runs) else "") + f", {run_label(cert)}"
    out = {"process": measured(s.process_seconds, "s", f"spawn to imports done, {where}"),
           "import_torch": measured(s.import_torch_seconds, "s", f"import torch, {where}")}
    if not isinstance(s.import_transformers_seconds, NotExecutable):
        out["import_transformers"] = measured(s.import_transformers_seconds, "s",
                                              f"import transformers, {where}")
    if not isinstance(s.cuda_init_seconds, NotExecutable):
        out["cuda_init"] = measured(s.cuda_init_seconds, "s",
                                    f"torch.cuda.init + first allocation, {where}")
    first = _first_step(cert)
    if first is not None:
        out["first_step"] = first
    return out


def _first_step(cert: Certificate) -> Tagged | None:
    cands = []
    for r in cert.workloads:
        res = [p for p in r.points if p.usable and p.step0_seconds is not None]
        if res:
            top = max(res, key=lambda p: p.value)
            cands.append((top.step0_seconds, r, top))
    if not cands:
        return None
    secs, r, p = max(cands, key=lambda c: c[0])
    return measured(secs, "s", f"step 0 of {r.name} {r.mode} {r.sweep_param}={p.value} "
                    f"(median over children; the slowest workload's), {run_label(cert)}")


def checkpoint_write_seconds(cert: Certificate, name: str, mode: str | None = None
                             ) -> Tagged | None:
    """Median seconds of one atomic checkpoint write of the workload's model and optimizer
    state (temp file, fsync, rename), at the shape the probes used (in the source)."""
    w = workload_probes(cert, name, mode)
    c = w.checkpoint if w else None
    if not isinstance(c, CheckpointProbe):
        return None
    return measured(c.median_write_seconds, "s",
                    f"{w.name} {w.mode} {w.sweep_param}={c.value}: median of "
                    f"{len(c.write_seconds)} atomic writes to {c.directory}, {run_label(cert)}")


def checkpoint_bytes(cert: Certificate, name: str, mode: str | None = None) -> Tagged | None:
    """Bytes of one checkpoint (model + optimizer state) of the workload."""
    w = workload_probes(cert, name, mode)
    c = w.checkpoint if w else None
    if not isinstance(c, CheckpointProbe):
        return None
    return measured(c.bytes, "B", f"{w.name} {w.mode} {w.sweep_param}={c.value}: file size, "
                    f"{run_label(cert)}")
