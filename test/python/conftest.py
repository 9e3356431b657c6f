"""The test suite compiles without the on-disk compile cache (aicfc/compile_cache.py), so
that each test sees the pipeline run; the cache's own tests give it folders of their own."""

from __future__ import annotations

import os

os.environ.setdefault("AICFC_CACHE_DIR", "off")
