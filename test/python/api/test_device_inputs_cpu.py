"""A device (CUDA array interface) input to a Program on the numpy backend is a clear
InputError naming the input; the backend's `takes_device_arrays` decides, not its name."""

from __future__ import annotations

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.program import InputError
from aicfc.runtime.numpy.backend import NumpyBackend


class FakeDeviceArray:
    """Stands in for a CuPy array: only the CUDA array interface marks it as on the device."""

    __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f4", "data": (0, False)}
    shape = (4, 3)
    dtype = np.dtype(np.float32)


def test_device_x_on_numpy_backend_names_the_input() -> None:
    assert NumpyBackend.takes_device_arrays is False
    prog = aicfc.compile(nn.Sequential(nn.Linear(3, 2)), optimizer=optim.SGD(lr=0.1))
    with pytest.raises(
        InputError,
        match=r'input "x": a device \(CuPy\) array was given to the '
        r"numpy backend, which takes host arrays \(copy it with x\.get\(\)\)",
    ):
        prog.predict(FakeDeviceArray())
