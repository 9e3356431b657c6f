"""aicfc-run: run a function of an MLIR module on a backend, N times, with npz or random data.

    aicfc-run examples/digits_train_step.mlir --steps 100 --print-every 10
    aicfc-run step.mlir --function train_step --inputs data.npz --output out.npz
    aicfc-run step.mlir -i out.npz -o out2.npz --steps 100    # resume from a previous -o

The module may be graph-level (func.func with graph/autodiff ops: the train
pipeline runs first) or exec IR (exec.program). --function picks the function
(default: the only one, else train_step). Every argument is named by its
`aicfc.name`; values come from --inputs (an .npz whose keys are those names)
and anything the file does not provide is generated:

- inputs: float tensors N(0, 1); integer tensors are class labels, uniform in
  [0, C) with C the number of classes of the cross-entropy they feed (the
  logits' last dim, read from graph.cross_entropy or its exec launch), or token
  ids, uniform in [0, V) with V the rows of the embedding table they index
  (graph.embedding), else --label-classes (default 10);
- params: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's nn.Linear default,
  with fan_in the last dim of a [out, in] weight; a "<p>.bias" uses the fan_in
  of "<p>.weight" (else its own length);
- state (optimizer moments, step counters, rng.offset, hyperparameters): its
  `aicfc.init` (the learning rate, betas, ...), else zeros; a weight's low-precision copy
  ("<param>.bf16", aicfc-fold-weight-casts) is its param rounded to the copy's dtype.

All random values come from one Generator seeded by --seed (default 0). Each
step reuses the same inputs (so a train step fits that batch) and prints the
loss where the function has a "loss" output. --output writes the last step's
outputs and the final value of every param and state to exactly the path given,
atomically (an existing file survives a failed or interrupted save), so feeding
it back with --inputs resumes training: its params and state are taken, and keys
that are outputs of the function rather than arguments (such as "loss") are
skipped with a note; an inference function (no state) skips a training run's
optimizer state the same way. Labels from --inputs are checked against C up front.

Errors (bad IR, an unknown function, an npz key that is no argument, a file
that is not an .npz or is damaged, labels out of range, a shape or dtype
mismatch, an unwritable --output, a bad argument) print one line naming the
culprit (`file:line:col: error: ...` for IR, `aicfc-run: error: ...` otherwise)
and exit 1, before any step runs; never a traceback. An internal error exits 2,
Ctrl-C prints `aicfc-run: interrupted` and exits 130 (as aicfc-opt).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument
from xdsl.utils.exceptions import DiagnosticException, PassFailedException

from aicfc.backends import resolve_backend
from aicfc.builder import RNG_OFFSET
from aicfc.context import make_context
from aicfc.dialects import exec as ex
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.roles import arg_name
from aicfc.execute import LoadedFunction
from aicfc.ir import IRError, parse_module
from aicfc.passes.aicfc_fold_weight_casts import copy_source
from aicfc.runtime import registry
from aicfc.runtime.errors import ExecError
from aicfc.runtime.files import WriteError, atomic_write
from aicfc.runtime.plan import BufferSpec
from aicfc.tools.cli import (
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_OK,
    interrupted,
    one_line_warnings,
    usage_errors_exit_1,
)
from aicfc.training import TRAINING_STATE_PREFIXES


class RunError(Exception):
    """A user mistake on the command line or in the data files."""


@functools.cache
def _has_flag(op_name: str, flag: OpFlag) -> bool:
    cls = make_context().get_optional_op(op_name)
    return cls is not None and bool(static_flags(cls) & flag)


@dataclass(frozen=True)
class _IntegerOperand:
    """An op flag that makes operand `ints` integers in [0, dim `dim` of operand `bound`)."""

    flag: OpFlag
    ints: int
    bound: int
    dim: int


_LABELS = _IntegerOperand(OpFlag.TAKES_CLASS_LABELS, ints=1, bound=0, dim=-1)
"""Class labels (#1) of the logits (#0): [0, C) with C the logits' last dim."""
_TOKEN_IDS = _IntegerOperand(OpFlag.IS_GATHER, ints=0, bound=1, dim=0)
"""Gather ids (#0) of a table (#1): [0, V) with V the table's rows."""


def _integer_ranges(module: ModuleOp, rule: _IntegerOperand) -> dict[str, int]:
    """The bound of each integer argument (graph IR) or input buffer (exec IR) that an op
    flagged `rule.flag` (or a launch of a kernel implementing one) reads as `rule.ints`."""
    found: dict[str, int] = {}
    for op in module.walk():
        if isinstance(op, ex.LaunchOp):
            if len(op.inputs) >= 2 and _has_flag(_kernel_op(op), rule.flag):
                ints = op.inputs[rule.ints].owner
                if isinstance(ints, ex.BufferOp):
                    shape = ex.buffer_type(op.inputs[rule.bound]).get_shape()
                    found[ints.buffer_name.data] = shape[rule.dim]
        elif len(op.operands) >= 2 and _has_flag(op.name, rule.flag):
            arg = op.operands[rule.ints]
            name = arg_name(arg) if isinstance(arg, BlockArgument) else None
            if name is not None:
                found[name] = op.operands[rule.bound].type.get_shape()[rule.dim]  # type: ignore[attr-defined]
    return found


def _kernel_op(launch: ex.LaunchOp) -> str:
    try:
        return registry.get(launch.kernel_name).op
    except registry.UnknownKernelError:
        return ""


def label_classes(module: ModuleOp) -> dict[str, int]:
    """Classes C of each integer argument that is a cross-entropy's labels, by name.

    Graph IR: operand #1 of an op flagged TAKES_CLASS_LABELS (cross_entropy, its
    grad, the fused pair) is a function argument (C = the logits' last dim). Exec
    IR: a launch whose registry kernel implements such an op reads an input buffer
    as its labels (operand #1).
    """
    return _integer_ranges(module, _LABELS)


def token_id_rows(module: ModuleOp) -> dict[str, int]:
    """Rows V of the table each integer argument indexes as gather ids (operand #0 of an
    op flagged IS_GATHER: graph.embedding, or its exec launch), by name."""
    return _integer_ranges(module, _TOKEN_IDS)


def pick_function(module: ModuleOp, fn: str | None) -> str | None:
    """`fn`, or "train_step" when the module (graph or exec IR) has several functions
    including it; None leaves the choice to `find_program` (the only function)."""
    if fn is not None:
        return fn
    names = [op.sym_name.data for op in module.walk() if isinstance(op, func.FuncOp)]
    names += [op.sym_name.data for op in module.walk() if isinstance(op, ex.ProgramOp)]
    return "train_step" if len(names) > 1 and "train_step" in names else None


def _fan_in(b: BufferSpec, shapes: dict[str, tuple[int, ...]]) -> int:
    if b.name.endswith(".bias") and len(shapes.get(b.name[:-5] + ".weight", ())) == 2:
        return shapes[b.name[:-5] + ".weight"][1]
    if len(b.shape) >= 2:
        return math.prod(b.shape[1:])
    return max(1, math.prod(b.shape))


def generate(
    loaded: LoadedFunction,
    given: dict[str, np.ndarray],
    classes: dict[str, int],
    default_classes: int,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Values for every external: `given` ones, generated ones for the rest (see module doc)."""
    shapes = {b.name: b.shape for b in loaded.externals}
    outputs = set(loaded.executable.outputs)
    skipped = [n for n in given if n not in shapes and n in outputs]
    if skipped:  # e.g. "loss" of a previous run's --output: not an argument
        print(
            f"aicfc-run: note: skipping {', '.join(repr(n) for n in skipped)} from --inputs "
            f"(an output of @{loaded.executable.name}, not an argument)",
            file=sys.stderr,
        )
        given = {n: v for n, v in given.items() if n not in skipped}
    training = [n for n in given if n not in shapes and _training_entry(n, loaded)]
    if training:  # a train step's --output given to an inference function
        print(
            f"aicfc-run: note: skipping {len(training)} entries of a training checkpoint "
            f"from --inputs ({', '.join(repr(n) for n in training[:3])}"
            f"{', ...' if len(training) > 3 else ''}): @{loaded.executable.name} updates "
            "no state and takes only its inputs and params",
            file=sys.stderr,
        )
        given = {n: v for n, v in given.items() if n not in training}
    unknown = [n for n in given if n not in shapes]
    if unknown:
        raise RunError(
            f"--inputs has {', '.join(repr(n) for n in unknown)}, which @{loaded.executable.name} "
            f"does not take (its arguments: {', '.join(shapes)})"
        )
    values: dict[str, np.ndarray] = {}
    made: list[str] = []
    for b in loaded.externals:
        if b.name in given:
            v = np.asarray(given[b.name])
            if v.dtype.kind == "V" and v.dtype.itemsize == np.dtype(b.dtype).itemsize:
                v = v.view(b.dtype)  # .npz keeps bfloat16 as raw 2-byte words (|V2)
            values[b.name] = v
            continue
        made.append(b.name)
        if b.role == "state":
            values[b.name] = b.value if b.value is not None else np.zeros(b.shape, b.dtype)
        elif b.role == "param":
            bound = 1.0 / math.sqrt(_fan_in(b, shapes))
            values[b.name] = rng.uniform(-bound, bound, b.shape).astype(b.dtype)
        elif np.issubdtype(b.dtype, np.integer):
            c = classes.get(b.name, default_classes)
            values[b.name] = rng.integers(0, c, b.shape).astype(b.dtype)
        else:
            values[b.name] = rng.standard_normal(b.shape).astype(b.dtype)
    for b in loaded.externals:  # a copy the optimizer keeps: its param, rounded
        source = copy_source(b.name) if b.role == "state" and b.name in made else None
        if source is not None and source in values:
            with np.errstate(over="ignore"):
                values[b.name] = np.asarray(values[source]).astype(b.dtype)
    return values, made


TRAINING_ONLY = ("loss", RNG_OFFSET)
"""Entries of a train step's --output that an inference function never takes: its loss and
dropout's RNG counter (the optimizer's state is "<param>.<name>" and the training loop's
TRAINING_STATE_PREFIXES, see `_training_entry`)."""


def _training_entry(name: str, loaded: LoadedFunction) -> bool:
    """True if `name`, which `loaded` does not take, is what a training run adds to a
    checkpoint of `loaded`'s params, when `loaded` is an inference function (no state)."""
    if any(b.role == "state" for b in loaded.externals):
        return False
    if name in TRAINING_ONLY or name.startswith(TRAINING_STATE_PREFIXES):
        return True
    params = {b.name for b in loaded.externals if b.role == "param"}
    return any(name.startswith(f"{p}.") for p in params)


def updates_state(loaded: LoadedFunction) -> bool:
    """True if the program writes a param or state buffer (it is a train step)."""
    plan = loaded.executable.plan
    stored = {b.slot for b in loaded.stored}
    return any(stored.intersection(s.writes()) for s in plan.steps)


def _summary(loaded: LoadedFunction, made: list[str]) -> str:
    roles = {b.name: b.role for b in loaded.externals}
    inputs = [n for n in made if roles[n] == "input"]
    parts = [f"inputs {', '.join(inputs)}"] if inputs else []
    for role, what in (("param", "params"), ("state", "states at their initial values")):
        n = sum(roles[m] == role for m in made)
        if n:
            parts.append(f"{n} {what}")
    return "; ".join(parts)


def load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file by key; RunError for a missing, damaged or other file.

    `path` without its `.npz` suffix is accepted where only `path.npz` exists (numpy.savez
    adds the suffix)."""
    if not os.path.exists(path) and os.path.exists(path + ".npz"):
        path += ".npz"
    where = f"cannot read inputs '{path}'"
    try:
        with open(path, "rb") as f:
            npz = zipfile.is_zipfile(f)
        if not npz:
            raise RunError(
                f"{where}: not an .npz file (write one with numpy.savez(path, x=..., y=...), "
                "its keys the arguments' aicfc.name)"
            )
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except OSError as e:
        raise RunError(f"{where}: {e.strerror or e}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:  # a damaged archive or member
        raise RunError(f"{where}: the file is damaged ({e})") from None
    except ValueError as e:
        raise RunError(f"{where}: {e}") from None


def check_labels(
    values: dict[str, np.ndarray], classes: dict[str, int], ids: dict[str, int] | None = None
) -> None:
    """RunError for labels outside [0, C) or token ids outside [0, V) (the API's checks; the
    kernel would index past C or V)."""
    rules = (
        (
            classes,
            "labels",
            "for {} classes (the last dim of the logits of the cross-entropy it feeds)",
        ),
        (ids or {}, "ids", "(the {} rows of the embedding table it indexes)"),
    )
    for bounds, what, why in rules:
        for name, c in bounds.items():
            given = values.get(name)
            if given is None or given.size == 0 or not np.issubdtype(given.dtype, np.integer):
                continue
            lo, hi = int(given.min()), int(given.max())
            if lo < 0 or hi >= c:
                raise RunError(
                    f'input "{name}": {what} must be in [0, {c}) {why.format(c)}, '
                    f"got values from {lo} to {hi}"
                )


def check_output_path(path: str) -> None:
    """RunError when --output cannot be written (checked before any step runs)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise RunError(f"cannot write '{path}': it is a directory")
    if not os.path.isdir(folder):
        raise RunError(f"cannot write '{path}': No such file or directory ('{folder}')")
    if not os.access(folder, os.W_OK):
        raise RunError(f"cannot write '{path}': directory '{folder}' is not writable")


def save_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` to `path` exactly (no suffix is added), atomically (runtime/files.py):
    after any failure, Ctrl-C included, an existing file is as it was. RunError names `path`."""
    try:
        with atomic_write(path, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # names are not savez options
    except WriteError as e:
        raise RunError(str(e)) from None


def _loss_text(a: np.ndarray) -> str:
    """A one-element loss as a number; any other "loss" output as its dtype and shape."""
    return f"{float(a.reshape(())):.6f}" if a.size == 1 else f"{a.dtype}{list(a.shape)}"


def _describe(name: str, a: np.ndarray) -> str:
    value = f" = {a.item():.6g}" if a.size == 1 else ""
    return f"  {name}: {a.dtype}{list(a.shape)}{value}"


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RunError(f"cannot open '{args.file}': {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise RunError(
            f"cannot read '{args.file}': not UTF-8 text ({e.reason} at byte {e.start})"
        ) from None
    if args.output:
        check_output_path(args.output)
    module = parse_module(text, args.file)
    classes = label_classes(module)
    ids = token_id_rows(module)
    backend, reason = resolve_backend(args.backend)
    if args.backend == "auto":
        print(f"aicfc-run: backend {reason}", file=sys.stderr)
    loaded = LoadedFunction.load(
        module, pick_function(module, args.function), backend, inplace=not args.no_inplace
    )
    given = load_npz(args.inputs) if args.inputs else {}
    rng = np.random.default_rng(args.seed)
    values, made = generate(loaded, given, {**classes, **ids}, args.label_classes, rng)
    check_labels(values, classes, ids)
    feed = loaded.set_values(values)
    if made:
        print(f"aicfc-run: generated {_summary(loaded, made)} (seed {args.seed})", file=sys.stderr)
    train = updates_state(loaded)
    outputs: dict[str, np.ndarray] = {}
    every = max(1, args.print_every)
    for step in range(1, args.steps + 1):
        outputs = loaded.run(feed)
        if "loss" in outputs and (step % every == 0 or step in (1, args.steps)):
            print(f"step {step}: loss {_loss_text(outputs['loss'])}")
    results = loaded.results(outputs) if train else dict(outputs)
    print(f"@{loaded.executable.name}: {args.steps} step(s) on {loaded.store.backend.name}")
    for name, a in outputs.items():
        print(_describe(name, a))
    if args.output:
        save_npz(args.output, results)
        print(f"wrote {len(results)} arrays to {args.output}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="aicfc-run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="More: docs/aicfc-run.md. The passes that lower graph IR: docs/passes.md.",
    )
    usage_errors_exit_1(p)
    p.add_argument("file", help="an .mlir module (graph-level or exec IR)")
    p.add_argument(
        "--function",
        "-f",
        help="function to run (default: the only one, else train_step; graph or exec IR)",
    )
    p.add_argument(
        "--inputs",
        "-i",
        help=".npz of argument values keyed by aicfc.name (a previous --output resumes)",
    )
    p.add_argument(
        "--output", "-o", help=".npz to write outputs and final params/state to (written as named)"
    )
    p.add_argument("--steps", type=int, default=1, help="how many times to run (default 1)")
    p.add_argument("--print-every", type=int, default=1, help="print the loss every k steps")
    p.add_argument("--seed", type=int, default=0, help="seed of generated values (default 0)")
    p.add_argument(
        "--label-classes",
        type=int,
        default=10,
        help="classes of generated integer labels when the IR does not say (default 10)",
    )
    p.add_argument(
        "--backend",
        default="numpy",
        help="numpy (default), cupy (also called cuda) or auto (cupy where usable; "
        "says why on stderr)",
    )
    p.add_argument("--no-inplace", action="store_true", help="disable aicfc-fold-inplace")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aicfc-run` console script; returns the exit code (tools/cli.py)."""
    try:
        with one_line_warnings("aicfc-run"):
            return _main(argv)
    except KeyboardInterrupt:
        return interrupted("aicfc-run")


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.steps < 1 or args.label_classes < 1:
        print("aicfc-run: error: --steps and --label-classes must be >= 1", file=sys.stderr)
        return EXIT_ERROR
    if args.seed < 0:  # numpy.random.default_rng said only "expected non-negative integer"
        print(f"aicfc-run: error: --seed must be >= 0, got {args.seed}", file=sys.stderr)
        return EXIT_ERROR
    try:
        return run(args)
    except (IRError, PassFailedException, DiagnosticException) as e:
        print(str(e).rstrip(), file=sys.stderr)
    except (RunError, ExecError, ValueError) as e:
        print(f"aicfc-run: error: {e}", file=sys.stderr)
    except Exception as e:  # an internal failure: name it, no traceback
        print(
            f"aicfc-run: internal error: {type(e).__name__}: {e}\n"
            "(please report this with the input file)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
