"""What keeps a command that reads a certificate fast (issue 37, item 3: the half-second
answer; benches/answer_speed.py times it): the certificate is validated once per machine and
kept in the cache, only by the user who wrote it; no pydantic model builds its validator
before it is used; and predict, size, plan and preflight import neither numpy nor the replay's
own modules once the shapes they ask are in the cache. numpy's median, which they no longer
import, is matched to the last bit by fit.stats.median."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from afford.core import cache
from afford.fit.stats import median
from afford.schema import cert as cert_mod
from afford.schema.cert import Certificate, load_certificate
from tests.paths import ROOT, data_file

CERT = data_file("h200_default_d89f7a2.json")  # three workloads, their memory laws, probes


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("AFFORD_CACHE_DIR", str(folder))
    return folder


def _entries(folder: Path) -> list[Path]:
    return sorted((folder / cert_mod.CACHE_KIND).glob("*.pickle"))


def _no_validation(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("validated again")

    monkeypatch.setattr(cert_mod, "parse_envelope", refuse)


def test_a_certificate_is_validated_once_per_machine(own_cache, monkeypatch):
    first = load_certificate(CERT)
    assert len(_entries(own_cache)) == 1
    _no_validation(monkeypatch)
    again = load_certificate(CERT)
    assert again is not first and again == first
    assert again.to_json() == first.to_json()


def test_the_entry_is_the_users_alone_and_one_others_may_write_is_not_read(
        own_cache, monkeypatch):
    load_certificate(CERT)
    (entry,) = _entries(own_cache)
    assert entry.stat().st_mode & 0o777 == 0o600
    entry.chmod(0o620)  # its group may write it: never unpickled
    assert cache.read_object(cert_mod.CACHE_KIND, entry.stem) is None
    link = entry.with_name("link.pickle")
    entry.chmod(0o600)
    link.symlink_to(entry)  # a link is not followed
    assert cache.read_object(cert_mod.CACHE_KIND, "link") is None
    assert cache.read_object(cert_mod.CACHE_KIND, entry.stem) is not None


def test_an_edited_file_or_a_corrupt_entry_is_read_afresh(own_cache, tmp_path):
    path = tmp_path / "c.json"
    raw = json.loads(CERT.read_text())
    path.write_text(json.dumps(raw))
    assert load_certificate(path).environment.device_name == raw["environment"]["device_name"]
    raw["environment"]["device_name"] = "NVIDIA H200 (edited)"
    path.write_text(json.dumps(raw))
    assert load_certificate(path).environment.device_name == "NVIDIA H200 (edited)"
    for entry in _entries(own_cache):
        entry.write_bytes(b"not a pickle")
    assert load_certificate(path).environment.device_name == "NVIDIA H200 (edited)"


def test_with_the_cache_off_nothing_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("AFFORD_CACHE_DIR", "off")
    assert isinstance(load_certificate(CERT), Certificate)
    assert cache.read_object(cert_mod.CACHE_KIND, "x") is None
    assert cache.write_object(cert_mod.CACHE_KIND, "x", 1) is False


def test_the_key_names_the_code_that_read_it():
    """An edit of the schema is another name: a pickle holds instances of its classes."""
    fresh = cache.code_key.__wrapped__  # not the process's memo
    before = fresh("schema", "core", "data")
    source = Path(cert_mod.__file__)
    st = source.stat()
    try:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        assert fresh("schema", "core", "data") != before
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fresh("schema", "core", "data") == before != fresh("schema", "core")


def test_every_model_defers_building_its_validator():
    import importlib
    import pkgutil

    from pydantic import BaseModel

    import afford

    for m in pkgutil.walk_packages(afford.__path__, "afford."):
        if m.name != "afford.__main__":  # which runs the command line
            importlib.import_module(m.name)

    def subclasses(cls):
        for s in cls.__subclasses__():
            yield s
            yield from subclasses(s)

    models = {m for m in subclasses(BaseModel) if m.__module__.startswith("afford.")}
    assert len(models) > 100
    assert sorted(f"{m.__module__}.{m.__name__}" for m in models
                  if not m.model_config.get("defer_build")) == []


LOADED = ("numpy", "scipy", "torch", "afford.fit.memory.replay_fit",
          "afford.fit.memory.trace_scaling", "afford.fit.memory.breakdown")


def _answer_loads(argv: list[str], env: dict) -> list[str]:
    code = ("import sys\nfrom afford._entry import main\n"
            f"sys.argv = ['afford', *{argv!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code in (0, 1, None), e\n"
            f"print([m for m in {LOADED!r} if m in sys.modules], file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))


def test_a_warm_answer_imports_no_numpy_and_no_replay(tmp_path):
    """predict, size, plan and preflight, asked twice (the first fills the cache): the
    second imports none of :data:`LOADED`."""
    run = tmp_path / "run.toml"
    run.write_text('name = "r"\nworkload = "tinylm"\nmode = "bf16"\nvalue = 1024\n'
                   'target_tokens = "100M"\ncheckpoints_kept = 2\n')
    env = {**os.environ, "AFFORD_CACHE_DIR": str(tmp_path / "cache")}
    commands = [["predict", str(CERT), "--batch", "8", "--seq", "1024"],
                ["size", str(CERT), "-w", "tinylm", "--seq", "1024"],
                ["plan", str(CERT), "--platform", "local", "--run", str(run)],
                ["preflight", str(CERT), "--platform", "local", "--run", str(run)]]
    for argv in commands:
        _answer_loads(argv, env)
        assert _answer_loads(argv, env) == [], argv


def test_a_warm_replay_answer_replays_nothing(tmp_path):
    """A certificate whose memory answers by the allocator replay (the H200's Llama-shaped
    model, as tests/answers/test_size_replay.py builds it): asked again, size reads the replay's
    peaks, largest batch and breakdown from the cache, importing no replay module."""
    from afford.certification.stage_memory import refit_law
    from afford.schema.cert import save_certificate
    from afford.schema.memory_section import MemorySection
    from tests.synthetic_cert import certificate

    h200 = 150109880320
    sec = MemorySection.model_validate_json(data_file("h200_memory_section_llama.json").read_text())
    law = refit_law(next(x for x in sec.laws if x.workload == "hf_models:llama"
                         and x.mode == "fp32"), h200)
    path = tmp_path / "replay.json"
    save_certificate(certificate(device_memory_bytes=h200).model_copy(
        update={"memory": sec.model_copy(update={"laws": [law]})}), path)
    env = {**os.environ, "AFFORD_CACHE_DIR": str(tmp_path / "cache")}
    size = ["size", str(path), "-w", "hf_models:llama", "--mode", "fp32", "--seq"]
    for argv in ([*size, "1024"], [*size, "2048", "--batch", "4"]):
        assert "afford.fit.memory.replay_fit" in _answer_loads(argv, env), argv  # it replayed
        assert _answer_loads(argv, env) == [], argv


@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64),
                          st.floats(1e-9, 1e3), st.integers(-10**6, 10**6)),
                min_size=1, max_size=40))
def test_fit_stats_median_is_numpys_to_the_last_bit(xs):
    got, want = median(xs), float(np.median(np.asarray(xs, dtype=float)))
    assert got == want or (math.isnan(got) and math.isnan(want))


def test_fit_stats_median_at_the_edges():
    nan, inf = math.nan, math.inf
    assert math.isnan(median([1.0, nan])) and math.isnan(median([-inf, inf]))
    assert median([inf, 1.0]) == inf and median([3, 4]) == 3.5
    with pytest.raises(ValueError):
        median([])
