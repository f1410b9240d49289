import json

import pytest

from afford.errors import InputError
from afford.schema.cert import CERT_SCHEMA, Certificate, load_certificate, save_certificate


def test_round_trip(cpu_cert_path, tmp_path):
    cert = load_certificate(cpu_cert_path)
    out = tmp_path / "again.json"
    save_certificate(cert, out)
    again = load_certificate(out)
    assert again == cert
    assert json.loads(out.read_text())["schema"] == CERT_SCHEMA


def test_refuses_to_overwrite_without_asking(cpu_cert, tmp_path):
    out = tmp_path / "c.json"
    out.write_text("mine")
    with pytest.raises(InputError, match="already exists"):
        save_certificate(cpu_cert, out)
    assert out.read_text() == "mine"
    save_certificate(cpu_cert, out, overwrite=True)
    assert load_certificate(out) == cpu_cert


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
