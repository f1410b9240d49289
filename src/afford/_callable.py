"""A package that is also a function: ``afford.certify(...)`` and ``afford.plan(...)``.

Both names are subpackages, and importing a subpackage binds it as the parent package's
attribute of that name, replacing whatever was bound there before (a function of the API
would be lost as soon as ``afford.plan.planner`` is imported). So the subpackage itself is
made callable: :func:`make_callable` gives its module object a class whose ``__call__``
calls the public function, which ``target`` returns when the call is made (the function
lives in a module the package must not import when it is itself imported). Everything else
about the module is unchanged: ``afford.plan.planner`` is the planner module, and
``inspect.signature(afford.plan)`` is the function's.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(name: str, target: Callable[[], Callable[..., Any]]) -> None:
    """Make the loaded module ``name`` callable as ``target()`` (resolved at each call)."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return target()(*args, **kwargs)

        @property
        def __signature__(self) -> inspect.Signature:
            return inspect.signature(target())

    CallableModule.__qualname__ = CallableModule.__name__ = f"CallableModule[{name}]"
    sys.modules[name].__class__ = CallableModule
