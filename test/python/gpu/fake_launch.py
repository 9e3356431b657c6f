"""Stand-ins for launching CUDA kernels without a GPU (no device, no CuPy).

Buffers that have only a shape, a dtype and an address (`FakeArray`; `f`, `i`, `d` make
f32, int and f64-scalar ones), the backend's launch context (`FakeCtx`: workspaces and
uploaded tables; `CublasLtCtx` with a cuBLASLt that records its plans), and the autouse
fixture `stub_kernels` that resolves every kernel to a placeholder naming its symbol, so
no module is compiled. Shared by the test_abi*_cpu.py files (import the fixture too).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from aicfc.runtime.cuda import abi as cuda_abi


@pytest.fixture(autouse=True)
def stub_kernels(monkeypatch):
    """No module is compiled here: every kernel resolves to a placeholder naming its symbol."""
    monkeypatch.setattr(cuda_abi, "get_function", lambda s: f"<{s.symbol}>")


@dataclass
class Ptr:
    ptr: int


_ADDRESSES = itertools.count(0x7F0000000000, 1 << 20)


@dataclass
class FakeArray:
    shape: tuple[int, ...]
    dtype: np.dtype
    data: Ptr = field(default_factory=lambda: Ptr(next(_ADDRESSES)))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


class FakeCtx:
    sm_count = 132

    def workspace(self, nbytes: int) -> FakeArray:
        return FakeArray((nbytes,), np.dtype(np.uint8))

    def table(self, values: np.ndarray) -> FakeArray:
        self.last_table = values
        return FakeArray(values.shape, np.dtype(np.int64))

    def cublaslt(self) -> Any:
        raise AssertionError("library kernels are not checked here")


F = np.dtype(np.float32)


def f(*shape: int) -> FakeArray:
    return FakeArray(shape, F)


def i(*shape: int, dtype: Any = np.int32) -> FakeArray:
    return FakeArray(shape, np.dtype(dtype))


def d() -> FakeArray:
    """A hyperparameter: a float64 scalar (the train step's state)."""
    return FakeArray((), np.dtype(np.float64))


class FakeCublasLt:
    """Records what the cuBLASLt launcher plans (a handle needs a GPU)."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, Any, str, bool]] = []

    def plan(self, name: str, g: Any, d: Any, act: str, tf32: bool) -> Any:
        self.plans.append((name, d, act, tf32))
        return cuda_abi.CallbackLaunch(name=name, shapes="", issue=lambda stream: None)


class CublasLtCtx(FakeCtx):
    def __init__(self) -> None:
        self.lt = FakeCublasLt()

    def cublaslt(self) -> Any:
        return self.lt
