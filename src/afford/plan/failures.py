"""What a kill costs, and the checkpoint interval a failure rate asks for (docs/DESIGN.md
section 4).

The failure ledger: GPU seconds a kill costs = training since the last durable checkpoint
(redone) + whatever was being written + the restart (the startup paid again before step 1).
Without periodic checkpoints the last durable state is the previous session's final save.
Four kill points: during warm-up (the restart only), mid-chunk (a kill at a random moment of
training: half an interval on average), during a periodic checkpoint write (just before it
completes: a whole interval), and during the final save (just before it completes).

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

from afford.plan.derive import derive, num
from afford.plan.result import Daly, Failures, KillRow
from afford.provenance import Tagged


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


def _row(point, how, without, with_, quota: Tagged | None) -> KillRow:
    ratio = derive(num(without) / num(with_), "x", "without / with", without, with_) \
        if without is not None and with_ is not None and num(with_) > 0 else None

    def share(t):
        if t is None or quota is None or quota.value is None:
            return None
        return derive(num(t) / num(quota), "ratio", "lost / weekly quota", t, quota)

    return KillRow(point=point, how=how, without=without, with_=with_, ratio=ratio,
                   share_of_quota_without=share(without), share_of_quota_with=share(with_))


def kill_ledger(restart: Tagged, write: Tagged, step: Tagged, steps: Tagged,
                save_every: Tagged, quota: Tagged | None = None) -> tuple[KillRow, ...]:
    """GPU seconds lost per kill point in a chunk of ``steps`` steps (the whole run when the
    platform has no cap), with periodic checkpoints every ``save_every`` steps and without."""
    r, w, t, n, k = num(restart), num(write), num(step), int(num(steps)), int(num(save_every))
    ins = (restart, write, step, steps, save_every)
    periodic = 0 < k <= n
    interval = k * t + w
    tail = n - k * ((n - 1) // k) if n >= 1 else 0  # steps since the last periodic save
    warm = derive(r, "s", "restart (startup before step 1)", restart)
    mid_without = derive(r + n * t / 2, "s", "restart + half the chunk's training", *ins)
    mid_with = derive(r + interval / 2, "s", "restart + half an interval (save_every x step + "
                      "write)", *ins) if periodic else mid_without
    write_with = derive(r + interval, "s", "restart + save_every x step + write", *ins) \
        if periodic else None
    final_without = derive(r + n * t + w, "s", "restart + the chunk's training + write", *ins)
    final_with = derive(r + tail * t + w, "s", "restart + steps since the last periodic save "
                        "x step + write", *ins) if periodic else final_without
    return (
        _row("warm-up", "a kill before step 1 completes: the startup is paid again",
             warm, warm, quota),
        _row("mid-chunk", "a kill at a random moment of training: expected loss", mid_without,
             mid_with, quota),
        _row("checkpoint write", "a kill just before a periodic write completes "
             "(none without periodic checkpoints)", None, write_with, quota),
        _row("final save", "a kill just before the final save completes", final_without,
             final_with, quota),
    )


def daly(mtbf: Tagged, write: Tagged, restart: Tagged, step: Tagged,
         save_every: Tagged) -> Daly:
    """Young's and Daly's intervals beside the overhead-budget interval, each with its
    expected waste and loss per failure."""
    m, d, r = num(mtbf), num(write), num(restart)
    tau_b = int(num(save_every)) * num(step)
    tau_d = daly_interval(d, m)
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
    rows = kill_ledger(restart, write, step, steps, save_every, quota)
    d = daly(mtbf, write, restart, step, save_every) \
        if mtbf is not None and mtbf.value is not None else None
    return Failures(rows=rows, daly=d)
