"""Finding a backend by name: the one place that names the concrete backends.

    backend = get_backend("numpy")             # or "cupy" (also "cuda"), or "auto"
    backend, why = resolve_backend("auto")     # why: "requested", "auto chose numpy: ..."

`BACKEND_CLASSES` is the table: backend name -> the module and class that
implement it (runtime/numpy/, runtime/cuda/). The shared runtime never imports
a concrete backend; the API layer (this package) may, and imports each only
when it is asked for, so `import aicfc` needs neither CuPy nor a GPU.
"""

from __future__ import annotations

import importlib
import logging

from aicfc.runtime.backend import Backend
from aicfc.runtime.backend_names import AUTO, backend_name
from aicfc.runtime.errors import BackendUnavailable

BACKEND_CLASSES: dict[str, tuple[str, str]] = {
    "numpy": ("aicfc.runtime.numpy.backend", "NumpyBackend"),
    "cupy": ("aicfc.runtime.cuda.backend", "CupyBackend"),
}
"""Backend name (`Backend.name`, runtime/backend_names.py BACKENDS) -> (module, class)."""

log = logging.getLogger("aicfc")


def backend_class(name: str) -> type[Backend]:
    """The class of backend `name` ("numpy" or "cupy"), imported on first use.

    Raises BackendUnavailable when its module, or a module it needs, is missing.
    """
    module_name, class_name = BACKEND_CLASSES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name == module_name:
            path = module_name.replace(".", "/") + ".py"
            raise BackendUnavailable(
                f"backend {name!r} is not part of this installation ({path} is missing)"
            ) from None
        raise BackendUnavailable(
            f"backend {name!r} needs the module {e.name!r}, which is not installed "
            "(pip install 'aicfc[cuda]')"
        ) from None
    cls: type[Backend] = getattr(module, class_name)
    return cls


def _create(name: str, **options: object) -> Backend:
    cls = backend_class(name)
    reason = cls.unavailable_reason()
    if reason:
        raise BackendUnavailable(f"backend {name!r} cannot run here: {reason}")
    return cls(**options)


def get_backend(name: str = "auto") -> Backend:
    """The backend called `name`: "numpy", "cupy" (or "cuda", the name of its kernel
    family), or "auto" (cupy when usable, else numpy; `resolve_backend` also says why).

    Raises BackendUnavailable when "cupy" cannot run here (module, CuPy or GPU
    missing; the message says which) and ValueError (runtime/backend_names.py
    UnknownBackendError) for an unknown name.
    """
    return resolve_backend(name)[0]


def resolve_backend(name: str = "auto", **options: object) -> tuple[Backend, str]:
    """`get_backend(name)` and why it is that backend, e.g. "requested" or, for "auto"
    without a GPU, "auto chose numpy: backend 'cupy' cannot run here: CuPy is not
    installed (pip install 'aicfc[cuda]')". The reason is also logged at INFO level on
    the "aicfc" logger. `options` go to the backend's constructor (a named backend only:
    `device=1` for cupy)."""
    chosen = backend_name(name, allow_auto=True)
    if chosen != AUTO:
        return _create(chosen, **options), "requested"
    try:
        backend, reason = _create("cupy"), "auto chose cupy: CuPy sees a usable GPU"
    except BackendUnavailable as e:
        backend, reason = _create("numpy"), f"auto chose numpy: {e}"
    log.info("backend %s", reason)
    return backend, reason
