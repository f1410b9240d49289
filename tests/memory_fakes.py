"""Memory laws with an allocator replay, built from the synthetic training program
(tests/alloc_programs.py) at the memory stage's CUDA plan: four traced shapes and three held
out. Every peak is the program's own replay, so the replay is exact wherever its learned
sizes are, and the law is what least squares makes of the four traced peaks. The law's
dims are labelled like the plan tests' tinylm (d 512, L 8, H 8), so a fake certificate of
tests/plan_helpers.py runs the same model in its time and memory sections."""

from __future__ import annotations

from types import SimpleNamespace

from afford.certification.stage_memory import MemoryJob, build_law
from afford.fit.memory.allocator import replay
from afford.fit.memory.replay_model import build_replay
from afford.schema.memory_section import (
    SWEEP_ROLES,
    AllocTrace,
    MemoryLaw,
    MemorySection,
    MemoryShape,
    pack_ints,
)
from tests.alloc_programs import program

PLAN = (("base", 8, 512), ("seq", 8, 256), ("batch", 4, 512), ("corner", 4, 256),
        ("heldout-interpolated", 6, 768), ("heldout-seq", 8, 2048),
        ("heldout-batch", 32, 512))
DIMS = {"d": 512, "L": 8, "H": 8}
D = 64  # the program's own width


def params(s: int) -> int:
    return D * D * (1 + 2) + s * D  # two layers' weights and the position table


def shape(role: str, B: int, s: int, stage=None, fresh: bool = True,
          frozen: int = 0) -> MemoryShape:
    t = program(B, s, d=D, stage=stage)
    res, _ = replay(t.events())
    trace = AllocTrace(n_allocs=t.n_allocs, n_ops=len(t.ops), sizes=pack_ints(t.sizes),
                       streams=pack_ints(t.streams), ops=pack_ints(t.ops)) \
        if role in SWEEP_ROLES else None
    return MemoryShape(
        key=f"memory|tinylm|{role}|B={B},s={s}", role=role, shape={"batch": B, "seq": s},
        dims={"B": B, "s": s, **DIMS}, params=params(s), frozen_params=frozen, frozen_bytes=0,
        states_bytes=16 * params(s), steps=3, allocated_by_step=[res.peak_allocated_bytes] * 3,
        reserved_by_step=[res.peak_reserved_bytes] * 3, trace=trace,
        fresh_state=True if fresh else None)


def law(mode: str = "fp32", stage=None, fresh: bool = True, frozen: int = 0) -> MemoryLaw:
    """The law of the program's shapes with its replay, as the memory stage builds them
    (``fresh=False``: as an older afford measured them, in pre-warmed children; ``frozen``:
    the frozen parameters an adapter leaves, counted but not in the program's bytes)."""
    shapes = [shape(r, B, s, stage, fresh, frozen) for r, B, s in PLAN]
    job = MemoryJob(spec="tinylm", mode=mode, dim_keys={"B": "batch", "s": "seq"},
                    base_shape={"batch": 8, "seq": 512},
                    runs=tuple((x.role, x.shape) for x in shapes), attention="materialised",
                    traced=True)
    env = SimpleNamespace(device_type="cuda", device_memory_bytes=None)  # no verdicts
    got = build_law(job, shapes, env)
    return got.model_copy(update={"replay": build_replay(got)})


def scaled(law_: MemoryLaw, factor: float) -> MemoryLaw:
    """The law with its fits' activation coefficients and fixed terms scaled (allocated and
    reserved alike: a law that misses the step by about that much), its held-out errors
    kept."""
    def scale(f):
        return f.model_copy(update={"c_res": f.c_res * factor, "c_op": f.c_op * factor,
                                    "fixed_bytes": f.fixed_bytes * factor})
    return law_.model_copy(update={"allocated": scale(law_.allocated),
                                   "reserved": scale(law_.reserved)})


def section(*laws: MemoryLaw) -> MemorySection:
    return MemorySection(steps_per_shape=3, budget_fraction=0.9, tolerance=0.05,
                         targets={"reserved": 0.03}, laws=list(laws), wall_seconds=1.0)


def with_memory(cert, *laws: MemoryLaw):
    return cert.model_copy(update={"memory": section(*laws)})


def without_point_peaks(cert):
    """The certificate with its sweep's and design's points stripped of memory peaks (the
    synthetic time certificate's round figures, 8-12 GiB, are not the program's MiBs: its
    measured shapes would bound the law's)."""
    def strip(p):
        return p.model_copy(update={"peak_allocated_bytes": None, "peak_reserved_bytes": None})
    rs = [r.model_copy(update={"points": [strip(p) for p in r.points],
                               "design_points": [strip(p) for p in r.design_points]})
          for r in cert.workloads]
    return cert.model_copy(update={"workloads": rs})
