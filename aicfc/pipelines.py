"""The named pipelines, re-exported for API users (defined in passes/pipelines.py).

```python
for step in aicfc.pipelines.train_pipeline("numpy"):
    print(step.stage, step.passes)
```
"""

from __future__ import annotations

from aicfc.passes.pipelines import (
    GRAPH_STAGE,
    Step,
    parse_passes,
    run_steps,
    stage_names,
    train_pipeline,
    with_data_parallel,
)

__all__ = [
    "GRAPH_STAGE",
    "Step",
    "parse_passes",
    "run_steps",
    "stage_names",
    "train_pipeline",
    "with_data_parallel",
]
