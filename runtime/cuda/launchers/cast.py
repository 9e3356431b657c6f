"""The launcher of kernels/cast.cu (graph.cast between f32 and bf16/f16)."""

from __future__ import annotations

from aicfc.runtime.cuda.launchers.common import Launcher, launch_pointwise

launch_cast: Launcher = launch_pointwise
"""aicfc_cast_<from>_<to> (x, y, n): n elements, a grid-stride loop (common.launch_pointwise)."""
