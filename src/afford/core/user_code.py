"""The user's own code that afford imports: a workload ``pkg.mod:factory``, a data generator
``pkg.mod:function``.

Two rules, one place:

- **Where it is imported from.** Afford's processes never put the working folder on
  ``sys.path`` by themselves (its measuring children start with ``python -P``): a
  ``numpy.py`` left in the folder where ``afford certify`` runs is never imported. A spec
  names a module; when its top package is not importable from ``sys.path`` as it stands
  (installed, or on ``PYTHONPATH``), the working folder is added, at the end of
  ``sys.path`` (installed packages keep their names); :func:`added_folder` says whether
  the package came from the working folder, for the certificate to record.
- **Its failures are the user's input.** Whatever importing the module or calling its
  function raises (any exception, ``SystemExit`` too: a module that calls ``sys.exit(7)``
  must not end afford with exit 7) becomes one line naming the module, an
  :class:`~afford.core.errors.InputError` (exit 2). Only a module that is not there at all is
  :class:`UserCodeMissing` (or one without the name), which a caller may record instead
  (an UNPINNED generator).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable

from afford.core.errors import InputError


class UserCodeMissing(InputError):
    """The module a spec names does not exist (neither installed nor in the working folder),
    or has no such name."""


def split_spec(spec: str, what: str, noun: str = "name") -> tuple[str, str]:
    """``pkg.mod:attr`` -> (``pkg.mod``, ``attr``); InputError naming ``what`` otherwise
    (``noun``: what the attribute is, ``factory`` or ``function``)."""
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name.strip() or not attr.strip():
        raise InputError(f"{what} {spec!r}: write it as pkg.module:{noun}")
    return mod_name.strip(), attr.strip()


def one_line(exc: BaseException) -> str:
    """What the user's code did, on one line: ``raised ValueError: boom``, ``called
    sys.exit(7)``."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())[:500]
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def import_attr(spec: str, what: str, noun: str = "name") -> object:
    """The object ``spec`` (``pkg.mod:attr``) names, imported under the rules above.
    UserCodeMissing when the module or its ``attr`` is not there, InputError when importing
    it failed."""
    mod_name, attr = split_spec(spec, what, noun)
    _find_top(mod_name.split(".")[0])
    try:
        module = importlib.import_module(mod_name)
    except (Exception, SystemExit) as exc:  # the user's code: any failure is their input
        name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        if name is not None and (mod_name == name or mod_name.startswith(name + ".")):
            raise _no_module(spec, what, mod_name, name) from None
        raise InputError(f"{what} {spec!r}: importing {mod_name} failed: "
                         f"it {one_line(exc)}") from None
    if not hasattr(module, attr):
        raise UserCodeMissing(f"{what} {spec!r}: {mod_name} has no {attr!r}")
    return getattr(module, attr)


def _no_module(spec: str, what: str, mod_name: str, name: str) -> UserCodeMissing:
    return UserCodeMissing(f"{what} {spec!r}: cannot import {mod_name}: no module {name!r} "
                           "(installed, on PYTHONPATH or in the working folder)")


def missing_module(spec: str, what: str = "workload") -> InputError | None:
    """Why ``spec``'s module cannot be imported under the rules above, read without
    importing anything: a malformed spec, or a top package neither importable from
    ``sys.path`` nor in the working folder; None when it may be there (importing it may
    still fail). The same words :func:`import_attr` raises."""
    try:
        mod_name, _ = split_spec(spec, what, "factory")
    except InputError as exc:
        return exc
    top = mod_name.split(".")[0]
    if _as_it_stands(top) or _in_working_folder(top):
        return None
    return _no_module(spec, what, mod_name, top)


def call(fn: Callable[[], object], spec: str, what: str) -> object:
    """``fn()``, the user's function: any failure (SystemExit too) one InputError line."""
    try:
        return fn()
    except (Exception, SystemExit) as exc:
        raise InputError(f"{what} {spec!r}: it {one_line(exc)}") from None


def added_folder(spec: str) -> str | None:
    """The working folder when ``spec``'s package was imported from it (afford added it to
    ``sys.path``, or the process started there); None when it came from anywhere else
    (installed, on PYTHONPATH) or was not imported."""
    module = sys.modules.get(spec.partition(":")[0].split(".")[0])
    paths = list(getattr(module, "__path__", None) or [])
    where = os.path.dirname(paths[0]) if paths else \
        os.path.dirname(getattr(module, "__file__", None) or "")
    here = os.getcwd()
    return here if where and os.path.realpath(where) == os.path.realpath(here) else None


def _as_it_stands(top: str) -> bool:
    """Whether ``top`` is importable from ``sys.path`` as it stands (or already imported);
    True also where looking raises: importing it then says why."""
    if top in sys.modules:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return True


def _in_working_folder(top: str) -> bool:
    """Whether the working folder holds a package or module ``top``, found by the same
    finder an import uses, without touching ``sys.path``."""
    return importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) is not None


def _find_top(top: str) -> None:
    """Make ``top`` importable: as it stands, or from the working folder added at the end
    of ``sys.path`` (only here, only for a user's package, only when it is there)."""
    if _as_it_stands(top):
        return
    folder = os.getcwd()
    if folder not in sys.path and _in_working_folder(top):
        sys.path.append(folder)
        importlib.invalidate_caches()
