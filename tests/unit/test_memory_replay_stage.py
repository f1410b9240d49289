"""The memory stage's allocator replay on histories recorded on an H200 (no device): the
recorded histories replay to the measured peaks, the learned model predicts the held-out
shapes, the law is kept beside it, and the breakdown sums to the peak."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from afford.certification.stage_memory import MemoryJob, build_law, refit_law
from afford.fit.memory.replay_model import SYNTHESIS_TOLERANCE, build_replay, use_replay
from afford.schema.memory_section import MemoryLaw, MemorySection
from tests.paths import DATA
from tests.replay_data import shapes

ENV = SimpleNamespace(device_type="cuda", device_memory_bytes=150 * 10**9)
ROLES = {"tinylm": {(8, 2048): "base", (8, 1024): "seq", (4, 2048): "batch",
                    (4, 1024): "corner", (16, 2048): "heldout-batch",
                    (8, 4096): "heldout-seq"},
         "gpt2": {(4, 1024): "base", (4, 512): "seq", (2, 1024): "batch", (2, 512): "corner",
                  (8, 1024): "heldout-batch", (4, 2048): "heldout-seq"}}


def law_of(workload: str, mode: str) -> MemoryLaw:
    sh = shapes(workload, mode, ROLES[workload])
    job = MemoryJob(spec=workload, mode=mode, dim_keys={"B": "batch", "s": "seq"},
                    base_shape=dict(sh[0].shape), runs=tuple((s.role, s.shape) for s in sh),
                    attention="fused", traced=True)
    law = build_law(job, sh, ENV)
    return law.model_copy(update={"replay": build_replay(law)})


@pytest.mark.parametrize("workload, mode", [("tinylm", "bf16"), ("gpt2", "fp32")])
def test_replay_is_validated_and_beats_the_law_at_held_out_shapes(workload, mode):
    rp = law_of(workload, mode).replay
    assert rp.trusted and len(rp.validation) == 4
    assert all(c.reserved_error == 0 and abs(c.allocated_error) < 1e-3 for c in rp.validation)
    # the learned sizes write every traced history back
    assert [(c.B, c.s) for c in rp.synthesised] == [(c.B, c.s) for c in rp.validation]
    for c, r in zip(rp.synthesised, rp.validation):
        assert abs(c.replay_reserved_bytes / r.replay_reserved_bytes - 1) <= SYNTHESIS_TOLERANCE
    assert {c.role for c in rp.heldout} == {"heldout-batch", "heldout-seq"}
    assert max(c.tokens_over_traced for c in rp.heldout) == 2.0
    for c in rp.heldout:  # issue 20's targets: reserved 3 %, allocated 2 %
        assert abs(c.reserved_error) <= 0.03 and abs(c.allocated_error) <= 0.02
        assert c.law_reserved_error is not None and c.expandable_reserved_bytes > 0
    assert rp.better == "replay" and rp.law_worst_reserved_error > rp.replay_worst_reserved_error
    assert use_replay(rp)


def test_tinylm_capped_buffers_are_learned_when_a_traced_shape_passes_the_cap():
    rp = law_of("tinylm", "fp32").replay
    assert rp.size_laws["capped"] > 0
    assert all(c.reserved_error == 0 for c in rp.heldout)


def test_breakdown_sums_to_the_recorded_peak():
    law = law_of("gpt2", "bf16")
    b = law.replay.breakdown
    assert b.source == "recorded" and (b.B, b.s) == (4, 1024)
    assert sum(v for k, v in b.classes().items() if k != "slack") == b.allocated_bytes
    assert b.allocated_bytes + b.slack_bytes == b.reserved_bytes
    base = next(s for s in law.shapes if s.role == "base")
    assert b.peak_reserved_bytes == base.peak("reserved")
    assert b.activations_bytes > b.parameters_bytes > 0 and b.optimizer_state_bytes > 0


def test_a_replay_that_misses_the_measured_peak_is_not_trusted():
    law = law_of("gpt2", "bf16")
    bad = [s.model_copy(update={"reserved_by_step": [int(r * 1.08) for r in s.reserved_by_step]})
           if s.role == "seq" else s for s in law.shapes]  # 8 % more than the history needs
    rp = build_replay(law.model_copy(update={"shapes": bad}))
    assert not rp.trusted and not use_replay(rp)
    assert any("not trusted" in w for w in rp.warnings)
    assert rp.safety_margin == pytest.approx(0.08 / 1.08, rel=1e-3)  # its under-prediction


def test_learned_sizes_that_do_not_write_a_traced_history_back_are_not_trusted(monkeypatch):
    """An alignment that leaves part of the reference unmatched keeps the reference's
    sizes there: the history synthesised at a smaller traced shape is too large. Here no
    stretch may be searched at all (MAX_STRETCH 0), so every slot outside the common runs
    keeps the base's size; the replay says so and is not trusted."""
    from afford.fit.memory import replay_fit, trace_scaling

    law = law_of("gpt2", "bf16")
    monkeypatch.setattr(trace_scaling, "MAX_STRETCH", 0)
    replay_fit._learn.cache_clear()
    try:
        rp = build_replay(law)
    finally:
        replay_fit._learn.cache_clear()
    assert not rp.trusted and not use_replay(rp)
    assert any("do not write the traced history" in w for w in rp.warnings)
    gaps = [c.replay_reserved_bytes / r.replay_reserved_bytes - 1
            for c, r in zip(rp.synthesised, rp.validation)]
    assert max(gaps) > SYNTHESIS_TOLERANCE


def test_refit_rebuilds_the_replay_from_the_raw_records():
    law = law_of("tinylm", "bf16")
    again = MemorySection.model_validate_json(MemorySection(
        steps_per_shape=3, budget_fraction=0.9, tolerance=0.05, targets={}, laws=[law],
        wall_seconds=1.0).model_dump_json()).laws[0]
    new = refit_law(again.model_copy(update={"replay": None}), ENV.device_memory_bytes)
    assert new.replay == law.replay.model_copy(update={"fit_seconds": new.replay.fit_seconds})


def test_an_allocator_option_the_model_does_not_follow_is_not_trusted():
    law = law_of("tinylm", "fp32")
    shp = [s.model_copy(update={"trace": s.trace.model_copy(
        update={"alloc_conf": "max_split_size_mb:128"})}) if s.trace else s for s in law.shapes]
    rp = build_replay(law.model_copy(update={"shapes": shp}))
    assert not rp.trusted and any("max_split_size_mb" in w for w in rp.warnings)


def test_the_laws_held_out_misses_say_the_replay_answers_where_it_does():
    import json

    from afford.certification.stage_memory import refit_law
    from afford.fit.memory.replay_model import with_replay
    from afford.schema.memory_section import MemoryLaw

    # softmax bf16's law of an H200 certificate (the merged tree of 2026-12-03): it misses
    # 16 x 4096 by -39 %
    doc = json.loads((DATA / "h200_softmax_bf16_law.json").read_text())
    law = MemoryLaw.model_validate(doc["law"])
    new = refit_law(law, doc["device_memory_bytes"])
    misses = [w for w in new.warnings if w.startswith("held-out ") and " off (target " in w]
    assert misses and all("the allocator replay answers" in w for w in misses)
    untrusted = new.replay.model_copy(update={"trusted": False})
    bare = with_replay(new.model_copy(update={"warnings": law.warnings}), untrusted)
    assert not any("replay answers" in w for w in bare.warnings)


def test_a_deep_models_histories_align_and_predict_a_fresh_process():
    """Qwen2 (24 layers, GQA 14/2) in bf16 on an H200: its base shape's backward allocates
    28 ops more than the other traced shapes', and every few ops a lifetime differs, so the
    fine passes found no anchor over 5,200 ops and left 4,794 of 12,599 slots at the base's
    size: the replay printed +11.6 % reserved, +13.3 % allocated at 1 x 512 against a fresh
    process. Aligned as plain kinds there, only the 42 extra slots stay unmatched (the
    embedding's backward sorts its indices above 3,072 of them, 14 allocations a step: the
    base has 4,096 tokens, the other traced shapes 2,048), written out above 2,048 tokens
    only; the learned sizes write each traced history back, and the fresh-process truths at
    14 shapes (1 x 512 to 8 x 4096, 0.06x to 4x the traced tokens) are met within 1 %
    reserved, 0.2 % allocated."""
    import gzip
    import json

    from afford.figures.memory_at import answer

    path = DATA / "h200_qwen2_bf16_law_truth.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    law = refit_law(MemoryLaw.model_validate(doc["law"]), doc["device_memory_bytes"])
    rp = law.replay
    assert rp.trusted and rp.size_laws["inexact"] <= 2
    assert "reference allocations without a match per traced shape: [42, 42, 42]" in rp.warnings
    assert any("42 allocations only the reference (8x512)" in w for w in rp.warnings)
    assert all(abs(c.reserved_error) < 0.005 for c in rp.synthesised)
    for t in doc["truth"]:
        got = answer(law, {"B": t["batch"], "s": t["seq"]}, "H200")
        assert got.source in ("replay", "measured")  # measured: a shape the stage ran
        assert abs(got.reserved.value / t["peak_reserved_bytes"] - 1) < 0.01, t
        assert abs(got.allocated.value / t["peak_allocated_bytes"] - 1) < 0.002, t


def test_the_reports_replay_table_shows_both_checks_and_the_held_out_shapes():
    """The certificate's report: each traced shape twice (its recorded history, and the
    history the learned sizes write back), then the held-out shapes."""
    from afford.report.certificate import memory_replay
    from tests.memory_fakes import with_memory
    from tests.synthetic_cert import certificate

    table = memory_replay(with_memory(certificate(), law_of("gpt2", "fp32")))
    roles = [row[2] for row in table.rows]
    traced = ["base", "seq", "batch", "corner"]
    assert roles[:8] == traced + [f"{r} (learned sizes)" for r in traced]
    assert sorted(roles[8:]) == ["heldout-batch", "heldout-seq"]  # the data's held-out shapes
    verdicts = [row[-1] for row in table.rows]
    assert verdicts[:8] == ["trusted"] * 8
    assert all(v.startswith("better: ") for v in verdicts[8:])
