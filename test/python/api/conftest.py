"""Shared fixtures of the API tests."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="package")
def _single_threaded_blas():
    """One BLAS thread: the GEMMs here are tiny, and on a loaded 2-core machine OpenBLAS's
    spinning worker threads made each training step 10-20x slower."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield
