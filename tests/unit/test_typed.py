"""afford is a typed package (PEP 561): its wheel ships ``afford/py.typed``, so that a type
checker reads the annotations of ``afford.track``, the API and the schemas in a user's code
instead of treating the package as untyped."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.paths import ROOT


def test_the_marker_file_is_in_the_package():
    assert (ROOT / "src" / "afford" / "py.typed").is_file()


@pytest.mark.slow  # builds a wheel from a copy of the sources: about 5 s
def test_the_wheel_ships_py_typed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("afford-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "afford/py.typed" in names
    assert "afford/data/platforms/local.toml" in names  # and the data beside it
