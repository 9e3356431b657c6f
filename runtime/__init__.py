"""The runtime: kernel registry and selector, the NumPy reference, the backends.

Import-light on purpose: importing `aicfc.runtime` loads no backend, so
`aicfc-lower-exec` can read `runtime.registry` without NumPy kernels or CuPy.
The interface types (runtime/backend.py, store.py, errors.py) load on first use;
a backend by name comes from `aicfc.backends.get_backend`.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "Backend": "aicfc.runtime.backend",
    "Executable": "aicfc.runtime.backend",
    "BufferStore": "aicfc.runtime.store",
    "ExecError": "aicfc.runtime.errors",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aicfc.runtime' has no attribute {name!r}")
