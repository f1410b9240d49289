"""A bytecode cache for afford's own start, on an image whose packages carry none.

Python compiles a module from source when it finds no bytecode for it, and writes what it
compiled beside the source unless it may not (a read-only install, or
``PYTHONDONTWRITEBYTECODE``, which container images often set). Where torch was installed
without its bytecode and none can be written, every process compiles its modules again: on
the GPU image afford is validated on, certify's parent compiled 1,900-2,200 modules before
its sweep and each child as many, seconds of every start
(``lab/device-runs/2026-12-06-h100-setup``).

:func:`start` (the console script calls it first) then points this process's bytecode at
a folder of afford's cache (``sys.pycache_prefix``: :mod:`afford.core.cache`'s folder, under
``bytecode``), where the first run writes it and later runs read it; nothing is written
beside any installed file. It does so only when torch's own bytecode is missing
(``importlib.util.cache_from_source`` of its ``__init__``): an ordinary install is left as
it is. ``AFFORD_CACHE_DIR=off`` or ``AFFORD_BYTECODE=off`` turns it off; a
``PYTHONPYCACHEPREFIX`` of the user's own is kept.

Which processes use it: the parent and certify's first sweep child, whose start is the
command's critical path and whose startup run counts towards no figure (it is contended).
Every other child starts as a process of the user's would, without it, so the certificate's
startup costs (what a restart costs a plan) stay those of a plain process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ENV = "AFFORD_BYTECODE"  # "off": never
FROM = "AFFORD_BYTECODE_FROM"  # set in a child started with the cache: its folder
PROBE = "torch"  # the package whose missing bytecode says the image carries none


def missing(package: str = PROBE) -> bool:
    """Whether ``package`` is installed from source files with no bytecode where Python
    looks for it (found, never imported): beside its source, or under a
    ``sys.pycache_prefix`` when one is set (:func:`start` asks only when none is)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(origin))


def folder(environ: dict[str, str] | None = None) -> Path | None:
    """The cache's folder for bytecode, made if need be; None when turned off or not
    writable."""
    from afford.core import cache

    env = os.environ if environ is None else environ
    if env.get(ENV, "").strip().lower() == cache.OFF:
        return None
    base = cache.folder(env)
    if base is None:
        return None
    path = base / "bytecode"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def start(environ: dict[str, str] | None = None, probe: str = PROBE) -> str | None:
    """Point this process's bytecode at afford's cache when the image carries none (module
    docstring; ``probe``: the package whose bytecode is looked for); the folder, or None
    when nothing was changed."""
    env = os.environ if environ is None else environ
    if sys.pycache_prefix or env.get("PYTHONPYCACHEPREFIX") or not missing(probe):
        return None
    path = folder(env)
    if path is None:
        return None
    sys.pycache_prefix = str(path)
    sys.dont_write_bytecode = False  # afford's own folder: nothing beside the user's files
    return str(path)


def child_env(env: dict[str, str], path: str | None) -> dict[str, str]:
    """A child's environment that reads and writes its bytecode in ``path`` (the folder
    :func:`start` chose), or ``env`` unchanged when it chose none."""
    if not path:
        return env
    out = {**env, "PYTHONPYCACHEPREFIX": path, FROM: path}
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def in_use() -> bool:
    """Whether this process is a child started with afford's bytecode cache
    (:func:`child_env`)."""
    return bool(sys.pycache_prefix) and os.environ.get(FROM) == sys.pycache_prefix
