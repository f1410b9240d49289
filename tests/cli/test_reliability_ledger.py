"""The ledger's input rules (issue 14, items 5 and 9): step ranges are checked without being
expanded, absurd ones are exit 2; a warm step time at step index 0 is refused."""

import time

import pytest

from afford.core.errors import InputError
from afford.schema import ledger
from tests.paths import DATA
from tests.reliability import cli, one_line_error


def _add(path, quantity, steps, value="0.01"):
    return cli("history", "add", "-f", str(path), "--quantity", quantity, "--value", value,
               "--unit", "s", "--device", "cpu", "--command", "t", "--torch", "2.0",
               "--commit", "abc", "--steps", steps, "--date", "2026-01-01T00:00:00Z")


def test_a_huge_step_range_is_checked_without_expanding_it(tmp_path):
    t0 = time.perf_counter()
    assert ledger.parse_step_ranges("3-99999999999") == {"": [(3, 99999999999)]}
    assert ledger.parse_step_ranges("c0:5-9223372036854775807;c1:1-2") == {
        "c0": [(5, 2**63 - 1)], "c1": [(1, 2)]}
    r = _add(tmp_path / "h.tsv", "x/warm_step_seconds", "3-99999999999")
    assert r.exit_code == 0, r.output
    assert ledger.load(tmp_path / "h.tsv")[0].step_indices == "3-99999999999"
    assert time.perf_counter() - t0 < 2  # the MemoryError took minutes


@pytest.mark.parametrize("steps,match", [
    ("3-9223372036854775808", "beyond any step counter"),
    ("1" * 5000, "write them as"),  # past int()'s digit limit: no ValueError traceback
    ("0-99999999999,5", "ranges must ascend"),
])
def test_absurd_step_indices_are_exit_2(tmp_path, steps, match):
    with pytest.raises(InputError, match=match):
        ledger.parse_step_ranges(steps)
    r = _add(tmp_path / "h.tsv", "x/step_seconds", steps)
    assert r.exit_code == 2 and one_line_error(r) and match in r.stderr


def test_listing_indices_one_by_one_is_bounded():
    assert ledger.parse_step_indices("c0:0-2;c1:5") == {"c0": [0, 1, 2], "c1": [5]}
    with pytest.raises(InputError, match="more than the 1000000"):
        ledger.parse_step_indices("0-99999999999")


@pytest.mark.parametrize("steps", ["0-14", "0", "c0:3-14;c1:0-14", "0,5-9"])
def test_a_warm_step_time_at_step_0_is_refused(tmp_path, steps):
    with pytest.raises(InputError, match="step 0 is never warm"):
        ledger.new_reading(device="cpu", command="t", quantity="m/fp32/seq=8/warm_step_seconds",
                           value=0.01, unit="s", step_indices=steps)
    r = _add(tmp_path / "h.tsv", "warm_step_seconds", steps)
    assert r.exit_code == 2 and one_line_error(r) and "never warm" in r.stderr
    assert not (tmp_path / "h.tsv").exists()


@pytest.mark.parametrize("quantity,steps", [
    ("m/fp32/seq=8/warm_step_seconds", "1-14"),
    ("m/fp32/seq=8/warm_step_seconds", "c0:10-64;c1:10-59"),
    ("m/fp32/seq=8/step0_seconds", "c0:0;c1:0"),  # step 0 has its own quantity
    ("startup/first_step_seconds", "0"),
])
def test_what_the_seed_rule_allows(tmp_path, quantity, steps):
    assert _add(tmp_path / "h.tsv", quantity, steps).exit_code == 0


def test_a_ledger_line_breaking_the_seed_rule_is_refused_on_load(tmp_path):
    good = ledger.new_reading(device="cpu", command="t", quantity="warm_step_seconds",
                              value=0.01, unit="s", step_indices="1-3")
    line = ledger.to_line(good).replace("\t1-3\t", "\t0-3\t")
    p = tmp_path / "h.tsv"
    p.write_text(ledger.HEADER + "\n" + line + "\n")
    with pytest.raises(InputError, match=r"h.tsv:2: .*never warm"):
        ledger.load(p)


def test_the_committed_ledger_keeps_the_rules():

    # load checks every line against every rule, the seed rule included
    rows = ledger.load(DATA / "ledger_excerpt.tsv")
    assert any(ledger.is_warm_step_time(r.quantity) for r in rows)
