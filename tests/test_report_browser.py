"""The HTML report in a real browser: Debian's chromium, headless, renders it to a
screenshot, and its DOM holds the plots and the tables."""

import re
import subprocess
from pathlib import Path

import pytest

from afford.report import html, plots
from afford.report.build import build_report
from tests.synthetic import report_inputs

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="chromium is not installed at /usr/bin/chromium "
                       "(apt-get install -y chromium; .ci/run installs it)"),
    pytest.mark.skipif(not plots.available(),
                       reason="matplotlib is not installed (afford[plots]): no plots to see"),
]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    report = build_report(report_inputs())
    path = tmp / "report.html"
    path.write_text(html.render(report, draw=plots.svg))
    return tmp, path, report


def test_the_dom_holds_the_plots_and_tables(page):
    tmp, path, report = page
    r = chromium(tmp, "--dump-dom", path.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    figures = re.findall(r'<figure id="plot-([^"]+)" data-kind="(\w+)">\s*<svg', dom)
    assert sorted(pid for pid, _ in figures) == sorted(p.id for p in report.plots)
    assert {kind for _, kind in figures} == {"throughput", "memory", "residency", "ladder"}
    assert dom.count("<table") == sum(len(s.tables) for s in sections(report.sections)) == 38
    assert "Device: Tesla T4 (no certificate yet)" in dom
    assert "afford certify --out afford-cert-tesla-t4.json" in dom
    assert re.search(r"<del[^>]*>811.1 us", dom)  # the struck reading, struck


def sections(items):
    for s in items:
        yield s
        yield from sections(s.subsections)


def test_it_renders_to_a_screenshot(page):
    tmp, path, _ = page
    shot = tmp / "report.png"
    r = chromium(tmp, "--window-size=1200,4000", f"--screenshot={shot}", path.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 4000)
    assert len(data) > 100_000  # a page of tables and plots, not a blank one
