"""The process group that torchrun made: detect it, join it, watch it, leave it.

``torchrun`` (``python -m torch.distributed.run``) starts the processes and sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` (PyTorch docs, "torchrun (Elastic
Launch)"); afford starts nothing of its own. Each rank binds to ``cuda:LOCAL_RANK`` and
joins with NCCL, or with gloo on a CPU box. Every group is made with the same timeout, so a
rank that dies or hangs ends every collective that waits for it with an error instead of a
hang. Control traffic (waiting ranks, gathering readings) goes over a gloo group, so a rank
that waits for others waits on the host, not in a GPU kernel.

Progress and errors of each rank are also written to torchrun's rendezvous store (hosted by
the agent, so it outlives a dead worker): that is how rank 0 knows, after a failure, which
ranks finished which stages.

When one worker fails, the torchrun agent sends SIGTERM to the others and SIGKILL 30 s
later (torch.distributed.elastic, ``PContext.close``). Rank 0 turns SIGTERM into an
exception while it measures and ignores it while it writes what it has.

NVLink multicast stays off in every process afford runs (:data:`ENV_FLAGS`): a multi-GPU
machine here shares its GPUs. NCCL's watchdog is told to abort the communicator on a
timeout but keep the process (``TORCH_NCCL_ASYNC_ERROR_HANDLING=2``, CleanUpOnly), so rank
0 survives to write a partial certificate.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from afford.core.errors import InputError

ENV_FLAGS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
             "NVSHMEM_DISABLE_NVLS": "1"}
NCCL_DEFAULTS = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}
FAIL_ENV = "AFFORD_TEST_FAIL"  # tests only: "RANK:STAGE:exit" or "RANK:STAGE:hang"
TORCHRUN_HINT = ("torchrun --nproc-per-node=N -m afford certify --distributed "
                 "(or python -m torch.distributed.run --nproc-per-node=N -m afford ...)")


class LauncherStopped(BaseException):
    """SIGTERM from the launcher: another rank failed and torchrun is stopping this one."""


@dataclass(frozen=True)
class Launch:
    """What torchrun told this process."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def detect_launch(environ: dict[str, str] | None = None) -> Launch | None:
    """The torchrun environment, or ``None`` when this process was not started by it."""
    env = os.environ if environ is None else environ
    if not all(k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return None
    try:
        rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise InputError("RANK, WORLD_SIZE and LOCAL_RANK must be integers; start afford "
                         f"with {TORCHRUN_HINT}") from None
    if not (0 <= rank < world and 0 <= local < local_world):
        raise InputError(f"inconsistent torchrun environment: RANK={rank}, "
                         f"WORLD_SIZE={world}, LOCAL_RANK={local}")
    return Launch(rank, world, local, local_world)


def require_launch() -> Launch:
    launch = detect_launch()
    if launch is None:
        raise InputError("--distributed needs the environment torchrun sets (RANK, "
                         f"WORLD_SIZE, LOCAL_RANK); start it as {TORCHRUN_HINT}")
    return launch


def apply_env_flags() -> dict[str, str]:
    """Turn NVLink multicast off (always) and set NCCL's error handling (unless the user
    chose one). Must run before the process group starts. Returns what is in force."""
    os.environ.update(ENV_FLAGS)
    for k, v in NCCL_DEFAULTS.items():
        os.environ.setdefault(k, v)
    return {k: os.environ[k] for k in (*ENV_FLAGS, *NCCL_DEFAULTS)}


def choose_device(launch: Launch, requested: str | None) -> torch.device:
    """``cuda:LOCAL_RANK`` when CUDA is there (and not ``--device cpu``), else the CPU."""
    if requested and requested.startswith("cpu"):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        if requested and requested.startswith("cuda"):
            raise InputError("--device cuda: no CUDA device is visible to torch here")
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if launch.local_rank >= count:
        raise InputError(f"LOCAL_RANK {launch.local_rank} but only {count} CUDA device(s) "
                         "are visible: use --nproc-per-node at most the GPU count")
    return torch.device("cuda", launch.local_rank)


@dataclass
class Runtime:
    """A joined process group and what this rank needs to work in it."""

    launch: Launch
    device: torch.device
    backend: str
    timeout: timedelta
    ctrl: Any  # gloo group for control traffic (the world group itself under gloo)
    store: Any | None
    env_flags: dict[str, str] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return self.launch.rank

    @property
    def world_size(self) -> int:
        return self.launch.world_size

    @property
    def is_root(self) -> bool:
        return self.launch.rank == 0


def start(launch: Launch, timeout_seconds: float, requested_device: str | None = None
          ) -> Runtime:
    """Bind the device and join the group torchrun prepared (``env://``)."""
    flags = apply_env_flags()
    device = choose_device(launch, requested_device)
    timeout = timedelta(seconds=timeout_seconds)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
        ctrl = dist.new_group(backend="gloo", timeout=timeout)
        backend = "nccl"
    else:
        dist.init_process_group("gloo", timeout=timeout)
        ctrl = dist.group.WORLD
        backend = "gloo"
    return Runtime(launch=launch, device=device, backend=backend, timeout=timeout, ctrl=ctrl,
                   store=_default_store(), env_flags=flags)


def stop(rt: Runtime) -> None:
    """Every group destroyed while the interpreter is whole. Objects in reference cycles
    (a DDP wrapper's reducer holds its group) are collected first: one left for the
    interpreter's finalisation takes gloo's worker threads down with it, and the rank dies
    of SIGABRT ("terminate called without an active exception") after its work is done,
    which torchrun reports as the run's failure (1 run in 13 on a 2-core box)."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
    gc.collect()


def _default_store():
    """The rendezvous store of the default group (private accessor; ``None`` if absent)."""
    try:
        from torch.distributed import distributed_c10d

        return distributed_c10d._get_default_store()
    except Exception:  # older or newer torch without it: progress is then not recorded
        return None


def gather(rt: Runtime, payload: Any) -> list[Any] | None:
    """Every rank's ``payload`` on rank 0 (``dist.gather_object`` over the gloo group)."""
    out = [None] * rt.world_size if rt.is_root else None
    dist.gather_object(payload, out, dst=0, group=rt.ctrl)
    return out


def wait_all(rt: Runtime) -> None:
    """All ranks meet here (a gloo barrier, with the group's timeout)."""
    dist.barrier(group=rt.ctrl)


# -- progress in the rendezvous store -------------------------------------------------------

def _key(rank: int, what: str) -> str:
    return f"afford/{rank}/{what}"


def mark(rt: Runtime, what: str, value: Any = "1") -> None:
    """Record ``what`` for this rank in the store; never raises (the store may be gone)."""
    if rt.store is None:
        return
    try:
        rt.store.set(_key(rt.rank, what), json.dumps(value))
    except Exception:
        pass


def read_mark(rt: Runtime, rank: int, what: str) -> Any | None:
    """A rank's record, or ``None`` when it never wrote it (non-blocking check first)."""
    if rt.store is None:
        return None
    try:
        key = _key(rank, what)
        if not rt.store.check([key]):
            return None
        return json.loads(rt.store.get(key))
    except Exception:
        return None


# -- failure ---------------------------------------------------------------------------------

class _Guard:
    protect = False  # set: SIGTERM is ignored from now on
    failed = False   # set: keep ignoring SIGTERM after the block (we write what we have)


@contextmanager
def launcher_signals() -> Iterator[_Guard]:
    """SIGTERM raises :class:`LauncherStopped` while measuring; once ``guard.protect`` is
    set it is ignored. After the block the old handler comes back, unless ``guard.failed``:
    then SIGTERM stays ignored so the partial certificate gets written (torchrun's SIGKILL
    follows 30 s after its SIGTERM)."""
    guard = _Guard()

    def on_term(signum, frame):
        if not guard.protect:
            raise LauncherStopped("stopped by the launcher (SIGTERM): another rank failed")

    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: leave signals alone
        yield guard
        return
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN if guard.failed else old)


def maybe_fail(rt: Runtime, stage: str) -> None:
    """Test hook: ``AFFORD_TEST_FAIL=RANK:STAGE:exit|hang`` makes that rank die (exit code
    17) or hang (sleep past the timeout) at the start of that stage."""
    spec = os.environ.get(FAIL_ENV)
    if not spec:
        return
    rank, st, mode = spec.split(":")
    if int(rank) != rt.rank or st != stage:
        return
    if mode == "exit":
        os._exit(17)
    time.sleep(3 * rt.timeout.total_seconds() + 30)


def rank_info(rt: Runtime) -> dict:
    d = rt.device
    name = torch.cuda.get_device_name(d) if d.type == "cuda" else "cpu"
    return {"rank": rt.rank, "local_rank": rt.launch.local_rank, "hostname": socket.gethostname(),
            "pid": os.getpid(), "device": str(d), "device_name": name}


def wait_device(device: torch.device, event=None) -> None:
    """Wait for the GPU by polling an event from Python instead of blocking in a CUDA
    synchronize: a rank stuck behind a dead peer's NCCL kernel then still runs its SIGTERM
    handler and writes what it has before torchrun's SIGKILL (30 s later)."""
    if device.type != "cuda":
        return
    if event is None:
        event = torch.cuda.Event()
        event.record()
    while not event.query():
        time.sleep(1e-4)


def agree_max(value: float, group, device: torch.device) -> float:
    """The largest ``value`` over ``group`` (so every member picks the same count)."""
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    wait_device(device)
    return float(t.item())
