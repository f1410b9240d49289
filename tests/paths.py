"""Where the suite's files are, named once. A test or helper reads the repository's folders
and its recorded inputs through these names, never through its own ``__file__``, so that a
test file can move between the lane folders (tests/unit, tests/answers, ...) and no path
breaks."""

from __future__ import annotations

from pathlib import Path

#: the repository's root (pyproject.toml, README.md, docs/, examples/, tools/)
ROOT = Path(__file__).resolve().parents[1]
#: the package's source, for a child process started with ``PYTHONPATH=src``
SRC = ROOT / "src"
#: the suite's shared folder: helpers, fakes and the scripts tests start as children
TESTS = ROOT / "tests"
#: the recorded inputs tests assert on (certificates, laws, traces, plans)
DATA = TESTS / "data"
#: the goldens (goldens.py compares against them)
GOLDEN = TESTS / "golden"
