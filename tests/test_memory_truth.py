"""benches/memory_truth.py's parts that need no GPU: shapes, the child's item, rows and
their summary against issue 28's targets, the slot diff, and a dry run through
``afford size --json`` on a fake certificate."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import pytest

from afford.fit.allocator import replay
from afford.fit.trace_scaling import learn
from afford.schema.cert import save_certificate
from tests import memory_fakes as mf
from tests.alloc_programs import MIB, program
from tests.time_certs import make_time_cert

PATH = Path(__file__).parent.parent / "benches" / "memory_truth.py"
spec = importlib.util.spec_from_file_location("memory_truth", PATH)
mt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mt)

TRACED = [(8, 512), (8, 256), (4, 512), (4, 256)]


@pytest.fixture(scope="module")
def law():
    return mf.law()


@pytest.fixture(scope="module")
def cert_path(law, tmp_path_factory):
    path = tmp_path_factory.mktemp("truth") / "cert.json"
    save_certificate(mf.with_memory(make_time_cert(), law), path)
    return path


def test_parse_shape():
    assert mt.parse_shape("3x768") == (3, 768) and mt.parse_shape("16X2048") == (16, 2048)
    for bad in ("3", "x768", "0x512", "3x-1", "axb"):
        with pytest.raises(ValueError, match="BATCHxSEQ"):
            mt.parse_shape(bad)


def test_the_grid_lies_between_and_beyond_the_traced_shapes_up_to_4x_their_tokens():
    got = mt.grid_shapes(TRACED, 12)
    tokens = [b * s for b, s in got]
    assert len(got) == 12 == len(set(got)) and not set(got) & set(TRACED)
    assert max(tokens) == 4 * 8 * 512 and tokens == sorted(tokens)
    assert any(4 * 256 < t < 8 * 512 for t in tokens)  # between the traced token counts
    assert any(b == 6 for b, _ in got) and any(s == 768 for _, s in got)  # off the grid
    assert len(mt.grid_shapes(TRACED, 1000)) < 1000  # every candidate, when fewer


def test_the_childs_item_is_the_memory_stages(law):
    it = mt.item_for(law, 6, 768, 3, trace=True)
    assert it["shape"] == {"batch": 6, "seq": 768} and it["workload"] == "tinylm"
    assert it["dims"] == {"B": 6, "s": 768, "d": 512, "L": 8, "H": 8}
    assert it["steps"] == 3 and it["trace"] is True and it["mode"] == "fp32"


def _truth(B: int, s: int) -> dict:
    """The program's own peaks at the shape: what a fresh child would read."""
    res, _ = replay(program(B, s, d=mf.D).events())
    return {"allocated_by_step": [res.peak_allocated_bytes] * 3,
            "reserved_by_step": [res.peak_reserved_bytes] * 3}


def test_rows_and_summary_against_the_targets(law, cert_path):
    rows = [mt.row_of(law, B, s, _truth(B, s), mt.size_json(cert_path, law, B, s))
            for B, s in ((6, 768), (16, 512), (3, 256))]
    assert all(r["source"] == "replay" and r["err_reserved"] == 0 for r in rows)
    assert rows[0]["tokens_over_traced"] == pytest.approx(6 * 768 / 4096)
    assert rows[0]["err_law"] != 0 and rows[0]["replay_reserved"] == rows[0]["size_reserved"]
    s = mt.summary(rows)
    assert s["met"] and s["measured"] == 3 and s["reserved_worst"] == 0
    low = dict(rows[0], err_reserved=-0.015, err_budgeted=-0.015)  # 1.5 % optimistic
    s = mt.summary([low, *rows[1:]])
    assert not s["met"] and s["optimistic"] == pytest.approx(0.015)
    assert mt.summary([dict(rows[0], err_reserved=None)])["met"] is False
    out = io.StringIO()
    mt.write_tsv(rows, mt.COLUMNS, out)
    lines = out.getvalue().splitlines()
    assert lines[0].split("\t") == list(mt.COLUMNS) and len(lines) == 4


def test_a_failed_truth_is_a_row_with_its_error(law, cert_path):
    r = mt.row_of(law, 6, 768, {"error": "OutOfMemoryError: CUDA out of memory"},
                  mt.size_json(cert_path, law, 6, 768))
    assert r["truth_reserved"] is None and r["err_reserved"] is None
    assert r["note"].startswith("OutOfMemoryError")


def test_slot_diff_names_the_sizes_that_do_not_carry_and_the_extra_allocations():
    stage = (32 * 1024, 48 * MIB)
    model = learn([program(B, s, stage=stage) for B, s in TRACED])
    assert mt.slot_diff(model, program(6, 256, stage=stage), 6, 256) == []
    other = (32 * 1024, 64 * MIB)  # the truth stops later than the traced shapes showed
    got = mt.slot_diff(model, program(6, 768, stage=other), 6, 768)
    sizes = [d for d in got if d["kind"] == "size"]
    assert len(sizes) == 6 and all(d["diff"] == -16 * MIB for d in sizes)
    assert all("cap" in d["law"] for d in sizes)
    cold = mt.slot_diff(model, program(6, 256, stage=stage, cold=True), 6, 256)
    assert cold == [{"kind": "recorded only", "slot": 1, "law": "", "synthesised": 0,
                     "recorded": 32 * MIB, "diff": -32 * MIB}]


def test_a_dry_run_prints_a_row_per_shape(cert_path, capsys):
    assert mt.main([str(cert_path), "--shape", "6x768", "--shape", "3x256", "--dry-run"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].startswith("workload\tmode\tB\ts") and len(lines) == 3
    assert lines[1].split("\t")[:4] == ["tinylm", "fp32", "6", "768"]
    assert '"measured": 0' in out.err


@pytest.mark.cuda
def test_a_truth_is_measured_in_a_fresh_child_and_diffed_on_the_gpu():
    """On CUDA: one shape of a tiny tinylm in its own pre-warmed memory child (and one cold),
    its peaks read as the memory stage reads them, its recorded history against itself
    (a model learned from that one history writes it out unchanged: no slot differs)."""
    from afford.fit import memory_replay as mr
    from afford.schema.memory import AllocTrace

    law = mf.law()  # only its workload keys are used: tinylm, batch and seq
    item = mt.item_for(law, 4, 256, 3, trace=True)
    item["shape"] = {"batch": 4, "seq": 256, "d": 256, "L": 2, "H": 4}
    item["dims"] = {"B": 4, "s": 256, "d": 256, "L": 2, "H": 4}
    for cold in (False, True):
        rec = mt.measure_truth(item, "large-gpu", 0, cold)
        assert rec.get("error") is None, rec
        assert len(rec["reserved_by_step"]) == 3
        assert rec["reserved_by_step"][-1] >= rec["allocated_by_step"][-1] > 0
    t = AllocTrace(**rec["trace"])
    model = mr.learn_traces([(t, 4, 256)])
    assert mt.slot_diff(model, mr.op_trace(t, 4, 256), 4, 256) == []
