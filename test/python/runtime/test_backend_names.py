"""Backends and kernel families (runtime/backend_names.py): two words, one reader of names.

A backend runs programs ("numpy", "cupy"); a kernel family is what kernels target
("numpy", "cuda"). Every place that takes a backend name accepts "cuda" for cupy, and
every one reads it through `backend_name`, so they accept and refuse the same names.
"""

from __future__ import annotations

import pytest

from aicfc.backends import BACKEND_CLASSES, backend_class
from aicfc.passes.options import CHOICES
from aicfc.passes.pipelines import train_pipeline
from aicfc.runtime import registry
from aicfc.runtime.backend_names import (
    BACKEND_KERNEL_FAMILY,
    BACKENDS,
    KERNEL_FAMILIES,
    UnknownBackendError,
    backend_name,
    kernel_family,
)


@pytest.mark.parametrize(
    ("name", "backend", "family"),
    [("numpy", "numpy", "numpy"), ("cupy", "cupy", "cuda"), ("cuda", "cupy", "cuda")],
)
def test_each_accepted_name_selects_one_backend_and_its_family(name, backend, family):
    assert backend_name(name) == backend
    assert kernel_family(name) == family


def test_auto_only_where_the_caller_allows_it():
    assert backend_name("auto", allow_auto=True) == "auto"
    with pytest.raises(UnknownBackendError, match="expected one of numpy, cupy, cuda \\("):
        backend_name("auto")


@pytest.mark.parametrize("name", ["tpu", "CUDA", "", "numpy "])
def test_an_unknown_name_is_refused_naming_the_accepted_ones(name):
    with pytest.raises(ValueError, match=rf"unknown backend {name!r}; expected one of numpy, cupy"):
        backend_name(name)


def test_every_backend_has_a_class_that_launches_its_family():
    assert set(BACKEND_CLASSES) == set(BACKENDS) == set(BACKEND_KERNEL_FAMILY)
    for name in BACKENDS:  # importing the classes needs no GPU (CuPy loads lazily)
        cls = backend_class(name)
        assert cls.name == name
        assert cls.kernel_family == BACKEND_KERNEL_FAMILY[name]


def test_every_kernel_belongs_to_a_family_its_name_starts_with():
    assert {k.family for k in registry.REGISTRY} == set(KERNEL_FAMILIES)
    assert all(k.name.startswith(k.family + ".") for k in registry.REGISTRY)


def test_the_pass_options_and_the_pipeline_read_the_same_names():
    for key in [("aicfc-lower-exec", "backend"), ("aicfc-train-pipeline", "backend")]:
        assert CHOICES[key]() == ("numpy", "cupy", "cuda")
    for name in CHOICES["aicfc-lower-exec", "backend"]():
        lower = next(s.passes for s in train_pipeline(name) if s.stage == "exec")
        assert lower == f"aicfc-lower-exec{{backend={kernel_family(name)}}}"
