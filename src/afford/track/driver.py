"""What the framework callbacks share: the budget read when the callback is made (Lightning
configures its checkpoint cadence from it), a guard made when the framework knows this
process's rank (only rank zero writes the marker, step log and ledger), one ``step`` per
optimizer step (micro-batches of gradient accumulation are not steps), the answers the
framework acts on (save now, stop now), saves confirmed only from the framework's own
after-save hook (``confirm="explicit"``: the marker never names a checkpoint the framework
has not finished writing), and the guard's figures once per step for the framework's log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from afford.track.budget import Budget, resolve_budget
from afford.track.session import Session

log = logging.getLogger("afford.track")
BUDGET_KEYS = ("plan", "cert", "platform", "run", "budget")


class Driver:
    """Holds the guard of a callback; ``guard`` given (switched to explicit confirmation),
    or made from ``session_kwargs`` (any :class:`Session` keyword)."""

    def __init__(self, guard: Session | None = None, **session_kwargs: Any) -> None:
        chosen = {k: session_kwargs.pop(k) for k in BUDGET_KEYS if k in session_kwargs}
        if guard is not None:
            if any(v is not None for v in chosen.values()):
                from afford.core.errors import InputError

                raise InputError("give the callback guard= or a plan (plan=, cert=, budget=), "
                                 "not both")
            guard.confirm = "explicit"
        self.guard = guard
        self.budget: Budget = guard.budget if guard is not None else resolve_budget(**chosen)
        self.session_kwargs = session_kwargs
        self._last_index: int | None = None
        self._logged_index: int | None = None
        self._checked = False

    def begin(self, writes: bool = True) -> Session:
        """The guard, made now if it was not (``writes``: this process is rank zero)."""
        if self.guard is None:
            self.guard = Session(budget=self.budget, confirm="explicit", writes=writes,
                                 **self.session_kwargs)
        return self.guard

    def end_of_step(self, index: int, loss: Any = None,
                    agree: Callable[[bool], bool] | None = None) -> tuple[bool, bool] | None:
        """(save, stop) after optimizer step ``index`` (0-based, global); None for a
        repeated index (another micro-batch of the same step) or a negative one.
        ``agree``: the framework's reduction of this rank's stop over the ranks (True when
        any rank stops); a stop that another rank decided is recorded as this session's
        stop (:meth:`Session.stop_now`), so the writing rank's marker ends ``stopped``."""
        if index == self._last_index or index < 0:
            return None
        self._last_index = index
        g = self.begin()
        if not self._checked:
            self._checked = True
            self._check_resumed(g, index)
        g.step(index, loss=loss)
        save = g.should_save(index)
        stop = g.should_stop()
        if agree is not None and agree(stop) and not stop:
            g.stop_now("another rank's guard asked to stop (a stop on any rank stops all)")
            stop = True
        return save or stop, stop

    def saved(self, index: int, checkpoint: str | None = None) -> None:
        self.begin().saved(index, checkpoint)

    def metrics(self) -> dict[str, float]:
        """The guard's figures (name -> value) after its last step, once per step: {} when
        they were given already or there is no step yet."""
        g = self.guard
        if g is None or not g.indices or g.indices[-1] == self._logged_index:
            return {}
        self._logged_index = g.indices[-1]
        return {m.name: float(m.value) for m in g.readings()}

    def end(self, error: str = "") -> None:
        """Close the session; ``error``: the exception that ended training (no save in
        flight is confirmed, the marker records a crash)."""
        if self.guard is None:
            return
        if error:
            self.guard._crashed, self.guard._error = True, error[:200]
        self.guard.close()

    def _check_resumed(self, g: Session, index: int) -> None:
        """The framework's first step should be the marker's resume step; say so when not
        (it restarted from scratch, or from another checkpoint than the last confirmed)."""
        if index == g.resume_step or not g.writes:
            return
        where = f" ({g.resume_checkpoint})" if g.resume_checkpoint else ""
        g._warn(f"training starts at step {index}, but the resume marker {g.marker} says the "
                f"last confirmed save is step {g.resume_step - 1}{where}: resume from that "
                "checkpoint (the callback's .checkpoint), or give another marker= for a new "
                "run", "resumed")
