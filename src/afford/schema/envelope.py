"""The envelope every afford file shares: a ``schema`` id, then the body; load/save helpers.

:func:`validate` turns a parsed input (a platform or run TOML file) into its model with one
clear InputError naming the file, the field (dotted path) and the reason.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from afford.core.errors import InputError
from afford.core.io import atomic_write_text, loads_json, read_text

M = TypeVar("M", bound="Envelope")
B = TypeVar("B", bound=BaseModel)


MIGRATIONS: dict[str, dict[str, Callable[[dict], dict]]] = {}  # current id -> old id -> step


def register_migration(current: str, old: str) -> Callable:
    """Decorator: ``fn(raw) -> raw`` upgrades a parsed file of schema ``old`` one step toward
    ``current``; :func:`load_envelope` applies the registered steps (pytest-benchmark's
    ``normalize_stats`` idea: old files are upgraded on load, never rejected)."""
    def wrap(fn: Callable[[dict], dict]) -> Callable[[dict], dict]:
        MIGRATIONS.setdefault(current, {})[old] = fn
        return fn
    return wrap


class Envelope(BaseModel):
    model_config = ConfigDict(defer_build=True, allow_inf_nan=False, extra="forbid",
                              populate_by_name=True)

    schema_id: str = Field(alias="schema")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=1) + "\n"


def load_envelope(path: str | Path, model: type[M], current: str,
                  migrations: dict[str, Callable[[dict], dict]] | None = None) -> M:
    """Read ``path`` as ``model``; upgrade known older ids (``migrations``, else those
    registered for ``current``); clear errors otherwise."""
    p = Path(path)
    return parse_envelope(read_text(p, str(p)), p, model, current, migrations)


def parse_envelope(text: str, p: Path, model: type[M], current: str,
                   migrations: dict[str, Callable[[dict], dict]] | None = None) -> M:
    """:func:`load_envelope` of the text read from ``p`` (named in errors)."""
    raw = loads_json(text, str(p))
    if not isinstance(raw, dict) or not isinstance(raw.get("schema"), str):
        raise InputError(f"{p}: not an afford file (no 'schema' field; expected {current!r})")
    migrations = migrations if migrations is not None else MIGRATIONS.get(current, {})
    seen = set()
    while raw["schema"] != current:
        sid = raw["schema"]
        if sid not in migrations or sid in seen:
            raise InputError(f"{p}: schema {sid!r} is not one this afford reads "
                             f"(expected {current!r}"
                             f"{', or ' + ', '.join(migrations) if migrations else ''})")
        seen.add(sid)
        raw = migrations[sid](raw)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise InputError(f"{p}: malformed {current} file: {where}: {first['msg']} "
                         f"({exc.error_count()} error(s) in all)") from None


def save_envelope(obj: Envelope, path: str | Path, *, overwrite: bool) -> Path:
    return atomic_write_text(path, obj.to_json(), overwrite=overwrite)


def validate(raw: dict, model: type[B], label: str, **context) -> B:
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
