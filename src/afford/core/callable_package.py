"""A package that is also a function: ``afford.certify(...)`` and ``afford.plan(...)``.

Both names are subpackages, and importing a subpackage binds it as the parent package's
attribute of that name, replacing whatever was bound there before (a function of the API
would be lost as soon as ``afford.planning.planner`` is imported). So the subpackage itself is
made callable: :func:`make_callable` gives its module object a class whose ``__call__``
calls the public function named by ``target`` (``"module:function"``), looked up when the
call is made. The lookup is by name, at call time, because the function may live in a layer
above the package (``afford.plan`` is pure; ``afford.api.plan`` reads the files it is given):
the package never imports it, and importing the package imports nothing more. Everything
else about the module is unchanged: ``afford.planning.planner`` is the planner module, and
``inspect.signature(afford.plan)`` is the function's.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(name: str, target: str) -> None:
    """Make the loaded module ``name`` callable as the function ``target`` names
    (``"module:function"``, looked up at each call)."""
    module_name, _, attr = target.partition(":")

    def function() -> Callable[..., Any]:
        return getattr(importlib.import_module(module_name), attr)

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function()(*args, **kwargs)

        @property
        def __signature__(self) -> inspect.Signature:
            return inspect.signature(function())

    CallableModule.__qualname__ = CallableModule.__name__ = f"CallableModule[{name}]"
    sys.modules[name].__class__ = CallableModule
