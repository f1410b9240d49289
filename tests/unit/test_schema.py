import json

import pytest

from afford.core.errors import InputError
from afford.schema.cert import CERT_SCHEMA, Certificate, load_certificate, save_certificate
from tests.paths import DATA, data_file

BENCH_CERT = data_file("h200_default_d89f7a2.json")


def test_a_committed_h200_certificate_round_trips(tmp_path):
    """Real JSON from a real device (tests/data, from an H200 run of 2026-12-02), in the
    default run: no certify."""
    cert = load_certificate(BENCH_CERT)
    assert cert.environment.device_type == "cuda" and cert.workloads
    out = tmp_path / "again.json"
    save_certificate(cert, out)
    assert load_certificate(out) == cert
    assert json.loads(out.read_text())["schema"] == CERT_SCHEMA
    with pytest.raises(InputError, match="already exists"):
        save_certificate(cert, out)


@pytest.mark.parametrize("text,match", [
    ("not json", "not JSON"),
    ('{"a": 1}', "no 'schema'"),
    ('{"schema": "afford.cert/99"}', "not one this afford reads"),
    ('{"schema": "afford.cert/1", "environment": {}}', "malformed"),
])
def test_bad_files_are_clear_errors(tmp_path, text, match):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(InputError, match=match):
        load_certificate(p)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_certificate(tmp_path / "nope.json")


def test_json_schema_export_has_the_id():
    schema = Certificate.model_json_schema(by_alias=True)
    assert "schema" in schema["properties"]
    assert "workloads" in schema["properties"]


# --- an old certificate, upgraded through its registered migration -------------------------

V0 = DATA / "cert_v0_h200_tinylm.json"


def test_the_v0_fixture_has_the_foundation_form():
    """tests/data/cert_v0_h200_tinylm.json: the H200 certificate of 786f77f
    (tests/data/h200_default_d89f7a2.json.gz is its sibling) cut to tinylm, without the fields
    added after 4678abe."""
    raw = json.loads(V0.read_text())
    assert raw["schema"] == "afford.cert/0"
    assert "stage_seconds" not in raw["environment"]
    assert "prewarmed_children" not in raw["protocol"]
    assert not {"determinism", "gates", "memory", "probes", "sizes", "levers"} & set(raw)
    point = raw["workloads"][0]["points"][0]
    assert "vocab" not in point and "stopped" not in point["children"][0]


def test_a_v0_certificate_loads_through_the_registered_migration(monkeypatch):
    from afford.schema import envelope

    step = envelope.MIGRATIONS[CERT_SCHEMA]["afford.cert/0"]
    calls = []
    monkeypatch.setitem(envelope.MIGRATIONS[CERT_SCHEMA], "afford.cert/0",
                        lambda raw: calls.append(raw["schema"]) or step(raw))
    cert = load_certificate(V0)
    assert calls == ["afford.cert/0"]
    assert cert.schema_id == CERT_SCHEMA
    assert cert.environment.stage_seconds == {} and cert.protocol.prewarmed_children == []
    assert cert.warnings[-1].startswith("upgraded from afford.cert/0")
    (tiny,) = cert.workloads
    assert tiny.name == "tinylm" and [p.value for p in tiny.points] == [1024, 2048, 4096, 8192]
    # the kept raw samples still give the recorded medians
    from afford.fit.stats import median
    for p in tiny.points:
        for c in p.children:
            assert c.median_seconds == pytest.approx(median(c.timed_seconds))
    raw = json.loads(V0.read_text())
    assert tiny.law.power.r2 == raw["workloads"][0]["law"]["power"]["r2"]


def test_an_upgraded_certificate_saves_as_the_current_version(tmp_path):
    out = tmp_path / "v1.json"
    save_certificate(load_certificate(V0), out)
    assert json.loads(out.read_text())["schema"] == CERT_SCHEMA
    assert load_certificate(out).warnings[-1].startswith("upgraded from afford.cert/0")


def test_without_its_migration_a_v0_certificate_is_a_clear_error(monkeypatch):
    from afford.schema import envelope

    monkeypatch.setitem(envelope.MIGRATIONS, CERT_SCHEMA, {})
    with pytest.raises(InputError, match="'afford.cert/0' is not one this afford reads"):
        load_certificate(V0)
