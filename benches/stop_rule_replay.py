"""Replay the adaptive timing rule on a certificate's raw samples: how many timed seconds it
would have spent, and how far each child's median would have moved.

Each child's recorded timed steps are fed, in their order, to this afford's timed run
(:func:`afford.measure.timing.timed_run`) on a fake clock; where the rule asks for more steps
than were recorded, the child keeps all it has (the recording's own rule stopped there). Three
rules: ``adaptive`` (this afford's), and ``adaptive + floor caps`` (children after the first
do not extend a point the first child found on the launch floor, as certify's early round
asks: :func:`afford.certification.stage_time.early_round`), ``floor points at 0.1 s`` (those
children time such a point to the rule's ``precise_seconds`` and its minimum count of steps,
not its 0.25 s floor: a cut considered on 2026-12-06 and not taken, since a floor child's
median then moved by up to 6-11 %), and ``min 12 steps (before)``, the
adaptive rule as it was before 2026-12-06 (8 since). Per rule: timed seconds saved, and the
shift of each child's median, for work-regime and floor points apart (the certificate's own
regimes), beside the children's spread at the floor points.

    python3 benches/stop_rule_replay.py CERT.json [CERT.json ...]
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace

from afford.measure.timing import _block_size, rule_for, timed_run
from afford.schema.cert import load_certificate
from afford.workloads.clock import FakeClock


def replay(steps: list[float], warmup: list[float], rule) -> list[float]:
    """The steps the rule would have timed, from the recorded ones."""
    clock = FakeClock()

    class Exhausted(Exception):
        pass

    def step(i: int) -> None:
        k = i - 1000
        if k >= len(steps):
            raise Exhausted
        clock.advance(steps[k])

    try:
        run = timed_run(step, clock, 1000, _block_size(statistics.median(warmup), rule), rule,
                        now=lambda: clock.t, estimate=statistics.median(warmup))
    except Exhausted:
        return steps
    return run.seconds


def regimes(r) -> dict[str, bool]:
    return {g.label: g.work for g in (r.time.regimes if r.time else [])}


def label(p) -> str:
    return f"{p.batch} x {p.seq}" if p.batch and p.seq else f"n={p.value}"


def quantiles(xs: list[float]) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    return f"median {xs[len(xs) // 2]:.2%}, 90th {xs[int(0.9 * (len(xs) - 1))]:.2%}, " \
           f"max {xs[-1]:.2%}"


def main(paths: list[str]) -> None:
    base = rule_for("adaptive")
    for path in paths:
        cert = load_certificate(path)
        recorded = 0.0
        out = {"adaptive": ([], [], 0.0), "adaptive + floor caps": ([], [], 0.0),
               "floor points at 0.1 s": ([], [], 0.0), "min 12 steps (before)": ([], [], 0.0)}
        for r in cert.workloads:
            work_of = regimes(r)
            for p in r.points + r.design_points:
                work = work_of.get(label(p))
                if work is None:
                    continue
                for k in p.children:
                    if len(k.timed_seconds) < base.min_steps or not k.warmup_seconds:
                        continue
                    recorded += sum(k.timed_seconds)
                    med = statistics.median(k.timed_seconds)
                    for name in out:
                        rule = base
                        if name.endswith("caps") and not work and k.child >= 1:
                            rule = replace(base, max_floor_seconds=base.floor_seconds)
                        if name == "floor points at 0.1 s" and not work and k.child >= 1:
                            rule = replace(base, floor_seconds=base.precise_seconds,
                                           max_floor_seconds=base.precise_seconds)
                        if name == "min 12 steps (before)":
                            rule = replace(base, min_steps=12)
                        got = replay(list(k.timed_seconds), list(k.warmup_seconds), rule)
                        shift = abs(statistics.median(got) / med - 1.0)
                        w, f, saved = out[name]
                        (w if work else f).append(shift)
                        out[name] = (w, f, saved + sum(k.timed_seconds) - sum(got))
        print(f"{path}: {recorded:.1f} s of timed steps recorded")
        for name, (w, f, saved) in out.items():
            print(f"  {name:22s} saves {saved:5.1f} s; child medians move: work "
                  f"{quantiles(w)}; floor {quantiles(f)}")


if __name__ == "__main__":
    main(sys.argv[1:])
