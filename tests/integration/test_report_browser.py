"""The HTML report in a real browser: Debian's chromium, headless, renders it to a
screenshot, and its DOM holds the plots and the tables; the report of real certificates
(probes, gates, host load, sizes, levers, distributed) overflows no 1400-pixel window
(issue 32, item 3): measured in the page by the browser, and shot at that width."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from afford.report import html, plots
from afford.report.build import build_report
from tests.paths import data_file
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


def screenshot(tmp: Path, path: Path, width: int, height: int) -> bytes:
    """The page shot at ``width`` x ``height``; PNG checked to be that size and not blank."""
    shot = tmp / f"report-{width}.png"
    r = chromium(tmp, f"--window-size={width},{height}", f"--screenshot={shot}", path.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == \
        (width, height)
    assert len(data) > 100_000  # a page of tables and plots, not a blank one
    return data


def test_it_renders_to_a_screenshot(page):
    tmp, path, _ = page
    screenshot(tmp, path, 1200, 4000)


REAL = [data_file(name) for name in
        ("h200_default_d89f7a2.json", "h200_sizes_levers_63bd66d.json",
         "h200_distributed_ws1_63bd66d.json", "cpu_tinylm_tiny.json")]
# In the page, after layout: every element whose right edge passes the window's width.
MEASURE = """<script>
(function () {
  var w = document.documentElement.clientWidth, over = [];
  document.querySelectorAll("body *").forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.right > w + 0.5) over.push(e.tagName + " " + Math.round(r.right) + ": " +
                                    (e.textContent || "").slice(0, 60));
  });
  var out = document.createElement("pre");
  out.id = "overflow";
  out.textContent = JSON.stringify({client: w, scroll: document.documentElement.scrollWidth,
                                    over: over.slice(0, 12), n: over.length});
  document.body.appendChild(out);
})();
</script>"""


@pytest.fixture(scope="module")
def real_page(tmp_path_factory):
    from afford.report.build import Inputs
    from afford.schema.cert import load_certificate

    tmp = tmp_path_factory.mktemp("real")
    report = build_report(Inputs(certs=tuple((p.name, load_certificate(p)) for p in REAL)))
    page = html.render(report, draw=plots.svg)
    path = tmp / "report.html"
    path.write_text(page)
    (tmp / "measured.html").write_text(page.replace("</body>", MEASURE + "</body>"))
    return tmp, path, page


def test_the_report_of_real_certificates_reads_to_the_end(real_page):
    _, _, page = real_page
    assert "Not shown" not in page and "carry no provenance tag" not in page
    for title in ("Probes", "Gates", "Host load", "Sizes", "Levers", "Distributed"):
        assert f">{title}</h" in page, title
    assert "gemm.fp32.dtype" not in page and "ladder.batch_key" not in page


def test_no_horizontal_overflow_at_1400_pixels(real_page):
    tmp, _, _ = real_page
    r = chromium(tmp, "--window-size=1400,1000", "--dump-dom",
                 (tmp / "measured.html").as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(r'<pre id="overflow">([^<]*)</pre>', r.stdout)
    assert found, r.stdout[-2000:]
    got = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["client"] <= 1400 and got["scroll"] <= got["client"], got
    assert got["n"] == 0, got


def test_the_report_of_real_certificates_renders_to_a_screenshot(real_page):
    tmp, path, _ = real_page
    screenshot(tmp, path, 1400, 3000)
