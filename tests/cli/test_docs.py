"""Every citation of the design and the references resolves to the copies in docs/."""

import re

from tests.paths import ROOT

CITING = [p for folder in ("src", "tests", "tools", "examples") for p in (ROOT / folder).rglob("*")
          if p.suffix in (".py", ".toml", ".sh") and p.name != "test_docs.py"]
CITING.append(ROOT / "README.md")
SECTION = re.compile(r"docs/DESIGN\.md sections? (\d+)(?:(?:,| and) (\d+))?(?:,? rules? (\d+))?")


def _design() -> dict[int, str]:
    """Section number -> its text."""
    text = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    parts = re.split(r"^## (\d+)\. ", text, flags=re.M)
    return {int(n): body for n, body in zip(parts[1::2], parts[2::2])}


def test_no_citation_of_a_file_outside_the_repository():
    bare = re.compile(r"(?<![/\w.])(DESIGN|REFERENCES)(\.md| section| s\.)")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in CITING
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if bare.search(line)]
    assert found == []
    assert (ROOT / "docs" / "REFERENCES.md").is_file()


def test_every_cited_design_section_and_rule_exists():
    sections = _design()
    cited = [(p, m) for p in CITING for m in SECTION.finditer(p.read_text(encoding="utf-8"))]
    assert len(cited) > 40
    for p, m in cited:
        for n in filter(None, (m.group(1), m.group(2))):
            assert int(n) in sections, f"{p.relative_to(ROOT)} cites section {n}"
        if m.group(3):
            rules = re.findall(r"^(\d+)\. ", sections[int(m.group(1))], flags=re.M)
            assert m.group(3) in rules, f"{p.relative_to(ROOT)} cites {m.group(0)}"


def test_every_quoted_references_heading_exists():
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "REFERENCES.md").read_text(
        encoding="utf-8"), flags=re.M)
    quoted = re.compile(r'docs/REFERENCES\.md, "([^"]+)"')
    for p in CITING:
        for m in quoted.finditer(p.read_text(encoding="utf-8")):
            assert m.group(1) in headings, f"{p.relative_to(ROOT)} cites {m.group(0)}"


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(python3 -m pip install [^\n]+)\n```", text)


def test_ci_runs_the_readme_test_command_verbatim_in_a_fresh_venv():
    install_and_certify, install_and_test = _readme_commands()[:2]
    assert install_and_certify.endswith("&& afford certify")
    assert install_and_test.endswith("&& python3 -m pytest -q")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in ci.splitlines()]
    assert install_and_test in lines
    venv = lines.index("python3 -m venv .venv-ci")
    assert venv < lines.index(". .venv-ci/bin/activate") < lines.index("python3 -m pip check") \
        < lines.index(install_and_test)


def _tour() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## Commands", 1)[1].split("\n## ", 1)[0]


def test_the_readme_tour_has_a_row_for_every_command():
    from afford.cli import COMMANDS

    rows = re.findall(r"^\| `(?:torchrun [^`]*-m )?afford (\w+)", _tour(), flags=re.M)
    assert sorted(set(COMMANDS) - set(rows)) == []


def test_the_readme_names_compare_verdicts_as_the_code_spells_them():
    from afford.planning.compare_laws import NOT_COMPARED, NOT_REPRODUCED, REPRODUCES

    row = next(ln for ln in _tour().splitlines() if ln.startswith("| `afford compare"))
    for word, code in ((REPRODUCES, 0), (NOT_REPRODUCED, 1), (NOT_COMPARED, 2)):
        assert f"{word} (exit {code})" in row or f"{word} ({code})" in row, row


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_of_the_readme_and_docs_resolves():
    """README.md and docs/*.md: each link to a file of the repository names one that
    exists (web links are not followed)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [f"{page.relative_to(ROOT)} -> {target}" for page in pages
              for target in LINK.findall(page.read_text(encoding="utf-8"))
              if not target.startswith(("http://", "https://", "mailto:"))
              and not (page.parent / target).exists()]
    assert broken == []
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


COSTS_CITATION = re.compile(r"COSTS(?: file)?,? (?:section |§)?(\d+(?:\.\d+)?)")


def test_every_cited_costs_section_exists():
    """"COSTS 3.4" in the code is section 3.4 of docs/spec/COSTS.md, the lab's file."""
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", (ROOT / "docs" / "spec" /
                   "COSTS.md").read_text(encoding="utf-8"), flags=re.M))
    cited = {(p, m.group(1)) for p in CITING + [ROOT / "docs" / "MANUAL.md"]
             for m in COSTS_CITATION.finditer(p.read_text(encoding="utf-8"))}
    assert len(cited) > 20
    assert [f"{p.relative_to(ROOT)} cites COSTS {n}" for p, n in sorted(cited)
            if n not in headings] == []
    assert {"0", "1.4", "1.5", "1.6", "3", "3.1", "3.2", "3.3", "3.4"} <= headings
