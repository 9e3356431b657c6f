"""aicfc-launch: start N ranks of a training script on this host, as torchrun does.

    aicfc-launch --nproc 2 train.py --epochs 3
    python -m aicfc.distributed --nproc 2 train.py --epochs 3

Each rank is `python train.py --epochs 3` with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, AICFC_RENDEZVOUS (a fresh directory the ranks share, removed at the
end) and AICFC_TIMEOUT in its environment (aicfc/distributed/__init__.py reads them),
and NCCL_NVLS_ENABLE=0 unless set (NVLink multicast off).

A rank that fails must not leave the others hanging in a collective: when one exits
with a non-zero code (or is killed by a signal), the launcher reports it, gives the
others `--grace` seconds to stop on their own (a CPU rank times out at its next
collective naming the dead one; a rank blocked inside NCCL never returns), then
terminates them, and exits 1 with a message naming the rank that failed first. Ctrl-C
stops every rank (exit 130). Exit codes as the other tools: 0 all ranks succeeded,
1 a rank failed or a usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import NoReturn

from aicfc.runtime.collectives import DEFAULT_TIMEOUT

PROG = "aicfc-launch"
POLL = 0.05
"""Seconds between checks of the ranks' exit status."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Start N data-parallel ranks of a Python script (RANK, WORLD_SIZE, "
        "LOCAL_RANK in their environment).",
    )
    p.add_argument("--nproc", type=int, required=True, help="number of ranks (one per GPU)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds a rank waits for another at a collective before failing (AICFC_TIMEOUT)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds the other ranks get to stop after one fails, before they are terminated",
    )
    p.add_argument("script", help="the Python script each rank runs")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")

    def error(message: str) -> NoReturn:  # a usage error exits 1, as aicfc-opt's do
        p.print_usage(sys.stderr)
        p.exit(1, f"{PROG}: error: {message}\n")

    p.error = error  # type: ignore[method-assign]
    return p


def describe_exit(code: int) -> str:
    """`exited with code 3`, or `was killed by SIGKILL` for a negative Popen code."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def rank_env(
    base: dict[str, str], rank: int, world: int, rendezvous: str, timeout: float
) -> dict[str, str]:
    """The environment of rank `rank` (one host: local rank = rank)."""
    env = dict(base)
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        AICFC_RENDEZVOUS=rendezvous,
        AICFC_TIMEOUT=repr(timeout),
    )
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    return env


def _stop(procs: Sequence[subprocess.Popen[bytes]], wait: float = 5.0) -> None:
    """SIGTERM every running rank, SIGKILL those still running after `wait` seconds."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
    deadline = time.monotonic() + wait
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()


def supervise(procs: Sequence[subprocess.Popen[bytes]], grace: float) -> int:
    """Wait for the ranks; 0 if all succeeded, else 1 after reporting the first failure."""
    failed: tuple[int, int] | None = None
    deadline = None
    while True:
        codes = [p.poll() for p in procs]
        if failed is None:
            bad = [(r, c) for r, c in enumerate(codes) if c is not None and c != 0]
            if bad:
                failed = bad[0]
                print(
                    f"{PROG}: error: rank {failed[0]} {describe_exit(failed[1])}; stopping the "
                    f"other ranks (they get {grace:g} s to exit)",
                    file=sys.stderr,
                    flush=True,
                )
                deadline = time.monotonic() + grace
        if all(c is not None for c in codes):
            break
        if deadline is not None and time.monotonic() > deadline:
            running = [r for r, c in enumerate(codes) if c is None]
            print(
                f"{PROG}: error: terminating rank {', '.join(map(str, running))} (still running "
                f"{grace:g} s after rank {failed[0] if failed else '?'} failed)",
                file=sys.stderr,
                flush=True,
            )
            _stop(procs)
            break
        time.sleep(POLL)
    if failed is None:
        return 0
    print(
        f"{PROG}: error: rank {failed[0]} of {len(procs)} {describe_exit(failed[1])}",
        file=sys.stderr,
        flush=True,
    )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.nproc < 1:
        p.error(f"--nproc must be at least 1, got {args.nproc}")
    if args.timeout <= 0 or args.grace < 0:
        p.error(
            f"--timeout must be positive and --grace non-negative, got {args.timeout:g} "
            f"and {args.grace:g}"
        )
    if not os.path.isfile(args.script):
        print(f"{PROG}: error: no script {args.script!r}", file=sys.stderr)
        return 1
    rendezvous = tempfile.mkdtemp(prefix="aicfc-rendezvous-")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(args.nproc):
            env = rank_env(dict(os.environ), rank, args.nproc, rendezvous, args.timeout)
            procs.append(subprocess.Popen([sys.executable, args.script, *args.args], env=env))
        return supervise(procs, args.grace)
    except KeyboardInterrupt:
        _stop(procs)
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        _stop(procs, wait=1.0)
        shutil.rmtree(rendezvous, ignore_errors=True)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
