"""``afford size CERT --batch B --seq S --measure``: the asked shape measured in one memory
child on this machine, and the reading kept in the certificate.

Why: past the shapes a certificate measured, or past a code path none of them crossed (a
sliding window, say), its memory figure is extrapolated and ``fits`` may be ``uncertain``
(:mod:`afford.figures.memory_at`). One child that runs the shape's training loop settles
it, at the cost of a few steps, on the device the certificate describes (another device's
reading would be pooled into this one's: refused). The reading joins the memory law's
shapes with the role ``asked``: it answers at that shape from then on, and bounds the
shapes around it (memory grows with batch and sequence), but no law is refitted on it.
"""

from __future__ import annotations

from collections.abc import Callable

from afford.certification.stage_memory import STEPS, MemoryJob, dim_keys, items_for, shape_record
from afford.core.errors import InputError
from afford.schema.cert import Certificate
from afford.schema.memory_section import MemoryLaw, MemoryShape


def check_device(cert: Certificate, name: str, device_type: str) -> None:
    """Refuse a reading from another device than the certificate's (devices are not
    pooled: docs/DESIGN.md section 3, rule 7)."""
    env = cert.environment
    if device_type != env.device_type or name != env.device_name:
        raise InputError(f"--measure runs on this machine, a {name} ({device_type}); the "
                         f"certificate is of a {env.device_name} ({env.device_type}): run it "
                         "where the certificate was made (afford never pools devices)")


def measure(cert: Certificate, law: MemoryLaw, shape: dict[str, int], *, seed: int = 0,
            on_event: Callable[[dict], None] = lambda e: None) -> MemoryShape:
    """The asked shape's peaks, measured in a fresh memory child (pre-warmed at the same
    shape, as the memory stage's first shape is); an error record names what failed."""
    from afford.measure.memory_sweep import run_memory_child
    from afford.workloads import resolve

    env = cert.environment
    w = resolve(law.workload, env.device_class)
    full = {**law.base_shape, **shape}
    job = MemoryJob(spec=law.workload, mode=law.mode, dim_keys=dim_keys(w, full),
                    base_shape=law.base_shape, runs=(("warmup", full), ("asked", full)))
    items = items_for(job, w, STEPS[env.device_type])
    records = run_memory_child(items, device=env.device_type, device_class=env.device_class,
                               seed=seed, on_event=on_event)
    got = shape_record(items[-1], records.get(items[-1]["key"], {"error": "not measured"}))
    if not got.ok:
        raise InputError(f"--measure: the memory child could not run {law.workload} "
                         f"({law.mode}) at {full}: {got.error or 'out of memory'}")
    return got


def with_reading(cert: Certificate, law: MemoryLaw, reading: MemoryShape) -> Certificate:
    """The certificate with ``reading`` among ``law``'s shapes (one per shape: a newer
    reading of the same shape replaces the older ``asked`` one)."""
    laws = []
    for x in cert.memory.laws:
        if x.workload == law.workload and x.mode == law.mode:
            kept = [s for s in x.shapes if not (s.role == "asked" and s.dims == reading.dims)]
            x = x.model_copy(update={"shapes": kept + [reading]})
        laws.append(x)
    return cert.model_copy(update={"memory": cert.memory.model_copy(update={"laws": laws})})
