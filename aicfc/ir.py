"""Parse, verify and print IR with diagnostics that point into the source.

xDSL's parser does not keep source positions on ops, and a failed verify
raises without saying which op failed. `parse_module` records where each op
starts (as the op's FileLineColLoc) and verifies op by op, so a user's mistake
reads `file:line:col: error: message` (MLIR's diagnostic form), never a
traceback.
"""

from __future__ import annotations

import io
import re

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

from aicfc.context import make_context
from aicfc.dialects.diagnostics import format_diagnostic, location_of


class IRError(DiagnosticException):
    """A parse or verify error in user IR; str() is `file:line:col: error: message`."""


class LocatingParser(Parser):
    """A Parser that stores each op's source position as its FileLineColLoc.

    `line_offset` shifts reported lines (for --split-input-file chunks).
    """

    def __init__(self, ctx: Context, text: str, name: str = "<input>", line_offset: int = 0):
        super().__init__(ctx, text, name)
        self.file_name = name
        self.line_offset = line_offset

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        # An input without ops (an empty file, a chunk after a trailing `// -----`)
        # is an empty module, as in mlir-opt; xDSL calls it "Could not parse entire input!".
        if self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        return super().parse_module(allow_implicit_module)

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        loc = start.get_location()
        line, col = loc.line, loc.col
        try:
            op = super().parse_operation()
        except VerifyException as e:
            # A type or attribute that fails its own verify() while it is parsed
            # (e.g. !exec.buffer<?x4xf32, tmp>) has no position: report it at the op.
            raise ParseError(start, " ".join(str(e).split())) from None
        if isinstance(op.location, UnknownLoc):
            op.location = FileLineColLoc(
                StringAttr(self.file_name), IntAttr(line + self.line_offset), IntAttr(col)
            )
        return op


def format_parse_error(e: ParseError, name: str, line_offset: int = 0) -> str:
    loc = e.span.get_location()
    line, col = loc.line, loc.col
    return f"{name}:{line + line_offset}:{col}: error: {e.msg}"


def verify_located(module: Operation, name: str = "") -> None:
    """Verify `module`; on failure raise IRError located at the innermost failing op."""
    try:
        module.verify()
        return
    except (VerifyException, DiagnosticException):
        pass
    # Post-order in source order: the innermost op first, the first failing op in the file.
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, DiagnosticException) as e:
            # xDSL's constraint errors put the mismatch on a second line
            # ("result 'result' at position 0 does not verify:\nattribute ... but got ...").
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            first = " ".join(lines) if lines else type(e).__name__
            if not first.startswith(op.name):
                first = f"'{op.name}' {first}"
            raise IRError(format_diagnostic(_culprit(op, first), "error", first, name)) from None
    module.verify()


def _culprit(op: Operation, message: str) -> Operation:
    """The op to point at: for a symbol table's "Redefinition of symbol" (raised by
    the module, which has no source position) the second definition, else `op`."""
    found = re.search(r'Redefinition of symbol "([^"]*)"', message)
    if found is None or location_of(op) is not None:
        return op
    children = (c for region in op.regions for block in region.blocks for c in block.ops)
    definitions = [
        c
        for c in children
        if isinstance(sym := c.properties.get("sym_name"), StringAttr)
        and sym.data == found.group(1)
    ]
    return definitions[1] if len(definitions) > 1 else op


def parse_module(
    text: str, name: str = "<input>", ctx: Context | None = None, line_offset: int = 0
) -> ModuleOp:
    """Parse and verify `text`.

    Raises IRError (`file:line:col: error: ...`) for a syntax error or an op that
    fails verification.
    """
    parser = LocatingParser(ctx or make_context(), text, name, line_offset)
    try:
        module = parser.parse_module()
    except ParseError as e:
        raise IRError(format_parse_error(e, name, line_offset)) from None
    verify_located(module, name)
    return module


def print_module(op: Operation, generic: bool = False) -> str:
    """The textual form of `op` (custom syntax unless `generic`), ending in a newline."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    out.write("\n")
    return out.getvalue()
