"""Read a TOML input file into a pydantic model: one clear InputError, never a traceback.

Errors name the file, the field (dotted path) and the reason (exit code 2). Python 3.11+
reads TOML with the standard library's ``tomllib``; 3.10 with ``tomli`` (same API).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from afford.errors import InputError

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

M = TypeVar("M", bound=BaseModel)


def read_toml(path: str | Path, what: str) -> dict:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} file {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} file {p}: cannot read it: {exc}") from None
    return loads_toml(text, f"{what} file {p}")


def loads_toml(text: str, label: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{label}: not valid TOML: {exc}") from None


def validate(raw: dict, model: type[M], label: str, **context) -> M:
    """``model`` from ``raw``; InputError naming ``label``, the field and the reason."""
    try:
        return model.model_validate(raw, context=context or None)
    except ValidationError as exc:
        raise InputError(f"{label}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors()[:3]:
        where = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field (check its spelling)"
        elif e["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"field {where}: {msg}")
    more = exc.error_count() - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
