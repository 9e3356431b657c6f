"""aicfc's dialects and passes for every xDSL tool: the `xdsl.universe` entry point.

xDSL's drivers (`xdsl-opt`, any `xDSLOptMain`) collect the `Universe` objects that
installed distributions register under the entry-point group `xdsl.universe`
(`xdsl.universe.Universe.get_multiverse`). pyproject.toml registers this one:

    [project.entry-points."xdsl.universe"]
    aicfc = "aicfc.universe:AICFC_UNIVERSE"

so that, with aicfc installed, plain xDSL parses our dialects and runs our passes:

    xdsl-opt model.mlir -p aicfc-fuse,aicfc-expand-backward

Both tables hold factories (dialect name -> a function returning the `Dialect`,
pass name -> a function returning the pass class): loading the universe imports
no dialect and no pass until a tool asks for it. `aicfc-opt` builds on the same
tables (tools/aicfc_opt.py). Our names do not clash with xDSL's (a clash between
universes is an error in `get_multiverse`). An editable install writes entry
points at install time: after adding one, run `pip install -e .` again.
"""

from __future__ import annotations

from xdsl.universe import Universe

from aicfc.context import DIALECT_LOADERS
from aicfc.passes import get_all_passes

AICFC_UNIVERSE = Universe(all_dialects=dict(DIALECT_LOADERS), all_passes=get_all_passes())
"""The graph, autodiff and exec dialects and every `aicfc-*` pass, loaded lazily."""
