"""Program options that reach the backend: device arrays, sync=False, tf32, exec options."""

from __future__ import annotations

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.backends import get_backend
from aicfc.program import Program
from aicfc.runtime.errors import InputError
from aicfc.runtime.numpy.backend import NumpyBackend


class DeviceLike:
    """Stands for a CuPy array: it has the CUDA array interface, shape and dtype."""

    __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f4", "version": 3}
    shape = (4, 3)
    dtype = np.dtype(np.float32)


def program(backend=None, **kw) -> Program:
    aicfc.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    return Program(model, "cross_entropy", optim.Adam(), backend or get_backend("numpy"), **kw)


def test_the_numpy_backend_refuses_device_arrays_with_a_clear_error():
    p = program()
    with pytest.raises(InputError, match=r'input "x": a device \(CuPy\) array .* x\.get\(\)'):
        p.step(DeviceLike(), np.zeros(4, np.int32))
    with pytest.raises(InputError, match=r'input "x": a device'):
        p.predict(DeviceLike())


def test_async_step_on_the_cpu_returns_the_loss_as_an_array():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.integers(0, 2, 4)
    p, q = program(), program()
    loss = p.step(x, y, sync=False)
    assert isinstance(loss, np.ndarray) and loss.shape == ()
    assert float(loss) == q.step(x, y)
    out = p.predict(x, sync=False)
    assert isinstance(out, np.ndarray) and out.shape == (4, 2)


class FakeCuda(NumpyBackend):
    """A numpy backend that reports a CUDA capability (only lowering is looked at)."""

    def lower_exec_options(self) -> dict[str, object]:
        return {"arch": 90, "tf32": False, "cublaslt": False, "device": "fake"}


def lower_exec(prog) -> str:
    """The passes of `prog`'s "exec" step (by stage name: the steps before it vary)."""
    return next(s.passes for s in prog._steps if s.stage == "exec")


def test_program_passes_the_backend_capability_and_tf32_to_lower_exec():
    lower = lower_exec(program(FakeCuda()))
    assert lower == (
        'aicfc-lower-exec{backend=numpy arch=90 tf32=false cublaslt=false device="fake"}'
    )
    lower = lower_exec(program(FakeCuda(), tf32=True))
    assert "tf32=true" in lower
    assert lower_exec(program(tf32=True)) == "aicfc-lower-exec{backend=numpy}"


def test_compile_takes_tf32_and_keeps_strict_fp32_by_default():
    model = nn.Sequential(nn.Linear(3, 2))
    assert aicfc.compile(model, backend="numpy").tf32 is False
    assert aicfc.compile(model, backend="numpy", tf32=True).tf32 is False  # CPU: always strict
