import pytest
from pydantic import ValidationError

from afford.core.provenance import (
    NotExecutable,
    Struck,
    Tag,
    Tagged,
    assumed,
    fitted,
    measured,
    require_tagged,
)
from afford.report.terminal import fmt


def test_constructors_set_tags():
    assert measured(1.0, "s", "run").tag is Tag.MEASURED
    assert fitted(1.0, "s", "law", extrapolated=True).extrapolated
    assert assumed(600, "s", "no way to measure package install here").source.startswith("no way")


def test_renderer_refuses_bare_numbers():
    with pytest.raises(TypeError, match="untagged"):
        fmt(3.14)
    with pytest.raises(TypeError):
        require_tagged(12, "table")


def test_renderer_marks_tag_and_extrapolation():
    assert fmt(measured(0.0123, "s", "run")) == "12.30 ms M"
    assert fmt(fitted(2.0, "s", "law", extrapolated=True)) == "2.00 s F*"


def test_tagged_is_frozen_and_strict():
    t = measured(1.0, "s", "run")
    with pytest.raises(ValidationError):
        t.value = 2.0
    with pytest.raises(ValidationError):
        Tagged(value=1.0, unit="s", tag="GUESSED", source="x")


def test_struck_needs_a_reason():
    with pytest.raises(ValidationError):
        Struck(value=measured(1.0, "s", "run"), reason="")
    s = Struck(value=measured(1.0, "s", "run"), reason="wrong clock", superseded_by="r2")
    assert s.status == "withdrawn"


def test_not_executable_keeps_the_reason():
    ne = NotExecutable(what="nvml", reason="No module named 'pynvml'")
    assert ne.status == "NOT EXECUTABLE" and "pynvml" in ne.reason


def test_str_shows_value_unit_and_tag():
    assert str(measured(2.5, "s", "run 1")) == "2.5 s [MEASURED]"
    assert str(assumed(3, "", "guess")) == "3 [ASSUMED]"  # no unit, no gap
