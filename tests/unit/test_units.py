import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from afford.core.units import (
    UnitError,
    format_bytes,
    format_count,
    format_duration,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_fraction,
)


@pytest.mark.parametrize("text,value", [("7.5M", 7.5e6), ("124M", 124e6), ("1B", 1e9),
                                        ("2048", 2048), ("20k", 2e4), ("1.5e3", 1500)])
def test_parse_count(text, value):
    assert parse_count(text) == pytest.approx(value)


@pytest.mark.parametrize("text,seconds", [("11h", 39600), ("90s", 90), ("7d", 604800),
                                          ("1h30m", 5400), ("2w", 1209600), ("45", 45),
                                          ("30min", 1800), ("250ms", 0.25), ("2sec", 2)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text,nbytes", [("20GB", 20 * 10**9), ("16GiB", 16 * 2**30),
                                         ("512MiB", 512 * 2**20), ("1000", 1000),
                                         ("1.5TB", 1.5e12), ("512B", 512), ("512", 512)])
def test_parse_bytes(text, nbytes):
    assert parse_bytes(text) == nbytes


def test_decimal_and_binary_gigabytes_differ():
    assert parse_bytes("16GiB") - parse_bytes("16GB") == 16 * (2**30 - 10**9)


@pytest.mark.parametrize("text,frac", [("5%", 0.05), ("0.05", 0.05), ("100%", 1.0)])
def test_parse_fraction(text, frac):
    assert parse_fraction(text) == pytest.approx(frac)


@pytest.mark.parametrize("bad", ["", "M", "7.5X", "abc", "1h30", "inf"])
def test_bad_counts_and_durations_raise(bad):
    with pytest.raises(UnitError):
        parse_count(bad)
    with pytest.raises(UnitError):
        parse_duration(bad)


@pytest.mark.parametrize("bad", ["20 Gb", "GiB", "-", "3 XB"])
def test_bad_sizes_raise(bad):
    with pytest.raises(UnitError):
        parse_bytes(bad)


def test_formatting():
    assert format_count(7.5e6) == "7.5M"
    assert format_bytes(16 * 2**30) == "16.00 GiB"
    assert format_bytes(20e9, binary=False) == "20.00 GB"
    assert format_duration(0.0025) == "2.50 ms"
    assert format_duration(39600) == "11h 00m"


@given(st.floats(min_value=1, max_value=1e12, allow_nan=False))
def test_count_round_trip_within_rounding(x):
    assert math.isclose(parse_count(format_count(x, digits=6)), x, rel_tol=1e-5)


def test_decimal_k_and_binary_ki_counts():
    """issue 16: ``4k`` is 4000 (decimal), ``4Ki`` is 4096 (binary)."""
    from afford.core.units import parse_count
    assert parse_count("4k") == 4000 and parse_count("4Ki") == 4096
    assert parse_count("1Mi") == 2**20 and parse_count("32Ki") == 32768
    assert parse_count("2048") == 2048 and parse_count("7.5") == 7.5  # no suffix: x 1


def test_quota_time_formats_as_gpu_hours():
    from afford.core.provenance import inherited
    from afford.core.units import format_gpu_hours
    from afford.report.terminal import value_text
    assert format_gpu_hours(108000) == "30 GPU-h"
    assert format_gpu_hours(11.134 * 3600) == "11.13 GPU-h"
    assert value_text(inherited(108000.0, "GPU-s", "quota")) == "30 GPU-h"


def test_bounded_edges():
    from afford.core.units import MAX_COUNT, bounded
    assert bounded(5, "n") == 5.0 and bounded(MAX_COUNT, "n") == MAX_COUNT  # (0, 1e18]
    for bad in (0, 0.0, -1, MAX_COUNT * 1.01, math.inf, math.nan, True, "5"):
        with pytest.raises(UnitError, match="^n: "):
            bounded(bad, "n")
    # a closed lower end accepts the end itself, still nothing below it
    assert bounded(0.0, "n", low_open=False) == 0.0
    assert bounded(1, "n", low=1, low_open=False) == 1.0
    with pytest.raises(UnitError, match=r"out of range \[1, 1e\+18\]"):
        bounded(0.5, "n", low=1, low_open=False)
    with pytest.raises(UnitError, match=r"out of range \(1, 1e\+18\]"):
        bounded(1, "n", low=1)
    # an integer is judged by its size, one past every float too (it is finite, only too
    # large), and shown by its digits' count, not 400 digits
    with pytest.raises(UnitError, match=r"out of range \(0, 1e\+18\]"):
        bounded(10**30, "n")
    with pytest.raises(UnitError, match=r"a number of 401 digits is out of range"):
        bounded(10**400, "n")
    with pytest.raises(UnitError, match="not a finite quantity"):
        bounded(float("inf"), "n")


@pytest.mark.parametrize("value,low,expected", [(3, 1, 3), (3.0, 1, 3), ("4k", 1, 4000),
                                                (0, 0, 0), (10**18, 1, 10**18)])
def test_whole_numbers(value, low, expected):
    from afford.core.units import whole
    got = whole(value, "n", low=low)
    assert got == expected and isinstance(got, int)


@pytest.mark.parametrize("value,match", [(1.5, "not a whole number"), ("1.5", "not a whole"),
                                         (0, r"out of range \[1"), (-3, "out of range"),
                                         (99999999999999999999, "out of range"),
                                         (True, "not a whole number"),
                                         (float("nan"), "not a finite"), ("x", "cannot read")])
def test_whole_refuses_what_is_not_a_count(value, match):
    """``--children 99999999999999999999`` and ``--sweep s=1.5`` (issue 33): refused, never
    truncated or taken."""
    from afford.core.units import whole
    with pytest.raises(UnitError, match=match):
        whole(value, "n")


def test_dates_afford_can_compute_with():
    """Year 1 at +14:00 lies before year 1 in UTC: astimezone overflowed (issue 33)."""
    from datetime import datetime, timedelta, timezone

    from afford.core.units import check_date
    ok = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert check_date(ok, "d") is ok
    naive = datetime(2026, 12, 1)
    assert check_date(naive, "d") is naive
    for bad in (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                datetime(1969, 12, 31, 23, 59, tzinfo=timezone.utc),
                datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-14)))):
        with pytest.raises(UnitError, match="out of range"):
            check_date(bad, "d")


def test_a_century_is_the_longest_duration():
    """MAX_SECONDS: 100 Julian years of 365.25 days of 86400 s."""
    from afford.core.units import MAX_SECONDS, bounded
    century = parse_duration("36525d")
    assert bounded(century, "t", high=MAX_SECONDS) == century == 3_155_760_000.0
    with pytest.raises(UnitError, match="out of range"):
        bounded(parse_duration("36526d"), "t", high=MAX_SECONDS)


def test_sizes_with_a_suffix_the_table_lacks_raise():
    # the pattern admits kiB (k, i, B) but only KiB is a binary kilobyte
    assert parse_bytes("1KiB") == 1024 and parse_bytes("1kB") == 1000
    with pytest.raises(UnitError, match="as a size"):
        parse_bytes("1kiB")


def test_format_bytes_scales():
    assert format_bytes(1536) == "1.50 KiB" and format_bytes(3 * 2**40) == "3.00 TiB"
    assert format_bytes(2.5e6, binary=False) == "2.50 MB" and format_bytes(999) == "999 B"


@pytest.mark.parametrize("seconds,text", [
    (0.0005, "500.0 us"), (0.001, "1.00 ms"), (0.999, "999.00 ms"), (1.0, "1.00 s"),
    (119.5, "119.50 s"), (120.0, "2m 00s"), (3599, "59m 59s"), (3600.0, "1h 00m"),
    (86399, "23h 59m"), (86400.0, "1d 00h"), (90061, "1d 01h")])
def test_format_duration_switches_unit_at_each_boundary(seconds, text):
    # each unit from its boundary on: 1 ms, 1 s, 2 min, 1 h, 1 d (90061 s = 1 d 1 h 1 min 1 s)
    assert format_duration(seconds) == text
