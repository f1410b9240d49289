"""A typo costs seconds, not a minute (issue 32, item 6): a workload name that does not read
is answered by the console script before any child starts and before torch loads; the
torch-free check never refuses a name the full resolve accepts, and says what it says; bad
input to a command that does not measure loads no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from afford.core.errors import InputError
from afford.measure.children import child_env
from afford.workloads import names as names_mod
from afford.workloads import resolve
from afford.workloads.names import spec_error
from tests.paths import DATA

CERT = DATA / "cpu_tinylm_tiny.json"

# after the console script returns: was torch loaded, and how many children were spawned
PROBE = ("import sys\nfrom afford._entry import main\n"
         "sys.argv = ['afford', *{argv!r}]\n"
         "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
         "kids = sys.modules.get('afford.measure.children')\n"
         "print('probe:', code, 'torch' in sys.modules, len(kids._EARLY) if kids else 0,"
         " file=sys.stderr)")


def _console(argv: list[str], cwd: Path | None = None) -> tuple[int, bool, int, str]:
    """(exit code, torch loaded, early children spawned, stderr before the probe)."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True,
                          text=True, timeout=120, env=child_env(), cwd=cwd)
    *said, last = done.stderr.strip().splitlines()
    tag, code, torch, kids = last.split()
    assert tag == "probe:", done.stderr
    return int(code), torch == "True", int(kids), "\n".join(said)


@pytest.mark.parametrize("argv,words", [
    (["certify", "-w", "hf:gtp2"], "not a model type transformers knows"),
    (["certify", "--quick", "-w", "sofmax"], "unknown workload 'sofmax'"),
    (["certify", "-w", "tinylm", "-w", "tinylm@q4"], "unknown tinylm preset 'q4'"),
    (["certify", "-w", "tinylm+fusd"], "unknown step option 'fusd'"),
    (["certify", "-w", "hf:no/such/config.json"], "no such config file"),
    (["certify", "-w", "nosuchpkg.model:build"], "no module 'nosuchpkg'"),
    (["gate", "-w", "sofmax"], "unknown workload 'sofmax'"),
])
def test_a_bad_workload_name_is_answered_before_any_child_starts_and_torch_loads(argv, words):
    code, torch, kids, said = _console(argv)
    assert code == 2 and kids == 0 and not torch
    assert words in said and "Traceback" not in said
    assert len([ln for ln in said.splitlines() if ln.strip()]) == 1  # one line, on stderr


def test_a_good_name_still_gets_its_early_child(monkeypatch):
    """The check lets a readable command line spawn its first child as before."""
    import afford._entry as entry
    import afford.measure.children as children

    spawned = []
    monkeypatch.setattr(children, "spawn_early", lambda *a, **kw: spawned.append(a))
    monkeypatch.setattr("afford.cli.main", lambda: None)
    for argv, want in ((["certify", "-w", "tinylm", "-w", "hf:gpt2"], 1),
                       (["certify", "-w", "hf:gtp2"], 0), (["certify"], 1)):
        spawned.clear()
        monkeypatch.setattr(sys, "argv", ["afford", *argv])
        entry.main()
        assert len(spawned) == want, argv


def test_the_spawning_module_loads_no_torch():
    """The console script spawns certify's first child before the parent imports torch."""
    code = "import sys, afford.measure.children; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env(), check=True)
    assert out.stdout.split() == ["False"]


GOOD = ["softmax", "scan", "tinylm", "tinylm@q3", "tinylm@d32L1H2", "tinylm@q3b16+fused",
        "softmax+x2", "tinylm+compile+x4", "hf:gpt2", "hf:gpt2@d64L2H2+b2s64",
        "hf:llama@d64L2H2K1V512+lora=r4", "hf:gpt2+frozen=embeddings+fused",
        "tests.gate_workloads:leaky"]
BAD = ["sofmax", "scan@q3", "tinylm@q4", "tinylm@dd", "tinylm@d0", "tinylm@d8d8",
       "tinylm+fused+foreach", "softmax+", "hf:gtp2", "hf:", "hf:gpt2@z9", "hf:gpt2+lora=x",
       "hf:gpt2+b2+s4", "hf:gpt2+bogus", "hf:no/such/config.json", ":f", "mod:",
       "nosuchpkg.model:build"]


@pytest.mark.parametrize("spec", GOOD)
def test_the_torch_free_check_passes_what_resolve_builds(spec):
    resolve(spec, "cpu")
    assert spec_error(spec) is None


@pytest.mark.parametrize("spec", BAD)
def test_the_torch_free_check_refuses_in_resolves_words(spec):
    error = spec_error(spec)
    assert isinstance(error, InputError)
    with pytest.raises(InputError) as full:
        resolve(spec, "cpu")
    assert str(error) in str(full.value)


def test_a_model_type_transformers_adds_by_hand_is_not_refused():
    """transformers 5 adds a few types to its table by hand (``gpt-sw3``); the light
    table lacks them, the check reads them from the auto-config source."""
    pytest.importorskip("transformers")
    assert spec_error("hf:gpt-sw3") is None


TABLE_5 = """from collections import OrderedDict
CONFIG_MAPPING_NAMES = OrderedDict(
    [
        ("gpt2", "GPT2Config"),
        ("opt", "OPTConfig"),
    ]
)
SPECIAL = OrderedDict([("not_a_type", "X")])
"""
TABLE_4 = """CONFIG_MAPPING_NAMES: OrderedDict[str, str] = OrderedDict[str, str](
    [("llama", "LlamaConfig"), ("mistral", "MistralConfig")]
)
CONFIG_MAPPING_NAMES.update({"extra": "ExtraConfig"})
"""


def test_the_model_type_table_is_read_from_source_text_of_either_layout():
    assert names_mod.table_names(TABLE_5) == {"gpt2", "opt"}
    assert names_mod.table_names(TABLE_4) == {"llama", "mistral"}
    assert names_mod.table_names("X = 1\n") == frozenset()


def test_the_model_type_table_agrees_with_the_imported_one_and_imports_nothing():
    """The check reads transformers' table as text: a command line with a typo is answered
    without importing transformers (seconds on some images) or torch."""
    pytest.importorskip("transformers")
    code = ("import sys\nfrom afford.workloads import names\n"
            "known = names._model_type_names()\n"
            "print(len(known), 'transformers' in sys.modules, 'torch' in sys.modules)\n"
            "from transformers.models.auto import configuration_auto as c\n"
            "print(sorted(set(c.CONFIG_MAPPING_NAMES) - known))\n"
            "print(all(names._named_by_hand(t) for t in set(c.CONFIG_MAPPING_NAMES) - known))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env(), timeout=120)
    first, missing, by_hand = out.stdout.splitlines()[-3:]
    count, transformers, torch = first.split()
    assert int(count) > 100 and transformers == "False" and torch == "False", out.stderr
    assert by_hand == "True", missing  # the few added by hand are quoted in its source


@pytest.mark.parametrize("argv", [
    ["plan", str(CERT), "--platform", "kaggle-t4"],
    ["plan", str(CERT), "--platform", "local", "--run", "no-such-run.toml"],
    ["plan", str(CERT), "--platform", "local", "--run", "{bad}"],
    ["preflight", str(CERT), "--platform", "no-such-platform", "--run", "{bad}"],
    ["preflight", str(CERT), "--platform", "local", "--run", "{bad}"],
    ["predict", str(CERT), "--batch", "1", "--seq", "8", "--mode", "fp99"],
    ["size", str(CERT), "--batch", "0", "--seq", "8"],
    ["ladder", str(CERT), "--params", "1Q"],
    ["compare", str(CERT), "no-such-cert.json"],
    ["report", str(CERT), "-o", "r.txt"],
    ["bars", "no-such-data.txt"],
    ["milestones", "no-such-ladder.toml"],
    ["schema", "nope"],
])
def test_bad_input_to_a_command_that_does_not_measure_loads_no_torch(argv, tmp_path):
    bad = tmp_path / "bad-run.toml"
    bad.write_text('workload = "tinylm"\nmode = [\n', encoding="utf-8")  # not TOML
    code, torch, kids, said = _console([a.replace("{bad}", str(bad)) for a in argv],
                                       cwd=tmp_path)
    assert code == 2 and not torch and kids == 0, said
    assert "Traceback" not in said
