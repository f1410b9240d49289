"""The console script (``afford``, ``python -m afford``): one step before the command line.

For ``afford certify`` the first sweep child is spawned at once
(:func:`afford.measure.children.spawn_early`), before this process imports torch and parses its
arguments, so the child's interpreter start, its ``import torch`` and, on CUDA, its context and
cuBLAS warm-up overlap the parent's own imports instead of following them (both take seconds on
a GPU host, the child's start the longer). Nothing is timed while they overlap. The certify
command takes the child if it suits the device it resolves
(:func:`afford.measure.children.take_early`); otherwise it is stopped. A command line whose
workload names do not read (:mod:`afford.workloads.names`, no torch) spawns no child: the
command says what is wrong at once. Neither this module nor the spawn imports torch. On an
image whose packages carry no bytecode, this process and that first child keep theirs in
afford's cache (:mod:`afford.core.bytecode`).
"""

from __future__ import annotations

import sys


def early_child(argv: list[str]) -> tuple[bool, str | None]:
    """(spawn the first sweep child now?, what it pre-warms: a CUDA device, ``"auto"`` for
    CUDA when present, or None) from the raw arguments. Only a plain ``certify`` run:
    neither ``--help`` nor ``--distributed`` (torchrun starts one process per GPU)."""
    if not argv or argv[0] != "certify":
        return False, None
    rest = argv[1:]
    if any(a in ("--help", "-h", "--distributed") or a.startswith("--distributed=")
           for a in rest):
        return False, None
    device = None
    for i, a in enumerate(rest):
        if a == "--device" and i + 1 < len(rest):
            device = rest[i + 1]
        elif a.startswith("--device="):
            device = a.split("=", 1)[1]
    if device is None:
        return True, "auto"
    return True, device if device.startswith("cuda") else None


def workload_args(argv: list[str]) -> tuple[str, ...]:
    """The ``--workload`` / ``-w`` values of a raw command line (checked before the early
    child is spawned, and resolved by it while it waits)."""
    out = []
    for i, a in enumerate(argv):
        if a in ("--workload", "-w") and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif a.startswith("--workload="):
            out.append(a.split("=", 1)[1])
    return tuple(out)


def names_read(specs: tuple[str, ...]) -> bool:
    """Whether every workload name of the command line reads (its grammar, an ``hf:``
    source transformers knows: :func:`afford.workloads.names.spec_error`, torch-free)."""
    from afford.workloads.names import spec_error

    return all(spec_error(s) is None for s in specs)


def main() -> None:
    from afford.core.bytecode import start

    cached = start()  # before the imports that compile: an image with no bytecode of its own
    from afford.measure.timeline import mark

    mark("entry", argv=sys.argv[1:], bytecode_cache=cached)
    spawn, prewarm = early_child(sys.argv[1:])
    specs = workload_args(sys.argv[2:])
    if spawn and names_read(specs):
        from afford.measure.children import spawn_early

        spawn_early(prewarm, specs, bytecode=cached)
    from afford.cli import main as cli_main

    cli_main()
