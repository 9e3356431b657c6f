"""Diagnostics that name an op and point at its source (`file:line:col: error: ...`).

The parser (aicfc.ir.LocatingParser) stores each op's source position in its
`location` (a builtin FileLineColLoc, printed only with --print-debuginfo).
Passes raise `OpError` for a user's mistake and call `remark` for optional
notes; both print MLIR's diagnostic form with that location.
"""

from __future__ import annotations

import sys
from typing import TextIO

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException


def location_of(op: Operation | None) -> str | None:
    """`file:line:col` of an op parsed from source, else None (ops built by passes
    inherit no location unless the pass copies it)."""
    loc = getattr(op, "location", None)
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return None


def format_diagnostic(op: Operation | None, severity: str, message: str, default: str = "") -> str:
    where = location_of(op) or default
    prefix = f"{where}: " if where else ""
    return f"{prefix}{severity}: {message}"


class OpError(DiagnosticException):
    """A user-facing error about one op (shape, dtype, unsupported case).

    str() is `file:line:col: error: 'op.name' message` when the op has a source
    location, else `error: 'op.name' message`.
    """

    def __init__(self, op: Operation, message: str):
        self.op = op
        self.message = message
        super().__init__(format_diagnostic(op, "error", f"'{op.name}' {message}"))


class IRWarning(UserWarning):
    """A warning about user IR whose message is a located diagnostic (`file:line:col:
    remark: ...`): the API raises it as a UserWarning, aicfc-opt and aicfc-run print
    the message as it is, one line."""


def remark(op: Operation, message: str, stream: TextIO | None = None) -> None:
    """Print `file:line:col: remark: message` (to stderr by default)."""
    print(format_diagnostic(op, "remark", f"'{op.name}' {message}"), file=stream or sys.stderr)


def copy_location(src: Operation, *dst: Operation) -> None:
    """Give ops a pass creates the source location of the op they replace."""
    for op in dst:
        op.location = src.location
