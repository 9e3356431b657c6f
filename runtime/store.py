"""The param and state buffers of a backend, by name (`BufferStore`).

Programs loaded against one store share its buffers (the train step and predict
see the same parameter arrays). A buffer keeps its identity for the store's
lifetime, so a captured CUDA graph stays valid and `load_state_dict` writes into
the buffers instead of rebinding them. Inputs are not stored: each Executable
owns its input buffers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from aicfc.runtime.errors import StoreError

Array = Any
"""A backend array: numpy.ndarray for "numpy", cupy.ndarray for "cupy"."""

STORED_ROLES = ("param", "state")
"""Roles whose buffers live in the BufferStore (inputs belong to each Executable)."""


class ArrayBackend(Protocol):
    """What a store needs of its backend (runtime/backend.py `Backend` has all of it)."""

    @property
    def name(self) -> str:
        """The backend's name ("numpy", "cupy")."""
        ...

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> Array:
        """A new zero-filled array of this backend."""
        ...

    def to_numpy(self, array: Array) -> np.ndarray:
        """A NumPy copy of a backend array."""
        ...

    def write(self, dest: Array, source: np.ndarray) -> None:
        """Copy host data into an existing backend array, in place."""
        ...


class BufferStore:
    """The param and state buffers by name, shared by every program loaded against it.

    A buffer keeps its identity for the store's lifetime: loading a program,
    a training step and `load_state_dict` write into it, never rebind it.
    """

    def __init__(self, backend: ArrayBackend):
        self.backend = backend
        self._arrays: dict[str, Array] = {}
        self._specs: dict[str, tuple[tuple[int, ...], np.dtype, str]] = {}

    def declare(self, name: str, shape: tuple[int, ...], dtype: np.dtype, role: str) -> Array:
        """The buffer `name`, created zero-filled if missing.

        Raises StoreError when it exists with another shape, dtype or role.
        """
        if role not in STORED_ROLES:
            raise StoreError(f'buffer "{name}": role {role} is not stored (only param, state)')
        dtype = np.dtype(dtype)
        if name in self._specs:
            have = self._specs[name]
            if have != (tuple(shape), dtype, role):
                raise StoreError(
                    f'buffer "{name}" is a {have[2]} of {have[1]}{list(have[0])} in the store, '
                    f"but the program declares a {role} of {dtype}{list(shape)}"
                )
            return self._arrays[name]
        self._specs[name] = (tuple(shape), dtype, role)
        self._arrays[name] = self.backend.zeros(tuple(shape), dtype)
        return self._arrays[name]

    def __getitem__(self, name: str) -> Array:
        if name not in self._arrays:
            raise StoreError(f'no buffer "{name}" in the store (known: {", ".join(self._arrays)})')
        return self._arrays[name]

    def __contains__(self, name: object) -> bool:
        return name in self._arrays

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def names(self, *roles: str) -> list[str]:
        """Buffer names in declaration order (only `roles` if given)."""
        return [n for n, s in self._specs.items() if not roles or s[2] in roles]

    def spec(self, name: str) -> tuple[tuple[int, ...], np.dtype, str]:
        """(shape, dtype, role) of buffer `name`."""
        self[name]
        return self._specs[name]

    def state_dict(self, *roles: str) -> dict[str, np.ndarray]:
        """NumPy copies of the buffers by name (all, or only `roles`)."""
        return {n: self.backend.to_numpy(self._arrays[n]) for n in self.names(*roles)}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Write `state` into the existing buffers (never rebinding them).

        Every entry is checked before any is written. strict=True (PyTorch's
        default): a name the store lacks or a store buffer `state` lacks is an
        error; strict=False skips both. Raises StoreError naming the buffer, and
        TypeError when `state` is not a mapping of names to arrays.
        """
        if not isinstance(state, Mapping):
            raise TypeError(
                "load_state_dict: expected a mapping of buffer names to arrays (such as "
                f"state_dict() returns), got {type(state).__name__}"
            )
        unknown = [n for n in state if n not in self._specs]
        missing = [n for n in self._specs if n not in state]
        if strict and (unknown or missing):
            parts = []
            if unknown:
                parts.append(f"unexpected buffers: {', '.join(unknown)}")
            if missing:
                parts.append(f"missing buffers: {', '.join(missing)}")
            raise StoreError("load_state_dict: " + "; ".join(parts))
        checked: list[tuple[str, np.ndarray]] = []
        for name, value in state.items():
            if name not in self._specs:
                continue
            arr = np.asarray(value)
            shape, dtype, _ = self._specs[name]
            if arr.shape != shape or arr.dtype != dtype:
                raise StoreError(
                    f'load_state_dict: buffer "{name}" is {dtype}{list(shape)}, '
                    f"got {arr.dtype}{list(arr.shape)}"
                )
            checked.append((name, arr))
        for name, arr in checked:
            self.backend.write(self._arrays[name], arr)
