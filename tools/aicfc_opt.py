"""aicfc-opt: xDSL's opt driver with the graph, autodiff and exec dialects and aicfc's passes.

    aicfc-opt file.mlir -p aicfc-fuse,aicfc-expand-backward
    aicfc-opt file.mlir -p 'aicfc-fold-inplace{enable=false}' --split-input-file

A user's mistake (syntax, verification, an unknown pass or option, an op a pass
cannot handle) prints `file:line:col: error: message` on stderr and exits 1,
never a Python traceback. With --verify-diagnostics the message goes to stdout
and the exit code is 0 (xDSL's behaviour), so lit tests can FileCheck it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

from aicfc.context import DIALECT_LOADERS
from aicfc.ir import IRError, LocatingParser, format_parse_error, verify_located
from aicfc.passes import get_all_passes


class AicfcOptMain(xDSLOptMain):
    """The opt driver with our dialects, passes and located diagnostics."""

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, loader in DIALECT_LOADERS.items():
            self.ctx.register_dialect(name, loader)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--debug-traceback",
            action="store_true",
            help="on an internal error, show the Python traceback",
        )

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        name = self.get_input_name()
        try:
            text = chunk.read().decode()
        except UnicodeDecodeError as e:
            raise IRError(f"{name}: error: not UTF-8 text ({e.reason} at byte {e.start})") from None
        parser = LocatingParser(self.ctx, text, name, start_offset)
        try:
            module = parser.parse_module()
        except ParseError as e:
            raise IRError(format_parse_error(e, name, start_offset)) from None
        verify_located(module, name)
        return module

    def setup_pipeline(self) -> None:
        # Validate pass names and options up front: an unknown one is a user error.
        try:
            specs = list(parse_pipeline(self.args.passes))
        except ArgSpecParseError as e:  # a BaseException in xDSL: catch it by name
            raise UsageError(f"bad pass pipeline '{self.args.passes}':\n{e}") from None
        for spec in specs:
            if spec.name not in self.available_passes:
                raise UsageError(
                    f"unknown pass '{spec.name}'; available: "
                    + ", ".join(sorted(n for n in self.available_passes if n.startswith("aicfc")))
                    + " and xDSL's (canonicalize, cse, dce, ...)"
                )
        try:
            super().setup_pipeline()
        except (ValueError, TypeError) as e:
            raise UsageError(f"bad pass options in '{self.args.passes}': {e}") from None
        # xDSL verifies the module between passes without locations; a pass that
        # leaves invalid IR is then reported at the first failing op, like a parse.
        verify_between = self.pipeline.callback

        def located(previous: ModulePass | None, module: ModuleOp, nxt: ModulePass | None) -> None:
            try:
                if verify_between is not None:
                    verify_between(previous, module, nxt)
            except (VerifyException, DiagnosticException):
                verify_located(module, self.get_input_name())
                raise

        self.pipeline = PassPipeline(self.pipeline.passes, located)

    def apply_passes(self, prog: ModuleOp) -> None:
        self.pipeline.apply(self.ctx, prog)
        verify_located(prog, self.get_input_name())


class UsageError(Exception):
    """A bad command line (unknown pass, bad option)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aicfc-opt` console script; returns the exit code."""
    try:
        AicfcOptMain(description="aicfc modular optimizer driver", args=argv).run()
    except UsageError as e:
        print(f"aicfc-opt: error: {e}", file=sys.stderr)
        return 1
    except (IRError, PassFailedException, DiagnosticException) as e:
        print(str(e).rstrip(), file=sys.stderr)
        return 1
    except OSError as e:  # a missing or unreadable input or output file
        print(f"aicfc-opt: error: cannot open '{e.filename}': {e.strerror}", file=sys.stderr)
        return 1
    except Exception as e:  # an internal failure: name it, keep the exit code
        if "--debug-traceback" in (argv or sys.argv):
            raise
        print(
            f"aicfc-opt: internal error: {type(e).__name__}: {e}\n"
            "(please report this with the input file; rerun with --debug-traceback for details)",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
