"""Golden files, one switch: ``AFFORD_UPDATE_GOLDEN=1`` rewrites them after an intended change.

Text goldens (rendered tables) compare exactly; number goldens (JSON) flatten a result to
``{path: number}`` and compare each number with a relative tolerance, so a golden says which
figure moved, not which of 140 columns shifted.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from tests.paths import GOLDEN

UPDATE = "AFFORD_UPDATE_GOLDEN"
REL = 1e-9


def updating() -> bool:
    return bool(os.environ.get(UPDATE))


def check_text(name: str, text: str) -> None:
    path = GOLDEN / name
    if updating():
        path.write_text(text)
    assert text == path.read_text(), f"golden {name} changed; {UPDATE}=1 to accept"


def numbers(doc, prefix: str = "") -> dict[str, float | int | bool | None]:
    """The numeric, boolean and null leaves of a JSON document, by dotted path."""
    if isinstance(doc, dict):
        return {k: v for key, val in doc.items()
                for k, v in numbers(val, f"{prefix}{key}.").items()}
    if isinstance(doc, list):
        return {k: v for i, val in enumerate(doc) for k, v in numbers(val, f"{prefix}{i}.").items()}
    if doc is None or isinstance(doc, (bool, int, float)):
        return {prefix[:-1]: doc}
    return {}


def check_numbers(name: str, doc) -> None:
    got = numbers(doc)
    path = GOLDEN / name
    if updating():
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(path.read_text())
    assert sorted(got) == sorted(want), f"golden {name}: the set of figures changed"
    moved = [k for k, v in want.items() if not _same(got[k], v)]
    assert not moved, f"golden {name}: " + "; ".join(f"{k}: {want[k]} -> {got[k]}"
                                                     for k in moved[:10])


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or a == b
    return a == pytest.approx(b, rel=REL) or (math.isnan(a) and math.isnan(b))
