"""Startup costs, measured in fresh child processes (docs/DESIGN.md section 4, cost model:
startup is interpreter + framework import, measured where this box can measure it).

Each child times, on its own clock and before anything else imports them: ``import torch``;
``import transformers`` when it is installed; and on a CUDA device the creation of the CUDA
context (``torch.cuda.init()`` and a first allocation). The parent times the child from spawn
until its report arrives. Run as ``python -m afford.measure.probes.startup [--device cuda:N]``;
this module imports neither torch nor transformers at module level, and nor do the packages
above it, so the figures are those of a fresh interpreter.

The device probe child (:mod:`afford.measure.probes.probe_child`) calls :func:`measure_imports`
first thing too, so it is one of the runs; the others are spawned by :func:`run_startup`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable

TIMEOUT_SECONDS = 300.0  # a startup child's limit unless AFFORD_CHILD_TIMEOUT sets one


def measure_imports(cuda_device: str | None, transformers: bool = True) -> dict:
    """Time the imports (and, given a CUDA device, its context creation) in this process,
    which must not have imported torch yet. ``transformers=False``: torch's only (certify's
    first sweep child when no workload needs transformers: its run is contended, so it
    counts towards no figure, and the import would delay its first point by 1-2 s)."""
    if "torch" in sys.modules:
        raise RuntimeError("torch is already imported: the import time would not be measured")
    t0 = time.perf_counter()
    import torch

    out: dict = {"import_torch_seconds": time.perf_counter() - t0,
                 "torch_version": torch.__version__}
    if transformers and importlib.util.find_spec("transformers") is not None:
        t0 = time.perf_counter()
        import transformers

        out["import_transformers_seconds"] = time.perf_counter() - t0
        out["transformers_version"] = transformers.__version__
    if cuda_device:
        t0 = time.perf_counter()
        torch.cuda.init()
        torch.empty(1, device=cuda_device)
        torch.cuda.synchronize(cuda_device)
        out["cuda_init_seconds"] = time.perf_counter() - t0
    return out


def run_one(cuda_device: str | None, timeout: float | None = None) -> dict:
    """Spawn one fresh child; its report plus ``process_seconds`` on the parent's clock
    (spawn to the report line). A child that hangs is killed after ``timeout`` (default
    :func:`~afford.measure.children.child_timeout` with :data:`TIMEOUT_SECONDS`)."""
    from afford.measure.children import (  # not at module level: numpy, scipy
        child_env,
        child_timeout,
        python_command,
    )

    timeout = child_timeout(TIMEOUT_SECONDS) if timeout is None else timeout
    cmd = python_command("afford.measure.probes.startup",
                         ["--device", cuda_device] if cuda_device else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        elapsed = time.perf_counter() - t0
        _, err = proc.communicate()
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or not line.strip():
        tail = (err or "").strip()[-800:]
        raise RuntimeError(f"startup child exited with code {proc.returncode}: {tail}")
    return {**json.loads(line), "process_seconds": elapsed, "role": "startup"}


def run_startup(runs: int, cuda_device: str | None,
                on_run: Callable[[int], None] = lambda i: None) -> list[dict]:
    """``runs`` fresh children, one after another."""
    out = []
    for i in range(runs):
        on_run(i)
        out.append(run_one(cuda_device))
    return out


def main() -> int:
    args = sys.argv[1:]
    report = measure_imports(args[args.index("--device") + 1] if "--device" in args else None)
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
