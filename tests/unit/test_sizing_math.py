"""fit/sizing's pure math on a hand-built memory law (no torch, no certificate): the budgeted
peak's three paths (reserved law, worst measured ratio, CPU RSS), the positive-peak check,
the INHERITED defaults' completeness check and the formula description."""

import pytest

from afford.core.errors import InputError
from afford.fit.memory import sizing
from afford.schema import memory_law
from afford.schema.memory_section import MemoryFit, MemoryLaw

DIMS = {"B": 2, "s": 8, "d": 4, "L": 1, "H": 1}
P = 100.0  # trainable parameters at every shape (params_per_s = 0)


def mfit(c_res, fixed=0.0, quantity="allocated"):
    return MemoryFit(quantity=quantity, form="states_plus_fixed", c_res=c_res, c_op=0.0,
                     fixed_bytes=fixed, s2_term=False, r2=1.0, residuals=[0.0], n_points=1)


def law(allocated, reserved=None, device_type="cuda", ratio=None, baseline=None):
    """A law at base dims DIMS: states = 2 B/param x P = 200 B; activations c_res x B*s*d*L
    = c_res x 64."""
    return MemoryLaw(workload="toy", mode="bf16", device_type=device_type,
                     dim_keys={"B": "batch", "s": "seq"}, base_shape={"batch": 2, "seq": 8},
                     base_dims=DIMS, ranges={k: [1, 1e9] for k in ("B", "s", "tokens", "bss")},
                     bytes_per_param=2.0, params_p0=P, params_per_s=0.0,
                     baseline_rss_bytes=baseline, allocated=allocated, reserved=reserved,
                     worst_reserved_ratio=ratio, shapes=[])


def test_budgeted_bytes_uses_the_reserved_law_ratio():
    # allocated 200 + 1 x 64 = 264 B; reserved 200 + 36 + 2 x 64 = 364 B: ratio 364/264
    lw = law(mfit(1.0), mfit(2.0, fixed=36.0, quantity="reserved"))
    assert memory_law.budgeted_bytes(lw, DIMS, P) == pytest.approx(364.0)
    # a caller's own allocated figure is scaled by the same ratio
    assert memory_law.budgeted_bytes(lw, DIMS, P, allocated_bytes=528.0) == pytest.approx(728.0)


def test_budgeted_bytes_never_below_allocated_when_the_reserved_law_dips():
    # reserved law 200 + 0.5 x 64 = 232 B < allocated 264 B: reserved taken = allocated
    lw = law(mfit(1.0), mfit(0.5, quantity="reserved"))
    assert memory_law.budgeted_bytes(lw, DIMS, P) == pytest.approx(264.0)
    pred = sizing.predict(lw, {}, "run")
    assert pred.budgeted == pytest.approx(264.0) and pred.ratio.value == pytest.approx(1.0)
    assert any("fell below allocated" in n for n in pred.notes)
    # a reserved law that meets allocated exactly has not fallen below it
    same = sizing.predict(law(mfit(1.0), mfit(1.0, quantity="reserved")), {}, "run")
    assert same.budgeted == pytest.approx(264.0) and same.ratio.value == pytest.approx(1.0)
    assert not any("fell below" in n for n in same.notes)


def test_budgeted_bytes_without_a_reserved_law_uses_the_worst_measured_ratio():
    assert memory_law.budgeted_bytes(law(mfit(1.0), ratio=1.25), DIMS, P) == pytest.approx(330.0)
    # no ratio measured either: reserved taken = allocated
    assert memory_law.budgeted_bytes(law(mfit(1.0)), DIMS, P) == pytest.approx(264.0)


def test_cpu_budget_is_baseline_plus_rss_increment():
    lw = law(mfit(1.0, quantity="rss_increment"), device_type="cpu", baseline=1000.0)
    assert memory_law.budgeted_bytes(lw, DIMS, P) == pytest.approx(1264.0)


def test_max_batch_of_none_is_flagged_and_of_one_in_range_is_not():
    # reserved = allocated = 200 + 64 B at B = 2 (32 B per sequence): B = 1 needs 232 B
    lw = law(mfit(1.0))
    one = sizing.max_batch(lw, {}, 240.0, "run")
    assert one.value == 1 and one.extrapolated is False and "<= 240 B at s=8" in one.source
    none = sizing.max_batch(lw, {}, 231.0, "run")
    assert none.value == 0 and none.extrapolated is True  # nothing fits: no fitted shape says so


def test_frozen_weights_scale_as_layers_times_width_squared():
    lw = law(mfit(1.0)).model_copy(update={"frozen_params": 1000.0, "frozen_bytes": 2000.0})
    assert memory_law.frozen_at(lw, DIMS) == (1000.0, 2000.0)
    # d 4 -> 8 and L 1 -> 2: x (2 x 64) / (1 x 16) = 8
    assert memory_law.frozen_at(lw, {**DIMS, "d": 8, "L": 2}) == (8000.0, 16000.0)


def test_a_cuda_peak_must_be_positive_but_may_be_tiny():
    # fixed -199.5 B: the law predicts 200 - 199.5 + 0 = 0.5 B, a (silly) positive peak
    assert memory_law.law_bytes(law(mfit(0.0, fixed=-199.5)), DIMS, P) == pytest.approx(0.5)
    for fixed in (-200.0, -300.0):  # 0 B and -100 B are not peaks
        with pytest.raises(InputError, match="not a peak"):
            memory_law.law_bytes(law(mfit(0.0, fixed=fixed)), DIMS, P)
    # on a CPU the law is of the RSS increment, which may be <= 0 at a tiny shape
    cpu = law(mfit(0.0, fixed=-300.0, quantity="rss_increment"), device_type="cpu",
              baseline=1000.0)
    assert memory_law.law_bytes(cpu, DIMS, P) == pytest.approx(-100.0)


@pytest.mark.parametrize("table,citation", [
    ({"bytes_per_param": 16.0, "c_res": 41.5, "c_op": 0.0}, ""),   # constants, no citation
    ({"bytes_per_param": 16.0, "c_res": 41.5}, "afford on H200"),  # cited, c_op missing
])
def test_inherited_defaults_need_every_constant_and_a_citation(table, citation):
    d, why = sizing.inherited_defaults("bf16", {"source": {"citation": citation},
                                                "modes": {"bf16": table}})
    assert d is None and "no INHERITED memory defaults for bf16" in why


def test_formula_tag_states_the_constants_it_used():
    # 4x rule: 16 B/param x 100 params, no activation terms (c_res = c_op = 0)
    tag = sizing.formula_tag(sizing.four_x_model_size(), law(mfit(1.0)), DIMS, P)
    assert tag.value == pytest.approx(1600.0)
    assert "16 B/param x 100 params + L*(0.00 B*s*d + 0 B*H*s^2)" in tag.source
    # a default with no constants at all still prints zeros, not a crash
    bare = sizing.Defaults(key="user", name="bare", citation="me")
    tag = sizing.formula_tag(bare, law(mfit(1.0)), DIMS, P)
    assert tag.value == 0.0 and "0 B/param x 100 params + L*(0.00 B*s*d + 0 B*H*s^2)" in tag.source


def test_a_cpu_law_without_a_baseline_counts_the_increment_alone():
    lw = law(mfit(1.0, quantity="rss_increment"), device_type="cpu")
    assert memory_law.budgeted_bytes(lw, DIMS, P) == 264.0  # 200 + 64, no baseline added
    pred = sizing.predict(lw, {}, "run")
    assert pred.allocated.value == 264.0 and pred.reserved is None
    assert "peak RSS = measured baseline 0 B + toy bf16 memory law" in pred.allocated.source


@pytest.mark.parametrize("attention,keys", [
    (None, ["four_x_model_size"]),  # not attention: no Korthikanti
    ("materialised", ["four_x_model_size", "korthikanti_zero"]),  # eq. 1 as printed, once
    ("fused", ["four_x_model_size", "korthikanti_zero", "korthikanti_eq1_zero"]),
])
def test_defaults_compared_per_attention(attention, keys):
    lw = law(mfit(1.0)).model_copy(update={"attention": attention})
    got, notes = sizing.defaults_for(lw, {"source": {}, "modes": {}})
    assert [d.key for d in got] == keys
    assert notes and "no INHERITED memory defaults for bf16" in notes[0]


def test_frozen_weights_add_their_bytes_to_the_states():
    # 50 frozen parameters of 4 B (at the base dims): states 200 + 200 = 400 B; + 64 = 464
    lw = law(mfit(1.0)).model_copy(update={"frozen_params": 50.0, "frozen_bytes": 200.0})
    assert memory_law.law_bytes(lw, DIMS, P) == pytest.approx(464.0)
    assert sizing.predict(lw, {}, "run").states.value == pytest.approx(400.0)


def test_a_cpu_rss_must_be_positive_but_may_be_tiny():
    # baseline 0.5 B + an increment of 0 B: a (silly) positive RSS; 0 is not one
    cpu = law(mfit(0.0, fixed=-200.0, quantity="rss_increment"), device_type="cpu",
              baseline=0.5)
    assert memory_law.budgeted_bytes(cpu, DIMS, P) == pytest.approx(0.5)
    with pytest.raises(InputError, match="RSS peak of 0 B"):
        memory_law.budgeted_bytes(cpu.model_copy(update={"baseline_rss_bytes": 0.0}), DIMS, P)


def test_formula_tag_counts_frozen_weights_at_the_defaults_rate():
    lw = law(mfit(1.0)).model_copy(update={"frozen_params": 50.0, "frozen_bytes": 200.0})
    # 4x rule: 16 B x (100 trainable + 50 frozen) = 2400 B
    tag = sizing.formula_tag(sizing.four_x_model_size(), lw, DIMS, P)
    assert tag.value == pytest.approx(2400.0)
    assert "16 B/param x 100 params + 16 B x 50 frozen + L*(" in tag.source
    # a default without a frozen rate counts none, and says 0 B
    bare = sizing.Defaults(key="user", name="bare", citation="me", bytes_per_param=2.0)
    tag = sizing.formula_tag(bare, lw, DIMS, P)
    assert tag.value == pytest.approx(200.0) and " + 0 B x 50 frozen" in tag.source
