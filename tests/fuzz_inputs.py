"""Valid afford input files, and hypothesis strategies that break them (issue 14, the fuzz
campaign): numbers made zero, negative, NaN, infinite, huge or 5000 digits long; strings made
rich markup, unit nonsense or empty; values replaced by deep nesting or the wrong type.

The documents are held as Python data and written out by small emitters (JSON, TOML, TSV) that
can also write what Python cannot hold as a value (a 5000-digit integer, 100,000 nested
brackets): such a value is a :class:`Raw` text, spliced in verbatim.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from tests.paths import DATA, data_file
from tests.plan_helpers import make_cert
from tests.synthetic_cert import linear_sizes


@dataclass(frozen=True)
class Raw:
    """Text written verbatim into a JSON or TOML file (``json_text``/``toml_text``)."""

    json_text: str
    toml_text: str


DEEP = 100_000
HUGE_INT = "9" * 5000
NASTY_NUMBERS = [0, -1, -0.0, 1e-320, 1e308, -1e308, math.nan, math.inf, -math.inf, 2**63,
                 2**64, -(2**63), True, 0.5, 3, Raw(HUGE_INT, HUGE_INT),
                 Raw("-" + HUGE_INT, "-" + HUGE_INT), Raw("1e999", "1e999")]
NASTY_STRINGS = ["0", "-1", "nan", "NaN", "inf", "-inf", "Infinity", "1e999GiB", "1e999",
                 "1e308h", "-5h", "0h", "0%", "-5%", "1e400%", "none", "unknown", "[/]",
                 "[bold red]x", "[link=x]y[/link]", "", " ", "\x00", "é", "a" * 5000,
                 "0GiB", HUGE_INT, "1" + "0" * 400 + "GiB", "999999999999999999999d"]
NASTY_SHAPES = [None, [], {}, [1, 2], {"value": 1}, Raw("[" * DEEP + "]" * DEEP,
                                                        "[" * DEEP + "]" * DEEP)]

nasty = st.one_of(st.sampled_from(NASTY_NUMBERS), st.sampled_from(NASTY_STRINGS),
                  st.sampled_from(NASTY_SHAPES),
                  st.floats(allow_nan=True, allow_infinity=True),
                  st.integers(min_value=-(2**70), max_value=2**70),
                  st.text(max_size=12))


# --- the valid documents ------------------------------------------------------------------

MEMORY_SECTION = DATA / "memory_section_synthetic.json"


def cert_doc() -> dict:
    """A certificate with a workload, a sizes section and a memory law (every reader has
    something: ``afford size`` reads the law). The memory section is the synthetic GPU box of
    tests/answers/test_sizing.py, trimmed, stored so that no test here imports torch to build
    it."""
    c = make_cert().model_copy(update={"sizes": linear_sizes(mode="fp32")})
    doc = json.loads(c.to_json())
    doc["memory"] = json.loads(MEMORY_SECTION.read_text())
    return doc


def platform_doc() -> dict:
    return {
        "name": "fuzz-p100",
        "device": {"name": "P100", "memory": {"value": "16GiB", "cite": "datasheet"}},
        "session_cap": {"value": "12h", "cite": "docs"},
        "weekly_quota": {"value": "30h", "cite": "docs"},
        "disk": {"value": "20GB", "cite": "docs"},
        "margin": {"value": "1h", "assumed": "guess"},
        "mtbf": {"value": "24h", "assumed": "guess"},
        "startup": {"package_install": {"value": 170, "assumed": "guess"}},
    }


def run_doc() -> dict:
    return {"name": "r", "workload": "tinylm", "mode": "fp32", "value": 512,
            "target_tokens": "1B", "checkpoints_kept": 2, "checkpoint_overhead": "1%",
            "max_weeks": 4, "data_sources": ["corpus"]}


def manifest_doc(created: str = "2026-12-01T12:00:00Z") -> dict:
    return {"schema": "afford.manifest/1", "sources": [
        {"name": "corpus", "kind": "file", "status": "PINNED", "path": "corpus.txt",
         "sha256": "0" * 64, "size_bytes": 12, "files": 1, "pinned_at": created}]}


PROBE_CERT = data_file("h200_time_default_2026-12-02.json")


def probe_cert_doc() -> dict:
    """The H200 certificate of tests/data, its tinylm workload alone (bf16, with its step-time
    model), its probes (GEMM and copy ceilings, the batch ladder, FLOPs, the checkpoint write,
    startup), and every list of raw samples cut to 6: what ``plan``'s checkpoint cadence and
    ``ladder``'s roofline read, in 3,000 leaves."""
    doc = json.loads(PROBE_CERT.read_text())
    doc["workloads"] = [w for w in doc["workloads"] if w["name"] == "tinylm"]
    doc["probes"]["workloads"] = [w for w in doc["probes"]["workloads"]
                                  if w["name"] == "tinylm"]
    doc["memory"] = None

    def cut(v):
        if isinstance(v, dict):
            return {k: cut(x) for k, x in v.items()}
        if isinstance(v, list):
            if len(v) > 6 and all(isinstance(x, (int, float)) for x in v):
                return v[:6]
            return [cut(x) for x in v]
        return v

    return cut(doc)


def probe_run_doc() -> dict:
    """A run of the H200 certificate's tinylm (bf16, batch 8 at seq 1024)."""
    return {**run_doc(), "mode": "bf16", "value": 1024}


def constants_doc() -> dict:
    """A user's sizing constants (``afford size --constants``) for the fp32 memory law."""
    return {"schema": "afford.constants/1", "name": "fuzz/sizing.py", "citation": "fuzz",
            "constant": [
                {"name": "BPP", "value": 16, "unit": "B/param", "multiplies": "bytes_per_param",
                 "mode": "fp32"},
                {"name": "C_RES", "value": 34, "unit": "B/elem", "multiplies": "c_res",
                 "mode": "fp32"},
                {"name": "C_OP", "value": 5, "unit": "B/elem", "multiplies": "c_op",
                 "mode": "fp32"},
                {"name": "FIXED", "value": -2e7, "unit": "B", "multiplies": "fixed_bytes",
                 "mode": "fp32"}]}


def ladder_doc() -> dict:
    """A milestones ladder (TOML) on ``bars.json``: a bar rung and a curve rung."""
    return {"schema": "afford.milestones/1", "bars": "bars.json", "rungs": [
        {"name": "a beats the unigram counter", "run": "a", "bar": "kneser-ney:1",
         "params": "1M"},
        {"name": "a beats b at equal tokens", "run": "a", "beats_run": "b", "tokens": "20M"}]}


def eval_log(window: str, run: str, bpb0: float = 3.0) -> list[dict]:
    """A trainer's eval log (JSON list): step, tokens, bpb and window, three readings."""
    return [{"run": run, "step": s, "tokens": s * 1000, "bpb": bpb0 - s / 100,
             "window": window} for s in (10, 20, 40)]


# --- mutation -------------------------------------------------------------------------------

def leaves(doc, path=()):
    """Every path into ``doc`` (dict keys, list indices), containers included."""
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from leaves(v, (*path, i))


def replaced(doc, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {k: (replaced(v, rest, value) if k == head else v) for k, v in doc.items()}
    return [replaced(v, rest, value) if i == head else v for i, v in enumerate(doc)]


EDGES = [0, 1e-9, 1, 1e18, 1e59, -1e-9, 0.5, 2**40]  # in range of the readers, at its edges


def numeric_paths(doc: dict) -> list[tuple]:
    """The paths of ``doc``'s numbers, one entry of each list (the first) standing for all."""
    def at(path):
        v = doc
        for k in path:
            v = v[k]
        return v
    return [p for p in leaves(doc) if p and not any(isinstance(k, int) and k > 0 for k in p)
            and isinstance(at(p), (int, float)) and not isinstance(at(p), bool)]


@st.composite
def edged(draw, doc: dict, paths: list[tuple]):
    """``doc`` with one of its numbers set to an edge value (:data:`EDGES`): what the
    bounded readers let through, at its ends, where a divisor is 0 or a product is huge."""
    return replaced(doc, draw(st.sampled_from(paths)), draw(st.sampled_from(EDGES)))


@st.composite
def mutated(draw, doc: dict, max_edits: int = 3):
    """``doc`` with one to ``max_edits`` values replaced by nasty ones."""
    paths = list(leaves(doc))[1:]
    for _ in range(draw(st.integers(1, max_edits))):
        doc = replaced(doc, draw(st.sampled_from(paths)), draw(nasty))
        paths = [p for p in leaves(doc)][1:] or [()]
    return doc


# --- emitters -------------------------------------------------------------------------------

def to_json(doc) -> str:
    raws: list[str] = []

    def enc(v):
        if isinstance(v, Raw):
            raws.append(v.json_text)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(v, dict):
            return {str(k): enc(x) for k, x in v.items()}
        if isinstance(v, list):
            return [enc(x) for x in v]
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**4000:
            raws.append(str(v))
            return f"@@RAW{len(raws) - 1}@@"
        return v

    text = json.dumps(enc(doc), ensure_ascii=False)
    for i, r in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', r)
    return text


def _toml_value(v) -> str:
    if isinstance(v, Raw):
        return v.toml_text
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}"
                                for k, x in v.items() if x is not None) + " }"
    return '""'  # None at the top of a value: TOML has no null


def to_toml(doc) -> str:
    if not isinstance(doc, dict):
        return f"x = {_toml_value(doc)}\n"
    return "".join(f"{json.dumps(str(k))} = {_toml_value(v)}\n"
                   for k, v in doc.items() if v is not None)


def write(folder: Path, name: str, text: str) -> Path:
    p = folder / name
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    return p
