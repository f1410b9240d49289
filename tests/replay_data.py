"""Memory-stage shapes made from the allocator histories recorded on an H200
(recorded on an H200, 2026-12-02; tests/data/h200_traces): each recorded process ran six shapes in
order; the first history's never-freed extras (the cuBLAS workspaces) are the state every
later shape began from, as in the memory child (which pre-warms before its first shape)."""

from __future__ import annotations

import gzip
import json

from afford.fit.memory.allocator import AddressSource, Allocator, replay
from afford.fit.memory.trace_scaling import extra_slots, from_history
from afford.schema.memory_section import AllocTrace, MemoryShape, SeedSegment, pack_ints
from tests.paths import DATA

TRACES = DATA / "h200_traces"
DIMS = {"tinylm": (512, 8, 8), "gpt2": (768, 12, 12), "llama": (768, 12, 12)}


def records(workload: str, mode: str) -> list[dict]:
    with gzip.open(TRACES / f"trace-{workload}-{mode}.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


def _seed(alloc: Allocator) -> list[SeedSegment]:
    out = []
    for g in sorted(alloc.segments, key=lambda g: g.addr):
        blocks, b = [], g.head
        while b is not None:
            blocks.append((b.size, b.allocated))
            b = b.next
        out.append(SeedSegment(addr=g.addr, size=g.size, small=g.small, stream=g.stream,
                               blocks=blocks))
    return out


def shapes(workload: str, mode: str, roles: dict[tuple[int, int], str]) -> list[MemoryShape]:
    """MemoryShapes of the recorded shapes named in ``roles`` ((B, s) -> role); the traced
    roles (base, seq, batch, corner) carry their history and the state they began from (the
first recorded shape: an empty allocator; its history makes the workspaces)."""
    recs = records(workload, mode)
    traces = [from_history(r["B"], r["s"], r["events"]) for r in recs]
    freed = traces[0].freed()
    keep = [k for k in extra_slots(traces[1], traces[0]) if k not in freed]
    alloc = Allocator()
    alloc.addresses = AddressSource([e[1] for e in recs[0]["events"] if e[0] == "segment_alloc"])
    replay(traces[0].events(0), allocator=alloc)
    alloc.teardown(keep)
    seed = _seed(alloc)
    d, L, H = DIMS[workload]
    out = []
    for i, (r, t) in enumerate(zip(recs, traces)):
        role = roles.get((r["B"], r["s"]))
        if role is None:
            continue
        traced = role in ("base", "seq", "batch", "corner")
        trace = AllocTrace(n_allocs=t.n_allocs, n_ops=len(t.ops), sizes=pack_ints(t.sizes),
                           streams=pack_ints(t.streams), ops=pack_ints(t.ops),
                           external_frees=t.external_frees, seed=seed if i else []
                           ) if traced else None
        peaks = r["peaks_by_step"]
        out.append(MemoryShape(
            key=f"memory|{workload}|{mode}|{role}|B={r['B']},s={r['s']}", role=role,
            shape={"batch": r["B"], "seq": r["s"]},
            dims={"B": r["B"], "s": r["s"], "d": d, "L": L, "H": H}, params=r["params"],
            frozen_params=0, frozen_bytes=0, states_bytes=16 * r["params"], steps=len(peaks),
            allocated_by_step=[p[0] for p in peaks], reserved_by_step=[p[1] for p in peaks],
            trace=trace))
    return out
