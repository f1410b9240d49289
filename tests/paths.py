"""Where the suite's files are, named once. A test or helper reads the repository's folders
and its recorded inputs through these names, never through its own ``__file__``, so that a
test file can move between the lane folders (tests/unit, tests/answers, ...) and no path
breaks. The large recorded inputs of tests/data are stored gzipped: ``data_file`` hands a
test the plain file."""

from __future__ import annotations

import atexit
import gzip
import os
import shutil
import tempfile
from pathlib import Path

#: the repository's root (pyproject.toml, README.md, docs/, examples/, tools/)
ROOT = Path(__file__).resolve().parents[1]
#: the package's source, for a child process started with ``PYTHONPATH=src``
SRC = ROOT / "src"
#: the suite's shared folder: helpers, fakes and the scripts tests start as children
TESTS = ROOT / "tests"
#: the recorded inputs tests assert on (certificates, laws, traces, plans; data/README.md)
DATA = TESTS / "data"
#: the goldens (goldens.py compares against them)
GOLDEN = TESTS / "golden"
#: the lanes, one folder each under TESTS, in the order a session runs them (conftest): the
#: two pure-Python lanes first, each with a measurement beside it (tests/README.md)
LANES = ("unit", "answers", "cli", "integration", "measure")

_unpacked: list[Path] = []  # this process's folder of unpacked inputs, made on first use


def _folder() -> Path:
    if not _unpacked:
        folder = Path(tempfile.mkdtemp(prefix="afford-tests-data-"))
        owner = os.getpid()  # a forked child inherits the folder and must not remove it
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(folder, True))
        _unpacked.append(folder)
    return _unpacked[0]


def data_file(name: str) -> Path:
    """tests/data/NAME as a plain file that a test can hand to afford (a command,
    ``load_certificate``, a child process): NAME itself where it is stored plain; where it
    is stored gzipped (NAME.gz), unpacked once per process under NAME into a folder of the
    process's own, removed when that process exits."""
    plain = DATA / name
    if plain.is_file():
        return plain
    packed = DATA / f"{name}.gz"
    if not packed.is_file():
        raise FileNotFoundError(f"tests/data holds neither {name} nor {name}.gz")
    out = _folder() / name
    if not out.is_file():
        part = out.with_name(f".{out.name}.part")
        part.write_bytes(gzip.decompress(packed.read_bytes()))
        part.replace(out)
    return out
