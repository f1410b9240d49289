"""The code paths a transformers model switches between at some size, read from its config:
what a certificate can know, without running it, of where its measurements stop describing
the step.

- **a sliding window** (``sliding_window``, unless ``use_sliding_window`` is false; per layer
  in ``layer_types``): past the window the attention masks what lies further back, and
  transformers builds that mask (and the kernel SDPA can use changes) where at shorter
  sequences a causal flag sufficed. Measured on an H200: a model traced at seq <= 512 with
  a 4,096-token window, asked at 2 x 8192, reserved 15 % more than the traced shapes
  predicted;
- **chunked attention** (``attention_chunk_size``): the same, at the chunk;
- **a learned position table** (OPT, GPT-2 and their kin: ``max_position_embeddings`` or
  ``n_positions`` for a model whose positions are an embedding): the model as configured
  cannot run a longer sequence (afford's workload grows the table to the sequence it is
  built at, so its figures there are of the grown model: said beside them);
- **routing to experts** (``num_local_experts``, ``num_experts``, ``n_routed_experts``): the
  tokens each expert takes, and so the step's memory, depend on the data at every size.

Pure and torch-free: a dict in, :class:`~afford.schema.memory_section.CodePath` records out
(the memory stage stores them in the law; a command reading an older certificate derives
them from the config file its workload names, :func:`from_spec`).
"""

from __future__ import annotations

import json
from pathlib import Path

from afford.schema.memory_section import CodePath

LEARNED_POSITIONS = {  # model_type -> the config key of its learned position table
    "opt": "max_position_embeddings", "gpt2": "n_positions", "gpt_neo": "max_position_embeddings",
    "gpt_bigcode": "n_positions", "biogpt": "max_position_embeddings",
    "xglm": "max_position_embeddings"}
EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
EMBEDDING_SORT_ABOVE = 3072  # indices: PyTorch's CUDA embedding backward sorts above this
# (aten/src/ATen/native/cuda/Embedding.cu, embedding_dense_backward_cuda: num_indices <= 3072
# takes the direct kernel), taking index buffers and a vocabulary-sized fp32 accumulator


def embedding_sort() -> CodePath:
    """The embedding backward's sorting path, which a step over more tokens than any traced
    shape may take unseen (CUDA)."""
    return CodePath(kind="size_switch", axis="tokens", threshold=EMBEDDING_SORT_ABOVE,
                    source=f"PyTorch's embedding backward sorts above {EMBEDDING_SORT_ABOVE} "
                    "indices", effect="the embedding backward sorts its indices (index "
                    "buffers and a vocabulary x width fp32 accumulator)")


def _int(v) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _sliding(config: dict) -> int | None:
    if config.get("use_sliding_window") is False:
        return None
    window = _int(config.get("sliding_window"))
    kinds = config.get("layer_types")
    if window is not None and isinstance(kinds, list) and kinds and \
            not any("sliding" in str(k) for k in kinds):
        return None  # a window named, but no layer of this model uses it
    return window


def code_paths(config: dict) -> list[CodePath]:
    """The switches of a transformers config (as ``config.to_dict()`` or config.json)."""
    out = []
    window = _sliding(config)
    if window is not None:
        out.append(CodePath(kind="sliding_window", axis="seq", threshold=window,
                            source=f"config sliding_window {window}",
                            effect="the attention masks what lies beyond the window (a "
                            "mask built, another attention kernel)"))
    chunk = _int(config.get("attention_chunk_size"))
    if chunk is not None:
        out.append(CodePath(kind="chunked_attention", axis="seq", threshold=chunk,
                            source=f"config attention_chunk_size {chunk}",
                            effect="the attention works in chunks (a mask built, another "
                            "attention kernel)"))
    key = LEARNED_POSITIONS.get(str(config.get("model_type", "")))
    limit = _int(config.get(key)) if key else None
    if limit is not None:
        out.append(CodePath(kind="position_limit", axis="seq", threshold=limit,
                            source=f"config {key} {limit}",
                            effect="the learned position table ends: the model as "
                            "configured cannot run a longer sequence (afford's workload "
                            "grows the table to the sequence)"))
    experts = next((_int(config.get(k)) for k in EXPERTS if _int(config.get(k))), None)
    if experts is not None:
        out.append(CodePath(kind="moe_routing", axis="tokens", threshold=None,
                            source=f"config: {experts} experts",
                            effect="routing to experts: each expert's tokens, and the step's "
                            "memory, depend on the data"))
    return out


def from_spec(spec: str, base: Path | None = None) -> list[CodePath] | None:
    """The code paths of an ``hf:`` workload whose spec names a config file (``hf:cfg/opt/
    config.json``), read from that file where it exists (relative to ``base``, else the
    working folder); ``None`` where the spec names none or the file is not there."""
    if not spec.startswith("hf:"):
        return None
    path = spec[3:].split("@")[0].split("+")[0]
    if not path.endswith(".json"):
        return None
    p = Path(path) if base is None or Path(path).is_absolute() else base / path
    try:
        config = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return code_paths(config) if isinstance(config, dict) else None
