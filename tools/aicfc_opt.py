"""aicfc-opt: xDSL's opt driver with the graph, autodiff and exec dialects and aicfc's passes.

    aicfc-opt file.mlir -p aicfc-fuse,aicfc-expand-backward
    aicfc-opt file.mlir -p 'aicfc-fold-inplace{enable=false}' --split-input-file

Passes: aicfc's own (docs/passes.md) and, of xDSL's generic ones, those in
`XDSL_PASSES` (canonicalize, cse, dce): the rest of xDSL's ~150 passes target
other dialects and are not registered, so `--help` lists only what applies.
Our dialects and passes are also an `xdsl.universe` entry point (aicfc/universe.py),
which plain `xdsl-opt` loads; xDSL's driver then registers our dialects itself.
The only output target is MLIR text. `--version` prints aicfc's version and xDSL's.

A user's mistake (syntax, verification, an unknown pass or option, an option of
the wrong type, an op a pass cannot handle, a bad flag) prints `file:line:col:
error: message` or `aicfc-opt: error: message` on stderr and exits 1, never a
Python traceback; an internal error exits 2 and Ctrl-C prints `aicfc-opt:
interrupted` and exits 130 (tools/cli.py). With --verify-diagnostics the message
goes to stdout and the exit code is 0 (xDSL's behaviour), so lit tests can
FileCheck it. `-o FILE` is written only once every chunk succeeded, atomically
(runtime/files.py): a failure leaves an existing FILE as it was, and FILE may be
the input.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.targets.mlir import MLIRTarget
from xdsl.transforms import get_all_passes as xdsl_passes
from xdsl.utils.exceptions import (
    DiagnosticException,
    PassFailedException,
    VerifyException,
)
from xdsl.xdsl_opt_main import xDSLOptMain

import aicfc
from aicfc.float_literals import ExactFloatPrinter
from aicfc.ir import IRError, parse_module, verify_located
from aicfc.passes import get_all_passes
from aicfc.passes.options import XDSL_PASSES, PassOptionError, check_pipeline
from aicfc.runtime.files import WriteError, write_text
from aicfc.tools.cli import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    interrupted,
    one_line_warnings,
    usage_errors_exit_1,
)
from aicfc.universe import AICFC_UNIVERSE


class AicfcOptMain(xDSLOptMain):
    """The opt driver with our dialects, passes and located diagnostics."""

    version_format = f"aicfc-opt {aicfc.__version__} (xDSL {{xdsl_version}})"

    def register_all_dialects(self) -> None:
        # xDSL registers every installed universe's dialects, ours among them once the
        # entry point is installed; registering a name twice raises, so add only the
        # names still missing (a source tree whose install predates the entry point).
        super().register_all_dialects()
        registered = set(self.ctx.registered_dialect_names)
        for name, loader in AICFC_UNIVERSE.all_dialects.items():
            if name not in registered:
                self.ctx.register_dialect(name, loader)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        ours = ", ".join(n for n in self.available_passes if n not in XDSL_PASSES)
        for action in arg_parser._actions:
            if "--passes" in action.option_strings:
                action.help = (
                    "comma-separated passes, options in braces: -p 'aicfc-fuse,"
                    "aicfc-fold-inplace{enable=false}'. aicfc's passes: "
                    f"{ours}. xDSL's: {', '.join(XDSL_PASSES)}. Every pass, its IR level "
                    "and its options: docs/passes.md"
                )
        usage_errors_exit_1(arg_parser)
        arg_parser.add_argument(
            "--debug-traceback",
            action="store_true",
            help="on an internal error, show the Python traceback",
        )

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)
        generic = xdsl_passes()
        for name in XDSL_PASSES:
            self.register_pass(name, generic[name])

    def register_all_targets(self) -> None:
        self.available_targets["mlir"] = lambda: ExactMLIRTarget

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        name = self.get_input_name()
        try:
            text = chunk.read().decode()
        except UnicodeDecodeError as e:
            raise IRError(f"{name}: error: not UTF-8 text ({e.reason} at byte {e.start})") from None
        return parse_module(text, name, self.ctx, start_offset)

    def setup_pipeline(self) -> None:
        # Validate pass names and options up front: an unknown one is a user error.
        check_pipeline(self.args.passes, self.available_passes)
        print_between = self.args.print_between_passes  # printed below, floats exactly
        self.args.print_between_passes = False
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
            if print_between and previous is not None and nxt is not None:
                print(f"IR after {previous.name}:")
                ExactFloatPrinter(stream=sys.stdout).print_op(module)
                print("\n\n\n")

        self.pipeline = PassPipeline(self.pipeline.passes, located)

    def prepare_output(self) -> IO[str]:
        # -o: the text is kept until every chunk succeeded, then written atomically
        # (runtime/files.py), so a failure leaves an existing file as it was and -o
        # may name the input file.
        if self.args.output_file is None:
            return sys.stdout
        return self._output

    def run(self) -> None:
        self._output = _Text()
        super().run()
        if self.args.output_file is not None:
            write_text(self.args.output_file, self._output.getvalue())

    def apply_passes(self, prog: ModuleOp) -> None:
        self.pipeline.apply(self.ctx, prog)
        verify_located(prog, self.get_input_name())


class _Text(io.StringIO):
    """The output text: xDSL's driver closes its output stream, which would discard it."""

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ExactMLIRTarget(MLIRTarget):
    """xDSL's MLIR text target printing floats exactly (aicfc/float_literals.py)."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        if self.syntax_highlight:  # for a terminal only: xDSL's colouring printer
            super().emit(ctx, module, output)
            return
        printer = ExactFloatPrinter(
            stream=output,
            print_generic_format=self.print_generic_format,
            print_properties_as_attributes=self.print_properties_as_attributes,
            print_debuginfo=self.print_debuginfo,
        )
        printer.print_op(module)
        printer.print_metadata(ctx.loaded_dialects)
        print("\n", file=output)


class UsageError(Exception):
    """A bad command line (unknown pass, bad option)."""


DESCRIPTION = (
    "aicfc-opt: parse, verify and transform aicfc IR (the graph, autodiff and exec "
    "dialects) with aicfc's passes, and print the result. Docs: README.md, docs/passes.md."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aicfc-opt` console script; returns the exit code (tools/cli.py)."""
    try:
        with one_line_warnings("aicfc-opt"):
            AicfcOptMain(description=DESCRIPTION, args=argv).run()
    except KeyboardInterrupt:
        return interrupted("aicfc-opt")
    except (UsageError, PassOptionError) as e:
        print(f"aicfc-opt: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except (IRError, PassFailedException, DiagnosticException) as e:
        print(str(e).rstrip(), file=sys.stderr)
        return EXIT_ERROR
    except WriteError as e:  # -o: nothing was written, an existing file is intact
        print(f"aicfc-opt: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:  # a missing or unreadable input file
        print(f"aicfc-opt: error: cannot open '{e.filename}': {e.strerror}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # an internal failure: name it, keep the exit code
        if "--debug-traceback" in (argv or sys.argv):
            raise
        print(
            f"aicfc-opt: internal error: {type(e).__name__}: {e}\n"
            "(please report this with the input file; rerun with --debug-traceback for details)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
