"""The device probe child: one fresh process runs every probe that touches the device.

Run as ``python -m afford.measure.probes.probe_child [--device cuda:N]`` with a JSON job on
stdin. First thing, before anything imports torch, it times its own imports (it is one of the
startup runs); on CUDA it then pre-warms (:func:`afford.measure.sweep_child.prewarm`: cuBLAS
handles and the fused optimizer's first construction) before it reads its job, so the first
probe does not carry the process's one-time costs, and a child spawned ahead has them done
early. Then: the GEMM probes per dtype, the copy probe, and per workload the batch ladder (NVML
sampled over the x1 rung's warm steps; FLOPs counted and the state copied to host memory from
the warm x1 model), then FLOPs at the workload's other requested sweep values. Then it sends
``device_free`` (it needs the device no more: certify starts the memory stage's child) and
writes each workload's checkpoint from its host copy. Each result goes out as one JSON line as
soon as it is done, so a crash loses only the probe in flight; a probe that cannot run or fails
sends ``not_executable`` with the reason instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any, TextIO

from afford.measure.probes.startup import measure_imports


def _emit(out: TextIO, event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


class Emitter:
    """Send results, begin markers, and failures as NotExecutable with the error text."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def begin(self, key: str) -> None:
        _emit(self.out, {"event": "begin", "key": key})

    def result(self, key: str, value: Any, seconds: float | None = None) -> None:
        from afford.core.provenance import NotExecutable

        timing = {} if seconds is None else {"seconds": seconds}
        if isinstance(value, NotExecutable):
            _emit(self.out, {"event": "probe", "key": key,
                             "not_executable": value.model_dump(), **timing})
        else:
            _emit(self.out, {"event": "probe", "key": key, "result": value, **timing})

    def run(self, key: str, what: str, fn) -> Any:
        """``fn()``'s result, sent with its wall seconds; an exception is sent as a failed
        NotExecutable (a full disk under the checkpoint probe is a failure of this run, not
        a probe that cannot run on this device; certify names it in the certificate's
        failures), :class:`~afford.core.provenance.CannotRunHere` as one that cannot run here;
        returns None."""
        from afford.core.provenance import CannotRunHere, NotExecutable
        from afford.measure.sweep_child import error_text

        self.begin(key)
        t0 = time.perf_counter()
        try:
            value = fn()
        except Exception as exc:  # raised here, this run: a failure, unless by design
            value = NotExecutable(what=what, reason=error_text(exc),
                                  failed=not isinstance(exc, CannotRunHere))
        self.result(key, value, time.perf_counter() - t0)
        return value


def run_device_probes(job: dict, em: Emitter) -> None:
    import torch

    from afford.measure.probes.copy import copy_probe, host_copy_probe
    from afford.measure.probes.gemm import gemm_probe
    from afford.schema.probes_section import GEMM_DTYPES

    device = torch.device(job["device"])
    p = job["protocol"]
    seed = int(job.get("seed", 0))
    for dtype in GEMM_DTYPES:
        em.run(f"gemm.{dtype}", f"GEMM {dtype}",
               lambda d=dtype: gemm_probe(d, device, p["gemm_n"], p["gemm_warmup_calls"],
                                          p["gemm_timed_calls"], p["gemm_reference_rows"], seed))
        _free(device)
    em.run("copy", "device copy bandwidth",
           lambda: copy_probe(device, p["copy_buffer_bytes"], p["gemm_warmup_calls"],
                              p["copy_timed_calls"], seed))
    _free(device)
    em.run("host_copy", "host link bandwidth (pinned host <-> device)",
           lambda: host_copy_probe(device, p["copy_buffer_bytes"] // 4,
                                   p["gemm_warmup_calls"], p["copy_timed_calls"], seed))
    _free(device)
    states: list[tuple[dict, dict, float]] = []  # (item, host state, copy seconds)
    for item in job["workloads"]:
        run_workload_probes(item, device, job, em, states)
    _emit(em.out, {"event": "device_free"})
    for item, state, copy_seconds in states:
        em.run(f"w{item['index']}.checkpoint", "checkpoint write",
               lambda s=state, c=copy_seconds, it=item: _checkpoint(s, c, it, job))
        state.clear()


def run_workload_probes(item: dict, device, job: dict, em: Emitter,
                        states: list[tuple[dict, dict, float]]) -> None:
    from afford.core.provenance import NotExecutable
    from afford.measure.probes.launch import run_ladder, rung_rule
    from afford.workloads import resolve

    p, i = job["protocol"], item["index"]
    workload = resolve(item["spec"], job["device_class"])
    rule = rung_rule(p["ladder_floor_seconds"], p["ladder_warmup_seconds"], p["ladder_min_steps"])

    def with_x1(built) -> None:
        if item["value"] in item["flop_values"]:  # else the sweep counted them here
            em.run(f"w{i}.flops.{item['value']}", "FLOPs of a step",
                   lambda: _flops(built, item, item["value"], workload, device))
        _keep_state(built, {**item, "shape": workload.shape(item["value"])}, states, em)
        em.run(f"w{i}.gemm_shapes", "GEMM at the workload's shapes",
               lambda: _gemm_shapes(built, item, device, p, int(job.get("seed", 0))))

    def ladder(reader):
        fields, trace = run_ladder(workload, item["value"], item["mode"], device, rule,
                                   p["ladder_multipliers"], int(job.get("seed", 0)),
                                   reader[0] if reader else None, p["nvml_hz"],
                                   p["nvml_window_seconds"], with_x1)
        if trace is not None:
            em.result(f"w{i}.utilisation", {**trace, "source": reader[1]})
        return fields

    with _utilisation(device) as src:
        reader = None
        if isinstance(src, NotExecutable):
            em.result(f"w{i}.utilisation", src)
        else:
            reader = src
        em.run(f"w{i}.ladder", "batch ladder", lambda: ladder(reader))
    for v in item["flop_values"]:
        if v != item["value"]:
            em.run(f"w{i}.flops.{v}", "FLOPs of a step",
                   lambda v=v: _built_flops(workload, item, v, device, int(job.get("seed", 0))))
    _free(device)


@contextlib.contextmanager
def _utilisation(device):
    """The utilisation reader of the CUDA device (by UUID, then PCI bus id, then index), or
    NotExecutable; on the CPU, NotExecutable."""
    import torch

    from afford.measure.probes.nvml import not_on_cpu, utilisation_source

    if device.type != "cuda":
        yield not_on_cpu()
        return
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", "") or "") or None
    pci = None
    if hasattr(props, "pci_bus_id"):
        pci = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:" \
              f"{getattr(props, 'pci_device_id', 0):02x}.0"
    with utilisation_source(device.index or 0, uuid, pci) as src:
        yield src


def _flops(built, item: dict, value: int, workload, device) -> dict:
    from afford.measure.probes.flops import COUNTER, count_step_flops

    total, by_op = count_step_flops(built, item["mode"], device)
    return {"value": value, "shape": workload.shape(value), "flops": total, "by_op": by_op,
            "counter": COUNTER}


def _gemm_shapes(built, item: dict, device, p: dict, seed: int) -> dict:
    from afford.measure.probes.gemm_shapes import gemm_shape_probe

    return gemm_shape_probe(built, item["mode"], device, GEMM_SHAPES_TIMED,
                            p["gemm_warmup_calls"], p["gemm_timed_calls"], seed)


GEMM_SHAPES_TIMED = 3  # the step's matmul shapes timed alone, by arithmetic


def _built_flops(workload, item: dict, value: int, device, seed: int) -> dict:
    built = workload.build(workload.shape(value), device, seed)
    try:
        return _flops(built, item, value, workload, device)
    finally:
        del built
        _free(device)


def _keep_state(built, item: dict, states: list, em: Emitter) -> None:
    """The warm x1 model's state copied to host memory (timed) for the checkpoint probe,
    which writes it once every probe that needs the device is done; a copy that fails is
    the checkpoint probe's failure, sent now."""
    from afford.core.provenance import NotExecutable
    from afford.measure.probes.checkpoint import host_state
    from afford.measure.sweep_child import error_text

    try:
        state, seconds = host_state(built.model, built.optimizer)
    except Exception as exc:  # the write's failure: the copy is the first part of it
        em.result(f"w{item['index']}.checkpoint", NotExecutable(
            what="checkpoint write", reason=error_text(exc), failed=True))
        return
    states.append((item, state, seconds))


def _checkpoint(state: dict, copy_seconds: float, item: dict, job: dict) -> dict:
    import shutil
    import tempfile

    from afford.measure.probes.checkpoint import checkpoint_probe

    p = job["protocol"]
    folder = tempfile.mkdtemp(prefix=".afford-probe-", dir=job["checkpoint_dir"])
    try:
        fields = checkpoint_probe(state, folder, p["checkpoint_writes"],
                                  copy_seconds=copy_seconds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    fields["directory"] = os.path.abspath(job["checkpoint_dir"])
    return {"value": item["value"], "shape": item["shape"], **fields}


def _free(device) -> None:
    """Give cached device memory back between probes (CUDA only: on the CPU the tensors are
    freed when their last reference goes, and a full gc pass costs ~0.1 s a time)."""
    import gc

    import torch

    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def main() -> int:
    args = sys.argv[1:]
    device = args[args.index("--device") + 1] if "--device" in args else None
    imports = measure_imports(device)  # first thing: this process is one of the startup runs
    ready = time.time()  # wall clock: the parent noted the spawn on the same clock
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # workload prints go to stderr; stdout carries only our JSON lines
    sys.stdout = sys.stderr
    em = Emitter(out)
    startup = {**imports, "role": "probe child", "ready_wall": ready}
    if device is not None:  # before the job arrives: cuBLAS and the fused optimizer
        from afford.measure.sweep_child import prewarm

        startup["prewarm_seconds"] = prewarm(device)["prewarm_seconds"]
    import gc

    import afford.measure.probes.launch  # noqa: F401  (torch, the workloads, the timing)
    from afford.measure.sweep_child import warm

    warm(args)

    _emit(out, {"event": "probe", "key": "startup", "result": startup})
    job = json.load(sys.stdin)

    gc.freeze()  # the imports' objects are no garbage: each _free's gc pass skips them
    run_device_probes(job, em)
    _emit(out, {"event": "done"})
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
