"""FLOPs of one whole training step, counted with ``torch.utils.flop_counter.FlopCounterMode``.

The counter sees the aten ops that run: matmuls (mm, addmm, bmm, baddbmm), convolutions and
the fused attention kernels, forward and backward, each counted as 2 x multiply-adds (a
complex matmul is counted like a real one of the same shape). Elementwise work,
normalisation, softmax and the optimizer count 0: this is the arithmetic a matmul unit does,
which is what the GEMM ceiling measures. Attention is counted as if not causal (the counter
does not discount the masked half), and its backward includes the recomputed scores.

PyTorch registers the CUDA attention kernels but not the CPU one
(``_scaled_dot_product_flash_attention_for_cpu``), and before torch 2.12 its formulas assert
on grouped-query attention (key/value with fewer heads than the query: "sdpa_flop_count:
query/key/value shapes are incompatible").
So afford registers its own formulas for every SDPA kernel, CPU and CUDA: the same arithmetic
as PyTorch's, with the key/value heads broadcast to the query's (the kernel attends each
query head to its group's key/value head, so the work is that of h_q heads), and one workload
counts the same FLOPs on every device and torch version. :func:`count_flops_or_why` never
raises: a count that still fails is recorded with its reason.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from afford.workloads.base import Built, train_step

COUNTER = f"torch.utils.flop_counter.FlopCounterMode (torch {torch.__version__})"
SDPA_FORWARD = ("_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                "_scaled_dot_product_cudnn_attention")
SDPA_BACKWARD = tuple(f"{name}_backward" for name in SDPA_FORWARD)


def _heads(query, key, value) -> tuple[int, int, int, int, int, int]:
    """(b, h_q, s_q, s_k, d_qk, d_v) of (b, h, s, d) shapes; key/value may have fewer heads
    (grouped-query attention), as long as they divide the query's."""
    b, h_q, s_q, d_q = query
    b_k, h_k, s_k, d_k = key
    b_v, h_v, s_v, d_v = value
    if not (b == b_k == b_v and h_k == h_v and s_k == s_v and d_q == d_k) or h_q % h_k:
        raise ValueError(f"SDPA shapes q={tuple(query)} k={tuple(key)} v={tuple(value)}: "
                         "key/value heads must match and divide the query heads")
    return b, h_q, s_q, s_k, d_q, d_v


def sdpa_forward_flops(query, key, value) -> int:
    """q k^T and p v: 2 b h_q s_q s_k (d_qk + d_v) (causality not discounted)."""
    b, h, s_q, s_k, d_qk, d_v = _heads(query, key, value)
    return 2 * b * h * s_q * s_k * (d_qk + d_v)


def sdpa_backward_flops(grad_out, query, key, value) -> int:
    """The scores recomputed (d_qk), grad-scores (d_v), grad-V (d_v), grad-Q and grad-K
    (d_qk each): 2 b h_q s_q s_k (3 d_qk + 2 d_v)."""
    b, h, s_q, s_k, d_qk, d_v = _heads(query, key, value)
    return 2 * b * h * s_q * s_k * (3 * d_qk + 2 * d_v)


def _forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_forward_flops(query, key, value)


def _backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flops(grad_out, query, key, value)


def _custom_mapping() -> dict:
    aten = torch.ops.aten
    mapping = {getattr(aten, n): _forward for n in SDPA_FORWARD if hasattr(aten, n)}
    mapping.update({getattr(aten, n): _backward for n in SDPA_BACKWARD if hasattr(aten, n)})
    return mapping


def count_step_flops(built: Built, mode: str, device: torch.device
                     ) -> tuple[float, dict[str, float]]:
    """(total FLOPs, FLOPs per aten op) of one training step of ``built`` in ``mode``."""
    with FlopCounterMode(display=False, custom_mapping=_custom_mapping()) as counter:
        train_step(built, mode, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    by_op = {str(op): float(n)
             for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return float(counter.get_total_flops()), by_op


def count_flops_or_why(built: Built, mode: str, device: torch.device) -> dict:
    """The fields of :class:`afford.schema.point.StepFlops` for one step of ``built``:
    the counts by op class, or every count ``None`` and the error text. Never raises (a
    count that fails must not cost the measurement its point)."""
    from afford.fit.time.step_features import split_flops

    try:
        total, by_op = count_step_flops(built, mode, device)
    except Exception as exc:  # the counter's formulas assert on shapes they do not know
        return {"counter": COUNTER, "error": f"{type(exc).__name__}: {exc}"[:500]}
    split = split_flops(by_op)
    return {"total": total, "gemm": split["gemm"], "attn": split["attn"],
            "other": split["other"], "by_op": by_op, "counter": COUNTER}
