"""What the framework callbacks share: a guard made when training begins, one ``step`` per
optimizer step (micro-batches of gradient accumulation are not steps), and the answers the
framework acts on (save now, stop now)."""

from __future__ import annotations

from typing import Any

from afford.track.session import Session


class Driver:
    """Holds the guard of a callback; ``guard`` given, or made from ``session_kwargs``."""

    def __init__(self, guard: Session | None = None, **session_kwargs: Any) -> None:
        self.guard = guard
        self.session_kwargs = session_kwargs
        self._last_index: int | None = None

    def begin(self) -> Session:
        if self.guard is None:
            self.guard = Session(**self.session_kwargs)
        return self.guard

    def end_of_step(self, index: int, loss: Any = None) -> tuple[bool, bool]:
        """(save, stop) after optimizer step ``index`` (0-based, global); a repeated index
        (another micro-batch of the same step) is not a new step: (False, False)."""
        if index == self._last_index or index < 0:
            return False, False
        self._last_index = index
        g = self.begin()
        g.step(index, loss=loss)
        save = g.should_save(index)
        stop = g.should_stop()
        return save or stop, stop

    def saved(self, index: int) -> None:
        if self.guard is not None:
            self.guard.saved(index)

    def end(self) -> None:
        if self.guard is not None:
            self.guard.close()
