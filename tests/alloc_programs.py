"""A synthetic training loop's allocator history, for the tests of the allocator model,
trace scaling and the memory breakdown."""

from __future__ import annotations

import itertools

from afford.fit.memory.trace_scaling import OpTrace, from_history

MIB = 1 << 20


def program(B: int, s: int, cold: bool = False, steps: int = 3, layers: int = 2,
            d: int = 64, stage: tuple[int, int] | None = None,
            sort_above: int | None = None, sort_swaps: bool = False) -> OpTrace:
    """A training loop's allocator history: build (weights, an input pool), then steps of
    forward (saved activations, temporaries, materialised scores), backward (gradients,
    activations freed in reverse), AdamW state on the first step; ``cold`` adds what a
    first-in-process run has: a 32 MiB workspace at the first GEMM, kept. ``stage`` =
    (bytes a token, cap): each layer's backward also takes a reduction's global staging
    buffer, ``min(bytes x B*s, cap)`` (PyTorch's reduce kernels bound it by the grid), with
    its 4 KiB of semaphores, both freed at once. ``sort_above``: above this many tokens the
    position table's backward takes a sorting path (PyTorch's embedding backward above 3,072
    indices): sorted indices and a table-sized accumulator, freed when it is done.
    ``sort_swaps``: the position gradient's two work buffers, taken on both paths, are freed
    in one order on the sorting path and the other below it (as OPT's embedding backward
    frees its fp32 accumulator and its index buffer)."""
    addr = itertools.count(1 << 20, 1 << 12)
    rows, live = [], {}

    def alloc(name, size):
        live[name] = next(addr)
        rows.append(["alloc", live[name], size, 0])

    def free(name):
        rows.append(["free_completed", live.pop(name), 0, 0])

    weights = {f"w{i}": 4 * d * d * (i + 1) for i in range(layers)} | {"pos": 4 * s * d}
    for w, size in weights.items():
        alloc(w, size)
    alloc("pool", 8 * 4 * B * s)
    for step in range(steps):
        for w in weights:
            if f"g{w}" in live:
                free(f"g{w}")  # zero_grad(set_to_none=True)
        for i in range(layers):
            alloc(f"act{i}", 4 * B * s * d)
            if step == 0 and i == 0 and cold:
                alloc("workspace", 32 * MIB)
            alloc(f"tmp{i}", 16 * B * s * d)
            alloc(f"scores{i}", 2 * B * 4 * s * s)
            free(f"tmp{i}")
        for i in reversed(range(layers)):
            alloc(f"gw{i}", weights[f"w{i}"])
            if stage is not None:
                alloc(f"stage{i}", min(stage[0] * B * s, stage[1]))
                alloc(f"sem{i}", 4096)
                free(f"stage{i}")
                free(f"sem{i}")
            free(f"scores{i}")
            free(f"act{i}")
        sorting = sort_above is not None and B * s > sort_above
        if sort_swaps:
            alloc("work_a", 64 * MIB)
            alloc("work_b", 16 * B * s)
        if sorting:
            alloc("sorted", 8 * B * s)
            alloc("accum", 4 * weights["pos"])
            free("sorted")
            free("accum")
        if sort_swaps:
            first, second = ("work_a", "work_b") if sorting else ("work_b", "work_a")
            free(first)
            alloc("probe", 48 * MIB)  # reuses work_a's block only where it was freed first
            free("probe")
            free(second)
        alloc("gpos", weights["pos"])
        if step == 0:
            for w, size in weights.items():
                alloc(f"m{w}", size)
                alloc(f"v{w}", size)
    return from_history(B, s, rows)
