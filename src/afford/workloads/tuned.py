"""Step options on any workload, named after ``+`` in its spec (``tinylm@q3+compile``).

They are how the levers are measured as A/B pairs by the ordinary child protocol, and how a
step is taken apart for the sizes stage. Each changes one thing about the built step:

- ``fused`` / ``foreach``: rebuild the workload's Adam or AdamW with that implementation
  (PyTorch docs, ``torch.optim``: "fused" runs one kernel for all parameters, "foreach"
  one kernel per op over lists of tensors); any other optimizer is refused with the reason.
- ``compile``: ``torch.compile`` the model in place (``nn.Module.compile``). Compilation
  happens in step 0 (and any recompile in the warm-up), which the protocol keeps apart
  from the timed warm steps.
- ``cudagraphs``: capture the whole training step (forward, backward, optimizer) in one
  CUDA graph and replay it (PyTorch docs, "CUDA Graphs", whole-network capture): warm-up
  iterations on a side stream, a ``capturable`` optimizer, autocast without its cast cache
  during capture. The capture is done in step 0. Each replay trains on the batch that was
  captured (the values of the data do not change the cost of a step). ``train_step``'s own
  zero_grad/backward/step become host-side no-ops around the replay (a backward on a
  0-d CPU leaf: microseconds).
- ``phases``: mark the end of zero_grad, forward, backward and optimizer within each step on
  the child's own clock (CUDA events on CUDA, ``perf_counter`` on the CPU) and report the
  three phases' seconds per step; four extra marks per step.
- ``flops``: after timing, count the FLOPs of one forward + backward with
  ``torch.utils.flop_counter.FlopCounterMode`` and report them (attention counted as full,
  not causal, as in PaLM's appendix B; on the CPU the fused attention kernel is not counted).
- ``x<k>``: the batch (the shape's ``batch``, ``n`` or ``B``) times k.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from afford.workloads.base import Built, Workload, WorkloadRefused
from afford.workloads.clock import clock_for
from afford.workloads.names import OPTIONS, parse_options  # noqa: F401 - the grammar, torch-free

BATCH_KEYS = ("batch", "n", "B")
GRAPH_WARMUP_ITERS = 3  # side-stream iterations before capture (PyTorch CUDA Graphs docs)


def batch_factor(options: tuple[str, ...]) -> int:
    return next((int(o[1:]) for o in options if o.startswith("x")), 1)


def batch_key(shape: dict[str, int]) -> str | None:
    return next((k for k in BATCH_KEYS if k in shape), None)


class Tuned(Workload):
    """``inner`` with step options; everything else (name, sweep, dims) is the inner one's."""

    def __init__(self, inner: Workload, options: tuple[str, ...]) -> None:
        self.inner = inner
        self.options = options
        self.name = inner.name
        self.sweep_param = inner.sweep_param
        self.description = f"{inner.description} (+{'+'.join(options)})"
        self.attention = inner.attention

    def default_sweep(self, device_class: str) -> list[int]:
        return self.inner.default_sweep(device_class)

    def shape(self, value: int) -> dict[str, int]:
        shape = dict(self.inner.shape(value))
        k = batch_factor(self.options)
        if k > 1:
            key = batch_key(shape)
            if key is None:
                raise ValueError(f"workload {self.name!r}: x{k} needs a batch entry in the "
                                 f"shape ({', '.join(BATCH_KEYS)}); it has {sorted(shape)}")
            shape[key] *= k
        return shape

    def dims(self, shape: dict[str, int]) -> dict[str, int] | None:
        return self.inner.dims(shape)

    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        opts = self.options
        if "cudagraphs" in opts and device.type != "cuda":
            raise WorkloadRefused(f"CUDA graphs need a CUDA device; this is {device.type}")
        if "compile" in opts:
            torch._dynamo.reset()  # a fresh compile per point, not a cache hit from another
        built = self.inner.build(shape, device, seed)
        flags: dict[str, Any] = {}
        if "fused" in opts:
            flags.update(fused=True, foreach=False)
        if "foreach" in opts:
            flags.update(fused=False, foreach=True)
        if "cudagraphs" in opts:
            flags.update(capturable=True)
        if flags:
            built.optimizer = rebuild_optimizer(built.optimizer, **flags)
        if "compile" in opts:
            built.model.compile()
        if "cudagraphs" in opts:
            built = graphed(built, device)
        reports: list[Callable[[], dict]] = [built.report] if built.report else []
        if "phases" in opts:
            built, phase_report = phased(built, device)
            reports.append(phase_report)
        if "flops" in opts:
            reports.append(flops_report(built, device))
        if reports:
            built.report = lambda: {k: v for r in reports for k, v in r().items()}
        return built


def rebuild_optimizer(opt: torch.optim.Optimizer, **flags: Any) -> torch.optim.Optimizer:
    """The same Adam/AdamW over the same parameter groups, with ``flags`` changed."""
    cls = type(opt)
    if cls not in (torch.optim.Adam, torch.optim.AdamW):
        raise WorkloadRefused(f"the workload's optimizer is {cls.__name__}; the optimizer "
                              "options rebuild Adam or AdamW only")
    groups = [{**g, **flags} for g in opt.param_groups]
    try:
        return cls(groups, **flags)
    except (RuntimeError, ValueError) as exc:
        raise WorkloadRefused(f"{cls.__name__}({flags}) is not available here: {exc}") from exc


class _NoOpOptimizer:
    """Stands in for the optimizer when the whole step is replayed from a CUDA graph."""

    def __init__(self, inner: torch.optim.Optimizer) -> None:
        self.inner = inner
        self.param_groups = inner.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        return None

    def step(self) -> None:
        return None


def graphed(built: Built, device: torch.device) -> Built:
    """Capture forward + backward + optimizer step on the first call; replay afterwards."""
    opt, inner_loss = built.optimizer, built.loss
    proxy = torch.zeros((), requires_grad=True)  # returned to train_step; CPU, 0-d
    state: dict[str, Any] = {}

    def whole_step(dtype: torch.dtype, enabled: bool) -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype, enabled=enabled, cache_enabled=False):
            loss = inner_loss()
        with torch.autocast(device.type, enabled=False):
            loss.backward()
            opt.step()
        return loss

    def capture() -> None:
        enabled = torch.is_autocast_enabled(device.type)
        dtype = torch.get_autocast_dtype(device.type)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for i in range(GRAPH_WARMUP_ITERS):
                opt.zero_grad(set_to_none=True)
                loss = whole_step(dtype, enabled)
                if i == 0:
                    first = float(loss.detach())
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            state["loss"] = whole_step(dtype, enabled)
        state["graph"] = graph
        with torch.no_grad():
            proxy.fill_(first)

    def loss() -> torch.Tensor:
        if "graph" not in state:
            capture()
        state["graph"].replay()
        return proxy

    return Built(model=built.model, optimizer=_NoOpOptimizer(opt),
                 loss=loss, tokens_per_step=built.tokens_per_step, vocab=built.vocab,
                 report=built.report)


class _MarkedOptimizer:
    """Marks the end of zero_grad (a step's start), of backward and of the optimizer."""

    def __init__(self, inner: torch.optim.Optimizer, clock: Any, steps: list[list]) -> None:
        self.inner, self.clock, self.steps = inner, clock, steps
        self.param_groups = inner.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.inner.zero_grad(set_to_none=set_to_none)
        self.steps.append([self.clock.mark()])

    def step(self) -> None:
        self.steps[-1].append(self.clock.mark())
        self.inner.step()
        self.steps[-1].append(self.clock.mark())


def phased(built: Built, device: torch.device) -> tuple[Built, Callable[[], dict]]:
    """``built`` with its step marked into forward, backward and optimizer, and the report
    of their seconds per step (steps in the order taken: index i is the child's step i)."""
    clock = clock_for(device.type)
    steps: list[list] = []
    inner_loss = built.loss

    def loss() -> torch.Tensor:
        out = inner_loss()
        steps[-1].append(clock.mark())
        return out

    def report() -> dict:
        clock.sync()
        whole = [(i, m) for i, m in enumerate(steps) if len(m) == 4]
        return {"phases": {
            "clock": clock.name,
            "step_index": [i for i, _ in whole],
            "forward_seconds": [clock.between(m[0], m[1]) for _, m in whole],
            "backward_seconds": [clock.between(m[1], m[2]) for _, m in whole],
            "optimizer_seconds": [clock.between(m[2], m[3]) for _, m in whole]}}

    marked = Built(model=built.model,
                   optimizer=_MarkedOptimizer(built.optimizer, clock, steps),
                   loss=loss, tokens_per_step=built.tokens_per_step, vocab=built.vocab,
                   report=built.report)
    return marked, report


def flops_report(built: Built, device: torch.device) -> Callable[[], dict]:
    """Count one forward + backward's FLOPs (after timing; the step is not timed)."""

    def report() -> dict:
        from torch.utils.flop_counter import FlopCounterMode

        try:
            built.model.zero_grad(set_to_none=True)
            with FlopCounterMode(display=False) as counter:
                built.loss().backward()
            total = int(counter.get_total_flops())
        except Exception as exc:  # a count that fails is reported, the point stays timed
            return {"flops_error": f"{type(exc).__name__}: {exc}"[:500]}
        note = "; the CPU's fused attention kernel is not counted" if device.type == "cpu" \
            else ""
        return {"flops_per_step": total,
                "flops_source": f"torch.utils.flop_counter.FlopCounterMode over one forward + "
                                f"backward on {device.type}, torch {torch.__version__}{note}"}

    return report
