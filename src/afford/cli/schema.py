"""``afford schema KIND``: print the JSON Schema of a file kind.

The kinds users write by hand (``run`` and ``platform``, TOML) are here too, so that an
editor that reads JSON Schema (for TOML: Taplo, Even Better TOML) checks a run or platform
file as it is typed, against the same pydantic model ``afford plan`` loads it with.
"""

from __future__ import annotations

from typing import Annotated

import typer

from afford.cli.common import guard, print_json
from afford.core.errors import InputError

KINDS = {"cert": ("afford.schema.cert", "Certificate"),
         "constants": ("afford.schema.user_constants", "UserConstants"),
         "manifest": ("afford.schema.manifest", "Manifest"),
         "platform": ("afford.schema.platform", "Platform"),
         "run": ("afford.schema.run", "RunFile")}


def command(kind: Annotated[str, typer.Argument(help="File kind: " + ", ".join(KINDS))]) -> None:
    """Print the JSON Schema of an afford file kind (cert, run, platform, ...)."""
    import importlib

    with guard():
        if kind not in KINDS:
            raise InputError(f"unknown schema kind {kind!r}; kinds: {', '.join(sorted(KINDS))}")
        mod, name = KINDS[kind]
        model = getattr(importlib.import_module(mod), name)
        print_json(model.model_json_schema(by_alias=True))
