"""Where a certificate stops (issue 37 item 2): the code paths a transformers config switches
between (workloads/paths), kept in the memory law, and the mark a memory figure past one
gets. The sliding-window case: a model whose window is shorter than the asked sequence,
traced below it (on an H200 such a figure was 15 % optimistic, unmarked, ``fits: yes``)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from afford.certification.stage_memory import build_law, plan_job
from afford.core.provenance import module
from afford.figures import memory_at
from afford.fit.memory.replay_model import build_replay
from afford.workloads import paths
from tests import memory_fakes as mf

RUN = "a test"


def test_config_switches():
    got = {p.kind: p for p in paths.code_paths(
        {"model_type": "mistral", "sliding_window": 4096, "max_position_embeddings": 32768})}
    assert got["sliding_window"].threshold == 4096 and got["sliding_window"].axis == "seq"
    assert "position_limit" not in got  # rotary: no learned table
    assert paths.code_paths({"model_type": "qwen2", "sliding_window": 4096,
                             "use_sliding_window": False}) == []
    assert paths.code_paths({"model_type": "gemma2", "sliding_window": 4096,
                             "layer_types": ["full_attention"] * 2}) == []
    opt = {p.kind: p for p in paths.code_paths({"model_type": "opt",
                                                "max_position_embeddings": 2048})}
    assert opt["position_limit"].threshold == 2048
    moe = paths.code_paths({"model_type": "mixtral", "num_local_experts": 8})
    assert moe[0].kind == "moe_routing" and moe[0].threshold is None
    assert {p.kind for p in paths.code_paths({"model_type": "llama4_text",
                                              "attention_chunk_size": 8192})} == \
        {"chunked_attention"}


def test_an_older_certificate_reads_them_from_the_config_file_its_workload_names(tmp_path,
                                                                                 monkeypatch):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(
        {"model_type": "mistral", "sliding_window": 1024}))
    monkeypatch.chdir(tmp_path)
    assert paths.from_spec("hf:cfg/config.json")[0].threshold == 1024
    assert paths.from_spec("hf:llama@d64L2") is None and paths.from_spec("tinylm") is None
    assert paths.from_spec("hf:missing/config.json") is None


@pytest.fixture(scope="module")
def windowed():
    """A real mistral workload with a 3,072-token window (transformers builds its config,
    offline), its memory job planned as the stage plans it; the law fitted over the
    synthetic program's traced shapes (seq 256-512, held out to 2048: all below it)."""
    pytest.importorskip("transformers")
    from afford.workloads import resolve

    w = resolve("hf:mistral@d64L2H4K2V256F128", "large-gpu")
    w.config.sliding_window = 3072
    job = plan_job("hf:mistral@d64L2H4K2V256F128", w, "fp32", "large-gpu", traced=True)
    kinds = {p.kind: p for p in job.paths}
    assert kinds["sliding_window"].threshold == 3072 and "size_switch" in kinds
    fake = mf.law()  # the synthetic program's shapes, as the stage would record them
    law = build_law(fake_job(job), list(fake.shapes),
                    SimpleNamespace(device_type="cuda", device_memory_bytes=None))
    return law.model_copy(update={"replay": build_replay(law)})


def fake_job(job):
    from afford.certification.stage_memory import MemoryJob

    return MemoryJob(spec="tinylm", mode="fp32", dim_keys={"B": "batch", "s": "seq"},
                     base_shape={"batch": 8, "seq": 512}, runs=(), attention=job.attention,
                     traced=True, paths=job.paths)


def test_past_the_window_the_figure_is_marked_and_fits_is_not_a_plain_yes(windowed):
    assert windowed.paths and any(p.kind == "sliding_window" for p in windowed.paths)
    inside = memory_at.answer(windowed, {"batch": 4, "seq": 2048}, RUN)
    assert not inside.extrapolated  # below the window and within the measured range
    a = memory_at.answer(windowed, {"batch": 2, "seq": 4096}, RUN)
    assert a.extrapolated
    assert any("past 3072 (config sliding_window 3072)" in r for r in a.reasons), a.reasons
    assert a.path_bound is not None and a.path_bound.value > 0  # what scores could add
    roomy = module(100 * float(a.figure.value), "B", "a roomy budget")
    tight = module(1.05 * float(a.figure.value), "B", "5 % above the figure")
    assert memory_at.answer(windowed, {"batch": 2, "seq": 4096}, RUN,
                            budget=tight).fits == "uncertain"
    far = memory_at.answer(windowed, {"batch": 2, "seq": 4096}, RUN, budget=roomy)
    assert far.fits in ("likely", "uncertain") and far.settle.endswith("--measure")


def test_past_the_window_a_materialised_attention_adds_no_scores_bound(windowed):
    """An attention that stores its scores (an eager hf: family, the built-in softmax) has
    them in its law's s^2 term already: past the window the figure is still marked, but
    nothing is added for scores the law counts."""
    law = windowed.model_copy(update={"attention": "materialised"})
    a = memory_at.answer(law, {"batch": 2, "seq": 4096}, RUN)
    assert a.extrapolated and any("sliding_window" in r for r in a.reasons), a.reasons
    assert a.path_bound is None
    assert memory_at.answer(windowed, {"batch": 2, "seq": 4096}, RUN).path_bound is not None


def test_a_measured_shape_past_the_window_lifts_the_mark(windowed):
    """Once a shape past the window was measured (afford size --measure), the window is
    crossed by a measurement: shapes up to it are no longer marked for it."""
    from afford.schema.memory_section import MemoryShape

    base = next(s for s in windowed.shapes if s.role == "heldout-seq")
    asked = base.model_copy(update={"role": "asked", "key": "asked",
                                    "dims": {**base.dims, "B": 2, "s": 4096},
                                    "shape": {"batch": 2, "seq": 4096}})
    assert isinstance(asked, MemoryShape)
    law = windowed.model_copy(update={"shapes": [*windowed.shapes, asked]})
    a = memory_at.answer(law, {"batch": 2, "seq": 4096}, RUN)
    assert a.source == "measured" and not a.extrapolated
    b = memory_at.answer(law, {"batch": 2, "seq": 3584}, RUN)
    assert not any("sliding_window" in r for r in b.reasons)
