"""What a step of the CuPy backend does with device inputs and outputs, as plain Python.

Two per-step costs of `CupyExecutable.run_async` (runtime/cuda/backend.py) that are not
the graph's: the device-to-device copies of device inputs into the fixed input buffers,
each a stream operation of its own before the replay, and a fresh device array for each
output, allocated from the memory pool every step. Both are decided here, without CuPy,
so that the rules are tested on the CPU (test/python/runtime/test_step_io.py):

- `InGraphCopies`: when a step's device inputs come from the same device addresses as
  the step before (a loop over fixed device batches, or one that refills its own
  buffers), capture a graph whose first nodes copy from those addresses, and replay it
  from then on: the copies become graph nodes and the step is one launch. Graphs are
  keyed by the source addresses; at most `limit` are kept (least recently used first
  out), and after `max_captures` captures the rule stops capturing (a loop whose
  addresses never repeat would otherwise capture every other step).
- `OutputBlocks`: the outputs of successive steps are views of one block of `count`
  arrays allocated at once; a block is never reused (each view keeps its block alive),
  so an output a user holds is never overwritten, and the pool is asked once per
  `count` steps.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

Sources = tuple[tuple[str, int], ...]
"""(input name, device address) of each device input copied in, in input order."""


class InGraphCopies:
    """Decides, per step, whether a graph with the input copies inside it runs the step.

    `choose(sources)` returns True when the step should launch the graph keyed by
    `sources` (`captured(sources)` says whether it exists: else capture it first),
    False when it should copy outside the graph and launch the plain one. `evicted`
    lists the keys whose graphs the caller should drop (taken by `take_evicted`).
    """

    def __init__(self, limit: int = 4, max_captures: int = 16):
        if limit < 1 or max_captures < 0:
            raise ValueError(
                f"limit must be >= 1 and max_captures >= 0, got {limit}, {max_captures}"
            )
        self.limit = limit
        self.max_captures = max_captures
        self.captures = 0
        self._graphs: OrderedDict[Sources, None] = OrderedDict()
        self._previous: Sources | None = None
        self._evicted: list[Sources] = []

    def captured(self, sources: Sources) -> bool:
        return sources in self._graphs

    def choose(self, sources: Sources) -> bool:
        previous, self._previous = self._previous, sources
        if not sources:
            return False
        if sources in self._graphs:
            self._graphs.move_to_end(sources)
            return True
        if sources != previous or self.captures >= self.max_captures:
            return False
        self.captures += 1
        self._graphs[sources] = None
        while len(self._graphs) > self.limit:
            old, _ = self._graphs.popitem(last=False)
            self._evicted.append(old)
        return True

    def take_evicted(self) -> list[Sources]:
        out, self._evicted = self._evicted, []
        return out


class OutputBlocks:
    """Hands out arrays of `shape` and `dtype`, `count` per allocation (module doc).

    alloc(shape, dtype) makes a block; `next()` returns a view of its next row.
    """

    def __init__(
        self, shape: tuple[int, ...], dtype: Any, alloc: Callable[..., Any], count: int = 256
    ):
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        self.shape = tuple(shape)
        self.dtype = dtype
        self.alloc = alloc
        self.count = count
        self.blocks = 0
        self._block: Any = None
        self._next = count

    def next(self) -> Any:
        if self._next == self.count:
            self._block = self.alloc((self.count, *self.shape), self.dtype)
            self.blocks += 1
            self._next = 0
        k = self._next
        self._next += 1
        return self._block[k : k + 1].reshape(self.shape)  # a view (NumPy's block[k] of a
        # 1-d block would be a scalar copy)


def block_count(nbytes: int, budget: int = 1 << 16, most: int = 256) -> int:
    """Outputs per block: `most` for small outputs (a loss), fewer as they grow, so a
    block stays within `budget` bytes; 1 (an allocation per step) for outputs that large."""
    return max(1, min(most, budget // max(nbytes, 1)))
