"""``hf:`` workloads: the spec grammar, configs built offline with overrides, a tiny model
stepped through afford's own train_step and gradient check, LoRA and frozen parameters, and
the clear error (exit 2) without transformers or peft."""

import importlib.util
import json
import math
import sys

import pytest
import torch

from afford.core.errors import InputError
from afford.workloads import resolve, train_step
from afford.workloads.base import check_gradients, count_frozen, count_params

CPU = torch.device("cpu")
HAS_TF = importlib.util.find_spec("transformers") is not None
HAS_PEFT = importlib.util.find_spec("peft") is not None
needs_tf = pytest.mark.skipif(not HAS_TF, reason="transformers is not installed "
                              "(pip install 'afford[hf]')")
needs_peft = pytest.mark.skipif(not (HAS_TF and HAS_PEFT), reason="peft or transformers is not "
                                "installed (pip install 'afford[hf,lora]')")
TINY_GPT2 = "hf:gpt2@d64L2H2V512"
TINY_LLAMA = "hf:llama@d64L2H4K2V512F128"  # grouped-query: 4 heads, 2 key/value heads


def _parse(spec):
    from afford.workloads.hf_models import parse_spec

    return parse_spec(spec)


def test_spec_grammar():
    s = _parse("hf:llama@d768L12H12+b8s1024+lora=r16+frozen=embeddings+fused+x2")
    assert (s.source, s.sizes, s.batch, s.seq) == ("llama", {"d": 768, "L": 12, "H": 12}, 8, 1024)
    assert (s.lora_rank, s.lora_alpha, s.lora_targets, s.frozen) == (16, None, None, "embeddings")
    assert s.step_options == ("fused", "x2")
    assert s.name == "hf:llama@d768L12H12+b8s1024+lora=r16+frozen=embeddings"
    s = _parse("hf:configs/my@model/config.json@V8192+s512+lora=r8a32:all-linear")
    assert s.source == "configs/my@model/config.json" and s.sizes == {"V": 8192}
    assert (s.batch, s.seq, s.lora_alpha, s.lora_targets) == (None, 512, 32, "all-linear")
    assert _parse("hf:gpt2+b4").batch == 4 and _parse("hf:gpt2+b4").seq is None
    assert _parse("hf:gpt2+frozen=blocks3").frozen == "blocks3"


@pytest.mark.parametrize("bad, why", [
    ("hf:", "model type"), ("hf:gpt2@d64d32", "twice"), ("hf:gpt2@q3", "letters"),
    ("hf:gpt2+b4+s8", "twice"), ("hf:gpt2+lora=16", "lora=r16"), ("hf:gpt2+frozen=all",
                                                                  "frozen=embeddings"),
    ("hf:gpt2+bogus", "unknown step option"), ("hf:gpt2+fused+foreach", "cannot be combined")])
def test_bad_specs_name_the_fault(bad, why):
    with pytest.raises(ValueError, match=why):
        _parse(bad)


def test_without_transformers_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(InputError, match=r"pip install 'afford\[hf\]'") as err:
        resolve("hf:gpt2", "cpu")
    assert err.value.exit_code == 2


@needs_tf
def test_lora_without_peft_names_its_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(InputError, match=r"pip install 'afford\[lora\]'"):
        resolve("hf:gpt2+lora=r4", "cpu")


@needs_tf
def test_configs_by_name_and_path_with_overrides(tmp_path):
    w = resolve("hf:gpt2", "large-gpu")  # GPT-2 small as transformers defines it
    assert w.shape(1024) == {"batch": 8, "seq": 1024, "d": 768, "L": 12, "H": 12, "V": 50257}
    assert w.default_sweep("large-gpu") == [256, 512, 1024]
    w = resolve("hf:gpt2@d128L3H4V1000+b3s256", "cpu")
    assert w.shape(256) == {"batch": 3, "seq": 256, "d": 128, "L": 3, "H": 4, "V": 1000}
    assert w.dims(w.shape(64)) == {"B": 3, "s": 64, "d": 128, "L": 3, "H": 4}
    assert w.default_sweep("cpu") == [64, 128, 256]  # a seq sweep at that batch
    w = resolve("hf:llama@d768L12H12F2048", "cpu")
    c = w.config
    assert (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
            c.intermediate_size) == (768, 12, 12, 64, 2048)  # MHA stays MHA; head_dim follows
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**resolve(TINY_LLAMA, "cpu").config.to_dict()}))
    w = resolve(f"hf:{path}@L3", "cpu")
    assert (w.config.model_type, w.config.num_hidden_layers, w.config.num_key_value_heads) == \
        ("llama", 3, 2)


@needs_tf
@pytest.mark.parametrize("bad, why", [
    ("hf:not_a_model_type", "not a model type"), ("hf:missing/config.json", "no such"),
    ("hf:gpt2@d100H3", "multiple of the number of heads"),
    ("hf:llama@d96H6K4", "key/value heads"), ("hf:llama@H6", "not a multiple"),
    ("hf:gpt2@K2", "none of num_key_value_heads")])
def test_bad_configs_are_input_errors(bad, why):
    with pytest.raises(InputError, match=why):
        resolve(bad, "cpu")


@needs_tf
@pytest.mark.parametrize("spec", [TINY_GPT2, TINY_LLAMA + "+fused"])
def test_tiny_model_takes_whole_steps(spec):
    w = resolve(spec, "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    before = [p.detach().clone() for p in built.model.parameters()]
    loss = train_step(built, "fp32", CPU)
    assert float(loss) == pytest.approx(math.log(512), rel=0.05)  # random init: chance
    assert check_gradients(built.model) == len(before)
    assert any(not torch.equal(a, b) for a, b in zip(before, built.model.parameters()))
    assert built.tokens_per_step == 2 * 16 and built.vocab == 512


@needs_tf
def test_seq_beyond_the_configs_positions_is_built():
    w = resolve("hf:gpt2@d32L1H2V64", "cpu")
    built = w.build({**w.shape(1100)}, CPU, seed=0)  # GPT-2 holds 1024 learned positions
    assert torch.isfinite(train_step(built, "fp32", CPU))


@needs_tf
def test_frozen_embeddings_are_not_trained():
    w = resolve(TINY_GPT2 + "+frozen=embeddings", "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    train_step(built, "fp32", CPU)
    # token embeddings 512 x 64 (tied with the head) + positions 1024 x 64
    assert count_frozen(built.model) == 512 * 64 + 1024 * 64
    full = resolve(TINY_GPT2, "cpu").build(w.shape(16), CPU, seed=0)
    assert count_params(built.model) == count_params(full.model) - 512 * 64 - 1024 * 64
    assert check_gradients(built.model) == 26  # the frozen ones need no gradient
    assert all(p.grad is None for p in built.model.parameters() if not p.requires_grad)
    blocks = resolve(TINY_LLAMA + "+frozen=blocks1", "cpu").build(w.shape(16), CPU, seed=0)
    assert not any(p.requires_grad for p in blocks.model.model.layers[0].parameters())
    assert all(p.requires_grad for p in blocks.model.model.layers[1].parameters())


@needs_peft
def test_lora_trains_only_the_adapters():
    w = resolve(TINY_LLAMA + "+lora=r4", "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    train_step(built, "fp32", CPU)
    names = [n for n, p in built.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    # peft's llama table: q_proj (64 -> 64) and v_proj (64 -> 32, 2 kv heads of 16), 2 layers
    assert count_params(built.model) == 2 * (4 * (64 + 64) + 4 * (64 + 32))
    assert count_frozen(built.model) == count_params(resolve(TINY_LLAMA, "cpu").build(
        w.shape(16), CPU, seed=0).model)
    assert check_gradients(built.model) == len(names)
    opt_params = sum(p.numel() for g in built.optimizer.param_groups for p in g["params"])
    assert opt_params == count_params(built.model)


def test_cli_without_transformers_exits_2(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from afford.cli import app

    monkeypatch.setitem(sys.modules, "transformers", None)
    r = CliRunner().invoke(app, ["certify", "-w", "hf:gpt2", "--device", "cpu", "--quick",
                                 "--out", str(tmp_path / "c.json")])
    assert r.exit_code == 2 and "afford[hf]" in r.output
    assert not (tmp_path / "c.json").exists()


# ------------------------------------------------ size overrides across every model type


def test_per_layer_kinds_follow_the_layer_count():
    from afford.workloads.hf_models import _cycle_kinds

    assert _cycle_kinds(["a", "b", "a", "b"], 2) == ["a", "b"]
    assert _cycle_kinds(["a", "b"], 5) == ["a", "b", "a", "b", "a"]
    # a hybrid whose first layers are all linear keeps one full-attention layer
    assert _cycle_kinds(["lin", "lin", "lin", "full"] * 3, 2) == ["lin", "full"]
    assert _cycle_kinds(["x", "y", "z"], 2) == ["x", "y"]  # fewer layers than kinds: cut
    assert _cycle_kinds([1, 1, 1, 2], 2) == [1, 1]  # numbers are values, not kinds


@needs_tf
def test_layer_types_follow_L_and_grouped_heads_keep_their_group():
    from afford.workloads.hf_models import base_config, with_sizes

    c = with_sizes(base_config("qwen2"), {"d": 256, "L": 3, "H": 8})  # 32 heads, 32 kv
    assert c.num_hidden_layers == 3 and len(c.layer_types) == 3
    assert c.num_attention_heads == 8 and c.num_key_value_heads == 8  # multi-head stays so
    m = with_sizes(base_config("mistral"), {"d": 256, "L": 2, "H": 16})  # 32 heads, 8 kv
    assert m.num_key_value_heads == 4  # group of 4 kept


@needs_tf
@pytest.mark.parametrize("spec", [
    "hf:ministral@d64L2H4K2V512",  # head_dim None in its default: d / H
    "hf:hunyuan_v1_dense@d64L2H4V512",  # the same
    "hf:nemotron@d64L2H4V512F128",  # num_key_value_heads None: multi-head
    "hf:gptj@d64L2H4V512",  # rotary_dim 64 of a 256 head, kept as a quarter of a 16 head
    "hf:codegen@d64L2H4V512",
    "hf:falcon@d64L2H4V512F128"])  # F is its ffn_hidden_size
def test_families_whose_default_config_leaves_a_head_field_empty_take_whole_steps(spec):
    """Sized from the family's default config, each of these raised a TypeError or a shape
    mismatch inside transformers on its first step (2026-12-06, transformers 5): afford
    fills what the model reads and scales GPT-J's rotated share with the head."""
    w = resolve(spec, "cpu")
    built = w.build(w.shape(16), CPU, seed=0)
    assert torch.isfinite(train_step(built, "fp32", CPU))


@needs_tf
def test_head_fields_are_filled_only_where_empty_and_rotary_follows_the_head():
    from afford.workloads.hf_models import base_config, filled, with_sizes

    named = with_sizes(base_config("llama"), {"d": 256, "L": 2, "H": 8})
    assert filled(named) is named  # every head field named: the same config back
    m = filled(with_sizes(base_config("ministral"), {"d": 256, "L": 2, "H": 8, "K": 2}))
    assert (m.head_dim, m.num_key_value_heads) == (32, 2)
    n = filled(with_sizes(base_config("nemotron"), {"d": 256, "L": 2, "H": 8}))
    assert n.num_key_value_heads == 8
    j = with_sizes(base_config("gptj"), {"d": 512, "H": 8})  # 6B: 64 of 4096 / 16 = 256
    assert j.rotary_dim == 16  # a quarter of the 64-feature head
    assert with_sizes(base_config("gptj"), {"d": 64, "H": 16}).rotary_dim == 2  # at least 2


@needs_tf
def test_a_composite_config_sizes_its_text_decoder():
    w = resolve("hf:gemma3@d64L2H2K1", "cpu")  # multimodal config: its text decoder
    assert w.config.model_type == "gemma3_text"
    assert (w.config.hidden_size, w.config.num_hidden_layers) == (64, 2)
    assert len(w.config.layer_types) == 2


@needs_tf
@pytest.mark.parametrize("spec, field", [
    ("hf:mamba@d64L2H2", "num_attention_heads"),  # no attention heads to size
    ("hf:gpt2@d64L2H3", "multiple of the number of heads"),
    ("hf:mistral@d64L2H2", "key/value heads"),
    ("hf:deepseek_v3@d64L2H4K2", "latent attention")])  # K2 built, then failed its 1st step
def test_a_size_the_family_cannot_take_is_one_line_naming_the_field(spec, field):
    with pytest.raises(InputError, match=field) as err:
        resolve(spec, "cpu")
    assert "\n" not in str(err.value)


@needs_tf
def test_every_causal_lm_type_builds_a_sized_config_or_says_why():
    """Every model type in the installed transformers' causal-LM mapping, at @d64L2H2 (with
    K1 where the family groups its key/value heads): a config, or a one-line InputError;
    never another exception; nine in ten build (a family transformers builds without SDPA
    among them, with its eager attention). Configs only: no weights."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from afford.workloads.hf_models import SIZE_FIELDS

    transformers.logging.set_verbosity_error()
    built, refused = [], {}
    for t in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        for size in ("d64L2H2", "d64L2H2K1"):
            try:
                w = resolve(f"hf:{t}@{size}", "cpu")
            except InputError as exc:
                refused[t] = str(exc)
                if "key/value heads" in str(exc):
                    continue
            else:
                refused.pop(t, None)
                built.append(t)
                assert w.config.hidden_size == 64  # L2 is the family's own layer count field
                assert 2 in [getattr(w.config, k, None) for k in SIZE_FIELDS["L"]]
            break
    assert all("\n" not in why for why in refused.values())
    print(f"{len(built)} of {len(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)} built; refused:")
    for t, why in sorted(refused.items()):
        print(f"  {t}: {why}")
    assert not [t for t, why in refused.items() if "SDPA" in why]
    assert len(built) >= 0.9 * len(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


@needs_tf
@pytest.mark.parametrize("spec", [TINY_GPT2, TINY_LLAMA, "hf:gpt2@d64L2H2V512+b2s64+fused"])
def test_a_described_config_plans_as_the_real_one(spec):
    """certify's parent plans an ``hf:`` workload from the fields its early child described
    (no transformers import): the shapes, dims, description and code paths are the ones the
    real config gives."""
    from afford.workloads.hf_models import DescribedConfig, describe

    said = json.loads(json.dumps(describe(spec)))  # as it travels, one JSON line
    real, planned = resolve(spec, "large-gpu"), resolve(spec, "large-gpu", said)
    inner = getattr(planned, "inner", planned)
    assert isinstance(inner.config, DescribedConfig)
    assert planned.description == real.description
    for value in real.default_sweep("large-gpu"):
        assert planned.shape(value) == real.shape(value)
        assert planned.dims(planned.shape(value)) == real.dims(real.shape(value))
    assert planned.code_paths() == real.code_paths()


@needs_tf
def test_a_spec_the_child_could_not_describe_is_resolved_and_reported_here():
    from afford.workloads.hf_models import describe

    said = describe("hf:gtp2")
    assert set(said) == {"error"}
    with pytest.raises(InputError, match="not a model type"):
        resolve("hf:gtp2", "cpu", said)


@needs_tf
def test_the_certify_parent_of_an_hf_workload_imports_no_transformers(tmp_path):
    """The console script's certify, stopped where its sweep would send the first job: the
    early child described the config, so the parent never imported transformers (on a GPU
    image that import was 4-10 s of a transformers certify's start); its plan's items are
    those of a parent that resolved the spec itself."""
    import subprocess

    from afford.measure.children import child_env

    code = """import json, sys
spec = sys.argv[1]
import afford.measure.children as children
def stop(items, **kw):
    print(json.dumps({"transformers": "transformers" in sys.modules,
                      "items": sorted(i["key"] for i in items)}))
    raise SystemExit(0)
children.run_children = stop
sys.argv = ["afford", "certify", "-w", spec, "--device", "cpu", "--quick", "--out", sys.argv[2]]
from afford._entry import main
main()
"""
    spec = "hf:gpt2@d64L2H2V512+b2s64"
    run = subprocess.run([sys.executable, "-c", code, spec, str(tmp_path / "c.json")],
                         capture_output=True, text=True, env=child_env(), timeout=300,
                         cwd=tmp_path)
    said = json.loads(run.stdout.strip().splitlines()[-1])
    assert said["transformers"] is False, run.stderr[-2000:]
    from afford.certification.request import build_request
    from afford.certification.request import resolve as plan_of

    req = build_request([spec], precision="quick")
    own = plan_of(req, "cpu", "cpu", "cpu")
    assert said["items"] == sorted(i["key"] for i in own.items)


@needs_tf
def test_a_family_without_sdpa_is_built_with_its_eager_attention_declared_materialised():
    """BLOOM has no SDPA attention in transformers 5 (``_supports_sdpa`` False): it is built
    with its eager attention and declared ``materialised`` (the memory law takes its s^2
    term), in the workload the parent plans from its early child's description as in the
    one resolved here; its description says so, and it takes whole steps. GPT-2 is built
    with SDPA and declared fused, as before."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from afford.certification.stage_memory import plan_job, s2_term
    from afford.certification.stage_time import plan_design
    from afford.workloads.hf_models import DescribedConfig, describe

    cls = AutoModelForCausalLM._model_mapping[type(AutoConfig.for_model("bloom"))]
    if getattr(cls, "_supports_sdpa", None) is not False:
        pytest.skip("this transformers builds BLOOM with SDPA")
    spec = "hf:bloom@d64L2H2V512"
    said = json.loads(json.dumps(describe(spec)))
    assert said["facts"]["attention"] == "materialised"
    real, planned = resolve(spec, "cpu"), resolve(spec, "cpu", said)
    assert isinstance(planned.config, DescribedConfig)
    for w in (real, planned):
        assert w.attention == "materialised"
        assert "eager attention: scores stored" in w.description
        job = plan_job(spec, w, "fp32", "cpu")
        assert job.attention == "materialised" and s2_term(job.attention) is True
    # the time design keeps every shape's stored scores (B*s^2) within the sweep's largest,
    # where GPT-2's SDPA design fits and holds out long sequences at batch 1 past it
    def scores(spec, w):
        values = w.default_sweep("large-gpu")
        d = plan_design(spec, w, "bf16", values)
        return [(p.batch or d.base_batch) * p.value ** 2 for p in d.shapes], \
            d.base_batch * max(values) ** 2

    eager, top = scores(spec, resolve(spec, "large-gpu", said))
    assert max(eager) <= top and len(eager) >= 7  # the sweep, across and held out
    sdpa, top = scores(TINY_GPT2, resolve(TINY_GPT2, "large-gpu"))
    assert max(sdpa) > 4 * top

    built = real.build(real.shape(16), CPU, seed=0)
    assert built.model.config._attn_implementation == "eager"
    assert float(train_step(built, "fp32", CPU)) == pytest.approx(math.log(512), rel=0.05)
    assert check_gradients(built.model) == sum(p.requires_grad for p in built.model.parameters())

    gpt2 = resolve(TINY_GPT2, "cpu")
    assert gpt2.attention == "fused" and "eager" not in gpt2.description
    assert describe(TINY_GPT2)["facts"]["attention"] == "fused"
    assert gpt2.build(gpt2.shape(16), CPU, seed=0).model.config._attn_implementation == "sdpa"


@needs_tf
def test_a_description_without_its_attention_is_resolved_from_the_real_config():
    """A description that does not say how the attention is built (one older than that
    field) is not planned from: the spec is resolved here, and its attention read from the
    installed transformers."""
    from afford.workloads.hf_models import DescribedConfig, describe

    said = describe("hf:bloom@d64L2H2V512")
    del said["facts"]["attention"]
    w = resolve("hf:bloom@d64L2H2V512", "cpu", said)
    assert not isinstance(w.config, DescribedConfig)
    assert w.attention == describe("hf:bloom@d64L2H2V512")["facts"]["attention"]
