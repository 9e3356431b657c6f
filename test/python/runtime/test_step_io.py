"""The per-step rules of the CuPy backend's device inputs and outputs (runtime/cuda/step_io.py),
on the CPU: which steps put their input copies inside a graph, how many graphs are
captured, and how often the outputs' memory is allocated, counted over step sequences.
The expected counts are worked out by hand from the rules in the module docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.runtime.cuda.step_io import InGraphCopies, OutputBlocks, block_count

A = (("x", 0x1000), ("y", 0x2000))
B = (("x", 0x3000), ("y", 0x4000))
C = (("x", 0x5000), ("y", 0x6000))


def run(rule: InGraphCopies, steps: list) -> list[bool]:
    return [rule.choose(s) for s in steps]


def test_fixed_device_batches_are_copied_inside_the_graph_from_the_second_step():
    rule = InGraphCopies()
    # step 1: addresses seen once (copy outside); step 2: the same again (capture); then replay
    assert run(rule, [A] * 5) == [False, True, True, True, True]
    assert rule.captures == 1 and rule.captured(A)


def test_fresh_addresses_every_step_never_capture():
    rule = InGraphCopies()
    steps = [(("x", 0x1000 * k), ("y", 0x1000 * k + 8)) for k in range(1, 50)]
    assert not any(run(rule, steps))
    assert rule.captures == 0


def test_double_buffering_captures_each_buffer_pair_once_it_repeats():
    rule = InGraphCopies()
    # A B A B ...: A never repeats back to back, so nothing is captured ...
    assert not any(run(rule, [A, B] * 4))
    # ... until a pair repeats; from then on that pair replays inside its graph
    assert run(rule, [B, A, B, A]) == [True, False, True, False]
    assert rule.captures == 1 and rule.captured(B) and not rule.captured(A)


def test_least_recently_used_graphs_are_evicted_beyond_the_limit():
    rule = InGraphCopies(limit=2)
    run(rule, [A, A, B, B])
    assert rule.take_evicted() == []
    run(rule, [A, C, C])  # A used (most recent), then C captured: B is the oldest
    assert rule.take_evicted() == [B] and rule.take_evicted() == []
    assert rule.captured(A) and rule.captured(C) and not rule.captured(B)


def test_captures_stop_at_the_cap():
    rule = InGraphCopies(limit=1, max_captures=2)
    run(rule, [A, A, B, B, C, C, C])
    assert rule.captures == 2 and rule.captured(B) and not rule.captured(C)
    assert rule.choose(B) is True and rule.choose(C) is False


def test_no_device_inputs_never_use_a_copying_graph():
    rule = InGraphCopies()
    assert run(rule, [(), (), ()]) == [False, False, False] and rule.captures == 0


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="limit must be >= 1"):
        InGraphCopies(limit=0)


def test_outputs_are_distinct_views_of_blocks_allocated_once_per_count_steps():
    calls = []

    def alloc(shape, dtype):
        calls.append(shape)
        return np.zeros(shape, dtype)

    blocks = OutputBlocks((), np.float32, alloc, count=4)
    outs = [blocks.next() for _ in range(10)]
    assert calls == [(4,), (4,), (4,)]  # 10 steps, blocks of 4: three allocations
    for k, out in enumerate(outs):
        out[...] = k
    # no output shares memory with another: each still holds its own value
    assert [float(o) for o in outs] == list(range(10))
    assert outs[0].base is not outs[4].base and outs[0].shape == ()


def test_block_count_keeps_a_block_within_its_budget():
    assert block_count(4) == 256  # a loss scalar
    assert block_count(4096) == 16
    assert block_count(1 << 20) == 1
