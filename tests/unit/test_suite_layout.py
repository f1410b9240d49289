"""The suite's own layout (issue 42; tests/README.md): every test file sits in one lane folder
and no file name is in two of them; tests/ itself holds the shared helpers, the fixtures
(data/, golden/) and conftest.py; the unit and answers lanes never ask for the session's real
CPU certificate (one certify, minutes on this box); no recorded input of tests/ is a byte copy
of a lab/ file (tests/data/README.md), and nothing in src/ or tests/ reads lab/ (the lab
notebook is a record)."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from tests.paths import LANES, ROOT, SRC, TESTS

#: the lanes whose files run in seconds: none of them may ask for conftest's real certificate
NO_CERTIFY = ("unit", "answers")
REAL_CERT = ("api_notebook", "cpu_cert", "cpu_cert_path", "planted_user_certify")
#: a path into lab/ written in code: "lab/...", 'lab', ROOT / "lab"
READS_LAB = re.compile(r"[\"']lab(?:/|[\"'])")


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def layout_problems(tests: Path) -> list[str]:
    """What breaks the lanes under ``tests``: a test file outside a lane, a lane that is not
    a package or holds anything but test files, a package folder that is no lane, and a
    test file's name in two lanes."""
    out = [f"{p.name}: a test file outside the lanes" for p in sorted(tests.glob("test_*.py"))]
    for folder in sorted(p for p in tests.iterdir() if (p / "__init__.py").is_file()):
        if folder.name not in LANES:
            out.append(f"{folder.name}/: a package folder that is no lane")
    seen: dict[str, str] = {}
    for lane in LANES:
        if not (tests / lane / "__init__.py").is_file():
            out.append(f"{lane}/: no lane package (its __init__.py)")
            continue
        for p in sorted((tests / lane).iterdir()):
            if p.name in ("__init__.py", "__pycache__"):
                continue
            if not (p.name.startswith("test_") and p.suffix == ".py"):
                out.append(f"{lane}/{p.name}: a lane holds test files only")
            elif p.name in seen:
                out.append(f"{lane}/{p.name}: also in {seen[p.name]}/")
            else:
                seen[p.name] = lane
    return out


def certify_in_fast_lanes(tests: Path) -> list[str]:
    """Where a file of the unit or answers lanes asks for conftest's real certificate: a
    test's or fixture's argument of that name, or the name given to ``usefixtures`` or
    ``getfixturevalue``."""
    return [f"{p.relative_to(tests)}:{node.lineno}" for lane in NO_CERTIFY
            for p in sorted((tests / lane).glob("*.py"))
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, ast.arg) and node.arg in REAL_CERT
            or isinstance(node, ast.Call) and any(
                isinstance(a, ast.Constant) and a.value in REAL_CERT for a in node.args)]


def byte_copies(tests: Path, lab: Path) -> list[str]:
    """Files of ``tests`` whose bytes are those of a file of ``lab`` (empty files aside)."""
    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    in_lab = {digest(p): p for p in _files(lab) if p.stat().st_size}
    return [f"{p.relative_to(tests)} = {in_lab[d].relative_to(lab)}" for p in _files(tests)
            if p.stat().st_size and (d := digest(p)) in in_lab]


def lab_readers(root: Path, *folders: Path) -> list[str]:
    """Lines of code or configuration under ``folders`` that write a path into lab/."""
    here = Path(__file__).resolve()
    return [f"{p.relative_to(root)}:{i}" for folder in folders for p in _files(folder)
            if p.suffix in (".py", ".toml") and p.resolve() != here
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if READS_LAB.search(line)]


def test_every_test_file_is_in_one_lane_under_a_name_of_its_own():
    assert layout_problems(TESTS) == []
    assert sum(1 for lane in LANES for _ in (TESTS / lane).glob("test_*.py")) > 100


def test_the_unit_and_answers_lanes_make_no_real_certificate():
    assert certify_in_fast_lanes(TESTS) == []


def test_no_recorded_input_is_a_byte_copy_of_a_lab_file():
    assert byte_copies(TESTS, ROOT / "lab") == []


def test_nothing_in_src_or_tests_reads_lab():
    assert lab_readers(ROOT, SRC, TESTS) == []


def test_the_layout_checks_can_fail(tmp_path):
    tests, lab = tmp_path / "tests", tmp_path / "lab"
    for lane in LANES:
        (tests / lane).mkdir(parents=True)
        (tests / lane / "__init__.py").write_text("")
    (tests / "test_flat.py").write_text("")
    (tests / "unit" / "test_a.py").write_text("def test_x(cpu_cert):\n    pass\n")
    (tests / "answers" / "test_b.py").write_text(
        "import pytest\n\n\n@pytest.mark.usefixtures('cpu_cert_path')\ndef test_y():\n"
        "    pass\n\n\ndef test_z(request):\n    request.getfixturevalue('cpu_cert')\n")
    (tests / "cli" / "test_a.py").write_text("")
    (tests / "cli" / "helper.py").write_text("")
    (tests / "slow").mkdir()
    (tests / "slow" / "__init__.py").write_text("")
    assert layout_problems(tests) == ["test_flat.py: a test file outside the lanes",
                                      "slow/: a package folder that is no lane",
                                      "cli/helper.py: a lane holds test files only",
                                      "cli/test_a.py: also in unit/"]
    assert certify_in_fast_lanes(tests) == ["unit/test_a.py:1", "answers/test_b.py:4",
                                            "answers/test_b.py:10"]
    lab.mkdir()
    (lab / "cert.json").write_text('{"a": 1}')
    (tests / "data.json").write_text('{"a": 1}')
    (tests / "other.json").write_text('{"a": 2}')
    assert byte_copies(tests, lab) == ["data.json = cert.json"]
    (tests / "reader.py").write_text('DATA = ROOT / "lab" / "x.json"\nOTHER = "lab/certificates"\n'
                                     '"""the notebook, lab/README.md, is a record"""\n')
    assert lab_readers(tmp_path, tests) == ["tests/reader.py:1", "tests/reader.py:2"]
