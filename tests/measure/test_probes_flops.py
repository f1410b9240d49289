"""FLOPs of one training step of each built-in workload, counted by FlopCounterMode, against
hand counts.

Conventions of the counter (torch.utils.flop_counter): a matmul (m x k) @ (k x n) is
2 m n k; a bias add, elementwise work, softmax, LayerNorm, embedding and the optimizer count
0; attention (SDPA) forward is 2 bmms of 2 B H s s dh = 4 B s^2 d (causality not
discounted); SDPA backward is 5 such bmms (the scores recomputed, then grad-scores, grad-V,
grad-Q, grad-K) = 10 B s^2 d. In the backward, a matmul costs its forward again for each
operand that needs a gradient: the weight always, the input only when it requires grad.

softmax (n, s, d; T = n s tokens; x needs no grad):
  forward : qkv 2 T d 3d = 6 T d^2; q k^T 2 n s^2 d; p v 2 n s^2 d; out 2 T d^2
  backward: qkv weight only 6 T d^2; q k^T both 4 n s^2 d; p v both 4 n s^2 d; out both 4 T d^2
  total   : 18 T d^2 + 12 n s^2 d

scan (n, s, d, H; T = n s; x needs no grad; the complex bmm counted like a real one):
  forward : inp 2 T d^2; gate 2 T d (2H) = 4 T d H; path @ u 2 (n H) s^2 (d/H) = 2 n s^2 d;
            out 2 T d^2
  backward: inp weight 2 T d^2; gate weight 4 T d H; path @ u both 4 n s^2 d; out both 4 T d^2
  total   : 10 T d^2 + 8 T d H + 6 n s^2 d

tinylm (B, s, d, L, V = 256; T = B s; the embeddings are parameters, so every block input
needs a gradient):
  per layer forward : qkv 6 T d^2 + proj 2 T d^2 + fc 8 T d^2 + fc2 8 T d^2 = 24 T d^2;
                      attention 4 B s^2 d
  per layer backward: 48 T d^2; attention 10 B s^2 d
  head (tied)       : forward 2 T d V, backward 4 T d V
  total             : L (72 T d^2 + 14 B s^2 d) + 6 T d V
"""

import pytest
import torch

from afford.measure.probes.flops import count_step_flops
from afford.workloads.scan import Scan
from afford.workloads.softmax import Softmax
from afford.workloads.tinylm import TinyLM, TinyLMConfig

CPU = torch.device("cpu")


def softmax_flops(n, s, d):
    T = n * s
    return 18 * T * d * d + 12 * n * s * s * d


def scan_flops(n, s, d, H):
    T = n * s
    return 10 * T * d * d + 8 * T * d * H + 6 * n * s * s * d


def tinylm_flops(B, s, d, L, V=256):
    T = B * s
    return L * (72 * T * d * d + 14 * B * s * s * d) + 6 * T * d * V


def count(workload, value, mode="fp32", device=CPU):
    built = workload.build(workload.shape(value), device, seed=0)
    return count_step_flops(built, mode, device)


@pytest.mark.parametrize("n,s,d", [(4, 64, 64), (2, 32, 16)])
def test_softmax_counts_match_the_hand_count(n, s, d):
    total, by_op = count(Softmax(n=n, d=d), s)
    assert total == softmax_flops(n, s, d)
    assert softmax_flops(4, 64, 64) == 31_457_280   # 18*256*4096 + 12*4*4096*64


@pytest.mark.parametrize("n,s,d,H", [(2, 64, 64, 4), (1, 16, 32, 2)])
def test_scan_counts_match_the_hand_count(n, s, d, H):
    total, _ = count(Scan(n=n, d=d, heads=H), s)
    assert total == scan_flops(n, s, d, H)
    assert scan_flops(2, 64, 64, 4) == 8_650_752    # 5242880 + 262144 + 3145728


@pytest.mark.parametrize("B,s,d,L,H", [(4, 16, 64, 2, 2), (2, 32, 32, 3, 4)])
def test_tinylm_counts_match_the_hand_count(B, s, d, L, H):
    w = TinyLM(TinyLMConfig(d=d, L=L, H=H, seq=s, batch=B))
    total, by_op = count(w, s)
    assert total == tinylm_flops(B, s, d, L)
    assert tinylm_flops(4, 16, 64, 2) == 45_875_200
    # the CPU attention kernel is counted too (registered by afford, not by torch)
    assert by_op["aten._scaled_dot_product_flash_attention_for_cpu"] == L * 4 * B * s * s * d
    assert by_op["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == \
        L * 10 * B * s * s * d


def test_autocast_does_not_change_the_count():
    w = TinyLM(TinyLMConfig(d=32, L=1, H=2, seq=16, batch=2))
    assert count(w, 16, "bf16")[0] == count(w, 16, "fp32")[0] == tinylm_flops(2, 16, 32, 1)


@pytest.mark.cuda
def test_tinylm_counts_the_same_on_cuda_in_bf16():
    w = TinyLM(TinyLMConfig(d=64, L=2, H=2, seq=256, batch=4))
    total, by_op = count(w, 256, "bf16", torch.device("cuda"))
    assert total == tinylm_flops(4, 256, 64, 2), by_op


def test_grouped_query_attention_is_counted_with_the_query_heads(monkeypatch):
    """A Llama of 4 query heads and 2 key/value heads (head dim 16), B 2, s 16, 2 layers,
    whose SDPA kernel receives K and V unexpanded. Each query head attends to its group's
    key/value head, so the work is that of 4 heads: forward 4 B H s^2 dh, backward
    10 B H s^2 dh per layer. torch < 2.12 asserted here ("sdpa_flop_count: query/key/value
    shapes are incompatible"); afford's own formulas must not depend on torch's."""
    import importlib.util

    import torch.utils.flop_counter as fc

    from afford.measure.probes.flops import sdpa_backward_flops, sdpa_forward_flops
    from afford.workloads import resolve

    assert sdpa_forward_flops((2, 4, 16, 16), (2, 2, 16, 16), (2, 2, 16, 16)) == \
        4 * 2 * 4 * 16**2 * 16
    assert sdpa_backward_flops((2, 4, 16, 16), (2, 4, 16, 16), (2, 2, 16, 16),
                               (2, 2, 16, 16)) == 10 * 2 * 4 * 16**2 * 16
    with pytest.raises(ValueError, match="divide"):
        sdpa_forward_flops((2, 4, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16))
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed (pip install 'afford[hf]')")

    def old_torch(*args, **kwargs):
        raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible")

    monkeypatch.setattr(fc, "sdpa_flop_count", old_torch)
    monkeypatch.setattr(fc, "sdpa_backward_flop_count", old_torch)
    w = resolve("hf:llama@d64L2H4K2V512F128", "cpu")
    assert w.config.num_key_value_heads == 2
    built = w.build(w.shape(16), CPU, seed=0)
    _, by_op = count_step_flops(built, "fp32", CPU)
    attn = {op: n for op, n in by_op.items() if "attention" in op}
    per_layer = 2 * 4 * 16**2 * 16
    assert sum(n for op, n in attn.items() if "backward" not in op) == 2 * 4 * per_layer
    assert sum(n for op, n in attn.items() if "backward" in op) == 2 * 10 * per_layer
