"""Mutation fuzzing of aicfc-opt and aicfc-run, seeded with the lit inputs.

Each mutant is a chunk of a lit input (a `.mlir` file under test/, split at `// -----`;
three in four from the chunks that parse, since most are cases of one error) with one
to three random edits: a line deleted, duplicated or swapped, the text cut
short, a span deleted, punctuation inserted, a number, type, SSA name, op name or
string replaced. It goes through the tools in this process (a subprocess costs
~0.5 s to start):

    aicfc-opt mutant.mlir
    aicfc-opt mutant.mlir -p aicfc-train-pipeline     (when the first one parsed it)
    aicfc-run mutant.mlir --steps 1                   (likewise)

A run is a failure when it ends with anything but exit code 0 or 1, raises out of
`main` (an escaped exception, not SystemExit), prints `Traceback` or `internal error`,
or runs longer than the time limit (a hang). Numbers in types stay small so a mutant
never asks for gigabytes. Deterministic for a seed.

    python test/python/fuzzing.py --mutants 5000 --seed 1 --keep /tmp/fuzz

runs a campaign and prints its figures; `test/python/tools/test_fuzz.py` runs a small
one in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import re
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# --- seeds ------------------------------------------------------------------------------


def seed_chunks(root: Path = ROOT) -> list[tuple[str, str]]:
    """(name, text) of every `// -----` chunk of the lit inputs, in a fixed order."""
    chunks = []
    files = sorted(p for p in (root / "test").rglob("*.mlir") if "Output" not in p.parts)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for i, chunk in enumerate(text.split("// -----")):
            if chunk.strip():
                chunks.append((f"{path.relative_to(root)}#{i}", chunk))
    return chunks


def parses(text: str) -> bool:
    """True if aicfc parses and verifies `text` (most lit chunks are cases of one error)."""
    import warnings

    from aicfc.ir import IRError, parse_module

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parse_module(text)
    except IRError:
        return False
    return True


# --- mutations --------------------------------------------------------------------------

NUMBERS = ["0", "1", "2", "3", "-1", "-2", "7", "64", "100000", "-100000", "9223372036854775807"]
FLOATS = ["0.0", "-0.0", "1.0e39", "-1.0e39", "1.0e-50", "0x7FC00000", "0x7F800000", "1.5"]
FLOATS += ["16777216.0", "nan", "inf", "1e3", "0x1FFFFFFFFFFFFFFFFF"]
TYPES = ["f32", "f16", "bf16", "f64", "i32", "i64", "i1", "index", "tensor<f32>", "tensor<4xf32>"]
TYPES += ["tensor<?xf32>", "tensor<0x4xf32>", "tensor<4x0xf32>", "tensor<2x3x4xf32>", "none"]
TYPES += ["tensor<3xi32>", "tensor<4xi64>", "!exec.buffer<4xf32, tmp>", "tensor<*xf32>"]
OPS = [
    "graph.matmul", "graph.bias_add", "graph.add", "graph.sub", "graph.mul", "graph.relu",
    "graph.gelu", "graph.tanh", "graph.softmax", "graph.reduce_sum", "graph.reshape",
    "graph.transpose", "graph.cross_entropy", "graph.mse_loss", "graph.dropout",
    "graph.gemm_epilogue", "graph.constant", "graph.broadcast_to", "autodiff.backward",
    "autodiff.adam_step", "autodiff.sgd_step", "autodiff.relu_grad", "exec.launch",
    "exec.buffer", "exec.alloc", "exec.copy", "exec.graph", "exec.program", "exec.return",
    "func.return", "func.func", "func.call", "builtin.module",
]  # fmt: skip
STRINGS = ['"input"', '"param"', '"state"', '"bogus"', '""', '"x"', '"loss"', '"0.weight"']
STRINGS += ['"numpy"', '"cuda"', '"cuda.gemm_tf32"', '"numpy.graph.add"', '"relu"', '"none"']
PUNCT = ["(", ")", "{", "}", "<", ">", "[", "]", ",", ":", "=", "%", "^", "#", "@", '"', "->"]

_NUMBER = re.compile(r"(?<![\w.%#@^])-?\d+(?:\.\d*)?(?:e[-+]?\d+)?(?![\w.])")
_DIMS = re.compile(r"(?<=[<x])\d+(?=x)")
_TYPE = re.compile(r"tensor<[^<>]*>|!exec\.buffer<[^<>]*>|\b(?:f16|bf16|f32|f64|i1|i32|i64)\b")
_SSA = re.compile(r"%[\w.$-]+(?:#\d+)?")
_OP = re.compile(r"\b(?:graph|autodiff|exec|func)\.\w+")
_STRING = re.compile(r'"[^"\n]*"')


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _sub_one(
    pattern: re.Pattern[str], text: str, rng: random.Random, new: Callable[[], str]
) -> str:
    found = list(pattern.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    return text[: m.start()] + new() + text[m.end() :]


def delete_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    del lines[rng.randrange(len(lines))]
    return "\n".join(lines)


def duplicate_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])
    return "\n".join(lines)


def swap_lines(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def truncate(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(len(text) + 1)]


def delete_span(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    return text[:i] + text[i + rng.randint(1, 12) :]


def insert_punctuation(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(PUNCT) + text[i:]


def replace_number(text: str, rng: random.Random) -> str:
    return _sub_one(_NUMBER, text, rng, lambda: rng.choice(NUMBERS + FLOATS))


def replace_dim(text: str, rng: random.Random) -> str:
    return _sub_one(_DIMS, text, rng, lambda: rng.choice(["0", "1", "2", "3", "5", "8"]))


def replace_type(text: str, rng: random.Random) -> str:
    return _sub_one(_TYPE, text, rng, lambda: rng.choice(TYPES))


def replace_ssa_name(text: str, rng: random.Random) -> str:
    names = sorted(set(_SSA.findall(text)))
    if not names:
        return text
    return _sub_one(_SSA, text, rng, lambda: rng.choice([*names, "%undefined", "%0#7"]))


def replace_op_name(text: str, rng: random.Random) -> str:
    return _sub_one(_OP, text, rng, lambda: rng.choice(OPS))


def replace_string(text: str, rng: random.Random) -> str:
    return _sub_one(_STRING, text, rng, lambda: rng.choice(STRINGS))


MUTATIONS: tuple[Callable[[str, random.Random], str], ...] = (
    delete_line, duplicate_line, swap_lines, truncate, delete_span, insert_punctuation,
    replace_number, replace_number, replace_dim, replace_type, replace_type,
    replace_ssa_name, replace_ssa_name, replace_op_name, replace_string,
)  # fmt: skip


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.choice((1, 1, 2, 3))):
        text = rng.choice(MUTATIONS)(text, rng)
    return text


# --- running the tools --------------------------------------------------------------------


class Hang(BaseException):
    """A run exceeded its time limit (a BaseException: the tools catch Exception)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Run:
    """One tool run on one mutant: exit code (None: it raised), output, and the verdict."""

    tool: str
    args: list[str]
    code: int | None
    output: str
    failure: str | None  # None, "exit code N", "traceback", "internal error", "hang", "raised"


def run_tool(tool: str, args: list[str], limit: float) -> Run:
    from aicfc.tools import aicfc_opt, aicfc_run

    main = aicfc_opt.main if tool == "aicfc-opt" else aicfc_run.main
    out = io.StringIO()
    code: int | None = None
    failure = None
    try:
        with time_limit(limit), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except Hang:
        failure = "hang"
    except BaseException:  # anything escaping main is a failure
        failure = "raised"
        out.write(traceback.format_exc())
    text = out.getvalue()
    if failure is None:
        if "Traceback" in text:
            failure = "traceback"
        elif "internal error" in text:
            failure = "internal error"
        elif code not in (0, 1):
            failure = f"exit code {code}"
    return Run(tool, args, code, text, failure)


def runs_for(path: str, limit: float) -> list[Run]:
    """The three runs of one mutant (the last two only when aicfc-opt parsed it)."""
    runs = [run_tool("aicfc-opt", [path], limit)]
    if runs[0].code == 0:
        runs.append(run_tool("aicfc-opt", [path, "-p", "aicfc-train-pipeline"], limit))
        runs.append(run_tool("aicfc-run", [path, "--steps", "1"], limit))
    return runs


@dataclass
class Campaign:
    mutants: int
    runs: int
    parsed: int
    failures: list[tuple[str, str, Run]]  # (seed chunk name, mutant text, run)
    seconds: float

    def summary(self) -> str:
        kinds = Counter(f"{r.tool}: {r.failure}" for _, _, r in self.failures)
        lines = [
            f"{self.mutants} mutants, {self.runs} tool runs, {self.parsed} parsed, "
            f"{len(self.failures)} failures in {self.seconds:.0f} s",
            *(f"  {n} x {k}" for k, n in kinds.most_common()),
        ]
        return "\n".join(lines)


def campaign(mutants: int, seed: int, limit: float = 20.0, keep: Path | None = None) -> Campaign:
    """Run `mutants` mutants (seed `seed`); failing mutants are written to `keep` if given."""
    rng = random.Random(seed)
    chunks = seed_chunks()
    valid = [c for c in chunks if parses(c[1])]  # 3 in 4 mutants start from valid IR
    failures: list[tuple[str, str, Run]] = []
    runs = parsed = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "mutant.mlir")
        for i in range(mutants):
            pool = valid if rng.random() < 0.75 else chunks
            name, text = pool[rng.randrange(len(pool))]
            text = mutate(text, rng)
            Path(path).write_text(text, encoding="utf-8")
            results = runs_for(path, limit)
            runs += len(results)
            parsed += results[0].code == 0
            for r in results:
                if r.failure is not None:
                    failures.append((name, text, r))
                    if keep is not None:
                        keep.mkdir(parents=True, exist_ok=True)
                        (keep / f"mutant-{i}.mlir").write_text(text, encoding="utf-8")
                        (keep / f"mutant-{i}.txt").write_text(
                            f"{name}\n{r.tool} {' '.join(r.args)}\n{r.failure}\n{r.output}"
                        )
    return Campaign(mutants, runs, parsed, failures, time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mutants", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=float, default=20.0, help="seconds per tool run")
    p.add_argument("--keep", type=Path, help="folder for the failing mutants and their output")
    args = p.parse_args(argv)
    result = campaign(args.mutants, args.seed, args.limit, args.keep)
    print(result.summary())
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
