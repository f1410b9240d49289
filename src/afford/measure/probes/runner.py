"""Spawn the device probe child and collect its JSON lines (parent side).

The spawn style of :mod:`afford.measure.children` (:class:`~afford.measure.children.Spawned`):
``python -m`` with the parent's ``sys.path`` on ``PYTHONPATH``, a JSON job on stdin, results
as JSON lines on stdout, stderr kept for the error message. On CUDA certify spawns the child
ahead, while the sweep's last child measures (:func:`spawn_probe_child`), so its imports and
CUDA start-up are off the critical path. The child stamps the wall clock when its imports
are done, and the parent noted the spawn on the same clock: spawn to ready is its process
time, so the probe child doubles as a startup run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from afford.core.io import clean_stale_probes
from afford.measure.children import Event, Spawned, child_timeout, exchange, failure_text

TIMEOUT_SECONDS = 900.0  # silence after which the probe child is stopped (AFFORD_CHILD_TIMEOUT)


def spawn_probe_child(device: str, overlapped: bool = False,
                      warm: tuple[str, ...] = ()) -> Spawned:
    """Start the probe child; it imports torch (and, on CUDA, creates its context and
    pre-warms cuBLAS and the fused optimizer) while it waits for its job, and resolves the
    ``warm`` workloads (:func:`afford.measure.children.warm_specs`)."""
    from afford.measure.children import warm_args

    cuda = str(device).startswith("cuda")
    return Spawned("afford.measure.probes.probe_child",
                   (["--device", str(device)] if cuda else []) + warm_args(warm),
                   overlapped=overlapped)


def run_probe_child(job: dict, on_event: Callable[[Event], None] = lambda e: None,
                    timeout: float | None = None, spawned: Spawned | None = None
                    ) -> tuple[dict[str, dict], str | None]:
    """(probe events by key, why the child stopped early or None). The startup event gets
    ``process_seconds``: spawn to ready on the wall clock. ``spawned``: the child started
    ahead (:func:`spawn_probe_child`); else it is started now. The watchdog stops a child
    silent for ``timeout`` seconds (default :func:`~afford.measure.children.child_timeout`
    with :data:`TIMEOUT_SECONDS`)."""
    timeout = child_timeout(TIMEOUT_SECONDS) if timeout is None else timeout
    if job.get("checkpoint_dir"):  # a killed probe's .afford-probe-* folders, left there
        clean_stale_probes(job["checkpoint_dir"])
    kid = spawned or spawn_probe_child(job["device"])
    results: dict[str, dict] = {}
    done: list[bool] = []

    def take(event: dict[str, Any]) -> None:
        event["child"] = "probes"
        if event["event"] == "probe":
            if event["key"] == "startup":
                got = event["result"]
                got["process_seconds"] = max(0.0, got.pop("ready_wall") - kid.spawn_wall)  # wall
                if kid.overlapped:
                    got["role"] += " (spawned ahead: its imports overlapped the sweep's " \
                                   "last child)"
            results[event["key"]] = event
        if event["event"] == "done":
            done.append(True)
        on_event(event)

    rc, tail, timed_out = exchange(kid, job, take, timeout, idle=True)
    if done and rc == 0:
        return results, None
    return results, failure_text("the probe child", rc, tail, timed_out, timeout)
