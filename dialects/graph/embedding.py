"""Embedding: graph.embedding, rows of a table gathered by integer ids."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from aicfc.dialects.checks import verify_ids
from aicfc.dialects.flags import OpFlag, OpInfo
from aicfc.dialects.graph.base import GraphOp
from aicfc.dialects.tensors import (
    fmt_shape,
    ranked,
    require_float,
    require_result,
    tensor,
    tensor_bytes,
)

F = OpFlag


@irdl_op_definition
class EmbeddingOp(GraphOp):
    """out[n, :] = weight[ids[n], :] for every position n of ids (torch F.embedding).

    ids [...] i32 or i64, each in [0, V); weight [V, D] float; out [..., D] in weight's
    dtype. Linear in the weight (a gather: out = onehot(ids) weight); its gradient is the
    scatter-add autodiff.embedding_grad. An id outside [0, V) is an error of the reference
    (naming the range) and of the host-input checks; on the device, kernels/embedding.cu
    writes a NaN row.

    ```mlir
    %e = graph.embedding %ids, %wte : (tensor<2x8xi32>, tensor<65x16xf32>) -> tensor<2x8x16xf32>
    ```
    """

    name = "graph.embedding"
    DISPLAY_NAME: ClassVar[str] = "Embedding"
    ids = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpInfo(F.IS_GATHER | F.HAS_PARAM | F.IS_LINEAR))
    assembly_format = (
        "$ids `,` $weight attr-dict `:` `(` type($ids) `,` type($weight) `)` `->` type($result)"
    )

    def __init__(self, ids: SSAValue, weight: SSAValue):
        i, w = ranked(self.name, "ids", ids), ranked(self.name, "weight", weight)
        shape = (*i.get_shape(), w.get_shape()[-1])
        super().__init__(operands=[ids, weight], result_types=[tensor(shape, w.element_type)])

    @property
    def num_embeddings(self) -> int:
        return ranked(self.name, "weight", self.weight).get_shape()[0]

    def verify_(self) -> None:
        i = verify_ids(self.name, self.ids)
        w = ranked(self.name, "weight", self.weight)
        require_float(self.name, "weight", w)
        if len(w.get_shape()) != 2:
            raise VerifyException(
                f"{self.name}: weight must be a table [V, D], got {fmt_shape(w.get_shape())}"
            )
        out = tensor((*i.get_shape(), w.get_shape()[1]), w.element_type)
        require_result(self.name, self.result.type, out)

    def flops(self) -> int:
        return 0  # a gather moves rows; it computes nothing

    def bytes_moved(self) -> int:
        """The ids, the gathered rows (not the whole table) and the output."""
        return tensor_bytes(self.ids.type) + 2 * tensor_bytes(self.result.type)
