"""The determinism audit: what is bitwise here, with deterministic mode off and on.

For each workload, one child process with ``torch.use_deterministic_algorithms`` off and one
with it on (``CUBLAS_WORKSPACE_CONFIG`` put in the child's environment before torch starts,
as cuBLAS requires: PyTorch docs, "Reproducibility"). In each child, per workload, K repeats
of one whole training step from the same seed and the same inputs (the workload is built
afresh from the seed each time); the forward output, the loss, the gradients and the
parameters after the optimizer step of every repeat are compared with repeat 0, bitwise
and by max |delta|. Then a few warm steps are timed, so the cost of deterministic mode is
a measured ratio of two medians.

An op with no deterministic kernel raises a ``RuntimeError`` under the flag; the run is
recorded NOT EXECUTABLE with torch's message and the op it names. Which ops raise depends
on the torch version and the device, so nothing here lists them: the audit records what
this box does.

Run as ``python -m afford.measure.determinism`` with a JSON job on stdin; one JSON line per
workload on stdout.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TextIO

import torch

from afford.measure.children import child_env, child_timeout, python_command
from afford.measure.env import cpu_model
from afford.measure.step_capture import StageError, bitwise_equal, capture_step, max_abs_delta
from afford.measure.sweep_child import error_text
from afford.measure.timing import TimingRule, time_point
from afford.schema.determinism_section import AuditRun, DeterminismSection
from afford.workloads import resolve
from afford.workloads.base import train_step, validate_shape
from afford.workloads.clock import clock_for

CUBLAS_DETERMINISTIC = ":4096:8"  # PyTorch docs, "Reproducibility": :4096:8 or :16:8
TIMING_STEPS = 8
CHILD_TIMEOUT_SECONDS = 600.0

_OP_PATTERNS = (
    re.compile(r"(\S+) does not have a deterministic implementation"),
    re.compile(r"not deterministic because it uses (\w+)"),
)


def missing_kernel_op(message: str) -> str | None:
    """The op torch names in a missing-deterministic-kernel error, or ``None``.

    Parsed from the message text (e.g. ``"put_ does not have a deterministic
    implementation, but you set 'torch.use_deterministic_algorithms(True)'..."`` -> ``put_``;
    the cuBLAS workspace error names ``CuBLAS``).
    """
    for pattern in _OP_PATTERNS:
        m = pattern.search(message)
        if m:
            return m.group(1).strip("`'\"")
    return None


# --- inside the child ------------------------------------------------------------------

class _Tally:
    """Comparisons of one quantity over the repeats, against repeat 0."""

    def __init__(self, quantity: str) -> None:
        self.quantity = quantity
        self.differing = 0
        self.max_delta = 0.0
        self.first: str | None = None

    def add(self, ref: dict, new: dict) -> None:
        differs = False
        for name, a in ref.items():
            b = new.get(name)
            if b is not None and bitwise_equal(a, b):
                continue
            differs = True
            self.first = self.first or name
            d = max_abs_delta(a, b) if b is not None else float("inf")  # never NaN
            self.max_delta = max(self.max_delta, d)
        self.differing += differs

    def result(self) -> dict:
        return {"quantity": self.quantity, "bitwise_equal": self.differing == 0,
                "repeats_differing": self.differing, "max_abs_delta": self.max_delta,
                "first_differing": self.first}


def _parts(snap) -> dict[str, dict]:
    fwd = {snap.forward_of or "output": snap.forward} if snap.forward is not None else {}
    return {"forward output": fwd, "loss": {"loss": snap.loss}, "gradients": snap.grads,
            "parameters after step": snap.params}


def _repeat(workload, shape, device, mode: str, seed: int):
    try:
        built = workload.build(shape, device, seed)
    except Exception as exc:
        raise StageError("build", exc) from exc
    try:
        return capture_step(built, mode, device)
    finally:
        del built


def _timing(workload, shape, device, mode: str, seed: int, steps: int) -> dict:
    clock = clock_for(device.type)
    rule = TimingRule(warmup_steps=2, warmup_seconds=0.0, min_steps=steps, floor_seconds=0.0,
                      max_floor_seconds=0.0, max_block=steps)
    built = workload.build(shape, device, seed)
    t = time_point(lambda i: train_step(built, mode, device), clock, rule)
    return {"step0_seconds": t.step0_seconds, "timed_seconds": list(t.timed_seconds),
            "timed_step_indices": list(t.timed_indices), "median_seconds": t.median_seconds,
            "clock": clock.name}


#: the stage of the step that produces each compared quantity, in the step's order
STAGE_OF = {"forward output": "forward", "loss": "forward", "gradients": "backward",
            "parameters after step": "optimizer step"}
STAGES = ("build", "forward", "backward", "optimizer step")


def _ran_before(stage: str) -> tuple[str, ...]:
    """The quantities a step that raised in ``stage`` still produced."""
    n = STAGES.index(stage) if stage in STAGES else 0
    return tuple(q for q, st in STAGE_OF.items() if STAGES.index(st) < n)


def _attempt(workload, shape, device, mode: str, seed: int):
    """(snapshot, None) of a whole step, or (what ran before the failing stage, its
    StageError) when a later stage raised; a build or forward failure is raised."""
    try:
        return _repeat(workload, shape, device, mode, seed), None
    except StageError as exc:
        if exc.partial is None or not _ran_before(exc.stage):
            raise
        return exc.partial, exc


def _compare(workload, shape, device, mode: str, seed: int, repeats: int, run: dict
             ) -> StageError | None:
    """K repeats compared with repeat 0, per quantity: a quantity every repeat produced is
    compared (COSTS 1.6 keeps forward and replay bitwise beside a gradient NOT EXECUTABLE);
    returns the error of the stage that stopped the rest, or None."""
    ref, failed = _attempt(workload, shape, device, mode, seed)
    run["forward_output_of"] = ref.forward_of
    ref_parts = _parts(ref)
    tallies = {q: _Tally(q) for q in STAGE_OF}
    for _ in range(1, repeats):
        snap, err = _attempt(workload, shape, device, mode, seed)
        if err is not None and (failed is None or STAGES.index(err.stage) <
                                STAGES.index(failed.stage)):
            failed = err
        parts = _parts(snap)
        for q, t in tallies.items():
            t.add(ref_parts[q], parts[q])
    ran = _ran_before(failed.stage) if failed is not None else tuple(STAGE_OF)
    run["comparisons"] = [tallies[q].result() for q in ran]
    return failed


def audit_workload(workload, spec: str, value: int, device, mode: str, repeats: int,
                   seed: int, deterministic: bool, timing_steps: int = TIMING_STEPS) -> dict:
    """K repeats of one step, compared with repeat 0; then a few timed warm steps.
    Returns the fields of :class:`afford.schema.determinism_section.AuditRun`. A stage that raises
    after the forward (an op with no deterministic backward) leaves the quantities before it
    compared and the rest NOT EXECUTABLE (``not_executable`` then names them)."""
    if repeats < 2:
        raise ValueError(f"repeats={repeats}: the audit compares repeats with repeat 0, "
                         "so it needs at least 2")
    run: dict[str, Any] = {"workload": spec, "value": value, "mode": mode,
                           "deterministic": deterministic, "repeats": repeats}
    stage = "build"
    flag = "on" if deterministic else "off"
    try:
        shape = validate_shape(workload, value)
        run["shape"] = shape
        failed = _compare(workload, shape, device, mode, seed, repeats, run)
        if failed is not None:
            rest = [q for q in STAGE_OF if q not in _ran_before(failed.stage)]
            run.update(stage=failed.stage, op=missing_kernel_op(str(failed.exc)),
                       not_executable={"what": f"{spec} at {value}, deterministic mode "
                                       f"{flag}: {', '.join(rest)} ({failed.stage})",
                                       "reason": error_text(failed.exc)})
            return run
        stage = "timing"
        run["timing"] = _timing(workload, shape, device, mode, seed, timing_steps)
    except Exception as exc:  # recorded, never raised: rule 9
        stage = exc.stage if isinstance(exc, StageError) else stage
        cause = exc.exc if isinstance(exc, StageError) else exc
        run.update(stage=stage, op=missing_kernel_op(str(cause)),
                   not_executable={"what": f"{spec} at {value}, deterministic mode {flag}: "
                                           f"{stage}", "reason": error_text(cause)})
    return run


def _child_state() -> dict:
    fill = getattr(getattr(torch.utils, "deterministic", None), "fill_uninitialized_memory",
                   None)
    return {"torch_version": torch.__version__,
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            "fill_uninitialized_memory": bool(fill) if fill is not None else None}


def main() -> int:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # workload prints go to stderr; stdout carries only our JSON lines
    sys.stdout = sys.stderr
    job = json.load(sys.stdin)
    torch.use_deterministic_algorithms(bool(job["deterministic"]))  # before any CUDA work
    device = torch.device(job["device"])
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else (cpu_model()
                                                                              or "cpu")
    state = _child_state()
    _emit(out, {"event": "start", "device_name": name, **state})
    for item in job["items"]:
        gc.collect()
        workload = resolve(item["workload"], job["device_class"])
        run = audit_workload(workload, item["workload"], int(item["value"]), device,
                             item["mode"], int(job["repeats"]), int(job["seed"]),
                             bool(job["deterministic"]), int(job.get("timing_steps",
                                                                     TIMING_STEPS)))
        run["cublas_workspace_config"] = state["cublas_workspace_config"]
        run["fill_uninitialized_memory"] = state["fill_uninitialized_memory"]
        _emit(out, {"event": "run", "run": run})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    out.close()
    return 0


def _emit(out: TextIO, event: dict) -> None:
    out.write(json.dumps(event) + "\n")
    out.flush()


# --- in the parent ---------------------------------------------------------------------

def child_environment(deterministic: bool) -> dict[str, str]:
    """The child's environment: the parent's, plus (deterministic child) the cuBLAS
    workspace setting, unless the user set one already."""
    env = child_env()
    if deterministic:
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    return env


def run_child(job: dict, timeout: float | None = None) -> tuple[list[dict], str]:
    """Run one audit child; its events, and the tail of its stderr when it failed. It is
    stopped after ``timeout`` (default :func:`~afford.measure.children.child_timeout` with
    :data:`CHILD_TIMEOUT_SECONDS`)."""
    timeout = child_timeout(CHILD_TIMEOUT_SECONDS) if timeout is None else timeout
    env = child_environment(bool(job["deterministic"]))
    try:
        proc = subprocess.run(python_command("afford.measure.determinism"),
                              input=json.dumps(job), capture_output=True, text=True,
                              env=env, timeout=timeout)
        stdout, rc, err = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc, err = None, f"timed out after {timeout:.0f} s"
    events = []
    for line in stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a crash: its run is lost
            continue
    why = "" if rc == 0 else f"audit child exited with {rc}: {(err or '')[-1500:].strip()}"
    return events, why


def run_audit(items: list[dict], *, device: str, device_class: str, repeats: int = 8,
              seed: int = 0, timing_steps: int = TIMING_STEPS,
              on_event: Callable[[dict], None] = lambda e: None):
    """Audit every item (``{"workload", "value", "mode"}``) with the flag off, then on.
    Returns a :class:`~afford.schema.determinism_section.DeterminismSection`."""
    runs, names, torch_version, warnings = [], [], None, []
    for deterministic in (False, True):
        job = {"deterministic": deterministic, "device": device, "device_class": device_class,
               "repeats": repeats, "seed": seed, "timing_steps": timing_steps, "items": items}
        on_event({"event": "audit-child", "deterministic": deterministic})
        events, why = run_child(job)
        start = next((e for e in events if e["event"] == "start"), {})
        names.append(start.get("device_name"))
        torch_version = torch_version or start.get("torch_version")
        done = {(e["run"]["workload"], e["run"]["value"]): e["run"] for e in events
                if e["event"] == "run"}
        if why:
            warnings.append(why)
        for it in items:
            run = done.get((it["workload"], it["value"])) or _lost(it, deterministic,
                                                                   repeats, why)
            runs.append(AuditRun(**run))
    return DeterminismSection(device=device, device_name=next((n for n in names if n), "?"),
                              torch_version=torch_version or "?", repeats=repeats, seed=seed,
                              runs=runs, warnings=warnings)


def _lost(item: dict, deterministic: bool, repeats: int, why: str) -> dict:
    flag = "on" if deterministic else "off"
    return {"workload": item["workload"], "value": item["value"], "mode": item["mode"],
            "deterministic": deterministic, "repeats": repeats, "stage": "child",
            "not_executable": {"what": f"{item['workload']} at {item['value']}, "
                                       f"deterministic mode {flag}",
                               "reason": why or "the audit child gave no result",
                               "failed": bool(why)}}


if __name__ == "__main__":
    sys.exit(main())
