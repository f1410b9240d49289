"""FLOPs of one whole training step, counted with ``torch.utils.flop_counter.FlopCounterMode``.

The counter sees the aten ops that run: matmuls (mm, addmm, bmm, baddbmm), convolutions and
the fused attention kernels, forward and backward, each counted as 2 x multiply-adds (a
complex matmul is counted like a real one of the same shape). Elementwise work,
normalisation, softmax and the optimizer count 0: this is the arithmetic a matmul unit does,
which is what the GEMM ceiling measures. Attention is counted as if not causal (the counter
does not discount the masked half), and its backward includes the recomputed scores.

PyTorch registers the CUDA attention kernels but not the CPU one
(``_scaled_dot_product_flash_attention_for_cpu``); the same formulas are registered here for
it, so one workload counts the same FLOPs on every device.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import (FlopCounterMode, sdpa_backward_flop_count,
                                      sdpa_flop_count)

from afford.workloads.base import Built, train_step

COUNTER = f"torch.utils.flop_counter.FlopCounterMode (torch {torch.__version__})"


def _sdpa_cpu(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _sdpa_cpu_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


def _custom_mapping() -> dict:
    aten = torch.ops.aten
    mapping = {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu] = _sdpa_cpu
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu_backward] = _sdpa_cpu_backward
    return mapping


def count_step_flops(built: Built, mode: str, device: torch.device) -> tuple[float, dict[str, float]]:
    """(total FLOPs, FLOPs per aten op) of one training step of ``built`` in ``mode``."""
    with FlopCounterMode(display=False, custom_mapping=_custom_mapping()) as counter:
        train_step(built, mode, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    by_op = {str(op): float(n)
             for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return float(counter.get_total_flops()), by_op
