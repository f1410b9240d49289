"""The weekly quota with startup charged, and the time to a run's target (docs/DESIGN.md
section 4).

A platform that bills GPU hours per week bills every session's startup too:

- billed per chunk = chunk + startup;
- whole chunks a week = floor(quota / billed);
- remainder = quota - whole chunks x billed; trainable = remainder - one more startup
  (zero when the remainder is smaller than a startup);
- steps a week = whole chunks x steps per chunk + floor(trainable / step seconds), at a
  banded step's slow end (:func:`afford.planning.chunk.slow_end`), as the chunk plans.

The naive figure quota / chunk charges nothing for startup; it is kept beside the right one,
marked wrong, so the difference is visible.
"""

from __future__ import annotations

from afford.core.provenance import Tagged
from afford.planning.chunk import slow_end
from afford.planning.derive import ceil_div, derive, floor_div, num
from afford.planning.result import Quota, Startup, Target

WEEK_SECONDS = 7 * 86400


def weekly_quota(quota: Tagged, chunk_seconds: Tagged, start: Startup,
                 step: Tagged | None = None, steps_per_chunk: Tagged | None = None,
                 tokens_per_step: Tagged | None = None) -> Quota:
    """Whole chunks, the trainable remainder, and (with a step time) steps and tokens a week."""
    q, c, s = num(quota), num(chunk_seconds), num(start.total_seconds)
    billed = c + s
    whole = floor_div(q, billed)
    remainder = max(0.0, q - whole * billed)
    trainable = max(0.0, remainder - s)
    st = start.total_seconds
    naive = derive(q / c, "chunks", "quota / chunk (WRONG: charges nothing for startup)",
                   quota, chunk_seconds)
    billed_t = derive(billed, "s", "chunk + startup", chunk_seconds, st)
    whole_t = derive(whole, "chunks", "floor(quota / billed per chunk)", quota, billed_t)
    rem_t = derive(remainder, "s", "quota - whole chunks x billed per chunk", quota, billed_t)
    train_t = derive(trainable, "s", "remainder - one more startup (0 if it does not cover it)",
                     rem_t, st)
    steps = tokens = naive_steps = None
    if step is not None and steps_per_chunk is not None:
        n = whole * int(num(steps_per_chunk)) + floor_div(trainable, slow_end(step))
        steps = derive(n, "steps", "whole chunks x steps per chunk + "
                       "floor(trainable remainder / step seconds)", steps_per_chunk, step, train_t)
        naive_steps = derive(floor_div(q, c) * int(num(steps_per_chunk))
                             + floor_div(q - floor_div(q, c) * c, slow_end(step)), "steps",
                             "the whole quota trained in chunks with no startup (WRONG)",
                             naive, steps_per_chunk, step)
        if tokens_per_step is not None:
            tokens = derive(n * int(num(tokens_per_step)), "tokens",
                            "steps a week x tokens per step", steps, tokens_per_step)
    return Quota(quota_seconds=quota, naive_chunks=naive, naive_steps=naive_steps,
                 billed_seconds_per_chunk=billed_t, whole_chunks=whole_t, remainder_seconds=rem_t,
                 trainable_remainder_seconds=train_t, steps_per_week=steps,
                 tokens_per_week=tokens)


def target_steps(tokens_per_step: Tagged, *, tokens: Tagged | None = None,
                 steps: Tagged | None = None) -> tuple[Tagged, Tagged]:
    """(steps, tokens) of a target stated as tokens (steps = ceil(tokens / tokens per step))
    or as steps (tokens = steps x tokens per step). Exactly one of the two is given."""
    if (tokens is None) == (steps is None):
        raise ValueError("give exactly one of tokens or steps")
    tps = int(num(tokens_per_step))
    if steps is not None:
        return steps, derive(int(num(steps)) * tps, "tokens", "target steps x tokens per step",
                             steps, tokens_per_step)
    n = ceil_div(num(tokens), tps)
    return derive(n, "steps", "ceil(target tokens / tokens per step)", tokens,
                  tokens_per_step), tokens


def time_to_target(steps: Tagged, tokens: Tagged, step: Tagged, start: Startup,
                   steps_per_chunk: Tagged | None = None,
                   quota: Quota | None = None) -> Target:
    """Sessions, billed GPU seconds and weeks to ``steps``.

    Capped: sessions = ceil(steps / steps per chunk); GPU seconds = (sessions - 1) x (chunk
    + startup) + startup + the last session's steps x step seconds. Uncapped: one session,
    startup + steps x step seconds. Weeks: steps / steps a week under a weekly quota, else
    GPU seconds / one week of wall clock. A banded step counts at its slow end. Periodic
    checkpoint writes are not included here; their share is the cadence's overhead budget.
    """
    n, t, s = int(num(steps)), slow_end(step), num(start.total_seconds)
    st = start.total_seconds
    if steps_per_chunk is not None and int(num(steps_per_chunk)) > 0:
        spc = int(num(steps_per_chunk))
        sessions = max(1, ceil_div(n, spc))
        last = n - (sessions - 1) * spc
        gpu = (sessions - 1) * (spc * t + s) + s + last * t
        sess_t = derive(sessions, "sessions", "ceil(target steps / steps per chunk)",
                        steps, steps_per_chunk)
        gpu_t = derive(gpu, "s", "(sessions - 1) x (steps per chunk x step + startup) + "
                       "startup + last session's steps x step", steps, step, st, steps_per_chunk)
    else:
        gpu = s + n * t
        sess_t = derive(1, "sessions", "no session cap: one session", steps)
        gpu_t = derive(gpu, "s", "startup + target steps x step seconds", steps, step, st)
    if quota is not None:
        per_week = quota.steps_per_week
        weeks = None if per_week is None or num(per_week) == 0 else \
            derive(n / num(per_week), "weeks", "target steps / steps a week", steps, per_week)
        return Target(target_steps=steps, target_tokens=tokens, sessions=sess_t, gpu_seconds=gpu_t,
                      weeks=weeks, limited_by="weekly quota")
    weeks = derive(gpu / WEEK_SECONDS, "weeks", "GPU seconds / 604800 s (running without pause)",
                   gpu_t)
    return Target(target_steps=steps, target_tokens=tokens, sessions=sess_t, gpu_seconds=gpu_t,
                  weeks=weeks, limited_by="wall clock")
