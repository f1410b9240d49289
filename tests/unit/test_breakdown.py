"""Where the peak goes (afford.fit.memory.breakdown): the step structure found in a history, every
allocation classed by its lifetime, and the classes summing to the peak."""

from __future__ import annotations

import pytest

from afford.fit.memory.allocator import Allocator, replay
from afford.fit.memory.breakdown import CLASSES, breakdown, classify, find_steps
from afford.fit.memory.trace_scaling import from_history
from tests.alloc_programs import MIB, program


def test_steps_are_found_from_the_repeating_sizes():
    t = program(4, 512)  # build: w0, w1, pos, pool; a warm step allocates 2*3 + 3 = 9
    steps = find_steps(t)
    assert (steps.first_step, steps.period) == (4, 9)
    assert steps.second_step == t.n_allocs - 2 * 9 and steps.last_step == t.n_allocs - 9


def test_every_allocation_is_classed_by_its_lifetime():
    t = program(2, 512, cold=True)
    kinds = classify(t, find_steps(t))
    by_size = {}
    for k, kind in enumerate(kinds):
        by_size.setdefault(t.sizes[k], set()).add(kind)
    assert by_size[32 * MIB] == {"workspaces"}
    assert kinds[:4] == ["parameters"] * 4
    last = kinds[find_steps(t).last_step:]
    # act0, tmp0, scores0, act1, tmp1, scores1, gw1, gw0, gpos
    assert last == ["activations", "temporaries", "activations"] * 2 + ["gradients"] * 3
    first = kinds[find_steps(t).first_step:find_steps(t).second_step]
    assert first[-6:] == ["optimizer_state"] * 6  # m and v of w0, w1, pos


def test_the_classes_sum_to_the_peak_worked_by_hand():
    # B=4, s=512, d=64, 2 layers: the last step peaks when layer 1 allocates its scores
    # while its temporary is live: the weights 16384 + 32768 + pos 131072 and the input
    # pool 65536; AdamW's m and v (2 x 180224); per layer an activation 4*B*s*d = 0.5 MiB
    # and scores 2*4*B*s^2 = 8 MiB; layer 1's temporary 16*B*s*d = 2 MiB; no gradient yet.
    b = breakdown(program(4, 512))
    assert b.parameters_bytes == 245760
    assert b.optimizer_state_bytes == 360448
    assert b.activations_bytes == 2 * (MIB // 2) + 2 * 8 * MIB
    assert b.temporaries_bytes == 2 * MIB
    assert b.gradients_bytes == b.workspaces_bytes == 0
    parts = sum(getattr(b, f"{c}_bytes") for c in CLASSES)
    assert parts == b.allocated_bytes
    assert parts + b.slack_bytes == b.reserved_bytes
    assert b.allocated_bytes == replay(program(4, 512).events())[0].peak_allocated_bytes
    assert sum(b.shares().values()) == pytest.approx(1.0)


def test_blocks_alive_before_the_history_count_as_workspaces():
    a = Allocator()
    a.malloc(-1, 32 * MIB)
    b = breakdown(program(4, 512), allocator=a)
    assert b.workspaces_bytes == 32 * MIB
    assert sum(getattr(b, f"{c}_bytes") for c in CLASSES) == b.allocated_bytes


def test_a_size_that_follows_the_data_does_not_hide_the_steps():
    """Steps of 1,000 allocations or more may differ at one slot in a thousand (a buffer
    sized by the batch's distinct tokens); smaller steps must repeat exactly."""
    def steps(n_allocs, odd):
        rows, addr = [["alloc", 0, 7, 0]], 1  # the build: one weight
        for k in range(3):
            for i in range(n_allocs):
                size = 100 + i + (k if i == odd else 0)  # slot ``odd`` differs per step
                rows += [["alloc", addr, size, 0], ["free_completed", addr, size, 0]]
                addr += 1
        return from_history(1, 1, rows)

    got = find_steps(steps(1000, odd=500))
    assert (got.first_step, got.period, got.last_step) == (1, 1000, 2001)
    with pytest.raises(ValueError, match="do not repeat"):
        find_steps(steps(999, odd=500))


def test_a_history_without_repeated_steps_is_refused():
    t = from_history(1, 1, [["alloc", 1, 100, 0], ["alloc", 2, 200, 0]])
    with pytest.raises(ValueError, match="do not repeat"):
        find_steps(t)


def test_two_identical_steps_are_not_enough_a_third_is_needed():
    """Steps are told apart by the sizes repeating after a first step; two steps and
    nothing before them (n = 2 x period) cannot show where the warm step starts."""
    step = [["alloc", 1, 100, 0], ["alloc", 2, 200, 0], ["free_completed", 1, 100, 0],
            ["free_completed", 2, 200, 0]]
    with pytest.raises(ValueError, match="do not repeat"):
        find_steps(from_history(1, 1, step * 2))
    three = find_steps(from_history(1, 1, step * 3))
    # nothing before the first step: no build, the first step begins at slot 0
    assert (three.first_step, three.period, three.second_step, three.last_step) == (0, 2, 2, 4)


def test_one_allocation_before_two_identical_steps_shows_where_the_second_begins():
    """The boundary of the rule above: anything before the last two repeated steps (here a
    single allocation) shows where the second step starts, so the steps are found."""
    step = [["alloc", 1, 100, 0], ["alloc", 2, 200, 0], ["free_completed", 1, 100, 0],
            ["free_completed", 2, 200, 0]]
    steps = find_steps(from_history(1, 1, [["alloc", 9, 50, 0]] + step * 2))
    assert (steps.period, steps.second_step, steps.last_step) == (2, 1, 3)


def test_a_prefix_that_shares_no_size_with_the_warm_step_is_all_first_step():
    """Sizes 7, 8, 9, then the warm step (1, 2) twice: nothing before the second step aligns
    with it, so no build can be told apart from the first step, and the first step is taken
    to begin at slot 0 (its never-freed blocks are not claimed as parameters)."""
    rows = [["alloc", a, size, 0] for a, size in ((1, 7), (2, 8), (3, 9))]
    step = [["alloc", 10, 1, 0], ["alloc", 11, 2, 0], ["free_completed", 10, 0, 0],
            ["free_completed", 11, 0, 0]]
    t = from_history(1, 1, rows + step * 2)
    steps = find_steps(t)
    assert (steps.first_step, steps.period, steps.second_step) == (0, 2, 3)
    assert "parameters" not in classify(t, steps)[:3]


def test_at_a_tie_the_breakdown_is_taken_when_the_peak_is_first_reached():
    """A weight (8 KiB), then three steps: free the last gradient, activation 4 KiB,
    temporary 2 KiB (freed), gradient 2 KiB, activation freed. The last step reaches its
    peak (14 KiB) twice: with the temporary live, then with the gradient in the temporary's
    block. As the replay's peak event, the breakdown takes the first moment."""
    rows, addr = [["alloc", 1, 8192, 0]], 100
    for k in range(3):
        if k:
            rows.append(["free_completed", addr - 1, 0, 0])  # zero_grad: last step's grad
        rows += [["alloc", addr, 4096, 0], ["alloc", addr + 2, 2048, 0],
                 ["free_completed", addr + 2, 0, 0], ["alloc", addr + 3, 2048, 0],
                 ["free_completed", addr, 0, 0]]
        addr += 4
    t = from_history(1, 1, rows)
    b = breakdown(t)
    assert b.allocated_bytes == 8192 + 4096 + 2048
    assert (b.parameters_bytes, b.activations_bytes, b.temporaries_bytes,
            b.gradients_bytes) == (8192, 4096, 2048, 0)
    # the last step's ops: free, alloc act, alloc tmp, free tmp, alloc grad, free act
    assert b.peak_event == len(t.ops) - 4  # the temporary's allocation, not the gradient's


def test_a_last_step_that_peaks_at_its_first_allocation():
    """A weight (8 KiB), then three steps of a 4 KiB temporary then a 1 KiB one, each freed
    at once: the last step peaks at its very first op, which the breakdown counts."""
    rows = [["alloc", 1, 8192, 0]]
    for k in range(3):
        rows += [["alloc", 10 + k, 4096, 0], ["free_completed", 10 + k, 0, 0],
                 ["alloc", 20 + k, 1024, 0], ["free_completed", 20 + k, 0, 0]]
    t = from_history(1, 1, rows)
    b = breakdown(t)
    assert b.steps.last_step == 5 and b.peak_event == t.ops.index(5) == len(t.ops) - 4
    assert (b.allocated_bytes, b.parameters_bytes, b.temporaries_bytes) == \
        (8192 + 4096, 8192, 4096)


def test_a_gradient_freed_by_the_next_zero_grad_marks_where_optimizer_state_begins():
    """Step one: activation A, a cuBLAS workspace W, gradient G, A freed, then the moment M
    made lazily by optimizer.step (the step's last allocation); zero_grad frees G at the
    start of step two, before step two allocates anything. G outlives step one's last
    allocation, so it is step one's last gradient: W (allocated before it, kept) is a
    workspace and M (after it, kept) optimizer state."""
    MB = 1 << 20
    P, A, W, G, M = 1 * MB, 2 * MB, 3 * MB, 4 * MB, 5 * MB
    h = [["alloc", 10, P, 0],                                          # build: a parameter
         ["alloc", 11, A, 0], ["alloc", 12, W, 0], ["alloc", 13, G, 0],
         ["free_completed", 11, A, 0], ["alloc", 14, M, 0],           # step one
         ["free_completed", 13, G, 0], ["alloc", 15, A, 0], ["alloc", 16, G, 0],
         ["free_completed", 15, A, 0],                                 # step two
         ["free_completed", 16, G, 0], ["alloc", 17, A, 0], ["alloc", 18, G, 0],
         ["free_completed", 17, A, 0]]                                 # step three
    t = from_history(1, 1, h)
    steps = find_steps(t)
    assert (steps.first_step, steps.second_step, steps.period) == (1, 5, 2)
    kinds = classify(t, steps)
    assert kinds[:5] == ["parameters", "temporaries", "workspaces", "temporaries",
                         "optimizer_state"]
    # the last step: A is freed after G is made (saved for backward), G is kept
    assert kinds[7:] == ["activations", "gradients"]


def test_without_a_gradient_freed_later_every_block_step_one_keeps_is_optimizer_state():
    """Nothing allocated in step one outlives the step's last allocation (no gradient freed
    by the next zero_grad), so no block marks where the gradients end: every block step
    one keeps counts as optimizer state, its very first allocation included."""
    MB = 1 << 20
    P, X, T, M = 1 * MB, 2 * MB, 3 * MB, 4 * MB
    h = [["alloc", 10, P, 0],                                          # build
         ["alloc", 11, X, 0], ["alloc", 12, T, 0], ["free_completed", 12, T, 0],
         ["alloc", 13, M, 0],                                          # step one keeps X, M
         ["alloc", 14, X, 0], ["alloc", 15, T, 0], ["free_completed", 15, T, 0],
         ["free_completed", 14, X, 0],                                 # step two
         ["alloc", 16, X, 0], ["alloc", 17, T, 0], ["free_completed", 17, T, 0],
         ["free_completed", 16, X, 0]]                                 # step three
    t = from_history(1, 1, h)
    steps = find_steps(t)
    assert (steps.first_step, steps.second_step, steps.period) == (1, 4, 2)
    assert classify(t, steps)[:4] == ["parameters", "optimizer_state", "temporaries",
                                      "optimizer_state"]
