"""Differential tests of the whole compiler on unusual but valid train steps.

For each graph (graphs.py: fan-out into the loss, a weight used by two layers,
a param read before and after its update, swapped states, gradients and old
params as outputs, pre-activations used downstream, odd wrt lists, two
backwards, dropout, functions without ops, 1-wide chains) and for random steps
(random_steps.py, hypothesis-drawn seeds):

- the reference is the interpreter (runtime/reference.py) on the function after
  aicfc-expand-backward alone;
- fused IR (aicfc-fuse, aicfc-expand-backward, aicfc-fuse, canonicalize, cse)
  run by the interpreter must give the same results;
- the lowered program on the NumPy runtime, with and without
  aicfc-fold-inplace (and always memory-planned), must give the same outputs
  and the same param/state trajectory over three steps, the interpreter
  feeding each step's next values back as the following step's arguments;
- where named in graphs.GRADIENTS, the gradients equal central finite
  differences of the loss.

Everything runs in float64, fresh random inputs (not zeros), so any difference
beyond rounding (relative error 1e-9; finite differences 1e-6) is a bug in a
pass or in buffer aliasing, not precision.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aicfc.dialects.roles import arg_name, result_names
from aicfc.execute import LoadedFunction, run_pipeline
from aicfc.ir import parse_module
from aicfc.runtime.interpreter import find_func, run_func
from regressions.graphs import GRADIENTS, GRAPHS
from regressions.random_steps import random_step
from support import random_values, rel_err

TOL = 1e-9
FD_TOL = 1e-6
STEPS = 3
FUSED = "aicfc-fuse,aicfc-expand-backward,aicfc-fuse,canonicalize,aicfc-fold-constants,cse"

Values = dict[str, np.ndarray]


def random_arguments(text: str, rng: np.random.Generator, classes: int = 2) -> Values:
    return random_values(find_func(parse_module(text)), rng, classes)


def interpret(text: str, passes: str, args: Values) -> Values:
    module = parse_module(text)
    run_pipeline(module, passes)
    fn = find_func(module)
    names = [arg_name(a) or f"arg{i}" for i, a in enumerate(fn.body.blocks.first.args)]  # type: ignore[union-attr]
    outs = run_func(fn, [args[n] for n in names])
    return {
        n or f"result{j}": o for j, (n, o) in enumerate(zip(result_names(fn), outs, strict=True))
    }


def assert_compiles_like_the_interpreter(text: str, args: Values) -> None:
    want = interpret(text, "aicfc-expand-backward", args)
    fused = interpret(text, FUSED, args)
    for name, value in want.items():
        assert rel_err(fused[name], value) <= TOL, f"fused: {name}"
    for inplace in (False, True):
        loaded = LoadedFunction.load(parse_module(text), None, "numpy", inplace=inplace)
        feed = loaded.set_values(args)
        stored = {b.name for b in loaded.stored}
        current = dict(args)
        for step in range(STEPS):
            want = interpret(text, "aicfc-expand-backward", current)
            got = loaded.results(loaded.run(feed))
            assert set(got) == set(want) | stored
            for name, value in want.items():
                assert rel_err(got[name], value) <= TOL, f"inplace={inplace} step {step}: {name}"
            current.update({n: v for n, v in want.items() if n in stored})


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graph_compiles_like_the_interpreter(name: str) -> None:
    text = GRAPHS[name]
    assert_compiles_like_the_interpreter(text, random_arguments(text, np.random.default_rng(7)))


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_equal_finite_differences(name: str) -> None:
    text, (loss, pairs) = GRAPHS[name], GRADIENTS[name]
    args = random_arguments(text, np.random.default_rng(11))
    grads = interpret(text, "aicfc-expand-backward", args)
    eps = 1e-6
    for arg, grad in pairs:
        fd = np.zeros_like(args[arg])
        for idx in np.ndindex(fd.shape):
            up, down = dict(args), dict(args)
            up[arg], down[arg] = args[arg].copy(), args[arg].copy()
            up[arg][idx] += eps
            down[arg][idx] -= eps
            l_up = interpret(text, "aicfc-expand-backward", up)[loss]
            l_down = interpret(text, "aicfc-expand-backward", down)[loss]
            fd[idx] = (l_up - l_down) / (2 * eps)
        assert rel_err(grads[grad], fd) <= FD_TOL, f"{grad} = d{loss}/d{arg}"


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_train_steps_compile_like_the_interpreter(seed: int) -> None:
    text, classes = random_step(random.Random(seed))
    assert_compiles_like_the_interpreter(
        text, random_arguments(text, np.random.default_rng(seed), classes)
    )
