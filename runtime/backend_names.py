"""Two words, one meaning each: a backend runs programs, a kernel family is what kernels target.

- A **backend** is a runtime that executes exec programs: "numpy" (the CPU
  reference) or "cupy" (the GPU, CUDA graphs). `Backend.name` is one of `BACKENDS`.
- A **kernel family** is the target a kernel is written for: "numpy" (the
  reference functions) or "cuda" (kernels/*.cu and cuBLASLt). `KernelSpec.family`
  is one of `KERNEL_FAMILIES`, and a kernel's name starts with it ("cuda.relu_f32").

Each backend launches one family (`BACKEND_KERNEL_FAMILY`). Wherever a user names
a backend (`aicfc.compile(backend=)`, `aicfc-run --backend`,
`aicfc-lower-exec{backend=}`, `aicfc-train-pipeline{backend=}`), the GPU backend
may also be called by its family's name, "cuda"; `backend_name` is the one place
that reads such a name. Plain data: imports nothing.
"""

from __future__ import annotations

BACKENDS = ("numpy", "cupy")
"""The backends (`Backend.name`)."""

KERNEL_FAMILIES = ("numpy", "cuda")
"""The kernel families (`KernelSpec.family`)."""

BACKEND_KERNEL_FAMILY: dict[str, str] = {"numpy": "numpy", "cupy": "cuda"}
"""Backend -> the kernel family it launches (`Backend.kernel_family`)."""

ALIASES: dict[str, str] = {"cuda": "cupy"}
"""Other names of a backend: "cuda", the kernel family of cupy, names cupy."""

BACKEND_CHOICES: tuple[str, ...] = (*BACKENDS, *ALIASES)
"""Every name that selects a backend, in the order messages and docs list them."""

AUTO = "auto"
"""The name that lets the API choose (cupy where usable, else numpy; aicfc/backends.py)."""


class UnknownBackendError(ValueError):
    """A name that selects no backend; the message lists the names that do."""


def backend_name(name: str, allow_auto: bool = False) -> str:
    """The backend that `name` selects: "numpy" or "cupy" ("cuda" selects "cupy"), or
    "auto" where `allow_auto` (the API's choice).

    Raises UnknownBackendError for any other name, e.g. "unknown backend 'tpu';
    expected one of numpy, cupy, cuda (cuda, the kernel family of cupy, selects cupy)".
    """
    if name in BACKENDS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    if allow_auto and name == AUTO:
        return AUTO
    choices = (*BACKEND_CHOICES, AUTO) if allow_auto else BACKEND_CHOICES
    aliases = ", ".join(
        f"{alias}, the kernel family of {b}, selects {b}" for alias, b in ALIASES.items()
    )
    raise UnknownBackendError(
        f"unknown backend {name!r}; expected one of {', '.join(choices)} ({aliases})"
    )


def kernel_family(name: str) -> str:
    """The kernel family that the backend called `name` launches ("cupy" or "cuda": "cuda").

    Raises UnknownBackendError as `backend_name` does.
    """
    return BACKEND_KERNEL_FAMILY[backend_name(name)]
