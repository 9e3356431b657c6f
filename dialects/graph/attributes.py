"""Attributes of the graph dialect: the activation of a GEMM epilogue."""

from __future__ import annotations

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.str_enum import StrEnum


class Activation(StrEnum):
    """Pointwise activation of a GEMM epilogue (cuBLASLt: RELU, GELU)."""

    NONE = "none"
    RELU = "relu"
    GELU = "gelu"


@irdl_attr_definition
class ActivationAttr(EnumAttribute[Activation], SpacedOpaqueSyntaxAttribute):
    """`#graph<activation relu>`; printed bare (`act = relu`) inside op formats."""

    name = "graph.activation"
