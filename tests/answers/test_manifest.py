"""The data manifest: streamed hashes of known files, folders, generators, UNPINNED, merging."""

import hashlib
import json
import os

import pytest
from typer.testing import CliRunner

from afford.cli import app
from afford.core.errors import InputError
from afford.core.provenance import measured
from afford.schema import manifest as mf

runner = CliRunner()


def test_streamed_hash_of_a_known_file(tmp_path, monkeypatch):
    data = b"afford pins data\n" * 1000 + b"tail"
    f = tmp_path / "train.bin"
    f.write_bytes(data)
    monkeypatch.setattr(mf, "BLOCK", 7)  # many blocks, one odd tail: streaming is exercised
    digest, size = mf.sha256_file(f)
    assert digest == hashlib.sha256(data).hexdigest() and size == len(data) == 17004
    s = mf.pin_path(f)
    assert (s.name, s.kind, s.status, s.sha256, s.size_bytes) == \
        ("train.bin", "file", "PINNED", hashlib.sha256(data).hexdigest(), 17004)


def test_empty_file_hash(tmp_path):
    f = tmp_path / "empty"
    f.write_bytes(b"")
    assert mf.sha256_file(f) == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0)


def test_tree_hash_of_a_folder(tmp_path):
    d = tmp_path / "shards"
    (d / "b").mkdir(parents=True)
    (d / "a.txt").write_bytes(b"one")
    (d / "b" / "c.txt").write_bytes(b"three")
    lines = "".join(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n"
                    for rel, data in (("a.txt", b"one"), ("b/c.txt", b"three")))
    expect = hashlib.sha256(lines.encode()).hexdigest()
    assert mf.sha256_tree(d) == (expect, 8, 2)
    (d / "b" / "c.txt").rename(d / "b" / "d.txt")
    assert mf.sha256_tree(d)[0] != expect  # a renamed shard is a different data set


def test_absent_source_is_unpinned(tmp_path):
    s = mf.pin_path(tmp_path / "nope.bin", name="corpus")
    assert s.status == "UNPINNED" and "not present" in s.reason and s.sha256 is None
    m = mf.Manifest(sources=[s])
    assert mf.status_of(m, "corpus") == "UNPINNED"
    assert mf.status_of(m, "never-named") == "UNPINNED"
    assert mf.status_of(None, "corpus") == "UNPINNED"


def test_generator_is_pinned_by_code_and_params():
    from pathlib import Path

    import tests.gen_data as gen

    s = mf.pin_generator("tests.gen_data:make", {"n": "3"})
    code = Path(gen.__file__).read_bytes()
    assert s.status == "PINNED" and s.code_sha256 == hashlib.sha256(code).hexdigest()
    doc = json.dumps({"generator": "tests.gen_data:make", "code_sha256": s.code_sha256,
                      "params": {"n": "3"}}, sort_keys=True)
    assert s.sha256 == hashlib.sha256(doc.encode()).hexdigest()
    assert mf.pin_generator("tests.gen_data:make", {"n": "4"}).sha256 != s.sha256
    bad = mf.pin_generator("tests.no_such_module:make", {})
    assert bad.status == "UNPINNED" and "cannot read the generator" in bad.reason


def test_merge_keeps_unchanged_and_refuses_a_changed_hash(tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"v1")
    out = tmp_path / "m.json"
    first = mf.pin_into(out, [mf.pin_path(f)])
    g = tmp_path / "b.bin"
    g.write_bytes(b"other")
    again = mf.pin_into(out, [mf.pin_path(f), mf.pin_path(g)])
    assert [s.name for s in again.sources] == ["a.bin", "b.bin"]
    assert again.sources[0] == first.sources[0]  # first pin kept, pinned_at included
    f.write_bytes(b"v2")
    with pytest.raises(InputError, match="the data changed"):
        mf.pin_into(out, [mf.pin_path(f)])
    assert mf.load(out) == again
    forced = mf.pin_into(out, [mf.pin_path(f)], force=True)
    assert forced.sources[0].sha256 == hashlib.sha256(b"v2").hexdigest()


def test_provisional_marks_values_from_unpinned_sources():
    m = mf.Manifest(sources=[mf.Source(name="pinned", kind="file", status="PINNED",
                                       sha256="0" * 64, pinned_at="2026-12-02T00:00:00Z")])
    v = measured(1000, "tokens", "count")
    assert not mf.provisional(v, m, ["pinned"]).provisional
    assert mf.provisional(v, m, ["pinned", "other"]).provisional


def run(*args):
    return runner.invoke(app, ["pin", *args])


def test_cli_pin(tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"hello")
    out = tmp_path / "m.json"
    r = run(str(f), "--name", "greeting", "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "afford.manifest/1"
    assert doc["sources"][0]["sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert mf.load(out).sources[0].name == "greeting"
    r = run(str(tmp_path / "gone.bin"), "-o", str(out))
    assert r.exit_code == 1 and "UNPINNED" in r.output
    assert mf.status_of(mf.load(out), "gone.bin") == "UNPINNED"
    r = run("--generator", "tests.gen_data:make", "--param", "n=5", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert mf.status_of(mf.load(out), "tests.gen_data:make") == "PINNED"


@pytest.mark.parametrize("args,match", [
    ([], "nothing to pin"),
    (["a", "b", "--name", "x"], "--name names one source"),
    (["--param", "k=v", "a"], "belongs to a --generator"),
    (["--generator", "nocolon"], "pkg.module:function"),
    (["--generator", "m:f", "--param", "novalue"], "KEY=VALUE"),
])
def test_cli_pin_bad_input(args, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


def test_cli_pin_never_overwrites_a_file_that_is_not_a_manifest(tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"x")
    mine = tmp_path / "notes.json"
    mine.write_text('{"mine": true}')
    r = run(str(f), "-o", str(mine))
    assert r.exit_code == 2 and "not an afford file" in r.output
    assert mine.read_text() == '{"mine": true}'


def test_schema_export():
    r = runner.invoke(app, ["schema", "manifest"])
    assert r.exit_code == 0 and "sources" in json.loads(r.stdout)["properties"]


# --- issue 32, item 4: pins re-checked where they are used ---------------------------------

def _hashes(monkeypatch) -> list:
    """Count the file hashes a re-check makes (the cheap check must make none)."""
    calls = []
    real = mf.sha256_file

    def counted(path):
        calls.append(str(path))
        return real(path)

    monkeypatch.setattr(mf, "sha256_file", counted)
    return calls


def test_an_unchanged_pin_is_checked_by_size_and_time_without_hashing(tmp_path, monkeypatch):
    f = tmp_path / "text.txt"
    f.write_bytes(b"one two three\n")
    m = mf.pin_into(tmp_path / "m.json", [mf.pin_path(f)])
    assert m.sources[0].mtime_ns == os.stat(f).st_mtime_ns
    calls = _hashes(monkeypatch)
    assert mf.recheck(m, tmp_path / "m.json") == m and calls == []
    os.utime(f, ns=(0, os.stat(f).st_mtime_ns + 10**9))  # touched: same bytes
    assert mf.recheck(m, tmp_path / "m.json").sources[0].status == "PINNED"
    assert calls == [str(f)]  # the time moved: hashed once, and the bytes are the same


def test_an_edited_file_of_the_same_size_is_no_longer_pinned(tmp_path):
    f = tmp_path / "text.txt"
    f.write_bytes(b"one two three\n")
    m = mf.pin_into(tmp_path / "m.json", [mf.pin_path(f)])
    f.write_bytes(b"one two THREE\n")
    os.utime(f, ns=(0, os.stat(f).st_mtime_ns + 10**9))  # a coarse clock still sees it
    s = mf.recheck(m, tmp_path / "m.json").sources[0]
    assert s.status == "UNPINNED" and s.sha256 == m.sources[0].sha256  # the pin's hash kept
    assert "changed since it was pinned" in s.reason
    assert hashlib.sha256(b"one two THREE\n").hexdigest()[:12] in s.reason
    assert m.sources[0].sha256[:12] in s.reason
    assert mf.status_of(mf.recheck(m), "text.txt") == "UNPINNED"


def test_a_folder_with_a_shard_added_or_removed_is_no_longer_pinned(tmp_path):
    d = tmp_path / "shards"
    d.mkdir()
    (d / "a.bin").write_bytes(b"aaaa")
    m = mf.Manifest(sources=[mf.pin_path(d)])
    assert mf.recheck(m).sources[0].status == "PINNED"
    (d / "b.bin").write_bytes(b"bbbb")
    s = mf.recheck(m).sources[0]
    assert s.status == "UNPINNED" and "1 -> 2 files" in s.reason
    (d / "b.bin").unlink()
    assert mf.recheck(m).sources[0].status == "PINNED"  # the same tree again


def test_a_manifest_without_times_is_checked_against_when_it_was_pinned(tmp_path):
    f = tmp_path / "text.txt"
    f.write_bytes(b"v1")
    old = mf.pin_path(f).model_copy(update={"mtime_ns": None})
    assert mf.rechecked(old).status == "PINNED"
    f.write_bytes(b"v2")
    later = old.pinned_at.timestamp() + 5
    os.utime(f, (later, later))
    assert mf.rechecked(old).status == "UNPINNED"


def test_a_source_not_found_or_a_generator_whose_code_changed_is_unpinned(tmp_path):
    f = tmp_path / "gone.txt"
    f.write_bytes(b"x")
    s = mf.pin_path(f)
    f.unlink()
    assert "not found at" in mf.rechecked(s).reason
    g = mf.pin_generator("tests.gen_data:make", {"n": "3"})
    assert mf.rechecked(g).status == "PINNED"
    moved = g.model_copy(update={"code_sha256": "0" * 64})
    assert "its code" in mf.rechecked(moved).reason


def test_a_relative_path_resolves_from_the_manifests_folder(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.txt").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    m = mf.pin_into(tmp_path / "m.json", [mf.pin_path("data/t.txt")])
    monkeypatch.chdir(tmp_path / "data")  # elsewhere: data/t.txt is not under here
    assert mf.recheck(m, tmp_path / "m.json").sources[0].status == "PINNED"


@pytest.fixture()
def pinned_run(tmp_path, monkeypatch):
    """A run on data source text.txt, pinned into afford.manifest.json by afford pin."""
    from afford.schema.cert import save_certificate
    from tests.plan_helpers import make_cert

    monkeypatch.chdir(tmp_path)
    save_certificate(make_cert(), tmp_path / "c.json")
    (tmp_path / "p.toml").write_text('name = "p"\nsession_cap = { value = "12h", cite = "d" }\n'
                                     'weekly_quota = { value = "30h", cite = "d" }\n'
                                     'disk = { value = "20GB", cite = "d" }\n')
    (tmp_path / "r.toml").write_text('workload = "tinylm"\nmode = "fp32"\nvalue = 256\n'
                                     'checkpoints_kept = 1\ntarget_steps = 1000\n'
                                     'data_sources = ["text.txt"]\n')
    (tmp_path / "text.txt").write_text("the data\n")
    assert run("text.txt").exit_code == 0
    return tmp_path


def _edit(path):
    path.write_text("the data, edited\n")


def test_preflight_and_plan_treat_a_changed_source_as_unpinned(pinned_run):
    args = ["c.json", "-p", "p.toml", "-r", "r.toml", "--manifest", "afford.manifest.json"]
    before = runner.invoke(app, ["preflight", *args, "--json"])
    assert json.loads(before.stdout)["plan"]["run"]["unpinned"] == []
    _edit(pinned_run / "text.txt")
    r = runner.invoke(app, ["preflight", *args, "--json"])
    doc = json.loads(r.stdout)
    assert doc["plan"]["run"]["unpinned"] == ["text.txt"]
    assert any("'text.txt' changed since it was pinned" in w for w in doc["warnings"])
    text = " ".join(runner.invoke(app, ["preflight", *args, "-v"]).output.split())
    assert "data not pinned (text.txt)" in text and "changed since it was pinned" in text
    plan = json.loads(runner.invoke(app, ["plan", *args, "--json"]).stdout)
    assert plan["run"]["unpinned"] == ["text.txt"]
    assert any("changed since it was pinned" in n for n in plan["notes"])


def test_the_report_shows_a_changed_source_unpinned(pinned_run):
    _edit(pinned_run / "text.txt")
    r = runner.invoke(app, ["report", "c.json", "--manifest", "afford.manifest.json",
                            "-o", "r.md"])
    assert r.exit_code == 0, r.output
    data = (pinned_run / "r.md").read_text().split("## Data", 1)[1].split("\n## ", 1)[0]
    assert "| text.txt | file | UNPINNED: changed since it was pinned" in data
    assert "PINNED |" not in data.replace("UNPINNED", "")
