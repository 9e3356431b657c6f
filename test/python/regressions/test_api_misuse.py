"""Regressions: Python API misuse that trained silently with invalid settings or
failed deep inside the compiler with a message that named neither the cause nor
the user's object."""

from __future__ import annotations

import math

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.dialects import graph

# --- optimizer hyperparameters: torch.optim's checks, at construction ----------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: optim.Adam(lr=-1.0), "Adam: lr must be >= 0 and finite, got -1.0"),
        (lambda: optim.Adam(lr=math.nan), "Adam: lr must be >= 0 and finite, got nan"),
        (lambda: optim.Adam(lr=math.inf), "Adam: lr must be >= 0 and finite, got inf"),
        (lambda: optim.Adam(eps=-1e-8), "Adam: eps must be >= 0 and finite, got -1e-08"),
        (lambda: optim.Adam(betas=(1.5, 0.9)), r"Adam: betas\[0\] must be in \[0, 1\), got 1.5"),
        (lambda: optim.Adam(betas=(0.9, 1.0)), r"Adam: betas\[1\] must be in \[0, 1\), got 1.0"),
        (lambda: optim.Adam(betas=(0.9, 0.99, 0.9)), "Adam: betas must be a pair"),  # type: ignore[arg-type]
        (lambda: optim.AdamW(weight_decay=-0.1), "AdamW: weight_decay must be >= 0"),
        (lambda: optim.SGD(lr=-0.1), "SGD: lr must be >= 0 and finite, got -0.1"),
        (lambda: optim.SGD(lr=0.1, momentum=-0.5), "SGD: momentum must be >= 0"),
        (lambda: optim.SGD(lr=0.1, weight_decay=math.nan), "SGD: weight_decay must be >= 0"),
    ],
)
def test_invalid_hyperparameters_are_refused_at_construction(make, message):
    # They used to compile and train (the verifier's checks never ran on built IR).
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("lr", ["0.1", None, True, [0.1]])
def test_a_non_number_hyperparameter_is_a_type_error(lr):
    # "0.1" used to reach xDSL's FloatAttr and fail as struct.error.
    with pytest.raises(TypeError, match=r"Adam: lr must be a number, got"):
        optim.Adam(lr=lr)  # type: ignore[arg-type]


def test_valid_hyperparameters_are_kept_as_floats():
    adam = optim.Adam(lr=np.float32(0.5), betas=(0, np.float64(0.5)), eps=0, weight_decay=1)
    assert (adam.lr, adam.betas, adam.eps, adam.weight_decay) == (0.5, (0.0, 0.5), 0.0, 1.0)
    assert all(type(v) is float for v in (adam.lr, *adam.betas, adam.eps, adam.weight_decay))
    assert optim.SGD(lr=1, momentum=0).state_names() == ()


# --- parameter dtypes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        (
            lambda: [nn.Linear(4, 3, dtype=np.int32)],
            "parameters must be float32 or float64, got 0.weight: int32, 0.bias: int32",
        ),
        (
            lambda: [nn.Linear(4, 3, dtype=np.float16)],
            "parameters must be float32 or float64, got 0.weight: float16, 0.bias: float16",
        ),
        (
            lambda: [nn.Linear(4, 3, dtype=np.float64), nn.Linear(3, 3)],
            r"parameters must share one dtype, got float32 and float64 \(0.weight: float64",
        ),
    ],
    ids=["int32_was_struct_error", "float16_was_no_ir_type", "mixed_was_vjp_type_mismatch"],
)
def test_parameter_dtypes_are_checked_when_compiling(layers, message):
    with pytest.raises(TypeError, match=message):
        aicfc.compile(nn.Sequential(*layers()), backend="numpy")


def test_a_float64_model_still_trains_in_float64():
    aicfc.manual_seed(0)
    prog = aicfc.compile(nn.Sequential(nn.Linear(4, 3, dtype=np.float64)), backend="numpy")
    x = np.random.default_rng(0).standard_normal((5, 4))
    loss = prog.step(x, np.array([0, 1, 2, 0, 1]))
    assert np.isfinite(loss) and prog.parameters()["0.weight"].dtype == np.float64


# --- batch sizes asked for by number -----------------------------------------------


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
@pytest.mark.parametrize("ask", ["mlir", "executable", "report"])
def test_a_batch_size_that_is_not_positive_is_refused(ask, batch_size):
    # 0 compiled a zero-row train step; -1 failed inside a verifier (tensor<-1x4xf32>).
    prog = aicfc.compile(nn.Sequential(nn.Linear(4, 3)), backend="numpy")
    calls = {
        "mlir": lambda: prog.mlir("graph", batch_size=batch_size),
        "executable": lambda: prog.executable(batch_size=batch_size),
        "report": lambda: prog.report(batch_size=batch_size),
    }
    with pytest.raises(
        ValueError, match=f"batch_size must be a positive integer, got {batch_size!r}"
    ):
        calls[ask]()
    assert prog.compiled() == []


# --- a module whose emit builds ill-typed IR -----------------------------------------


class _WrongWidth(nn.Module):
    """Emits a reshape whose result has another element count (a buggy custom module)."""

    def emit(self, ctx, x, prefix):  # type: ignore[no-untyped-def]
        return ctx.add(graph.ReshapeOp(x, (7,)))


def test_ill_typed_ir_from_a_module_is_reported_when_built():
    # Op constructors infer types but check nothing; the bad IR used to reach the passes.
    prog = aicfc.compile(nn.Sequential(nn.Linear(4, 3), _WrongWidth()), backend="numpy")
    with pytest.raises(
        ValueError,
        match=r"@predict: the IR built for the model does not verify: "
        r"graph.reshape: cannot reshape \[2, 3\] \(6 elements\) to \[7\]",
    ):
        prog.mlir("graph", "predict", batch_size=2)
