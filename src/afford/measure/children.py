"""Spawn the independent children, one after another, and collect their JSON lines.

Children run one at a time (they would contend for the device otherwise). Each gets every
sweep point in its own shuffled order, so drift over a run does not masquerade as a law
(docs/DESIGN.md section 3, rule 2). A child that dies leaves its finished points intact and an
error on the rest.

On CUDA child k+1 is spawned while child k measures, and pre-warmed (``--prewarm``: CUDA
context and cuBLAS handle created before it reads its job), so neither its imports nor the
CUDA start-up are on the critical path; as the last child starts, certify spawns the
stages' children the same way (``on_last``). Child 0 is the one the console script spawned
as ``afford certify`` began (:func:`spawn_early`, :func:`take_early`), before the parent
imported torch, when it suits the device. Each child's ``start`` event doubles as a startup
run (:func:`startup_run`): the child's import times, and spawn-to-ready on the wall clock.
:class:`Spawned` is the process handle every child of certify uses.

A watchdog stops a sweep child that sends nothing for :func:`child_timeout` seconds
(``AFFORD_CHILD_TIMEOUT``, default 900: a stopped or hung child must not hang certify); its
points are recorded as stopped by the watchdog, and every point a child left unfinished
(it died, or the watchdog stopped it) is measured once more in a fresh child
(``round="remeasure"``). :func:`failure_text` is the one wording of a child's end.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from afford.core.errors import InputError
from afford.core.units import UnitError, bounded, parse_number
from afford.measure.timeline import mark
from afford.measure.timing import TimingRule

Event = dict[str, Any]

CHILD_TIMEOUT_SECONDS = 900.0  # silence (no event) after which a sweep child is stopped
CHILD_TIMEOUT_ENV = "AFFORD_CHILD_TIMEOUT"
MIN_CHILD_TIMEOUT = 1.0  # seconds: less would stop a child before it reported anything
MAX_CHILD_TIMEOUT = 7 * 86400.0  # a week


def child_timeout(default: float = CHILD_TIMEOUT_SECONDS) -> float:
    """Seconds a child of certify (sweep, probe, memory, audit, startup) may go without
    sending an event before its watchdog stops it: ``AFFORD_CHILD_TIMEOUT`` when set, the
    one setting every child honours, else ``default`` (each kind of child has its own).
    A value that is not a number of seconds from :data:`MIN_CHILD_TIMEOUT` to a week is an
    InputError (exit 2), before anything is measured: ``1e-320`` would stop every child
    at once, ``1e99`` none ever."""
    text = os.environ.get(CHILD_TIMEOUT_ENV, "").strip()
    if not text:
        return default
    try:
        return bounded(parse_number(text, CHILD_TIMEOUT_ENV), CHILD_TIMEOUT_ENV,
                       low=MIN_CHILD_TIMEOUT, high=MAX_CHILD_TIMEOUT, low_open=False)
    except UnitError as exc:
        raise InputError(f"{exc}: the seconds a child may go silent") from None


def failure_text(who: str, rc: int | None, tail: str, timed_out: bool,
                 timeout: float | None) -> str:
    """How a child's end is reported: stopped by the watchdog (its timeout named as such),
    or the exit code, with the tail of its stderr."""
    if timed_out:
        why = (f"{who} was stopped by the watchdog after {timeout:g} s without progress "
               f"(a hung or stopped process; {CHILD_TIMEOUT_ENV} sets the limit)")
    else:
        why = f"{who} exited with code {rc}"
    return why + (f": {tail}" if tail and not timed_out else "")


def child_order(items: list[dict], child: int) -> list[dict]:
    """The order child ``child`` times the points in: a shuffle seeded by its index."""
    order = list(items)
    random.Random(child).shuffle(order)
    return order


# Python 3.10 has no -P: the child starts through this bootstrap, which drops the entry
# ``-c`` puts first on sys.path (``''``, the working folder), then runs the module as -m.
_BOOTSTRAP = ("import runpy, sys; sys.path[:1] = [] if sys.path[:1] == [''] else "
              "sys.path[:1]; runpy.run_module(sys.argv.pop(1), run_name='__main__', "
              "alter_sys=True)")


def python_command(module: str, args: list[str] | tuple[str, ...] = ()) -> list[str]:
    """``python -P -m MODULE ARGS``: every child afford spawns with ``sys.executable``
    starts without the working folder on ``sys.path`` (``-m`` puts it first, so a
    ``numpy.py`` left there would run in every measuring child). ``PYTHONPATH`` is honoured;
    a user workload's folder is added by the child itself, and only for it
    (:mod:`afford.core.user_code`). Python 3.10: the same through :data:`_BOOTSTRAP`."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _BOOTSTRAP, module, *args]


def child_env() -> dict[str, str]:
    """The parent's environment, with its ``sys.path`` on ``PYTHONPATH`` (the same afford
    and packages, as the GPU machine passes them) less the working folder, which the
    parent's own start may have put there (``python -m afford``); the user's
    ``PYTHONPATH`` is kept whole."""
    env = dict(os.environ)
    here = os.path.realpath(os.getcwd())
    paths = [p for p in sys.path if p and os.path.realpath(p) != here]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class Spawned:
    """A child process started now (``python -m MODULE ARGS``) that reads its JSON job on
    stdin when the parent gets to it: stdout is its JSON lines, stderr goes to a temporary
    file for the error message. ``spawn_wall`` is the wall clock at the spawn, the clock
    the child stamps its readiness on; ``overlapped``: spawned while another child measured
    on the device."""

    def __init__(self, module: str, args: list[str] | None = None,
                 env: dict[str, str] | None = None, overlapped: bool = False) -> None:
        self.err = tempfile.TemporaryFile(mode="w+")
        self.overlapped = overlapped
        self.early = False  # spawned by the console script, before the parent's imports
        self.spawn_wall = time.time()
        self.proc = subprocess.Popen(python_command(module, list(args or [])),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, env=env or child_env())

    def stderr_tail(self, chars: int = 1500) -> str:
        self.err.seek(0)
        return self.err.read()[-chars:].strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.err.close()


def exchange(kid, job: dict, on_event: Callable[[Event], None],
             timeout: float | None = None, *, idle: bool = False) -> tuple[int | None, str, bool]:
    """The one conversation with a child of certify (a :class:`Spawned`, or anything with
    its ``proc``, ``stderr_tail`` and ``kill``): the JSON job on stdin, each JSON line of
    stdout to ``on_event`` as it comes, the exit; then the process is stopped whatever
    happened. Returns (exit code, the tail of its stderr, whether ``timeout`` ran out and
    the child was killed: a hung child must not hang certify). ``idle``: ``timeout`` counts
    from the child's last line, not from the start (a sweep child's run has no fixed
    length, but it reports every point). A line that is not JSON ends the exchange as a
    failed child, never a traceback."""
    proc = kid.proc
    expired: list[bool] = []
    last = [time.monotonic()]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(min(1.0, timeout)):
            if time.monotonic() - last[0] >= timeout:
                expired.append(True)
                proc.kill()
                return

    watchdog = threading.Thread(target=watch, daemon=True) if timeout else None
    if watchdog is not None:
        watchdog.start()
    rc = None
    try:
        assert proc.stdin is not None and proc.stdout is not None
        mark("job", pid=proc.pid, child=job.get("child"), round=job.get("round"))
        try:
            proc.stdin.write(json.dumps(job))
            proc.stdin.close()
        except (BrokenPipeError, OSError):  # the child died at once; its stderr says why
            pass
        for line in proc.stdout:
            if idle:
                last[0] = time.monotonic()
            try:
                event = json.loads(line)
            except ValueError:
                proc.kill()
                break
            mark("event", pid=proc.pid, event=event.get("event"), key=event.get("key"))
            on_event(event)
        rc = proc.wait()
        mark("exit", pid=proc.pid, rc=rc)
    finally:
        done.set()
        if watchdog is not None:
            watchdog.join()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        tail = kid.stderr_tail()
        kid.kill()
    return rc, tail, bool(expired)


def warm_specs(specs) -> list[str]:
    """The workload specs worth resolving in a child before its job arrives: transformers
    models (``hf:``) and user workloads (``pkg.module:factory``), whose imports and config
    take seconds a process; the built-ins take milliseconds."""
    return [s for s in dict.fromkeys(specs) if ":" in s.partition("+")[0]]


def warm_args(specs) -> list[str]:
    """A child's ``--warm SPEC`` arguments (:func:`afford.measure.sweep_child.warm`)."""
    return [a for s in warm_specs(specs) for a in ("--warm", s)]


class _Child(Spawned):
    """A sweep child. It imports torch at once and then waits for its job on stdin, so the
    next child can be started while the current one measures (CUDA only: on a CPU device
    the import would compete with the timed steps for the same cores). ``warm``: workload
    specs it resolves while it waits (:func:`warm_specs`)."""

    def __init__(self, prewarm: str | None = None, overlapped: bool = False,
                 warm: tuple[str, ...] = (), early: bool = False,
                 describe: bool = False, env: dict[str, str] | None = None) -> None:
        self.prewarm = prewarm
        super().__init__("afford.measure.sweep_child",
                         (["--prewarm", prewarm] if prewarm else []) + warm_args(warm)
                         + (["--early"] if early else []) + (["--describe"] if describe else []),
                         env=env, overlapped=overlapped)
        self.early = early  # spawned by the console script, before the parent's imports
        self.describes = describe  # its first line describes its hf: specs' configs
        self.described: dict[str, dict] | None = None  # that line, once read


_EARLY: list[_Child] = []


def spawn_early(prewarm: str | None, warm: tuple[str, ...] = (),
                bytecode: str | None = None) -> None:
    """Spawn the first sweep child now, before the parent imports torch (the console
    script does this for ``afford certify``); ``prewarm``: a CUDA device, ``"auto"`` (CUDA
    when the child finds it), or None; ``bytecode``: afford's bytecode folder, when the
    image carries none (:mod:`afford.core.bytecode`: this child's start is the command's
    critical path, and its startup run counts towards no figure). The child waits for its
    job on stdin; if the parent exits first, the closed pipe ends it."""
    import atexit

    from afford.core.bytecode import child_env as with_bytecode

    hf = any(s.startswith("hf:") for s in warm_specs(warm))
    kid = _Child(prewarm=prewarm, warm=warm, early=True, describe=hf,  # a contended run
                 env=with_bytecode(child_env(), bytecode))
    _EARLY.append(kid)
    atexit.register(kid.kill)


DESCRIBE_TIMEOUT_SECONDS = 300.0  # the early child's imports and configs, on a slow host


def early_described(specs, timeout: float | None = None) -> dict[str, dict]:
    """The configs certify's early child described of the ``hf:`` specs it was spawned to
    warm (its first line, read once; :func:`afford.workloads.hf_models.describe`), by spec:
    the parent plans from them and never imports transformers, which on a GPU image took
    4-10 s of a transformers certify's start while the child imported it anyway. Empty
    where no such child runs, or it ended or said nothing within ``timeout`` seconds
    (:func:`child_timeout` of :data:`DESCRIBE_TIMEOUT_SECONDS`): the parent then resolves
    the specs itself, as it always did."""
    kid = _EARLY[-1] if _EARLY else None
    if kid is None or not kid.describes:
        return {}
    if kid.described is None:
        kid.described = _read_described(
            kid, child_timeout(DESCRIBE_TIMEOUT_SECONDS) if timeout is None else timeout)
        mark("described", pid=kid.proc.pid, specs=sorted(kid.described))
    return {s: kid.described[s] for s in specs if s in kid.described}


def _read_described(kid: _Child, timeout: float) -> dict[str, dict]:
    import select

    out = kid.proc.stdout
    try:
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline() if ready else ""
        event = json.loads(line) if line else {}
    except (OSError, ValueError):
        return {}
    configs = event.get("configs") if event.get("event") == "described" else None
    return {k: v for k, v in configs.items() if isinstance(v, dict)} \
        if isinstance(configs, dict) else {}


def take_early(device: str) -> _Child | None:
    """The child :func:`spawn_early` started, if it suits ``device`` (pre-warmed for it,
    ``auto`` on CUDA, or nothing on a CPU); one that does not is stopped. None if none."""
    if not _EARLY:
        return None
    kid = _EARLY.pop()
    cuda = device.startswith("cuda")
    if kid.prewarm == device or (cuda and kid.prewarm == "auto") or \
            (not cuda and kid.prewarm in (None, "auto")):
        return kid
    kid.kill()
    return None


def run_child(child: int, items: list[dict], *, device: str, device_class: str,
              rule: TimingRule, seed: int, on_event: Callable[[Event], None],
              spawned: _Child | None = None, timeout: float | None = None,
              options: dict | None = None, skipped: list[dict] | None = None
              ) -> dict[str, Event]:
    """Run one child over ``items`` (already in its order); return point events by key.
    ``options``: job-wide flags for this child (``synced``, ``count_flops``, ``round``,
    ``profile``). ``skipped``: items it neither times nor profiles (each with its
    ``skipped`` reason); each gets a record without a median that says why."""
    skipped = list(skipped or [])
    job = {"child": child, "device": device, "device_class": device_class, "seed": seed,
           "rule": asdict(rule), **(options or {}),
           "items": [{**it, "child": child, "position": pos} for pos, it in enumerate(items)]}
    results: dict[str, Event] = {}

    def unmeasured(pos: int, it: dict) -> Event:
        record = {"child": child, "order_position": len(items) + pos,
                  "skipped": it["skipped"]}
        if (options or {}).get("round"):
            record["round"] = options["round"]
        return {"event": "point", "key": it["key"], "child": child, "record": record}

    aside = {it["key"]: (pos, it) for pos, it in enumerate(skipped)}

    def take(event: Event) -> None:
        if event["event"] == "described":  # the early child's configs (early_described)
            return
        event["child"] = child
        if event["event"] == "start":
            event.update(spawn_wall=kid.spawn_wall, overlapped=kid.overlapped,
                         early=getattr(kid, "early", False),
                         process_seconds=max(0.0, event["ready_wall"] - kid.spawn_wall))
        if event["event"] == "point":
            results[event["key"]] = event
        elif event["event"] == "device":  # the point's device side, profiled after the job
            if event["key"] in results:
                results[event["key"]]["record"].update(event["record"])
            return
        on_event(event)

    kid = spawned or _Child()
    timeout = child_timeout() if timeout is None else timeout
    rc, tail, timed_out = exchange(kid, job, take, timeout, idle=True)
    why = failure_text(f"child {child}", rc, tail, timed_out, timeout)
    if rc != 0 or any(it["key"] not in results for it in items):
        for pos, it in enumerate(items):
            if it["key"] not in results:
                record = {"child": child, "order_position": pos, "error": why}
                if (options or {}).get("round"):
                    record["round"] = options["round"]
                results[it["key"]] = {"event": "point", "key": it["key"], "child": child,
                                      "record": record, "died": True}
                on_event(results[it["key"]])
    for key, (pos, it) in aside.items():
        results[key] = unmeasured(pos, it)
        on_event(results[key])
    return results


def remeasure(results: dict[str, Event], items: list[dict], child: int, **kw) -> None:
    """Time once more, in a fresh child, the points child ``child`` left unfinished (it died
    or the watchdog stopped it; a point that failed by itself, OOM included, is a reading
    and stays); the fresh child's records (``round="remeasure"``) replace the dead ones in
    ``results``, each saying whose it replaced and why (``replaced``: the certificate
    names that child in its failures). Once only: a point that fails again keeps that
    error."""
    dead = [it for it in child_order(items, child) if results.get(it["key"], {}).get("died")]
    if not dead:
        return
    again = run_child(child, dead, **kw)
    for key, event in again.items():
        event["record"]["round"] = "remeasure"
        event["record"]["replaced"] = results[key]["record"].get("error")
        results[key] = event


def run_children(items: list[dict], *, children: int, device: str, device_class: str,
                 rule: TimingRule, seed: int,
                 on_event: Callable[[Event], None] = lambda e: None,
                 on_last: Callable[[], None] | None = None,
                 options_for: Callable[[int], dict] | None = None,
                 first: int = 0, early: bool = True,
                 spare: _Child | None = None,
                 after_first: Callable[[dict[str, Event], list[dict]], list[dict]] | None
                 = None,
                 after_second: Callable[[list[dict[str, Event]], list[dict]],
                                        tuple[list[dict], list[dict]]] | None = None,
                 warm: tuple[str, ...] = ()) -> list[dict[str, Event]]:
    """Every child over every item, each in its own order; one result dict per child.
    Children measure one at a time; on CUDA the next one is spawned (imports torch and
    creates its CUDA context) while the current one measures. Child 0 is the one the
    console script started early (:func:`take_early`, when ``early``), or ``spare`` (a
    child spawned ahead for a later round), or is spawned now, not pre-warmed: nothing would
    overlap its CUDA start-up. ``on_last`` is called as the last child starts (certify
    spawns the stages' children there, on CUDA). ``options_for(c)``: child c's job-wide
    flags; ``first``: the index of the first child (a later round numbers its children on);
    ``after_first(records, items)``: the items the children after the first measure, from
    the first child's records (certify's early round: caps and the extension's shapes);
    ``after_second(records, items)``: (the items the children after the second time, the
    items they skip) from the first two children's records (certify: the points those two
    settled, :func:`afford.certification.stage_time.settled_by_two`); ``warm``: workload
    specs each child spawned here resolves while it waits for its job."""
    prespawn = device.startswith("cuda")
    out: list[dict[str, Event]] = []
    skipped: list[dict] = []
    nxt: _Child | None = spare or (take_early(device) if early else None) or _Child(warm=warm)
    try:
        for k in range(children):
            c = first + k
            cur, nxt = nxt, (_Child(prewarm=device, overlapped=True, warm=warm)
                             if prespawn and k + 1 < children else None)
            if on_last is not None and k + 1 == children:
                on_last()
            out.append(run_child(c, child_order(items, c), device=device,
                                 device_class=device_class, rule=rule, seed=seed,
                                 on_event=on_event, spawned=cur,
                                 options=options_for(c) if options_for else None,
                                 skipped=skipped))
            remeasure(out[-1], items, c, device=device, device_class=device_class,
                      rule=rule, seed=seed, on_event=on_event,
                      options=options_for(c) if options_for else None)
            if k == 0 and after_first is not None and children > 1:
                items = after_first(out[0], items)
            if k == 1 and after_second is not None and children > 2:
                items, skipped = after_second(out, items)
            if nxt is None and k + 1 < children:
                nxt = _Child(warm=warm)
    finally:
        if nxt is not None:
            nxt.kill()
    return out


def spare_child(device: str, warm: tuple[str, ...] = ()) -> _Child:
    """A sweep child spawned ahead for a later round of measurements (certify's step-time
    stage), pre-warmed on CUDA; the caller kills it when no round needs it."""
    return _Child(prewarm=device if device.startswith("cuda") else None, overlapped=True,
                  warm=warm)


def startup_run(start: Event) -> dict | None:
    """A sweep child's ``start`` event as the fields of a startup run
    (:class:`afford.schema.probes_section.StartupRun`), or ``None`` when it lacks them."""
    if "process_seconds" not in start or "import_torch_seconds" not in start:
        return None
    role = f"sweep child {start.get('child')}"
    if start.get("overlapped"):
        role += " (spawned ahead: its imports overlapped the previous child's measurement " \
                "on the device)"
    elif start.get("early"):
        role += " (spawned at the command's start: its imports overlapped the parent's" + (
            "; its bytecode read from afford's cache)" if start.get("bytecode_cache") else ")")
    keys = ("process_seconds", "import_torch_seconds", "import_transformers_seconds",
            "cuda_init_seconds", "torch_version", "transformers_version")
    return {**{k: start[k] for k in keys if start.get(k) is not None}, "role": role,
            **({"contended": True} if start.get("early") else {})}
