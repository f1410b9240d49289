"""What a kill costs, and the checkpoint interval a failure rate asks for (docs/DESIGN.md
section 4).

The failure ledger follows the lab's COSTS file, section 3.4 (the spec): a kill loses the
work done since the last durable save, and the restart (the startup before step 1, paid again)
is shown apart; a kill costs loss + restart in all. Each kill point has a worst case (COSTS's
figures) and an expected loss (a kill at a uniform moment), with periodic checkpoints every
``save_every`` steps and without (the last durable state is then the previous session's final
save):

- warm-up: the startup paid before the kill, at worst all of it (R), on average R / 2;
- mid-chunk: at worst save_every x step (without: the whole chunk's training), on average
  half an interval (without: half the chunk);
- during a periodic write: at worst save_every x step + write, on average half the write less
  (without periodic checkpoints there is none: a kill then costs what a mid-chunk one does);
- during the final save: at worst a whole interval, since a session ends on the clock and the
  final save can land just before the next periodic one (without: the chunk + the write); on
  average the projected steps since the last periodic save + half the write.

What the periodic interface is worth (COSTS 3.4): worst mid-chunk loss without / with, the
difference, and its share of the weekly quota. Fed COSTS's inputs (step 0.299025 s, 132,430
steps, write 0.609 s, save_every 204, startup 483.6 s, 30 GPU-h) this gives its rows: 8.06 /
1.02 / 1.03 / 1.03 GPU-min with, 660 without, 649x (COSTS: 647x, from its rounded 1.02),
659 GPU-min, 36.6 % (tests/unit/test_plan_math.py, tests/answers/test_costs_tables.py);
save_every 204 is afford's own solution at those inputs (:mod:`afford.planning.cadence`, COSTS's
definition of the share: write seconds over the chunk).

With a mean time between failures M (spot, preemptible):

- Young 1974: tau ~ sqrt(2 d M), d = checkpoint write seconds;
- Daly 2006 (FGCS 22(3), eq. 37): tau = sqrt(2 d M) (1 + (1/3) sqrt(d / 2M) + (1/9) (d / 2M))
  - d for d < 2M, else M;
- Daly's full model of the wall time to solve T_s: T_w = M e^(R/M) (e^((tau + d)/M) - 1)
  T_s / tau (R = restart seconds); the expected waste is T_w / T_s - 1;
- expected work lost per failure with exponential failures:
  M - (tau + d) / (e^((tau + d)/M) - 1) (~ (tau + d) / 2), plus the restart R.
"""

from __future__ import annotations

import math

from afford.core.provenance import Tagged
from afford.planning.derive import derive, num
from afford.planning.result import Daly, Failures, KillRow, Worth


def young_interval(d: float, m: float) -> float:
    """Young 1974: sqrt(2 d M)."""
    return math.sqrt(2.0 * d * m)


def daly_interval(d: float, m: float) -> float:
    """Daly 2006, eq. 37: the higher-order optimum of compute time between checkpoints."""
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def daly_wall_time(tau: float, d: float, r: float, m: float, solve: float = 1.0) -> float:
    """Daly 2006, full model: T_w = M e^(R/M) (e^((tau + d)/M) - 1) T_s / tau."""
    return m * math.exp(r / m) * math.expm1((tau + d) / m) * solve / tau


def waste(tau: float, d: float, r: float, m: float) -> float:
    """Expected wall-clock overhead T_w / T_s - 1 at interval ``tau``."""
    return daly_wall_time(tau, d, r, m) - 1.0


def loss_per_failure(tau: float, d: float, r: float, m: float) -> float:
    """Expected seconds lost per failure: M - (tau + d) / (e^((tau + d)/M) - 1), plus R."""
    return m - (tau + d) / math.expm1((tau + d) / m) + r


def _ratio(without: Tagged | None, with_: Tagged | None, what: str) -> Tagged | None:
    if without is None or with_ is None or num(with_) <= 0:
        return None
    return derive(num(without) / num(with_), "x", f"{what}: without / with", without, with_)


def _row(point, how, worst, expected, restart: Tagged | None) -> KillRow:
    """``worst`` and ``expected`` are (without, with) pairs of seconds lost, restart apart."""
    return KillRow(point=point, how=how, worst_without=worst[0], worst_with=worst[1],
                   worst_ratio=_ratio(*worst, "worst case"), expected_without=expected[0],
                   expected_with=expected[1], expected_ratio=_ratio(*expected, "expected"),
                   restart=restart)


def kill_ledger(restart: Tagged, write: Tagged, step: Tagged, steps: Tagged,
                save_every: Tagged) -> tuple[KillRow, ...]:
    """Seconds of work one kill loses at each kill point of a chunk of ``steps`` steps (the
    whole run when the platform has no cap), with periodic checkpoints every ``save_every``
    steps and without: the worst case and the expected loss, the restart apart."""
    r, w, t, n, k = num(restart), num(write), num(step), int(num(steps)), int(num(save_every))
    ins = (write, step, steps, save_every)
    periodic = 0 < k <= n
    lost = derive(r, "s", "the startup before step 1, all of it paid again", restart)
    half = derive(r / 2, "s", "half the startup before step 1", restart)
    chunk = derive(n * t, "s", "the chunk's training: steps x step", step, steps)
    chunk_w = derive(n * t + w, "s", "the chunk's training + the write", *ins)
    chunk_half = derive(n * t / 2, "s", "half the chunk's training", step, steps)
    chunk_wh = derive(n * t + w / 2, "s", "the chunk's training + half the write", *ins)
    if periodic:
        gap = derive(k * t, "s", "save_every x step", step, save_every)
        gap_w = derive(k * t + w, "s", "save_every x step + write", *ins)
        mid_e = derive((k * t + w) / 2, "s", "half an interval: (save_every x step + write) / 2",
                       *ins)
        write_e = derive(k * t + w / 2, "s", "save_every x step + half the write", *ins)
        tail = n - k * ((n - 1) // k)  # projected steps since the last periodic save: 1..k
        final_e = derive(tail * t + w / 2, "s", "projected steps since the last periodic save x "
                         "step + half the write", *ins)
    else:
        gap, gap_w, mid_e, write_e, final_e = chunk, None, chunk_half, None, chunk_wh
    again = derive(r, "s", "restart: the startup before step 1, paid again", restart)
    return (
        _row("warm-up", "a kill before step 1: the startup paid so far is the loss (the restart "
             "is that startup, counted once)", (lost, lost), (half, half), None),
        _row("mid-chunk", "worst: just before a save starts; expected: a random moment of "
             "training", (chunk, gap), (chunk_half, mid_e), again),
        _row("checkpoint write", "worst: just before a periodic write completes; expected: "
             "during it (without periodic checkpoints there is no such write: a kill at that "
             "moment loses what a mid-chunk kill does, as COSTS counts it)", (chunk, gap_w),
             (chunk_half, write_e), again),
        _row("final save", "worst: just before it completes, a whole interval after the last "
             "periodic save (the session ends on the clock, not on a step count); expected: the "
             "projected steps since that save", (chunk_w, gap_w if periodic else chunk_w),
             (chunk_wh, final_e), again),
    )


def worth(rows: tuple[KillRow, ...], quota: Tagged | None = None) -> Worth | None:
    """What the periodic interface is worth on a worst-case mid-chunk kill (COSTS 3.4): the
    ratio without / with, the GPU time saved per kill, and that time's share of the weekly
    quota."""
    mid = next(r for r in rows if r.point == "mid-chunk")
    if mid.worst_without is None or mid.worst_with is None or mid.worst_ratio is None:
        return None
    saved = derive(num(mid.worst_without) - num(mid.worst_with), "s",
                   "worst mid-chunk kill: without - with", mid.worst_without, mid.worst_with)
    share = None
    if quota is not None and quota.value is not None:
        share = derive(num(saved) / num(quota), "ratio", "saved per kill / weekly quota", saved,
                       quota)
    return Worth(ratio=mid.worst_ratio, saved_seconds=saved, saved_share_of_quota=share)


EXP_LIMIT = 700.0  # e^700 ~ 1e304: beyond, Daly's T_w is no float


def daly(mtbf: Tagged, write: Tagged, restart: Tagged, step: Tagged,
         save_every: Tagged) -> Daly | None:
    """Young's and Daly's intervals beside the overhead-budget interval, each with its
    expected waste and loss per failure; None when the MTBF is so short beside the restart
    or an interval that the expected wall time is beyond any float (no progress)."""
    m, d, r = num(mtbf), num(write), num(restart)
    tau_b = int(num(save_every)) * num(step)
    tau_d = daly_interval(d, m)
    if (r + max(tau_b, tau_d) + d) / m > EXP_LIMIT:  # T_w ~ e^((R + tau + d)/M)
        return None  # failures far more often than a save: the model's e^x leaves the floats
    ins = (mtbf, write, restart)
    bud = (mtbf, write, restart, step, save_every)
    return Daly(
        mtbf_seconds=mtbf, write_seconds=write, restart_seconds=restart,
        young_interval_seconds=derive(young_interval(d, m), "s", "Young 1974: sqrt(2 d M)", *ins),
        daly_interval_seconds=derive(tau_d, "s", "Daly 2006 eq. 37", *ins),
        daly_waste=derive(waste(tau_d, d, r, m), "ratio",
                          "Daly 2006 full model: T_w / T_s - 1 at Daly's interval", *ins),
        daly_loss_per_failure_seconds=derive(
            loss_per_failure(tau_d, d, r, m), "s",
            "M - (tau + d) / (e^((tau + d)/M) - 1) + R at Daly's interval", *ins),
        budget_interval_seconds=derive(tau_b, "s", "save_every x step", step, save_every),
        budget_waste=derive(waste(tau_b, d, r, m), "ratio",
                            "Daly 2006 full model: T_w / T_s - 1 at the budget interval", *bud),
        budget_loss_per_failure_seconds=derive(
            loss_per_failure(tau_b, d, r, m), "s",
            "M - (tau + d) / (e^((tau + d)/M) - 1) + R at the budget interval", *bud),
    )


def failures(restart: Tagged, write: Tagged, step: Tagged, steps: Tagged, save_every: Tagged,
             quota: Tagged | None = None, mtbf: Tagged | None = None) -> Failures:
    rows = kill_ledger(restart, write, step, steps, save_every)
    d = daly(mtbf, write, restart, step, save_every) \
        if mtbf is not None and mtbf.value is not None else None
    return Failures(rows=rows, worth=worth(rows, quota), daly=d)
