"""The ``tinylm`` training step under DDP and FSDP at world sizes 1..N on this node.

One torchrun covers every world size: for each ``w`` every rank creates the subgroup of
ranks ``0..w-1`` (``dist.new_group`` must be called by all ranks, members or not); members
train, the others wait at a gloo barrier. Weak scaling: each rank keeps its own batch of
its own data (seed + rank), the shape of the tinylm default for the device class.

Each member times, like a sweep child: step 0 alone, a fixed warm-up, then timed steps in
blocks between host syncs (``afford.measure.timing`` clocks), every step with its index.
The step count is agreed (slowest rank's warm estimate), since a rank that stepped fewer
times would leave the others in an all-reduce. DDP also times the same number of steps
under ``no_sync()`` (PyTorch DDP docs: no gradient all-reduce): the difference is the
all-reduce cost that backward did not hide. FSDP is ``fully_shard`` (FSDP2) per block and
at the root, when this torch has it; otherwise the FSDP run is NOT EXECUTABLE with the
error text.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from afford.fit.stats import median
from afford.measure.distributed.runtime import Runtime, agree_max, wait_device
from afford.measure.memory_peaks import MemoryWindow
from afford.measure.timing import MIN_BLOCK, timed_block
from afford.workloads.base import autocast_for
from afford.workloads.clock import CudaClock, HostClock
from afford.workloads.tinylm import VOCAB, TinyLMConfig, TinyLMModel, default


@dataclass(frozen=True)
class DPConfig:
    shape: TinyLMConfig
    mode: str
    warmup_steps: int = 3
    min_steps: int = 12
    floor_seconds: float = 0.5
    max_steps: int = 400
    max_block: int = 16
    seed: int = 0


def config_for(device_class: str, mode: str, precision: str, seed: int = 0) -> DPConfig:
    """The tinylm default of the device class; the floor of timed work by precision (as the
    sweep: quick 0.1 s, adaptive 0.5 s, full 3.0 s)."""
    floor = {"quick": 0.1, "adaptive": 0.5, "full": 3.0}[precision]
    warm = 2 if precision == "quick" else 3
    return DPConfig(shape=default(device_class), mode=mode, floor_seconds=floor,
                    warmup_steps=warm, seed=seed)


class PollingCudaClock(CudaClock):
    """The sweep's CUDA-event clock, but waiting by polling (:func:`runtime.wait_device`)
    so a rank behind a dead peer stays responsive to torchrun's SIGTERM."""

    def sync(self) -> None:
        wait_device(torch.device("cuda", torch.cuda.current_device()))


def _wrap(model: torch.nn.Module, strategy: str, group, device: torch.device):
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        return DDP(model, device_ids=ids, process_group=group)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    mesh = DeviceMesh.from_group(group, device.type)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t  # FSDP2 gradients are DTensors


def check_finite_grads(model: torch.nn.Module) -> int:
    """Every trainable parameter got a finite gradient (as the sweep's gate)."""
    n = 0
    for name, p in model.named_parameters():
        if p.requires_grad:
            if p.grad is None or not bool(torch.isfinite(_local(p.grad)).all()):
                raise RuntimeError(f"parameter {name!r}: no finite gradient under DDP/FSDP")
            n += 1
    return n


def timed_steps(step: Callable[[int], object], clock, start: int, count: int, block: int
                ) -> tuple[list[float], list[int]]:
    """``count`` steps from index ``start``, a host sync every ``block`` steps."""
    secs: list[float] = []
    idx: list[int] = []
    while len(secs) < count:
        s, i = timed_block(step, clock, start + len(secs), min(block, count - len(secs)))
        secs.extend(s)
        idx.extend(i)
    return secs, idx


def _build(cfg: DPConfig, rt: Runtime, strategy: str, group):
    c = cfg.shape
    torch.manual_seed(cfg.seed)
    model = TinyLMModel(c.d, c.L, c.H, c.seq).to(rt.device)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    wrapped = _wrap(model, strategy, group, rt.device)
    fused = rt.device.type == "cuda" and strategy == "ddp"
    opt = torch.optim.AdamW(wrapped.parameters(), lr=3e-4, fused=fused)
    gen = torch.Generator(device=rt.device).manual_seed(cfg.seed + 1 + rt.rank)
    pool = torch.randint(0, VOCAB, (4, c.batch, c.seq + 1), device=rt.device, generator=gen)
    return model, wrapped, opt, pool, params, grad_bytes


def run_one(rt: Runtime, cfg: DPConfig, strategy: str, w: int, group) -> dict:
    """This member's raw record of one (strategy, world size)."""
    window = MemoryWindow(rt.device)
    window.open()
    model, wrapped, opt, pool, params, grad_bytes = _build(cfg, rt, strategy, group)
    losses: dict[int, torch.Tensor] = {}

    def step(i: int, sync: bool = True) -> None:
        opt.zero_grad(set_to_none=True)
        batch = pool[i % len(pool)]
        ctx = contextlib.nullcontext() if sync else wrapped.no_sync()
        with ctx:
            with autocast_for(cfg.mode, rt.device):
                loss = wrapped(batch[:, :-1], batch[:, 1:])
            loss.backward()
        opt.step()
        if i == 0:
            losses[0] = loss.detach()  # read after the steps: no host sync inside step 0

    clock = PollingCudaClock() if rt.device.type == "cuda" else HostClock()
    step0, _ = timed_steps(step, clock, 0, 1, 1)
    warm, _ = timed_steps(step, clock, 1, cfg.warmup_steps, cfg.warmup_steps)
    check_finite_grads(model)
    est = agree_max(median(warm), group, rt.device)
    count = int(min(cfg.max_steps, max(cfg.min_steps, math.ceil(cfg.floor_seconds / est))))
    block = int(min(cfg.max_block, max(MIN_BLOCK, cfg.floor_seconds / 4.0 / est)))
    start = 1 + cfg.warmup_steps
    secs, idx = timed_steps(step, clock, start, count, block)
    record = {"strategy": strategy, "world_size": w, "rank": rt.rank, "mode": cfg.mode,
              "shape": _shape(cfg.shape), "params": params, "grad_bytes": grad_bytes,
              "tokens_per_step": cfg.shape.batch * cfg.shape.seq, "step0": step0[0],
              "first_loss": float(losses[0]), "seconds": secs, "indices": idx}
    if strategy == "ddp":
        nos, nidx = timed_steps(lambda i: step(i, sync=False), clock, start + count, count, block)
        record.update(nosync_seconds=nos, nosync_indices=nidx)
    record.update(window.close())
    return record


def _shape(c: TinyLMConfig) -> dict[str, int]:
    return {"batch": c.batch, "seq": c.seq, "d": c.d, "L": c.L, "H": c.H}


def _comm_failure(exc: BaseException) -> bool:
    """A lost or silent peer (gloo raises plain RuntimeErrors for these)."""
    text = str(exc)
    return isinstance(exc, getattr(dist, "DistError", ())) or any(
        k in text for k in ("imed out", "by peer", "aborted", "Connection"))


def fsdp_available() -> str | None:
    """``None`` when ``fully_shard`` imports, else why not."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError as exc:
        return f"torch.distributed.fsdp.fully_shard is not in torch {torch.__version__}: {exc}"
    return None


def scaling(rt: Runtime, cfg: DPConfig, strategy: str) -> dict:
    """Every world size 1..N of ``strategy``: this rank's records (``None`` where it was not
    a member), or the error that made the strategy NOT EXECUTABLE here."""
    if strategy == "fsdp" and (why := fsdp_available()):
        return {"strategy": strategy, "runs": [], "error": why}
    runs: list[dict | None] = []
    error = None
    for w in range(1, rt.world_size + 1):
        group = dist.new_group(ranks=list(range(w)), timeout=rt.timeout)
        rec = None
        if rt.rank < w and error is None:
            try:
                rec = run_one(rt, cfg, strategy, w, group)
            except (RuntimeError, NotImplementedError, ValueError, TypeError) as exc:
                if strategy == "ddp" or _comm_failure(exc):
                    raise  # DDP must run; a lost peer is a failed run, not an FSDP verdict
                error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:400]}"
        # every rank learns whether any member failed (a gloo all-reduce: also the barrier
        # where the non-members waited), so all stop this strategy together
        if agree_max(1.0 if error else 0.0, rt.ctrl, torch.device("cpu")) and error is None:
            error = "failed on another rank (its error is in its own record)"
        if rt.rank < w:
            dist.destroy_process_group(group)
        if rt.device.type == "cuda":
            torch.cuda.empty_cache()
        runs.append(rec)
    return {"strategy": strategy, "runs": runs, "error": error}
