"""Transformers causal LMs as workloads: ``hf:NAME``, built from a config with random weights.

Nothing is downloaded: the config comes from ``AutoConfig.for_model(NAME)`` (a model type
transformers knows offline: ``gpt2``, ``llama``, ``mistral``, ``qwen2``, ...) or from a
``config.json`` on disk, and ``AutoModelForCausalLM.from_config`` builds the model straight on
the device (``with torch.device(device)``) with SDPA attention, or, for a family that
transformers builds without SDPA (BLOOM, GPT-Neo, MPT, Gemma 2 in transformers 5), with its
eager attention, which stores the s x s scores and is declared so (``attention =
"materialised"``: the memory law takes its s^2 term). A model type's defaults are the
library's: ``hf:llama`` is the 7B Llama config (d 4096, 32 layers), because that is what was
asked for; name a smaller one with a size (``hf:llama@d768L12H12``).

Spec grammar (:func:`afford.workloads.names.parse_spec`, read without torch)::

    hf:SOURCE[@SIZE][+OPTION...]

    SOURCE  a model type (gpt2, llama, ...) or a path to a config.json (or its folder)
    SIZE    letters and numbers, each overriding one config field:
            d hidden size, L layers, H attention heads, K key/value heads (GQA configs),
            V vocabulary, F feed-forward size (intermediate_size, n_inner, ffn_dim, d_ff,
            ffn_hidden_size, dff or d_inner, whichever the family has):
            e.g. @d768L12H12, @d256L4H4V8192F1024
    OPTION  b8s1024  batch 8; the sweep is seq 256, 512, 1024 at that batch (b8 or s1024 alone
                     also work: the other keeps the device's default)
            lora=r16 LoRA adapters of rank 16 (peft, ``afford[lora]``) on the family's attention
                     projections (peft's table per model type); lora=r16a32 sets alpha (default
                     2 x r); lora=r16:all-linear targets every linear layer but the output head
            frozen=embeddings      the token and position embeddings are not trained
            frozen=blocks4         the embeddings and the first 4 blocks are not trained
            any step option of :mod:`afford.workloads.tuned` (fused, compile, x2, ...)

The loss is ``model(input_ids=ids, labels=ids).loss`` over a small pool of random token batches
(the values of the data do not change the cost of a step); AdamW over the trainable parameters,
fused on CUDA. Dropout and every other field stay as the config has them: this is the user's
model. The transformer dims of the memory and time models (d, L, H) are read from the config.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import torch

from afford.core.errors import InputError
from afford.schema.memory_section import CodePath
from afford.workloads.base import Attention, Built, Workload, WorkloadRefused
from afford.workloads.names import (
    HFSpec,
    is_config_path,
    no_transformers,
    parse_spec,
    unknown_model_type,
)
from afford.workloads.paths import code_paths, embedding_sort

LORA_EXTRA = "pip install 'afford[lora]'"
DEFAULT_BATCH = {"cpu": 2, "small-gpu": 4, "large-gpu": 8}
DEFAULT_SEQ = {"cpu": (32, 64, 128), "small-gpu": (128, 256, 512),
               "large-gpu": (256, 512, 1024)}
POOL = 4  # random token batches cycled through
SIZE_KEYS = {"d": "hidden_size", "L": "num_hidden_layers", "H": "num_attention_heads",
             "K": "num_key_value_heads", "V": "vocab_size"}
# llama-style, GPT-2, OPT, T5, Falcon, CTRL, XLNet (not BART-style encoder-decoders: L and H
# size their encoder, so their decoder's F alone would build a model nobody asked for)
FFN_KEYS = ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size", "dff",
            "d_inner")


# ---------------------------------------------------------------- the config


def transformers_module():
    """``transformers``, or InputError naming the extra that installs it."""
    try:
        import transformers
    except ImportError:
        raise no_transformers() from None
    return transformers


def base_config(source: str):
    """The config a source names: a model type known offline, or a config.json (or folder)."""
    tf = transformers_module()
    if is_config_path(source):
        path = Path(source)
        if not path.exists():
            raise InputError(f"hf:{source}: no such config file or folder")
        try:
            return tf.AutoConfig.from_pretrained(str(path))
        except Exception as exc:  # noqa: BLE001 - OSError, JSON errors, validators' errors
            raise InputError(f"hf:{source}: cannot read the config: {_line(exc)}") from None
    if source not in tf.CONFIG_MAPPING:
        raise unknown_model_type(source, tf.CONFIG_MAPPING)
    try:
        return tf.AutoConfig.for_model(source)
    except Exception as exc:  # noqa: BLE001 - a family's own default may fail its validators
        raise InputError(f"hf:{source}: transformers cannot build this model type's default "
                         f"config: {_line(exc)}") from None


def causal_part(config):
    """The config a causal LM is built from: the config itself, or the text decoder of a
    composite (multimodal, audio) config, as ``get_text_config(decoder=True)`` names it."""
    if _readable(config, "hidden_size"):
        return config
    try:
        text = config.get_text_config(decoder=True)
    except (ValueError, AttributeError) as exc:
        raise InputError(f"the {config.model_type} config has no hidden size and no single "
                         f"text decoder config ({_line(exc)})") from None
    if text is config or not _readable(text, "hidden_size"):
        raise InputError(f"the {config.model_type} config has no hidden size (none of "
                         f"{', '.join(SIZE_FIELDS['d'])})")
    return text


def _readable(config, name: str) -> bool:
    try:
        return getattr(config, name) is not None
    except Exception:  # noqa: BLE001 - a config's property may raise anything (per-layer fields)
        return False


def _line(exc: BaseException) -> str:
    """The last non-empty line of an exception's text (a validator's own words), shortened."""
    text = str(exc.__cause__ or exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def with_sizes(config, sizes: dict[str, int]):
    """A copy of ``config`` with the size letters applied to the family's own fields.

    ``L`` also resizes every per-layer field (a list as long as the old layer count, such as
    ``layer_types``, cycled or cut; a dict keyed by layer index, cut); a head dimension that
    was d / H is derived again; a grouped-query config keeps its group size where ``H``
    allows. A size the family cannot take is an InputError naming the field."""
    if not sizes:
        return config
    d = config.to_dict()
    amap = dict(getattr(config, "attribute_map", {}) or {})
    keys = {letter: _key(letter, d, amap) for letter in SIZE_FIELDS}
    keys["F"] = next((k for k in FFN_KEYS if k in d), None)
    old = {letter: d.get(key) for letter, key in keys.items() if key is not None}
    if "L" in sizes and keys["L"] is None and isinstance(d.get(_layer_list(amap)), list):
        old["L"] = len(d[_layer_list(amap)])  # counted by its per-layer list alone
    for letter, value in sizes.items():
        if keys[letter] is None and not (letter == "L" and "L" in old):
            raise InputError(f"size {letter}: the {config.model_type} config has none of "
                             f"{', '.join(FFN_KEYS if letter == 'F' else SIZE_FIELDS[letter])}")
        if keys[letter] is not None:
            d[keys[letter]] = value
    if "L" in sizes:
        _resize_layers(d, old["L"], sizes["L"])
    if sizes.keys() & {"d", "H", "K"}:
        _derive_heads(d, keys, old, sizes)
    if "V" in sizes:  # special tokens beyond a smaller vocabulary name no token
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if isinstance(d.get(key), int) and d[key] >= sizes["V"]:
                d[key] = None
    try:
        return type(config).from_dict(d)
    except Exception as exc:  # noqa: BLE001 - transformers' validators raise many kinds
        size = "".join(f"{k}{v}" for k, v in sizes.items())
        raise InputError(f"size {size}: transformers refuses the {config.model_type} config "
                         f"at this size: {_line(exc)}") from None


#: the fields a size letter sets, first match wins (through the family's attribute_map)
SIZE_FIELDS = {"d": ("hidden_size", "d_model", "n_embd"),
               "L": ("num_hidden_layers", "num_layers", "n_layer", "n_layers"),
               "H": ("num_attention_heads", "num_heads", "n_head"),
               "K": ("num_key_value_heads", "num_kv_heads"),
               "V": ("vocab_size",)}
HEAD_DIM_KEYS = ("head_dim", "d_head", "kv_channels")  # derived as d / H where they were


def _key(letter: str, d: dict, amap: dict) -> str | None:
    for name in SIZE_FIELDS[letter]:
        real = amap.get(name, name)
        if real in d and isinstance(d[real], int) and not isinstance(d[real], bool):
            return real
    return None


def _layer_list(amap: dict) -> str:
    return amap.get("layer_types", "layer_types")


def _resize_layers(d: dict, old_l: int | None, new_l: int) -> None:
    """Per-layer fields follow the new layer count: lists of the old length are cycled or
    cut, dicts keyed by layer index are cut."""
    if not old_l:
        return
    for key, value in list(d.items()):
        if isinstance(value, list) and len(value) == old_l and old_l > 1:
            d[key] = _cycle_kinds(value, new_l)
        elif isinstance(value, dict) and value and all(
                isinstance(k, str) and k.isdigit() and int(k) < old_l for k in value):
            d[key] = {k: v for k, v in value.items() if int(k) < new_l}


def _cycle_kinds(values: list, n: int) -> list:
    """``values`` cycled or cut to ``n``; a list of layer kinds (strings) keeps every kind it
    had where ``n`` allows (a hybrid whose first layers are all linear attention keeps one
    full-attention layer), each missing kind replacing the last entry of a kind seen twice."""
    out = [values[i % len(values)] for i in range(n)]
    if not all(isinstance(v, str) for v in values):
        return out
    kinds = list(dict.fromkeys(values))
    missing = [k for k in kinds if k not in out]
    if len(kinds) > n:
        return out
    for kind in missing:
        i = max(j for j, v in enumerate(out) if out.count(v) > 1)
        out[i] = kind
    return out


def _derive_heads(d: dict, keys: dict, old: dict, sizes: dict) -> None:
    """Head dimensions that were d / H stay d / H; a grouped-query config keeps its group
    size (H / K) where the new H allows, and multi-head stays multi-head."""
    if keys["d"] is None or keys["H"] is None:
        return
    old_d, old_h = old.get("d"), old.get("H")
    new_d, new_h = d[keys["d"]], d[keys["H"]]
    for key in HEAD_DIM_KEYS:
        if d.get(key) is not None and old_d and old_h and d[key] == old_d // old_h:
            d[key] = new_d // new_h
    rot = d.get("rotary_dim")  # GPT-J, CodeGen: the rotated part of each head, in features
    if isinstance(rot, int) and rot > 0 and old_d and old_h:
        share = rot / (old_d // old_h)  # GPT-J 6B: 64 of 256; kept as a share of the head
        d["rotary_dim"] = min(new_d // new_h, max(2, 2 * round(share * (new_d // new_h) / 2)))
    k_key, old_k = keys["K"], old.get("K")
    if "K" not in sizes and k_key is not None and old_k and old_h:
        group = old_h // old_k if old_h % old_k == 0 else None
        if old_k == old_h:
            d[k_key] = new_h
        elif group and new_h % group == 0:
            d[k_key] = new_h // group
    derived = [d[k] for k in HEAD_DIM_KEYS if d.get(k) is not None]
    if (not derived or derived[0] == new_d // new_h) and new_d % new_h:
        raise InputError(f"size d{new_d}H{new_h}: the hidden size is not a multiple of the "
                         "number of heads")
    k = d.get(k_key) if k_key else None
    if "K" in sizes and d.get("kv_lora_rank") and k != new_h:
        raise InputError(f"size K{k}: the {d.get('model_type', 'model')} config has multi-head "
                         "latent attention (kv_lora_rank), whose key/value heads are its "
                         f"attention heads; leave K out (or give K{new_h})")
    if isinstance(k, int) and k and new_h % k:
        raise InputError(f"size H{new_h}: not a multiple of the {k} key/value heads; give K "
                         "too (e.g. H12K4)")


def config_at(config, shape: dict[str, int]):
    """The config of a shape: d, L, H and V from the shape, positions at least seq."""
    sizes = {k: shape[k] for k in ("d", "L", "H", "V") if k in shape
             and shape[k] != getattr(config, SIZE_KEYS[k])}
    c = copy.deepcopy(with_sizes(config, sizes))
    positions = getattr(c, "max_position_embeddings", None)
    if positions is not None:
        with contextlib.suppress(NotImplementedError):  # XLNet's setter: it has no limit
            c.max_position_embeddings = max(int(positions), int(shape["seq"]))
    return c


# ---------------------------------------------------------------- the workload


class HFCausalLM(Workload):
    """A transformers causal LM from a config; see the module docstring."""

    sweep_param = "seq"

    def __init__(self, spec: HFSpec, config, device_class: str,
                 attention: Attention = "fused") -> None:
        self.spec = spec
        self.config = config
        self.name = spec.name
        self.batch = spec.batch or DEFAULT_BATCH[device_class]
        # fused: built with SDPA, the s x s scores never stored; materialised: the family's
        # eager attention (transformers has no SDPA for it), which stores them
        self.attention = attention
        extra = [x for x in (spec.lora_text(), f"frozen={spec.frozen}" if spec.frozen
                             else "",
                             "eager attention: scores stored" if attention == "materialised"
                             else "") if x]
        self.description = (
            f"transformers {config.model_type} d{config.hidden_size} "
            f"L{config.num_hidden_layers} H{config.num_attention_heads} "
            f"(random weights{', ' + ', '.join(extra) if extra else ''}), batch {self.batch} x seq")

    def default_sweep(self, device_class: str) -> list[int]:
        s = self.spec.seq
        if s is None:
            return list(DEFAULT_SEQ[device_class])
        return sorted({max(1, s // 4), max(1, s // 2), s})

    def shape(self, value: int) -> dict[str, int]:
        c = self.config
        return {"batch": self.batch, "seq": int(value), "d": c.hidden_size,
                "L": c.num_hidden_layers, "H": c.num_attention_heads, "V": c.vocab_size}

    def dims(self, shape: dict[str, int]) -> dict[str, int]:
        return {"B": shape["batch"], "s": shape["seq"], "d": shape["d"], "L": shape["L"],
                "H": shape["H"]}

    def code_paths(self) -> list[CodePath]:
        return code_paths(self.config.to_dict()) + [embedding_sort()]

    def build(self, shape: dict[str, int], device: torch.device, seed: int) -> Built:
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        config = config_at(self.config, shape)
        impl = IMPLEMENTATION[self.attention]
        try:
            with torch.device(device):
                model = AutoModelForCausalLM.from_config(config, attn_implementation=impl)
        except (ValueError, ImportError) as exc:
            raise WorkloadRefused(f"{self.name}: transformers cannot build a causal LM from "
                                  f"this config (attn_implementation={impl!r}): {exc}"
                                  ) from exc
        model = adapt(model, self.spec)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        if not trainable:
            raise WorkloadRefused(f"{self.name}: every parameter is frozen")
        opt = torch.optim.AdamW(trainable, lr=3e-4, fused=device.type == "cuda")
        B, s, V = shape["batch"], shape["seq"], config.vocab_size
        gen = torch.Generator(device=device).manual_seed(seed)
        pool = torch.randint(0, V, (POOL, B, s), device=device, generator=gen)  # (P, B, s)
        state = {"i": 0}

        def loss() -> torch.Tensor:
            ids = pool[state["i"] % POOL]  # (B, s)
            state["i"] += 1
            return model(input_ids=ids, labels=ids).loss

        return Built(model=model, optimizer=opt, loss=loss, tokens_per_step=B * s, vocab=V)


def adapt(model: torch.nn.Module, spec: HFSpec) -> torch.nn.Module:
    """LoRA adapters (peft) and frozen parameters, as the spec asks."""
    if spec.lora_rank:
        model = _lora(model, spec)
    if spec.frozen:
        freeze(model, spec.frozen)
    return model


def _lora(model: torch.nn.Module, spec: HFSpec) -> torch.nn.Module:
    try:
        import peft
    except ImportError:
        raise InputError(f"{spec.name}: LoRA needs peft, which is not installed here: "
                         f"{LORA_EXTRA}") from None
    cfg = peft.LoraConfig(r=spec.lora_rank, lora_alpha=spec.lora_alpha or 2 * spec.lora_rank,
                          lora_dropout=0.0, target_modules=spec.lora_targets,
                          task_type="CAUSAL_LM",
                          fan_in_fan_out=_conv1d(model))  # GPT-2 keeps (in, out) weights
    try:
        return peft.get_peft_model(model, cfg)
    except ValueError as exc:
        raise WorkloadRefused(f"{spec.name}: peft found no attention projections to adapt "
                              f"for this model type ({exc}); try lora=r{spec.lora_rank}"
                              ":all-linear") from exc


def _conv1d(model: torch.nn.Module) -> bool:
    return any(type(m).__name__ == "Conv1D" for m in model.modules())


def freeze(model: torch.nn.Module, what: str) -> None:
    """``embeddings``: every nn.Embedding (a tied output head shares the token embedding's
    weight, so it is frozen too); ``blocks<k>``: those and the first k transformer blocks."""
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            m.requires_grad_(False)
    if what.startswith("blocks"):
        k = int(what[len("blocks"):])
        blocks = _blocks(model)
        if k > len(blocks):
            raise WorkloadRefused(f"frozen={what}: the model has {len(blocks)} blocks")
        for block in list(blocks)[:k]:
            block.requires_grad_(False)


def _blocks(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The longest ModuleList of the model: its stack of transformer blocks."""
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        raise WorkloadRefused("frozen=blocks<k>: no stack of blocks (ModuleList) found")
    return max(lists, key=len)


def resolve_hf(spec: str, device_class: str, described: dict | None = None) -> Workload:
    """The workload of an ``hf:`` spec, with its step options; InputError when bad.
    ``described``: what a child that resolved the same spec said of its config
    (:func:`describe`): the workload then plans from those fields (:class:`DescribedConfig`)
    and this process never imports transformers; the children build from the real config."""
    parsed = _parsed(spec)
    facts = (described or {}).get("facts")
    if facts and all(isinstance(facts.get(f), int) for f in FACTS[1:]) and \
            isinstance(facts.get("model_type"), str) and \
            facts.get("attention") in IMPLEMENTATION:
        config = DescribedConfig(facts, described.get("config") or {})
        attention = facts["attention"]
    else:
        config = _config(spec, parsed)
        attention = attention_of(config)
    _check_dims(spec, config)
    workload: Workload = HFCausalLM(parsed, config, device_class, attention)
    if parsed.step_options:
        from afford.workloads.tuned import Tuned

        workload = Tuned(workload, parsed.step_options)
    return workload


def _parsed(spec: str) -> HFSpec:
    try:
        parsed = parse_spec(spec)
    except ValueError as exc:
        raise InputError(f"workload {spec!r}: {exc}") from None
    if parsed.lora_rank:
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            raise InputError(f"workload {spec!r}: LoRA needs peft, which is not installed "
                             f"here: {LORA_EXTRA}")
    return parsed


def _config(spec: str, parsed: HFSpec):
    """The causal config of a spec, its sizes applied (imports transformers), with the head
    fields its model reads filled in (:func:`filled`)."""
    base = base_config(parsed.source)  # its errors name the source
    try:
        return filled(with_sizes(causal_part(base), parsed.sizes))
    except InputError as exc:
        raise InputError(f"workload {spec!r}: {exc}") from None


def filled(config):
    """``config`` with the head fields its model reads as numbers filled where the family's
    default leaves them None: ``num_key_value_heads`` as H, multi-head (``NemotronConfig``;
    ``NemotronAttention`` divides by it) and ``head_dim`` as d / H (``MinistralConfig``,
    ``HunYuanDenseV1Config``; their attention raises it to a power). These are the values
    the families that read None themselves derive, so no model changes; a config naming
    both fields is returned as it is (every transformers causal-LM type that built before
    builds the same: ``benches/hf_family_scan.py``)."""
    names = ("num_key_value_heads", "head_dim")
    try:
        d_model, heads = config.hidden_size, config.num_attention_heads
    except AttributeError:
        return config
    values = config.to_dict()
    missing = [n for n in names if n in values and values[n] is None]
    if not missing or not isinstance(d_model, int) or not isinstance(heads, int) or not heads:
        return config
    if "head_dim" in missing and d_model % heads:
        missing.remove("head_dim")
    out = copy.deepcopy(config)
    for n in missing:
        setattr(out, n, heads if n == "num_key_value_heads" else d_model // heads)
    return out


# how each declared attention is built (``attn_implementation``)
IMPLEMENTATION = {"fused": "sdpa", "materialised": "eager"}


def attention_of(config) -> Attention:
    """How ``config``'s causal LM is built: ``fused`` (SDPA) unless the installed
    transformers says its class has no SDPA attention (``_supports_sdpa`` False: BLOOM,
    GPT-Neo, MPT, Gemma 2, XGLM in transformers 5), then ``materialised``: its eager attention,
    which stores the s x s scores. Those families were refused until 2026-12-07 (before that,
    once their first child tried to build them with SDPA: 19 s into a certify on an H100,
    2026-12-06). A class that does not say is built with SDPA, and its build decides."""
    try:
        from transformers import AutoModelForCausalLM

        cls = AutoModelForCausalLM._model_mapping[type(config)]
    except Exception:  # noqa: BLE001 - no mapping here: the children's build decides
        return "fused"
    return "materialised" if getattr(cls, "_supports_sdpa", None) is False else "fused"


# what the parent plans with: HFCausalLM's shape (d, L, H, V) and description
FACTS = ("model_type", *(SIZE_KEYS[k] for k in ("d", "L", "H", "V")))


def describe(spec: str) -> dict:
    """What a process that imported transformers tells certify's parent of an ``hf:``
    spec's config, so the parent plans without importing it (on a GPU image that import
    took 4-10 s, the whole of a transformers certify's start): ``{"facts": the fields
    :data:`FACTS` and how its attention is built (:func:`attention_of`), "config": its
    ``to_dict()``}`` (JSON-safe), or ``{"error": why}``, on
    which the parent resolves the spec itself and reports it as it always does."""
    import json

    try:
        config = _config(spec, _parsed(spec))
        _check_dims(spec, config)
        facts = {**{f: _value(config, f) for f in FACTS}, "attention": attention_of(config)}
        full = json.loads(json.dumps(config.to_dict(), default=str))
    except Exception as exc:  # noqa: BLE001 - the parent's own resolve reports it
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"facts": facts, "config": full}


class DescribedConfig:
    """A config as :func:`describe` sent it: the planning fields (:data:`FACTS`) and the
    whole ``to_dict()``, read as attributes, as the parent's :class:`HFCausalLM` reads a
    transformers config (it never builds from it: the children do, from the real one)."""

    def __init__(self, facts: dict, config: dict) -> None:
        self._facts = dict(facts)
        self._config = dict(config)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._facts:
            return self._facts[name]
        if name in self._config:
            return self._config[name]
        raise AttributeError(f"the described config has no field {name!r}")

    def to_dict(self) -> dict:
        return dict(self._config)


def _check_dims(spec: str, config) -> None:
    """The memory and time models read d, L, H and V of the config: a family without one of
    them (an attention-free model such as Mamba or RWKV) is refused here, naming it."""
    missing = [SIZE_KEYS[k] for k in ("d", "L", "H", "V")
               if not isinstance(_value(config, SIZE_KEYS[k]), int)]
    if missing:
        raise InputError(f"workload {spec!r}: the {config.model_type} config has no "
                         f"{' or '.join(missing)}, which afford's memory and time models read "
                         "(attention-free or per-layer families are not supported)")


def _value(config, name: str):
    try:
        return getattr(config, name)
    except Exception:  # noqa: BLE001 - a per-layer attribute raises its own error type
        return None
