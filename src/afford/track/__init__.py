"""afford.track: the loop guard for your own training loop (see :mod:`afford.track.session`).

::

    import afford.track

    guard = afford.track.Session(plan="plan.json", ledger="history.tsv")  # or cert=, ...
    if guard.resume_step > 0:
        load(f"ckpt-{guard.resume_step - 1}.pt")           # the last confirmed save
    for step, batch in enumerate(loader, start=guard.resume_step):
        ...train...
        guard.step(step, loss=loss)
        if guard.should_save(step): save(step)
        if guard.should_stop(): save(step); guard.saved(step); break
    guard.close()

``guard.previous`` says how the session before ended (:mod:`afford.track.marker`);
``guard.readings()`` gives the figures after each step for a logger
(:mod:`afford.track.metrics`).

Callbacks that wrap the same guard: :mod:`afford.track.hf` (transformers ``Trainer``) and
:mod:`afford.track.lightning` (Lightning ``Trainer``). Nothing here imports torch.
"""

from afford.track.budget import Budget, budget_from_plan, load_plan
from afford.track.marker import Previous
from afford.track.metrics import Metric
from afford.track.session import Session, summary

__all__ = ["Budget", "Metric", "Previous", "Session", "budget_from_plan", "load_plan",
           "summary"]
