"""Numbers in prose carry tags, as table cells do (issue 30, item 10)."""


import pytest

from afford.core.provenance import fitted, measured
from afford.report.prose import prose, untagged_figures


def test_a_tagged_figure_is_written_with_its_tag():
    assert prose("took {}", measured(40.6, "s", "wall")) == "took 40.60 s M"
    assert prose("{} step time: {}", "tinylm", fitted("t = 1e-3 s^1.2", "", "law")) == \
        "tinylm step time: t = 1e-3 s^1.2 F"


@pytest.mark.parametrize("template", ["took 40.6 s", "sweep 110 s, probes 24s", "12 %",
                                      "a = 6.34e-10", "share 0.75", "8 GiB", "1.5 ms"])
def test_a_figure_written_into_the_words_is_refused(template):
    assert untagged_figures(template)
    with pytest.raises(ValueError, match="untagged number"):
        prose(template)


def test_a_bare_number_passed_as_a_figure_is_refused():
    with pytest.raises(TypeError, match="untagged number"):
        prose("took {}", 40.6)


@pytest.mark.parametrize("words", ["3 children", "seq=512", "batch x2", "tinylm@q3",
                                   "d768L12", "{} ({}), {} protocol"])
def test_counts_and_names_in_the_words_are_not_figures(words):
    assert untagged_figures(words) == []


def test_certify_prints_its_wall_time_and_stage_seconds_tagged():
    """The certify summary's title and its time-by-stage line printed "40.6 s" and
    "sweep 110.0 s" untagged."""
    from afford.cli.certify import stage_line, summary_title
    from tests.synthetic import make_cert

    cert = make_cert()
    env = cert.environment.model_copy(update={"elapsed_seconds": 240.5,
                                              "stage_seconds": {"sweep": 110.0, "probes": 24.25}})
    cert = cert.model_copy(update={"environment": env})
    assert summary_title(cert).endswith("children, 4m 00s M")
    assert stage_line(cert) == "time by stage: sweep 110.00 s M, probes 24.25 s M"


def test_the_levers_batch_law_prints_its_coefficients_tagged():
    from types import SimpleNamespace

    from afford.fit.time.verdicts import ladder_fit
    from afford.report.ladder_tables import batch_lines

    law, _, share = ladder_fit([512, 1024, 2048], [0.06, 0.08, 0.12])
    (line,) = batch_lines(SimpleNamespace(runs=[SimpleNamespace(workload="w", batch_law=law,
                                                                  fixed_share=share)]))
    f, c = line.split("t = ")[1].split(" x tokens")[0].split(" + ")
    assert f.endswith(" F") and c.endswith(" s/token F")  # both coefficients FITTED
    r2 = line.split("R^2 ")[1].split(")")[0]
    assert r2.endswith(" C") and line.endswith("% C")


def test_the_step_time_model_line_tags_its_coefficients_fitted():
    from afford.figures.time_figures import TimeSummary
    from afford.report.time_model import model_lines

    s = TimeSummary(name="tinylm", mode="fp32", form="max", formula="t = max(2.1e-3, 6.34e-10 "
                    "FLOPs)", reason="smallest held-out error", features="FLOPs",
                    held_out=(), held_out_median=None, held_out_worst=None, verdict=None,
                    reasons=(), floor=None, floor_spread=None, notes=())
    assert model_lines(s)[0] == "tinylm (fp32) step time: t = max(2.1e-3, 6.34e-10 FLOPs) F"
