"""End to end: a tiny transformers model trained under afford.track on a platform with a
2-minute session cap, killed once with SIGKILL and resumed; nothing lost beyond one save
interval.

The pipeline is afford's own: ``afford certify`` measures the workload on this CPU (unless
``--cert`` gives a certificate), :func:`afford.planning.planner.plan` plans it on a platform whose
session cap is ``--cap`` seconds (margin ``--margin``), and three training sessions run as
child processes under ``afford.track.Session(plan=...)``, each charged from its spawn (its
imports count against the cap):

  A  from step 0 until the guard stops it, then its final save;
  B  resumes from A's final save and is SIGKILLed mid-chunk (at a random point);
  C  resumes from the marker B left and trains until the guard stops it.

Every step trains on a batch drawn from a generator seeded by the step's index, and every
checkpoint carries the sum of the indices it has trained on, so the last checkpoint shows
whether each step of the lineage was trained exactly once. Prints one table.

    PYTHONPATH=src python3 benches/track_e2e.py                 # cap 120 s, about 6 minutes
    PYTHONPATH=src python3 benches/track_e2e.py --cap 40 --margin 12 --cert cert.json
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SPEC = "hf:gpt2@d64L2H2V512+b4"  # GPT-2 shaped, 2 blocks of width 64, batch 4
SEQ = 64


# ---------------------------------------------------------------- one session (a child)


def session(out: Path, spawned: float, name: str) -> int:
    """A training session under the guard; JSON lines on stdout."""
    import torch
    import transformers

    import afford.schema.ledger  # noqa: F401  (imported now: the session's close is then quick)
    from afford.core.io import atomic_write_bytes
    from afford.track import Session, summary
    from afford.workloads import resolve, train_step

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    w = resolve(SPEC, "cpu")
    built = w.build(w.shape(SEQ), cpu, seed=0)
    cur: dict = {}
    built.loss = lambda: built.model(input_ids=cur["ids"], labels=cur["ids"]).loss
    guard = Session(plan=out / "plan.json", marker=out / "resume.json",
                    ledger=out / "history.tsv", elapsed_seconds=time.time() - spawned,
                    command=f"benches/track_e2e.py session {name}")
    start, trained = guard.resume_step, 0
    if start > 0:
        ck = torch.load(out / f"ckpt-{start - 1}.pt", weights_only=True)
        built.model.load_state_dict(ck["model"])
        built.optimizer.load_state_dict(ck["optimizer"])
        trained = int(ck["trained"])
        assert int(ck["step"]) == start - 1
    emit(event="start", resume_step=start, trained=trained, t=time.time() - spawned)

    def save(step: int) -> None:
        buf = io.BytesIO()
        torch.save({"model": built.model.state_dict(), "optimizer": built.optimizer
                    .state_dict(), "step": step, "trained": trained}, buf)
        atomic_write_bytes(out / f"ckpt-{step}.pt", buf.getvalue())
        for old in sorted(out.glob("ckpt-*.pt"), key=lambda p: int(p.stem[5:]))[:-2]:
            old.unlink()  # the plan's checkpoints_kept = 2

    for step in itertools.count(start):
        gen = torch.Generator().manual_seed(step)
        cur["ids"] = torch.randint(0, w.config.vocab_size, (4, SEQ), generator=gen)
        loss = train_step(built, "fp32", cpu)
        trained += step
        guard.step(step, loss=loss)
        emit(event="step", step=step)
        if guard.should_save(step):
            save(step)
        if guard.should_stop():
            save(step)
            guard.saved(step)
            emit(event="final", step=step, t=time.time() - spawned, loss=float(loss))
            break
    guard.close()
    emit(event="end", t=time.time() - spawned, summary=summary(guard))
    return 0


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


# ---------------------------------------------------------------- the driver


def certify(out: Path) -> Path:
    cert = out / "cert.json"
    cmd = [sys.executable, "-m", "afford", "certify", "-w", SPEC, "--device", "cpu",
           "--quick", "--no-memory", "--no-gates", "--sweep", "seq=32,64,128",
           "--out", str(cert), "--force", "--json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return cert


def plan(out: Path, cert: Path, cap: float, margin: float) -> dict:
    from afford.planning import planner
    from afford.schema.cert import load_certificate
    from afford.schema.platform import load_platform
    from afford.schema.run import load_run

    why = "the end-to-end example's session"
    (out / "platform.toml").write_text(
        f'schema = "afford.platform/1"\nname = "e2e-{cap:g}s"\n'
        f'session_cap = {{ value = "{cap:g}s", assumed = "{why} cap" }}\n'
        f'margin = {{ value = "{margin:g}s", assumed = "{why} margin" }}\n'
        f'weekly_quota = {{ value = "30h", assumed = "{why}: not used" }}\n'
        f'disk = {{ value = "10GB", assumed = "{why}: not used" }}\n')
    (out / "run.toml").write_text(
        f'schema = "afford.run/1"\nname = "e2e"\nworkload = "{SPEC}"\nmode = "fp32"\n'
        f'value = {SEQ}\ntarget_tokens = "1B"\ncheckpoints_kept = 2\n'
        'checkpoint_overhead = "1%"\n')
    doc = planner.plan(load_certificate(cert), load_platform(str(out / "platform.toml")),
                       load_run(out / "run.toml")).model_dump(mode="json", by_alias=True)
    (out / "plan.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def run_session(out: Path, name: str, kill_after: float | None = None) -> dict:
    """Spawn one session; SIGKILL it ``kill_after`` seconds after its first step."""
    spawned = time.time()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parent.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen([sys.executable, __file__, "--session", name, "--out", str(out),
                          "--spawned", repr(spawned)], stdout=subprocess.PIPE, text=True,
                         env=env)
    events: list[dict] = []
    threading.Thread(target=lambda: events.extend(json.loads(x) for x in p.stdout),
                     daemon=True).start()
    killed = False
    while p.poll() is None:
        time.sleep(0.02)
        first = next((e for e in events if e["event"] == "step"), None)
        if kill_after is not None and first and time.time() - spawned > kill_after:
            os.kill(p.pid, signal.SIGKILL)
            killed = True
            break
    p.wait()
    exited = time.time() - spawned
    time.sleep(0.2)  # the reader drains the pipe
    return {"name": name, "events": list(events), "killed": killed, "exited": exited}


def row(r: dict, cap: float) -> dict:
    ev = r["events"]
    start = next(e for e in ev if e["event"] == "start")
    steps = [e["step"] for e in ev if e["event"] == "step"]
    final = next((e for e in ev if e["event"] == "final"), None)
    end = next((e for e in ev if e["event"] == "end"), None)
    s = end["summary"] if end else {}
    return {"session": r["name"], "ended": "SIGKILL" if r["killed"] else "guard stop",
            "resumed_at": start["resume_step"], "first_step": steps[0] if steps else None,
            "last_step": steps[-1] if steps else None, "steps": len(steps),
            "final_save_at": final["t"] if final else None, "exited_at": r["exited"],
            "cap": cap, "warm_median": s.get("warm_median_seconds"),
            "predicted": s.get("predicted_step_seconds"), "trained_sum": start["trained"]}


def fmt(x, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def main(cap: float, margin: float, cert: Path | None, out: Path | None, seed: int) -> int:
    out = Path(out or tempfile.mkdtemp(prefix="afford-e2e-"))
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("resume.json", "history.tsv"):
        (out / stale).unlink(missing_ok=True)
    for stale in out.glob("ckpt-*.pt"):
        stale.unlink()
    cert = cert or certify(out)
    doc = plan(out, cert, cap, margin)
    from afford.track import budget_from_plan

    b = budget_from_plan(doc)
    rng = random.Random(seed)
    a = run_session(out, "A")
    b_run = run_session(out, "B", kill_after=rng.uniform(0.3, 0.7) * cap)
    c = run_session(out, "C")
    rows = [row(r, cap) for r in (a, b_run, c)]
    print_table(rows, b, cap, margin, out)
    return 0 if verdict(rows, b, out) else 1


def print_table(rows: list[dict], b, cap: float, margin: float, out: Path) -> None:
    print(f"platform: session cap {cap:g} s, margin {margin:g} s, chunk "
          f"{fmt(b.chunk_seconds)} s; plan: save every {b.save_every} steps, final save "
          f"{b.write_seconds:.3f} s, predicted step {fmt(b.step_seconds, '.4f')} s")
    head = ("session", "ended by", "resumed at", "steps", "last step", "final save at",
            "exited at", "cap", "warm median", "predicted")
    print(" | ".join(head))
    for r in rows:
        print(" | ".join([r["session"], r["ended"], str(r["resumed_at"]), str(r["steps"]),
                          str(r["last_step"]), fmt(r["final_save_at"]) + " s",
                          fmt(r["exited_at"]) + " s", f"{cap:g} s",
                          fmt(r["warm_median"], ".4f") + " s",
                          fmt(r["predicted"], ".4f") + " s"]))
    a, k, c = rows
    lost = k["last_step"] - (c["resumed_at"] - 1)
    print(f"A stopped by the guard, final save {fmt(a['final_save_at'])} s after spawn "
          f"({cap - a['final_save_at']:.1f} s before the cap); B resumed at step "
          f"{k['resumed_at']} = A's last step {a['last_step']} + 1")
    print(f"B was SIGKILLed after step {k['last_step']}; C resumed at step {c['resumed_at']}: "
          f"{lost} steps lost (save every {b.save_every})")
    last, held = c["last_step"], final_checkpoint(out, c["last_step"])
    print(f"C's final checkpoint (step {held['step']}) holds the sum of the step indices its "
          f"lineage trained on: {held['trained']}; steps 0..{last} each once give "
          f"{last * (last + 1) // 2}")
    print(f"files: {out}; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} cores")


def final_checkpoint(out: Path, step: int) -> dict:
    import torch

    ck = torch.load(out / f"ckpt-{step}.pt", weights_only=True)
    return {"step": int(ck["step"]), "trained": int(ck["trained"])}


def verdict(rows: list[dict], b, out: Path) -> bool:
    a, k, c = rows
    ok = a["ended"] == "guard stop" and c["ended"] == "guard stop" and k["ended"] == "SIGKILL"
    ok &= all(r["final_save_at"] is not None and r["final_save_at"] <= r["cap"]
              for r in (a, c))
    ok &= k["resumed_at"] == a["last_step"] + 1 and k["trained_sum"] == sum(
        range(k["resumed_at"]))
    ok &= c["trained_sum"] == sum(range(c["resumed_at"]))
    ok &= 0 <= k["last_step"] - (c["resumed_at"] - 1) <= (b.save_every or 0)
    held = final_checkpoint(out, c["last_step"])
    ok &= held == {"step": c["last_step"], "trained": sum(range(c["last_step"] + 1))}
    print("verdict:", "PASS (stopped in time, saved, resumed at the right step, nothing lost "
          "beyond one save interval)" if ok else "FAIL")
    return ok


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=float, default=120.0, help="session cap, seconds")
    ap.add_argument("--margin", type=float, default=20.0, help="margin before the cap, seconds")
    ap.add_argument("--cert", type=Path, help="a certificate of this workload on this CPU")
    ap.add_argument("--out", type=Path, help="folder for plan, checkpoints, marker, ledger")
    ap.add_argument("--seed", type=int, default=15, help="seeds the kill time")
    ap.add_argument("--session", help=argparse.SUPPRESS)
    ap.add_argument("--spawned", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.session:
        sys.exit(session(a.out, a.spawned, a.session))
    sys.exit(main(a.cap, a.margin, a.cert, a.out, a.seed))
