"""Parse, verify and print IR with diagnostics that point into the source.

xDSL's parser does not keep source positions on ops, and a failed verify
raises without saying which op failed. `parse_module` records where each op
starts (as the op's FileLineColLoc) and verifies op by op, so a user's mistake
reads `file:line:col: error: message` (MLIR's diagnostic form), never a
traceback. It also checks the train-step convention of every func.func's
arguments (docs/architecture.md §1: `aicfc.role` is input, param or state;
`aicfc.name`s are unique), pointing at the argument, and an unknown op name
gets the nearest registered ones ("did you mean graph.matmul?").
"""

from __future__ import annotations

import difflib
import io
import re
import struct
from collections.abc import Mapping, Sequence

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    AnyDenseElement,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    RankedStructure,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Input, Position, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind

from aicfc.context import make_context
from aicfc.dialects.diagnostics import format_diagnostic, location_of
from aicfc.dialects.roles import EXTERNAL_ROLES, NAME_ATTR, ROLE_ATTR
from aicfc.dominance import dominance_errors
from aicfc.float_literals import ExactFloatPrinter, parse_dense_float, parse_float_bits
from aicfc.state_updates import warn_state_updates


class IRError(DiagnosticException):
    """A parse or verify error in user IR; str() is `file:line:col: error: message`."""


class BoundedLexer(MLIRLexer):
    """xDSL's lexer with a string-literal check in linear time.

    xDSL's string pattern `"(?:[^"\\...]+|\\...)*"` nests quantifiers, so a string that
    is not closed on its line (or holds a bad escape) backtracks exponentially in the
    line's length: one unclosed quote in an 80-character line took minutes. The same
    language without the nesting fails fast; only then is xDSL's lexer asked.
    """

    _string = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')

    def _lex_string_literal(self, start_pos: Position) -> MLIRToken:
        if self._string.match(self.input.content, start_pos) is None:
            raise ParseError(
                Span(start_pos, start_pos + 1, self.input),
                "End of file reached before closing string literal.",
            )
        return super()._lex_string_literal(start_pos)


class LocatingParser(Parser):
    """A Parser that stores each op's source position as its FileLineColLoc.

    `line_offset` shifts reported lines (for --split-input-file chunks).
    """

    def __init__(self, ctx: Context, text: str, name: str = "<input>", line_offset: int = 0):
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(BoundedLexer(Input(text, name)))  # lexes a token
        self.file_name = name
        self.line_offset = line_offset
        self.argument_locations: dict[BlockArgument, str] = {}
        """`file:line:col` of each func.func argument, for `check_arguments`."""
        self._argument_spans: list[tuple[str, int, int]] = []
        self._in_dense_array = False
        self.value_names: dict[SSAValue, str] = {}
        """Each value's name as written (`%0`, `%g#1`), for diagnostics."""

    def _register_ssa_definition(self, name: str, values: Sequence[SSAValue], span: Span) -> None:
        super()._register_ssa_definition(name, values, span)
        for i, v in enumerate(values):
            self.value_names[v] = f"%{name}" if len(values) == 1 else f"%{name}#{i}"

    def _parse_block(self) -> Block:
        # ^2: (a numeric block id, valid MLIR) is no valid xDSL block name: xDSL raised a
        # bare ValueError (aicfc-opt: internal error) while naming the block.
        token = self._current_token
        try:
            return super()._parse_block()
        except ValueError as e:
            if "Invalid Block name" not in str(e):
                raise
            raise ParseError(
                token.span,
                f"block label '{token.text}' is not supported: a block name must start with a "
                "letter, '_', '$', '.' or '-' (for example ^bb2)",
            ) from None

    def parse_optional_argument(self, expect_type: bool = True):  # type: ignore[no-untyped-def]
        arg = super().parse_optional_argument(expect_type)
        if arg is not None:
            loc = arg.name.get_location()
            self._argument_spans.append((arg.name.text, loc.line + self.line_offset, loc.col))
        return arg

    def _get_op_by_name(self, name: str) -> type[Operation]:
        op_type = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if op_type is not None:
            return op_type
        known = [op.name for op in self.ctx.loaded_ops]
        dialect = self.ctx.get_optional_dialect(name.split(".")[0]) if "." in name else None
        if dialect is not None:  # prefer the ops of the dialect the name starts with
            known = [op.name for op in dialect.operations]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
        hint = f"; did you mean {close[0]}?" if close else ""
        self.raise_error(f"Operation {name} is not registered{hint}")

    def parse_dense_int_or_fp_elements_attr(
        self, type: RankedStructure[AnyDenseElement] | None
    ) -> DenseIntOrFPElementsAttr:
        # Float elements from their bits (aicfc/float_literals.py); the rest as xDSL reads it.
        dense = parse_dense_float(self, type)  # type: ignore[arg-type]
        return dense or super().parse_dense_int_or_fp_elements_attr(type)

    def parse_float(self, *, allow_negative: bool = True) -> float:
        # A typeless float property printed as its f64 bit pattern (lr = 0x4170000000000000).
        if self._in_dense_array:
            return super().parse_float(allow_negative=allow_negative)
        bits = parse_float_bits(self)
        return super().parse_float(allow_negative=allow_negative) if bits is None else bits

    def _parse_builtin_densearray_attr(self) -> DenseArrayBase | None:
        # array<f32: ...> reads its floats with parse_float too, for another type than f64.
        self._in_dense_array = True
        try:
            return super()._parse_builtin_densearray_attr()
        finally:
            self._in_dense_array = False

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
        first_arg = len(self._argument_spans)
        try:
            op = super().parse_operation()
        except (VerifyException, ValueError, OverflowError, struct.error) as e:
            # A type or attribute that fails its own verify() or constructor while it is
            # parsed (!exec.buffer<?x4xf32, tmp>; dense<0x1FFFFFFFFFFFFFFFFF> : tensor<i64>,
            # a ValueError; array<i64: 2^64>, a struct.error) has no position: report it at
            # the op.
            msg = " ".join(str(e).split())
            if isinstance(e, struct.error):
                msg = f"a value does not fit its element type ({msg})"
            raise ParseError(start, msg) from None
        if isinstance(op.location, UnknownLoc):
            op.location = FileLineColLoc(
                StringAttr(self.file_name), IntAttr(line + self.line_offset), IntAttr(col)
            )
        # Arguments parsed first; a generic "func.func" may lack its region (verify says so).
        if isinstance(op, func.FuncOp) and len(op.regions) == 1 and op.body.blocks:
            spans = self._argument_spans[first_arg : first_arg + len(op.args)]
            for arg, (text, at_line, at_col) in zip(op.args, spans, strict=False):
                if text == f"%{arg.name_hint}":
                    self.argument_locations[arg] = f"{self.file_name}:{at_line}:{at_col}"
        return op


PARSE_MESSAGES = {
    "in block definition": "expected '}' to close the region (or a block label such as ^bb0:)",
}
"""xDSL parse messages that read badly on their own -> what to print instead."""


def format_parse_error(e: ParseError, name: str, line_offset: int = 0) -> str:
    loc = e.span.get_location()
    line, col = loc.line, loc.col
    msg = PARSE_MESSAGES.get(e.msg.strip(), e.msg)
    return f"{name}:{line + line_offset}:{col}: error: {msg}"


def verify_located(
    module: Operation, name: str = "", value_names: Mapping[SSAValue, str] | None = None
) -> None:
    """Verify `module`, dominance included (aicfc/dominance.py); on failure raise IRError
    located at the innermost failing op (for dominance: the first use in source order,
    naming the value as `value_names` spell it)."""
    try:
        module.verify()
        failed = False
    except (VerifyException, DiagnosticException):
        failed = True
    if not failed:
        errors = dominance_errors(module, name, value_names)
        if errors:
            raise IRError(errors[0])
        return
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


def _check_attr_counts(fn: func.FuncOp, name: str) -> None:
    """arg_attrs / res_attrs hold one dictionary per argument / result (as MLIR's func verifier
    requires; xDSL's does not check it, and every reader of roles and names indexes by it)."""
    for what, attrs, types in (
        ("argument", fn.arg_attrs, fn.function_type.inputs.data),
        ("result", fn.res_attrs, fn.function_type.outputs.data),
    ):
        if attrs is not None and len(attrs.data) != len(types):
            where = location_of(fn) or name
            raise IRError(
                f"{where}: error: 'func.func' @{fn.sym_name.data} has {len(attrs.data)} "
                f"{what} attribute dictionaries for {len(types)} {what}s; expected one per {what}"
            )


def check_arguments(
    module: Operation, name: str = "", locations: dict[BlockArgument, str] | None = None
) -> None:
    """Check the train-step convention of every func.func's arguments.

    A string `aicfc.role` must be input, param or state, and no two arguments
    of a function may share an `aicfc.name`. Raises IRError located at the
    argument (`locations`, from LocatingParser) or else at the function, naming
    the argument as `%x` (and its 0-based position, as aicfc-lower-exec does).
    Non-string values are left to aicfc-lower-exec.
    """
    locations = locations or {}
    for fn in module.walk():
        if not isinstance(fn, func.FuncOp):
            continue
        _check_attr_counts(fn, name)
        if fn.arg_attrs is None or not fn.body.blocks:
            continue
        seen: dict[str, BlockArgument] = {}
        for i, (arg, attrs) in enumerate(zip(fn.args, fn.arg_attrs.data, strict=False)):
            role, arg_name = attrs.data.get(ROLE_ATTR), attrs.data.get(NAME_ATTR)
            which = f"%{arg.name_hint} " if arg.name_hint else ""
            message = None
            if isinstance(role, StringAttr) and role.data not in EXTERNAL_ROLES:
                message = (
                    f"argument {which}(#{i}, counting from 0) of @{fn.sym_name.data} has "
                    f'aicfc.role "{role.data}"; expected input, param or state'
                )
            elif isinstance(arg_name, StringAttr) and arg_name.data in seen:
                first = seen[arg_name.data]
                first_hint = f" (%{first.name_hint})" if first.name_hint else ""
                message = (
                    f'argument #{i} reuses the aicfc.name "{arg_name.data}"; names must be '
                    f"unique (argument {which}of @{fn.sym_name.data}, counting from 0; "
                    f"argument #{first.index}{first_hint} has it first)"
                )
            if message is not None:
                where = locations.get(arg) or location_of(fn) or name
                raise IRError(f"{where}: error: 'func.func' {message}")
            if isinstance(arg_name, StringAttr):
                seen.setdefault(arg_name.data, arg)


def parse_module(
    text: str, name: str = "<input>", ctx: Context | None = None, line_offset: int = 0
) -> ModuleOp:
    """Parse and verify `text`.

    Raises IRError (`file:line:col: error: ...`) for a syntax error, an op that
    fails verification (dominance included), or an argument that breaks the
    train-step convention (`check_arguments`). Warns (IRWarning, a UserWarning) for a
    state argument no result updates and a result name that matches no argument
    (aicfc/state_updates.py).
    """
    try:
        parser = LocatingParser(ctx or make_context(), text, name, line_offset)
        module = parser.parse_module()
    except ParseError as e:
        raise IRError(format_parse_error(e, name, line_offset)) from None
    verify_located(module, name, parser.value_names)
    check_arguments(module, name, parser.argument_locations)
    warn_state_updates(module, name, parser.argument_locations)
    return module


def print_module(op: Operation, generic: bool = False) -> str:
    """The textual form of `op` (custom syntax unless `generic`), ending in a newline."""
    out = io.StringIO()
    ExactFloatPrinter(stream=out, print_generic_format=generic).print_op(op)
    out.write("\n")
    return out.getvalue()
