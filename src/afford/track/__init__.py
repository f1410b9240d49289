"""afford.track: the loop guard for your own training loop (see :mod:`afford.track.session`).

::

    import afford.track

    guard = afford.track.Session(plan="plan.json")       # or cert=, platform=, run=
    for step, batch in enumerate(loader, start=guard.resume_step):
        ...train...
        guard.step(step, loss=loss)
        if guard.should_save(step): save(...)
        if guard.should_stop(): save(...); break

Callbacks that wrap the same guard: :mod:`afford.track.hf` (transformers ``Trainer``) and
:mod:`afford.track.lightning` (Lightning ``Trainer``). Nothing here imports torch.
"""

from afford.track.budget import Budget, budget_from_plan, load_plan
from afford.track.session import Session, summary

__all__ = ["Budget", "Session", "budget_from_plan", "load_plan", "summary"]
