"""The runtime's errors: each message names the program, buffer, input or kernel at fault.

`ExecError` is the base of every error a backend raises while loading or running
a program; the CuPy backend's `CudaKernelError` (runtime/cuda/abi.py) is one too.
"""

from __future__ import annotations


class ExecError(RuntimeError):
    """A runtime error that names the program, buffer, input or kernel at fault."""


class InputError(ExecError, ValueError):
    """A missing, unknown or mis-shaped input to `Executable.run`."""


class StoreError(ExecError, KeyError):
    """A buffer-store mismatch: shape, dtype or role of a named buffer, or an unknown name."""

    def __str__(self) -> str:
        return str(self.args[0])


class BackendUnavailable(ExecError):
    """The requested backend cannot run here (module, CuPy or GPU missing)."""
