"""The history ledger: round trip, strikes that never delete, the step-index rule, the CLI."""

import json
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.core.errors import InputError
from afford.core.provenance import Struck, Tag
from afford.figures import cert_readings
from afford.schema import ledger
from tests.paths import DATA
from tests.synthetic import make_cert

runner = CliRunner()
DATE = datetime(2026, 12, 2, 10, 31, tzinfo=timezone.utc)


def reading(**kw):
    base = dict(date=DATE, device="NVIDIA H200", torch="2.11.0", commit="abc",
                command="afford certify", quantity="tinylm/bf16/seq=512/warm_step_seconds",
                value=0.0123, unit="s", tag=Tag.MEASURED, step_indices="c0:4-15;c1:4-17")
    return ledger.new_reading(**{**base, **kw})


def test_header_is_the_committed_one():

    excerpt = DATA / "ledger_excerpt.tsv"  # rows of the project's
    assert excerpt.read_text().splitlines()[0] == ledger.HEADER
    assert ledger.HEADER.split("\t") == list(ledger.COLUMNS)
    assert len(ledger.COLUMNS) == 15


def test_round_trip_keeps_every_field(tmp_path):
    p = tmp_path / "h.tsv"
    tricky = reading(quantity="x/peak_reserved_bytes", value=16106127360, unit="B",
                     step_indices="", command="a\tcommand with a tab\nand a newline \\ too")
    rows = [reading(), tricky, reading(value=1e-9, quantity="y_step_seconds", step_indices="3")]
    ledger.append(p, rows)
    back = ledger.load(p)
    assert back == rows
    assert isinstance(back[1].value, int) and back[1].value == 16106127360
    assert back[1].command == "a\tcommand with a tab\nand a newline \\ too"
    text = p.read_text()
    assert text.splitlines()[0] == ledger.HEADER
    assert len(text.splitlines()) == 4  # header + 3, the escaped newline stays on its line
    assert all(len(line.split("\t")) == 15 for line in text.splitlines())


def test_ids_are_content_hashes_and_a_reading_is_appended_once(tmp_path):
    a, b = reading(), reading()
    assert a.id == b.id and a.id.startswith("r") and len(a.id) == 11
    assert reading(value=0.0124).id != a.id
    p = tmp_path / "h.tsv"
    ledger.append(p, [a])
    with pytest.raises(InputError, match="already in the ledger"):
        ledger.append(p, [b])
    assert len(ledger.load(p)) == 1


@pytest.mark.parametrize("quantity", ["warm_step_seconds", "step_seconds", "step0_seconds",
                                      "tinylm/fp32/seq=64/warm_step_seconds",
                                      "softmax/fp32/s=256/step0_seconds"])
def test_a_step_time_without_step_indices_is_refused(quantity):
    assert ledger.is_step_time(quantity)
    with pytest.raises(InputError, match="without the index of the step"):
        reading(quantity=quantity, step_indices="")
    with pytest.raises(InputError, match="unit must be s"):
        reading(quantity=quantity, unit="ms")


@pytest.mark.parametrize("quantity", ["checkpoint_write_seconds", "law_power/exponent",
                                      "peak_reserved_bytes", "steps_per_chunk",
                                      "law_floor_power/floor_seconds"])
def test_other_quantities_need_no_step_index(quantity):
    assert not ledger.is_step_time(quantity)
    assert reading(quantity=quantity, step_indices="").step_indices == ""


@pytest.mark.parametrize("quantity,unit", [
    ("step_time", "s"), ("tinylm/fp32/seq=64/step_time", "ms"), ("time_per_step", "s"),
    ("warm_step_ms", "ms"), ("tokens_per_second", "tokens/s"), ("throughput", "samples/s"),
    ("hf:gpt2/bf16/b=8/speed", "it/s"), ("iteration_time", "s/step")])
def test_a_reading_of_a_step_needs_its_index_whatever_its_name(quantity, unit):
    """Issue 30, item 5: decided by the unit and kind of the quantity (a measured time of a
    step, a measured throughput of steps), not by the name ending in step_seconds."""
    assert ledger.is_step_time(quantity, unit, Tag.MEASURED)
    with pytest.raises(InputError, match="is a reading of a step"):
        reading(quantity=quantity, unit=unit, step_indices="")
    assert reading(quantity=quantity, unit=unit, step_indices="c0:3-14").step_indices


@pytest.mark.parametrize("quantity,unit,tag", [
    ("checkpoint_write_seconds", "s", Tag.MEASURED), ("import_seconds", "s", Tag.MEASURED),
    ("gemm_fp32_flop_per_second", "FLOP/s", Tag.MEASURED),
    ("copy_bytes_per_second", "B/s", Tag.MEASURED), ("steps_per_chunk", "steps", Tag.MODULE),
    ("save_every_steps", "s", Tag.MEASURED), ("step_time", "s", Tag.FITTED),
    ("tokens_per_second", "tokens/s", Tag.ASSUMED)])
def test_not_a_reading_of_a_step(quantity, unit, tag):
    """A time that is not a step's, a rate of something else (a GEMM, a copy), a count, and a
    prediction or assumption (no step was read) need no step index."""
    assert not ledger.is_step_time(quantity, unit, tag)
    assert reading(quantity=quantity, unit=unit, tag=tag, step_indices="").step_indices == ""


def test_a_warm_throughput_at_step_0_is_refused():
    with pytest.raises(InputError, match="step 0 is never warm"):
        reading(quantity="warm_tokens_per_second", unit="tokens/s", step_indices="0-11")
    assert reading(quantity="warm_tokens_per_second", unit="tokens/s", step_indices="2-11")


def test_history_add_refuses_a_step_time_of_any_name_without_steps(tmp_path):
    p = tmp_path / "h.tsv"
    res = runner.invoke(app, ["history", "add", "--file", str(p), "--quantity",
                              "tinylm/step_time", "--value", "0.2", "--unit", "s", "--device",
                              "cpu", "--command", "afford certify", "--torch", "2.13.0",
                              "--commit", "abc"])
    assert res.exit_code == 2 and "reading of a step" in res.output
    assert "Traceback" not in res.output and not p.exists()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_reading_is_finite(value):
    with pytest.raises(InputError, match="finite"):
        reading(value=value)


@pytest.mark.parametrize("text,parsed", [
    ("3-5", {"": [3, 4, 5]}),
    ("0,2,5-7", {"": [0, 2, 5, 6, 7]}),
    ("c0:4-6;c1:4,5", {"c0": [4, 5, 6], "c1": [4, 5]}),
])
def test_step_index_grammar(text, parsed):
    assert ledger.parse_step_indices(text) == parsed
    for values in parsed.values():
        assert ledger.parse_step_indices(ledger.format_step_indices(values)) == {"": values}


@pytest.mark.parametrize("bad", ["", "5-3", "3,3", "a", "c0:", "c0:1;c0:2", "1-", "-1"])
def test_bad_step_indices(bad):
    with pytest.raises(InputError):
        ledger.parse_step_indices(bad)


def test_format_step_indices():
    assert ledger.format_step_indices([9, 3, 4, 5, 5, 11, 12]) == "3-5,9,11-12"
    assert ledger.format_step_indices([0]) == "0"


def test_strike_keeps_the_reading_and_changes_only_its_status(tmp_path):
    p = tmp_path / "h.tsv"
    old, new, other = reading(), reading(value=0.0131), reading(quantity="z_bytes", unit="B",
                                                                  value=7, step_indices="")
    ledger.append(p, [old, new, other])
    before = p.read_text().splitlines()
    struck = ledger.strike(p, old.id, reason="the timer wrapped a host sync",
                           status="retracted", superseded_by=new.id)
    after = p.read_text().splitlines()
    assert len(after) == len(before)
    assert after[0] == before[0] and after[2:] == before[2:]
    changed = dict(zip(ledger.COLUMNS, after[1].split("\t")))
    unchanged = dict(zip(ledger.COLUMNS, before[1].split("\t")))
    assert {k for k in ledger.COLUMNS if changed[k] != unchanged[k]} == \
        {"status", "reason", "superseded_by"}
    assert changed["status"] == "retracted" and changed["superseded_by"] == new.id
    back = ledger.load(p)
    assert back[0] == struck and back[0].value == 0.0123
    shown = back[0].shown()
    assert isinstance(shown, Struck) and shown.reason == "the timer wrapped a host sync"
    assert shown.superseded_by == new.id and shown.status == "retracted"


@pytest.mark.parametrize("kw,match", [
    (dict(reason=""), "needs a reason"),
    (dict(reason="x", status="deleted"), "withdrawn or retracted"),
    (dict(reason="x", superseded_by="rffffffffff"), "another reading"),
])
def test_bad_strikes(tmp_path, kw, match):
    p = tmp_path / "h.tsv"
    r = reading()
    ledger.append(p, [r])
    text = p.read_text()
    with pytest.raises(InputError, match=match):
        ledger.strike(p, r.id, **kw)
    assert p.read_text() == text


def test_a_strike_is_final(tmp_path):
    p = tmp_path / "h.tsv"
    r = reading()
    ledger.append(p, [r])
    ledger.strike(p, r.id, reason="superseded")
    with pytest.raises(InputError, match="already withdrawn"):
        ledger.strike(p, r.id, reason="again", status="retracted")
    with pytest.raises(InputError, match="no reading with id"):
        ledger.strike(p, "r0000000000", reason="x")


def test_a_struck_row_needs_its_reason_on_load(tmp_path):
    p = tmp_path / "h.tsv"
    r = reading()
    line = ledger.to_line(r).replace("\tcurrent\t", "\twithdrawn\t")
    p.write_text(ledger.HEADER + "\n" + line + "\n")
    with pytest.raises(InputError, match=r"h.tsv:2: .*needs its reason"):
        ledger.load(p)


@pytest.mark.parametrize("text,match", [
    ("", "header"), ("id\tdate\n", "header"),
    (ledger.HEADER + "\nonly\tthree\tcells\n", "3 columns"),
])
def test_malformed_ledgers(tmp_path, text, match):
    p = tmp_path / "h.tsv"
    p.write_text(text)
    with pytest.raises(InputError, match=match):
        ledger.load(p)


def test_certificate_readings_carry_step_indices_and_tags():
    cert = make_cert()
    rows = cert_readings.certificate_readings(cert, "afford certify (synthetic)")
    by_q = {r.quantity: r for r in rows}
    warm = by_q["softmax/fp32/s=256/warm_step_seconds"]
    assert warm.value == cert.workloads[0].points[0].median_seconds
    assert warm.step_indices == "c0:4-15;c1:4-15;c2:4-15" and warm.tag is Tag.MEASURED
    assert by_q["softmax/fp32/s=256/step0_seconds"].step_indices == "c0:0;c1:0;c2:0"
    assert by_q["softmax/fp32/s=2048/peak_reserved_bytes"].value == 2048 * 2048 * 2560
    assert by_q["softmax/fp32/law_power/exponent"].value == 1.5
    assert by_q["softmax/fp32/law_power/exponent"].tag is Tag.FITTED
    assert by_q["softmax/fp32/law_power/r2"].value == 0.99987
    assert by_q["tinylm/bf16/law_floor_power/floor_seconds"].value == 0.004
    assert by_q["tinylm/bf16/law_floor_power/loo_max"].value == 0.009
    assert "tinylm/bf16/seq=2048/warm_step_seconds" not in by_q  # out of memory: not a reading
    # 4 softmax points x 4 + 4 tinylm points x 4 + 3 (softmax law) + 4 (tinylm law)
    assert len(rows) == 16 + 16 + 3 + 4
    assert all(r.date == cert.environment.started_at and r.device == "Synthetic GPU 80GB"
               for r in rows)
    assert by_q["softmax/fp32/s=256/warm_step_seconds"].config_fingerprint != \
        by_q["softmax/fp32/s=512/warm_step_seconds"].config_fingerprint


def test_append_certificate_round_trips(tmp_path):
    p = tmp_path / "h.tsv"
    added = cert_readings.append_certificate(p, make_cert(), "afford certify (synthetic)")
    assert ledger.load(p) == added
    with pytest.raises(InputError, match="already in the ledger"):
        cert_readings.append_certificate(p, make_cert(), "afford certify (synthetic)")


# ---------------------------------------------------------------- CLI


def run(*args):
    return runner.invoke(app, ["history", *args])


def test_cli_add_strike_show(tmp_path, monkeypatch):
    from afford.cli import common

    monkeypatch.setattr(common.out, "width", 160)
    p = str(tmp_path / "h.tsv")
    r = run("add", "-f", p, "--quantity", "tinylm/bf16/seq=512/warm_step_seconds",
            "--value", "0.0123", "--unit", "s", "--device", "NVIDIA H200", "--command",
            "afford certify", "--date", "2026-12-02T10:31:00Z", "--torch", "2.11.0",
            "--commit", "abc")
    assert r.exit_code == 2 and "without the index of the step" in r.output
    assert "Traceback" not in r.output
    r = run("add", "-f", p, "--quantity", "tinylm/bf16/seq=512/warm_step_seconds",
            "--value", "0.0123", "--unit", "s", "--device", "NVIDIA H200", "--command",
            "afford certify", "--date", "2026-12-02T10:31:00Z", "--torch", "2.11.0",
            "--commit", "abc", "--steps", "c0:4-15;c1:4-17", "--json")
    assert r.exit_code == 0, r.output
    rid = json.loads(r.stdout)["ids"][0]
    assert rid == reading().id
    assert run("strike", rid, "-f", p).exit_code == 2
    r = run("strike", rid, "--reason", "host sync inside the timed region", "-f", p)
    assert r.exit_code == 0, r.output
    r = run("show", "-f", p)
    assert r.exit_code == 0
    assert "~~12.30 ms M~~" in r.stdout
    assert "WITHDRAWN: host sync" in r.stdout
    doc = json.loads(run("show", "-f", p, "--json").stdout)
    assert doc["readings"][0]["status"] == "withdrawn" and doc["readings"][0]["value"] == 0.0123


def test_cli_add_cert(tmp_path):
    cert = tmp_path / "c.json"
    cert.write_text(make_cert().to_json())
    p = str(tmp_path / "h.tsv")
    r = run("add", "-f", p, "--cert", str(cert), "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["ids"]) == 39
    assert ledger.load(p)[0].command == "afford certify --out synthetic.json"
    assert run("add", "-f", p, "--cert", str(cert), "--quantity", "x").exit_code == 2


@pytest.mark.parametrize("args,match", [
    (["show", "-f", "/no/such.tsv"], "no such ledger"),
    (["add", "-f", "h.tsv", "--quantity", "x"], "needs --value"),
    (["add", "-f", "h.tsv", "--quantity", "x", "--value", "abc", "--device", "d",
      "--command", "c"], "not a number"),
    (["add", "-f", "h.tsv", "--quantity", "x", "--value", "1", "--device", "d",
      "--command", "c", "--date", "yesterday"], "ISO 8601"),
])
def test_cli_bad_input_exits_2(args, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


def _noisy_cert():
    from afford.schema.time_section import CertTimeVerdict, HostLoad

    v = CertTimeVerdict(label="NOISY", reasons=["tinylm (fp32) seq=256: children disagree by "
                                                 "40% (> 10%)"], child_tolerance=0.1,
                        held_out_tolerance=0.1, floor_tolerance=0.5, rule="test rule")
    loads = [HostLoad(at="before", load_average=(3.1, 2.0, 1.0), cpu_count=2),
             HostLoad(at="after", load_average=(2.4, 2.0, 1.0), cpu_count=2)]
    return make_cert().model_copy(update={"time_verdict": v, "host_load": loads})


def test_history_add_cert_keeps_a_noisy_certificate_noisy(tmp_path):
    """Issue 30, item 11: a NOISY certificate's readings were appended as plain MEASURED;
    now each is ``noisy``, with the cause, and says so wherever its value is shown."""
    rows = cert_readings.certificate_readings(_noisy_cert(), "afford certify")
    assert rows and all(r.status == "noisy" and not r.struck for r in rows)
    why = rows[0].reason
    assert "children disagree by 40%" in why and "host load average 3.1 before" in why
    assert "NOISY certificate" in rows[0].tagged().source
    clean = cert_readings.certificate_readings(make_cert(), "afford certify")
    assert all(r.status == "current" and r.reason == "" for r in clean)
    p = tmp_path / "h.tsv"
    res = runner.invoke(app, ["history", "add", "--file", str(p), "--cert", _saved(tmp_path)])
    assert res.exit_code == 0, res.output
    back = ledger.load(p)
    assert back == cert_readings.certificate_readings(_noisy_cert(), "") and back[0].noisy
    shown = runner.invoke(app, ["history", "show", "--file", str(p)])
    assert "NOISY: " in shown.output


def _saved(tmp_path) -> str:
    from afford.schema.cert import save_certificate

    path = tmp_path / "noisy.json"
    save_certificate(_noisy_cert(), path)
    return str(path)


def test_a_strike_keeps_the_noisy_reason(tmp_path):
    p = tmp_path / "h.tsv"
    (r, *_) = ledger.append(p, cert_readings.certificate_readings(_noisy_cert(), "afford certify"))
    s = ledger.strike(p, r.id, reason="re-measured on an idle box")
    assert s.struck and s.reason.startswith("re-measured on an idle box (recorded NOISY: ")
    with pytest.raises(InputError, match="noisy reading needs its reason"):
        reading(status="noisy")
