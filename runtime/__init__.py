"""The runtime: kernel registry and selector, the NumPy reference, the backends.

Import-light on purpose: importing `aicfc.runtime` loads no backend, so
`aicfc-lower-exec` can read `runtime.registry` without NumPy kernels or CuPy.
`get_backend` and the interface types of `runtime/backend.py` load on first use.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "get_backend": "aicfc.runtime.backend",
    "Backend": "aicfc.runtime.backend",
    "BufferStore": "aicfc.runtime.backend",
    "Executable": "aicfc.runtime.backend",
    "ExecError": "aicfc.runtime.backend",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aicfc.runtime' has no attribute {name!r}")
