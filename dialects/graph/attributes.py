"""Attributes of the graph dialect: the activation of a GEMM epilogue."""

from __future__ import annotations

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition

from aicfc.dialects.graph.activations import Activation


@irdl_attr_definition
class ActivationAttr(EnumAttribute[Activation], SpacedOpaqueSyntaxAttribute):
    """`#graph<activation relu>`; printed bare (`act = relu`) inside op formats.

    Its values are the `Activation`s of dialects/graph/activations.py; which of them
    an op accepts is the op's verifier's (a gemm_epilogue's those with an epilogue form).
    """

    name = "graph.activation"
