"""What aicfc-opt and aicfc-run share on the command line: exit codes, usage errors, Ctrl-C.

One rule for both tools (docs/aicfc-run.md, docs/passes.md):

    0    success
    1    a mistake in what the user gave: the command line (an unknown flag, a bad
         value), the IR, a pass pipeline or option, a data file, an output path
    2    an internal error (a bug in aicfc; the message asks for a report)
    130  interrupted (Ctrl-C): one line `<tool>: interrupted`, no output file written

argparse exits 2 on a usage error; `usage_errors_exit_1` makes a parser exit 1, so 2
means only an internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import NoReturn

from aicfc.dialects.diagnostics import IRWarning

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERNAL = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT, what a shell reports for a command ended by Ctrl-C."""


def usage_errors_exit_1(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make `parser` report a usage error as argparse does (usage line, `prog: error: ...`)
    but exit EXIT_ERROR instead of 2."""

    def error(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_ERROR, f"{parser.prog}: error: {message}\n")

    parser.error = error  # type: ignore[method-assign]
    return parser


@contextlib.contextmanager
def one_line_warnings(tool: str) -> Iterator[None]:
    """Show each Python warning raised inside as one stderr line: `<tool>: warning: ...`,
    or the message itself for an IRWarning (already `file:line:col: remark: ...`)."""

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        located = issubclass(category, IRWarning)
        print(str(message) if located else f"{tool}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


def interrupted(tool: str) -> int:
    """Report Ctrl-C in one line and return EXIT_INTERRUPTED."""
    with contextlib.suppress(OSError, ValueError):  # stdout closed or a broken pipe
        sys.stdout.flush()
    print(f"{tool}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED
