"""Shared fixtures of the mixed-precision tests: one BLAS thread in every module here."""

from __future__ import annotations

from support import single_threaded_blas  # noqa: F401  (autouse: one BLAS thread)
