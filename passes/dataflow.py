"""The data-flow graph of a block as a CSR adjacency (docs/design.md#fusion-patterns).

Nodes are the block's ops, numbered in block order (0 .. n-1, the terminator
included). There is one edge per use: producer -> consumer when an operand of
the consumer is a result of the producer. Edges are stored in compressed
sparse row form, as in cuSPARSE and scipy.sparse.csr_matrix:

    row_ptr[i] .. row_ptr[i + 1]   the slice of edges leaving op i
    col_indices[e]                 the consumer of edge e
    result_index[e]                which result of the producer edge e carries
    operand_index[e]               which operand of the consumer it enters (for a
                                   use in a nested region: of the nested user op)

Edges of a row are sorted by (consumer, operand). A use inside a nested
region counts as an edge to the op of this block that holds the region. The
transpose (consumer -> producers) is kept in the same form for predecessors.

    g = DataFlowGraph.of_block(fn.body.blocks.first)
    g.successors(g.index(matmul))   # op indices of the matmul's consumers

The graph is a snapshot: rebuild it after the IR changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from xdsl.ir import Block, Operation

from aicfc.dialects.flags import OpFlag, all_flags

IndexArray = np.ndarray
"""A 1-D int64 NumPy array of op or edge indices."""


@dataclass(frozen=True)
class Edge:
    """One use: result `result` of op `producer` is operand `operand` of op `consumer`."""

    producer: int
    consumer: int
    result: int
    operand: int


@dataclass(frozen=True, eq=False)
class DataFlowGraph:
    """CSR adjacency of one block's data flow (see the module docstring).

    ops:          the block's ops in order; node i is ops[i].
    row_ptr:      int64 [n + 1]; edges of op i are row_ptr[i]:row_ptr[i + 1].
    col_indices:  int64 [nnz]; the consumer op of each edge.
    result_index: int64 [nnz]; the producer's result carried by each edge.
    operand_index: int64 [nnz]; the consumer's operand each edge enters.
    pred_row_ptr, pred_col_indices: the transpose (consumer -> producer).
    """

    ops: tuple[Operation, ...]
    row_ptr: IndexArray
    col_indices: IndexArray
    result_index: IndexArray
    operand_index: IndexArray
    pred_row_ptr: IndexArray
    pred_col_indices: IndexArray
    _index: dict[Operation, int]

    @classmethod
    def of_block(cls, block: Block) -> DataFlowGraph:
        """Build the graph of `block` (one pass over the uses: O(ops + uses))."""
        ops = tuple(block.ops)
        index = {op: i for i, op in enumerate(ops)}
        edges: list[tuple[int, int, int, int]] = []  # (producer, consumer, operand, result)
        for i, op in enumerate(ops):
            for r, res in enumerate(op.results):
                for use in res.uses:
                    user = block.find_ancestor_op_in_block(use.operation)
                    if user is not None:
                        edges.append((i, index[user], use.index, r))
        edges.sort()
        n = len(ops)
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 4)
        row_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(e[:, 0], minlength=n), out=row_ptr[1:])
        order = np.lexsort((e[:, 0], e[:, 1]))  # by consumer, then producer
        pred_row_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(e[:, 1], minlength=n), out=pred_row_ptr[1:])
        return cls(
            ops=ops,
            row_ptr=row_ptr,
            col_indices=e[:, 1].copy(),
            result_index=e[:, 3].copy(),
            operand_index=e[:, 2].copy(),
            pred_row_ptr=pred_row_ptr,
            pred_col_indices=e[order, 0].copy(),
            _index=index,
        )

    @property
    def num_nodes(self) -> int:
        return len(self.ops)

    @property
    def num_edges(self) -> int:
        return int(self.col_indices.shape[0])

    def index(self, op: Operation) -> int:
        """The node number of `op`; KeyError if `op` is not in this block."""
        return self._index[op]

    def contains(self, op: Operation) -> bool:
        return op in self._index

    def successors(self, i: int) -> IndexArray:
        """Consumers of op i's results, one entry per use, sorted (repeats possible)."""
        return self.col_indices[self.row_ptr[i] : self.row_ptr[i + 1]]

    def predecessors(self, i: int) -> IndexArray:
        """Producers of op i's operands that live in this block, one entry per operand use."""
        return self.pred_col_indices[self.pred_row_ptr[i] : self.pred_row_ptr[i + 1]]

    def out_edges(self, i: int) -> Iterator[Edge]:
        """The uses of op i's results as Edge records, in (consumer, operand) order."""
        for e in range(int(self.row_ptr[i]), int(self.row_ptr[i + 1])):
            yield Edge(
                i, int(self.col_indices[e]), int(self.result_index[e]), int(self.operand_index[e])
            )

    def out_degree(self, i: int) -> int:
        """Number of uses of op i's results inside this block."""
        return int(self.row_ptr[i + 1] - self.row_ptr[i])

    def is_single_use(self, i: int) -> bool:
        """True when op i has results and each has exactly one use (the derived
        SINGLE_USE bit, seen from the graph)."""
        op = self.ops[i]
        if not op.results:
            return False
        counts = np.bincount(
            self.result_index[self.row_ptr[i] : self.row_ptr[i + 1]], minlength=len(op.results)
        )
        return bool(np.all(counts == 1))

    def flags(self, i: int) -> OpFlag:
        """Static and derived OpFlag bits of op i (dialects.flags.all_flags), as
        of when the graph was built."""
        return self._flags[i]

    @cached_property
    def _flags(self) -> tuple[OpFlag, ...]:
        return tuple(all_flags(op) for op in self.ops)

    def to_dense(self) -> np.ndarray:
        """The [n, n] adjacency as use counts (for tests and small debugging dumps)."""
        n = self.num_nodes
        dense = np.zeros((n, n), dtype=np.int64)
        for i in range(n):
            np.add.at(dense[i], self.successors(i), 1)
        return dense
