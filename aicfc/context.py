"""The xDSL context with every dialect aicfc reads: builtin, func, arith and ours."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func


def make_context() -> Context:
    """A fresh Context with builtin, func, arith, graph, autodiff and exec loaded lazily."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    ctx.register_dialect("arith", lambda: Arith)
    for name, loader in DIALECT_LOADERS.items():
        ctx.register_dialect(name, loader)
    return ctx


def _graph():  # type: ignore[no-untyped-def]
    from aicfc.dialects.graph import Graph

    return Graph


def _autodiff():  # type: ignore[no-untyped-def]
    from aicfc.dialects.autodiff import Autodiff

    return Autodiff


def _exec():  # type: ignore[no-untyped-def]
    from aicfc.dialects.exec import Exec

    return Exec


DIALECT_LOADERS = {"graph": _graph, "autodiff": _autodiff, "exec": _exec}
