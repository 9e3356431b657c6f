"""The NumPy runtime: fixed buffers, in-place updates of params, checked inputs, copied outputs."""

# ruff: noqa: E501  (embedded MLIR keeps one op per line)

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from aicfc.backends import get_backend
from aicfc.dialects import exec as ex
from aicfc.ir import parse_module
from aicfc.runtime.backend import Backend
from aicfc.runtime.errors import BackendUnavailable, ExecError, InputError
from aicfc.runtime.interpreter import find_func, run_func
from aicfc.runtime.numpy.backend import NumpyBackend
from support import exec_programs, rel_err

TRAIN = """
func.func @train_step(%x: tensor<8x3xf32> {aicfc.role = "input", aicfc.name = "x"},
                      %t: tensor<8x2xf32> {aicfc.role = "input", aicfc.name = "target"},
                      %w: tensor<2x3xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
                      %b: tensor<2xf32> {aicfc.role = "param", aicfc.name = "fc.bias"},
                      %buf: tensor<2x3xf32> {aicfc.role = "state", aicfc.name = "fc.weight.momentum_buffer"})
    -> (tensor<f32> {aicfc.name = "loss"}, tensor<2x3xf32> {aicfc.name = "fc.weight"},
        tensor<2x3xf32> {aicfc.name = "fc.weight.momentum_buffer"}, tensor<2xf32> {aicfc.name = "fc.bias"}) {
  %p = graph.gemm_epilogue %x, %w bias %b transpose_b : (tensor<8x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<8x2xf32>
  %l = graph.mse_loss %p, %t : tensor<8x2xf32> -> tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %dp = autodiff.mse_loss_grad %p, %t, %one : (tensor<8x2xf32>, tensor<8x2xf32>, tensor<f32>) -> tensor<8x2xf32>
  %dw = graph.matmul %dp, %x transpose_a : (tensor<8x2xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  %db = graph.reduce_sum %dp axes = [0] : tensor<8x2xf32> -> tensor<2xf32>
  %h_lr = graph.constant dense<0.1> : tensor<f64>
  %h_mu = graph.constant dense<0.9> : tensor<f64>
  %h_wd = graph.constant dense<0.0> : tensor<f64>
  %h_one = graph.constant dense<1.0> : tensor<f32>
  %w1, %buf1 = autodiff.sgd_step %w, %dw lr(%h_lr) momentum(%h_mu) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) momentum_buffer(%buf) : tensor<2x3xf32>, tensor<f64>, tensor<f32>, tensor<f32> -> tensor<2x3xf32>
  %h_mu_1 = graph.constant dense<0.0> : tensor<f64>
  %b1 = autodiff.sgd_step %b, %db lr(%h_lr) momentum(%h_mu_1) weight_decay(%h_wd) grad_scale(%h_one) apply(%h_one) : tensor<2xf32>, tensor<f64>, tensor<f32>, tensor<f32>
  func.return %l, %w1, %buf1, %b1 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2xf32>
}
func.func @predict(%x: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "x"},
                   %w: tensor<2x3xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
                   %b: tensor<2xf32> {aicfc.role = "param", aicfc.name = "fc.bias"})
    -> (tensor<4x2xf32> {aicfc.name = "output"}) {
  %p = graph.gemm_epilogue %x, %w bias %b transpose_b : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  func.return %p : tensor<4x2xf32>
}
"""

NAMES = ("fc.weight", "fc.bias", "fc.weight.momentum_buffer")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def random_state(rng):
    return {
        "fc.weight": rng.standard_normal((2, 3)).astype(np.float32),
        "fc.weight.momentum_buffer": rng.standard_normal((2, 3)).astype(np.float32),
        "fc.bias": rng.standard_normal(2).astype(np.float32),
    }


def batch(rng):
    return {
        "x": rng.standard_normal((8, 3)).astype(np.float32),
        "target": rng.standard_normal((8, 2)).astype(np.float32),
    }


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "copy-back"])
def test_param_is_the_same_array_object_and_updated_in_place(rng, fold):
    backend = get_backend("numpy")
    store = backend.create_store()
    step = backend.load(exec_programs(TRAIN, fold=fold)["train_step"], store)
    state = random_state(rng)
    store.load_state_dict(state)
    weight = store["fc.weight"]
    before = weight.copy()
    data = batch(rng)
    step.run(data)
    assert store["fc.weight"] is weight
    assert step.buffer("fc.weight") is weight
    assert not np.allclose(weight, before)
    # The new value is the interpreter's (JAX-style) next value, to 1e-6.
    module = parse_module(TRAIN)
    want = run_func(find_func(module, "train_step"), {**data, **state})
    assert rel_err(weight, want[1]) < 1e-6
    assert rel_err(store["fc.weight.momentum_buffer"], want[2]) < 1e-6


def test_folded_program_writes_the_param_buffer_directly():
    program = exec_programs(TRAIN)["train_step"]
    sgd = [
        op for op in ex.launches(program) if getattr(op, "kernel_name", "") == "numpy.sgd_step_out"
    ]
    assert len(sgd) == 2
    for launch in sgd:
        assert launch.outputs[0] is launch.inputs[0]
    assert not any(isinstance(op, ex.CopyOp) for op in ex.launches(program))


def test_predict_sees_the_parameters_that_training_updated(rng):
    backend = get_backend("numpy")
    store = backend.create_store()
    programs = exec_programs(TRAIN)
    step = backend.load(programs["train_step"], store)
    predict = backend.load(programs["predict"], store)
    assert predict.buffer("fc.weight") is step.buffer("fc.weight")
    store.load_state_dict(random_state(rng))
    for _ in range(3):
        step.run(batch(rng))
    x = rng.standard_normal((4, 3)).astype(np.float32)
    out = predict.run({"x": x})["output"]
    w, b = store.state_dict()["fc.weight"], store.state_dict()["fc.bias"]
    assert rel_err(out, x @ w.T + b) < 1e-6


def test_outputs_are_copies_that_later_steps_do_not_change(rng):
    backend = get_backend("numpy")
    store = backend.create_store()
    step = backend.load(exec_programs(TRAIN)["train_step"], store)
    store.load_state_dict(random_state(rng))
    data = batch(rng)
    first = step.run(data)["loss"]
    kept = float(first)
    second = step.run(data)["loss"]
    assert float(first) == kept
    assert float(second) < kept  # an SGD step on the same batch lowers the loss


def test_new_externals_are_zero_filled_with_the_declared_shape_and_dtype():
    backend = get_backend("numpy")
    store = backend.create_store()
    backend.load(exec_programs(TRAIN)["train_step"], store)
    assert store.names() == list(NAMES)
    assert store.spec("fc.weight") == ((2, 3), np.dtype(np.float32), "param")
    assert store.spec("fc.weight.momentum_buffer")[2] == "state"
    for name in NAMES:
        assert not store[name].any()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("target"), 'missing input "target" \\(float32\\[8, 2\\]\\)'),
        (lambda d: d.update(z=np.zeros(1)), "unknown input 'z' \\(inputs: x, target\\)"),
        (
            lambda d: d.update(x=np.zeros((4, 3), np.float32)),
            'input "x" expects float32\\[8, 3\\], got float32\\[4, 3\\]',
        ),
        (
            lambda d: d.update(x=np.zeros((8, 3), np.float64)),
            'input "x" expects float32\\[8, 3\\], got float64\\[8, 3\\]',
        ),
    ],
)
def test_bad_inputs_are_named(rng, change, message):
    backend = get_backend("numpy")
    step = backend.load(exec_programs(TRAIN)["train_step"], backend.create_store())
    data = batch(rng)
    change(data)
    with pytest.raises(InputError, match="@train_step: " + message):
        step.run(data)


def test_planned_tmps_are_views_into_one_arena():
    program = exec_programs(TRAIN)["train_step"]
    backend = get_backend("numpy")
    step = backend.load(program, backend.create_store())
    assert program.arena_size is not None
    assert step.arena.nbytes == program.arena_size.value.data
    tmps = [b for b in step.plan.buffers if b.role == "tmp"]
    assert tmps and all(b.offset is not None for b in tmps)
    for b in tmps:
        assert np.shares_memory(step.arrays[b.slot], step.arena)
    unplanned = backend.load(exec_programs(TRAIN, plan=False)["train_step"], backend.create_store())
    assert unplanned.arena.nbytes == 0


CE = """
func.func @ce(%x: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "logits"},
              %y: tensor<4xi32> {aicfc.role = "input", aicfc.name = "labels"})
    -> (tensor<f32> {aicfc.name = "loss"}) {
  %l = graph.cross_entropy %x, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
"""


def test_a_failing_kernel_is_named_with_its_location_and_operand_shapes():
    backend = get_backend("numpy")
    ce = backend.load(exec_programs(CE)["ce"], backend.create_store())
    labels = np.array([0, 1, 2, 7], np.int32)  # 7 is out of range for 3 classes
    with pytest.raises(ExecError) as e:
        ce.run({"logits": np.zeros((4, 3), np.float32), "labels": labels})
    msg = str(e.value)
    assert "@ce (<input>:5:" in msg
    assert (
        'kernel "numpy.cross_entropy_out" failed on (float32[4, 3], int32[4]): ValueError: '
        "labels must be in [0, 3) for 3 classes, got values from 0 to 7"
    ) in msg


def exec_module(kernel: str, dtype: str = "f32") -> ex.ProgramOp:
    text = f"""
exec.program @p {{
  %x = exec.buffer "x" : !exec.buffer<4x{dtype}, input>
  %y = exec.alloc : !exec.buffer<4x{dtype}, tmp>
  exec.graph {{
    exec.launch "{kernel}"(%x) outs(%y) : (!exec.buffer<4x{dtype}, input>) -> (!exec.buffer<4x{dtype}, tmp>)
  }}
  exec.output "y" %y : !exec.buffer<4x{dtype}, tmp>
}}
"""
    return next(o for o in parse_module(text).walk() if isinstance(o, ex.ProgramOp))


@pytest.mark.parametrize(
    ("kernel", "dtype", "message"),
    [
        ("numpy.conv2d", "f32", 'kernel "numpy.conv2d" is not registered'),
        ("cuda.relu", "f32", 'kernel "cuda.relu" is not registered'),
        ("numpy.relu", "f80", 'buffer "x" has element type f80'),
    ],
)
def test_load_refuses_programs_it_cannot_run(kernel, dtype, message):
    backend = get_backend("numpy")
    with pytest.raises(ExecError, match=message):
        backend.load(exec_module(kernel, dtype), backend.create_store())


def test_load_refuses_a_kernel_of_another_backend(monkeypatch):
    from aicfc.runtime import registry
    from aicfc.runtime.registry import KernelSpec

    spec = KernelSpec(
        "cuda.relu", "graph.relu", "cuda", ("f32",), source="e.cu", symbol="r", launcher="e:f"
    )
    monkeypatch.setitem(registry.KERNELS_BY_NAME, "cuda.relu", spec)
    backend = get_backend("numpy")
    with pytest.raises(ExecError, match=r'"cuda\.relu" is a cuda kernel; lower the program'):
        backend.load(exec_module("cuda.relu"), backend.create_store())


# --- finding a backend -------------------------------------------------------


def test_get_backend_numpy_and_unknown_name():
    assert isinstance(get_backend("numpy"), NumpyBackend)
    with pytest.raises(
        ValueError, match="unknown backend 'tpu'; expected one of numpy, cupy, cuda, auto"
    ):
        get_backend("tpu")


def test_cupy_backend_missing_module_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "aicfc.runtime.cuda.backend", None)
    with pytest.raises(BackendUnavailable, match=r"aicfc/runtime/cuda/backend\.py is missing"):
        get_backend("cupy")
    assert isinstance(get_backend("auto"), NumpyBackend)


def test_cupy_backend_without_gpu_is_a_clear_error_and_auto_falls_back(monkeypatch):
    class FakeCupy(NumpyBackend):
        name = "cupy"

        @classmethod
        def unavailable_reason(cls):
            return "CuPy sees no CUDA device"

    fake = types.ModuleType("aicfc.runtime.cuda.backend")
    fake.CupyBackend = FakeCupy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aicfc.runtime.cuda.backend", fake)
    with pytest.raises(BackendUnavailable, match="cannot run here: CuPy sees no CUDA device"):
        get_backend("cupy")
    assert type(get_backend("auto")) is NumpyBackend


def test_auto_picks_cupy_when_usable(monkeypatch):
    class FakeCupy(NumpyBackend):
        name = "cupy"

    fake = types.ModuleType("aicfc.runtime.cuda.backend")
    fake.CupyBackend = FakeCupy  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aicfc.runtime.cuda.backend", fake)
    assert type(get_backend("auto")) is FakeCupy
    assert issubclass(FakeCupy, Backend)


def test_a_store_of_another_backend_is_refused():
    class Other(NumpyBackend):
        name = "other"

    backend = get_backend("numpy")
    with pytest.raises(ExecError, match="a other store cannot back a numpy program"):
        backend.load(exec_programs(CE)["ce"], Other().create_store())
