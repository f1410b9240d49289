"""A family's size law past what any step holds (a fuzzed or hand-edited sizes section) is an
input error with the workload and the size named, not a validation error from inside a plan
(afford.schema.sizes_section.FamilyScaling.work; the fuzz campaign's edges family found
`afford ladder` failing so at 1e59)."""

from __future__ import annotations

import pytest

from afford.core.errors import InputError
from afford.schema.sizes_section import FamilyScaling


def _family(**update) -> FamilyScaling:
    base = dict(workload="tinylm", batch=8, seq=1024, layer_gemm=6.0 * 8 * 1024 * 12,
                outer_gemm=6.0 * 8 * 1024 * 32000, layer_attn=12.0 * 8 * 1024 * 1024,
                layer_params=12.0, outer_params=32000.0, head_dim=64, aspect=64.0,
                read_at="d512 L8", source="counted", max_rel_error=0.0)
    return FamilyScaling(**{**base, **update})


def test_a_plain_family_gives_its_work():
    w = _family().work(2048, 24, 16.0)
    assert w.d == 2048 and w.L == 24
    assert w.gemm_flops == pytest.approx(6.0 * 8 * 1024 * (12 * 24 * 2048**2 + 32000 * 2048))
    assert w.state_bytes == pytest.approx(16.0 * (12 * 24 * 2048**2 + 32000 * 2048))


@pytest.mark.parametrize("field, what", [("layer_gemm", "GEMM FLOPs"),
                                         ("layer_attn", "attention FLOPs"),
                                         ("layer_params", "parameters")])
def test_a_coefficient_past_any_step_is_an_input_error(field, what):
    with pytest.raises(InputError, match=rf"tinylm's size law gives .* {what} a step at "
                                         r"d2048 L24"):
        _family(**{field: 1e59}).work(2048, 24, 16.0)
