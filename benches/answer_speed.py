"""How long does a command that reads a certificate take to answer? ``predict``, ``size``,
``plan`` and ``preflight`` on one certificate of several transformers workloads, each run
as a user runs it (a fresh ``afford`` process), wall time (a bench, not a test).

    python3 benches/answer_speed.py CERT [CERT ...] [--repeat 5] [--batch 4] [--seq 2048]
        [--baseline SRC]

The certificates' workloads and memory laws are merged into one certificate (the first's
environment and sections; what ``afford certify -w A -w B ...`` writes on one machine), its
allocator replays brought to this afford's version as a new certify stores them (the
learned size laws inside: no command learns them), in a temporary folder. Each command
runs ``--repeat`` times with a fresh cache folder first (``cold``: the shape's replay not
yet run on this machine) and then with the cache the first run left (``warm``: the same
question asked again, as a user asks plan after predict). Printed: the median and the
spread of each, the median CPU time (user + system) beside it (what a busy box does not
inflate as much as the wall time), and the box's load average before and after. Run it from
the folder the workloads name their config files from, where they name one.

``--baseline SRC`` times another afford beside this one (``SRC``: the ``src`` folder of a
checkout, e.g. ``git worktree add /tmp/base main``), each repeat running the baseline and
then this one, so that both see the same load: a before and after on a shared box.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def merged(paths: list[Path], out: Path) -> list[str]:
    """One certificate of every workload and memory law in ``paths``, replays current;
    the workload names."""
    from afford.figures.replay_figures import current
    from afford.schema.cert import load_certificate, save_certificate

    certs = [load_certificate(p) for p in paths]
    first = certs[0]
    workloads = [w for c in certs for w in c.workloads]
    laws = [current(law) for c in certs for law in (c.memory.laws if c.memory else [])]
    mem = first.memory.model_copy(update={"laws": laws})
    save_certificate(first.model_copy(update={"workloads": workloads, "memory": mem}), out,
                     overwrite=True)
    return [w.name for w in workloads]


def timed(args: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``afford`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    got = subprocess.run([sys.executable, "-m", "afford", *args], env=env,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if got.returncode not in (0, 1):
        raise SystemExit(f"afford {' '.join(args)} exited {got.returncode}: "
                         f"{got.stderr.strip()[-400:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _line(runs: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in runs]
    return (f"{statistics.median(wall):.3f} s [{min(wall):.3f}-{max(wall):.3f}] "
            f"(CPU {statistics.median(c for _, c in runs):.3f} s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("certs", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--baseline", type=Path, help="another afford's src folder, timed beside")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="afford-speed-"))
    cert = work / "cert.json"
    names = merged(a.certs, cert)
    run = work / "run.toml"
    run.write_text(f'schema = "afford.run/1"\nname = "speed"\nworkload = "{names[0]}"\n'
                   f'mode = "bf16"\nvalue = {a.seq}\nbatch = {a.batch}\n'
                   'target_tokens = "1B"\ncheckpoints_kept = 2\nmax_weeks = 4\n')
    shape = ["--batch", str(a.batch), "--seq", str(a.seq)]
    commands = {
        "predict": ["predict", str(cert), *shape, "--platform", "kaggle-p100"],
        "size": ["size", str(cert), "-w", names[0], *shape],
        "plan": ["plan", str(cert), "--platform", "kaggle-p100", "--run", str(run)],
        "preflight": ["preflight", str(cert), "--platform", "kaggle-p100", "--run", str(run),
                      "--accept-noisy"]}
    print(f"{len(names)} workloads ({', '.join(names)}), {cert.stat().st_size / 1e6:.1f} MB; "
          f"load {os.getloadavg()}")
    trees = {"": os.environ.get("PYTHONPATH")}
    if a.baseline is not None:
        trees = {"baseline ": str(a.baseline.resolve()), "this ": trees[""]}
    for name, args in commands.items():
        got: dict[str, tuple[list, list]] = {t: ([], []) for t in trees}
        for _ in range(a.repeat):
            for tree, path in trees.items():
                env = {**os.environ, "AFFORD_CACHE_DIR": tempfile.mkdtemp(dir=work)}
                if path is None:
                    env.pop("PYTHONPATH", None)
                else:
                    env["PYTHONPATH"] = path
                got[tree][0].append(timed(args, env))
                got[tree][1].append(timed(args, env))
        for tree, (cold, warm) in got.items():
            print(f"{tree}{name:10} cold median {_line(cold)}, warm median {_line(warm)} "
                  f"over {a.repeat}")
    print(f"load {os.getloadavg()}")
    shutil.rmtree(work, ignore_errors=True)  # the certificate and the caches (megabytes each)
    return 0


if __name__ == "__main__":
    sys.exit(main())
