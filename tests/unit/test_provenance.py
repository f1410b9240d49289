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
    assert str(measured(2.5, "s", "run 1")) == "2.50 s [MEASURED]"
    assert str(assumed(3, "", "guess")) == "3 [ASSUMED]"  # no unit, no gap


def test_str_reads_as_a_person_reads_a_figure():
    """Issue 40: ``print(step)`` printed ``6.880244862887468 s [FITTED]``: 15 digits, and
    nothing said it was extrapolated. It prints as the tables do, the marks spelled out."""
    step = fitted(6.880244862887468, "s", "law", extrapolated=True)
    assert str(step) == "6.88 s [FITTED, extrapolated]"
    assert str(fitted(0.0413, "s", "law")) == "41.30 ms [FITTED]"
    assert str(measured(1456.2, "s", "wall")) == "24m 16s [MEASURED]"
    pending = measured(3_000_000, "tokens", "count").model_copy(update={"provisional": True})
    assert str(pending) == "3M [MEASURED, provisional]"
    assert str(measured(-1.0, "s", "clock")) == "FAILED: a negative time (-1 s) [MEASURED]"
