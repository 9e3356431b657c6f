"""One rank of the data-parallel tests (test_distributed_cpu.py, gpu/test_data_parallel_gpu.py).

    python -m aicfc.distributed --nproc 2 distributed_worker.py --steps 20 --shard 8 --out p.npz
    python distributed_worker.py --single --steps 20 --shard 16 --out p.npz   # one process

Every rank draws the same global batches (seed 1) and trains on its shard
(aicfc.distributed.shard) with `data_parallel=True`; each rank initialises the model
with its own seed, so only the broadcast from rank 0 makes them start equal. Rank 0
writes the final state with save_checkpoint (atomically, rank 0 only). `--single`
trains one process on whole batches of `--shard` rows, the reference. `--die-rank R
--die-step K` makes rank R exit with code 3 before step K (a rank that dies).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import aicfc
from aicfc import distributed, nn, optim

IN, HIDDEN, CLASSES = 12, 32, 5


def make_model(seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    return nn.Sequential(
        nn.Linear(IN, HIDDEN, rng=rng),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN, rng=rng),
        nn.GELU(),
        nn.Linear(HIDDEN, CLASSES, rng=rng),
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="numpy")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--shard", type=int, default=8, help="rows per rank (the batch with --single)")
    p.add_argument("--single", action="store_true")
    p.add_argument("--out")
    p.add_argument("--bucket-mb", type=float, default=0.004)
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--die-step", type=int, default=-1)
    args = p.parse_args()
    rank = 0 if args.single else int(os.environ["RANK"])
    world = 1 if args.single else int(os.environ["WORLD_SIZE"])
    # Each rank initialises differently; the reference starts from rank 0's weights.
    model = make_model(100 + rank)
    dp: bool | distributed.DataParallel = (
        False if args.single else distributed.DataParallel(bucket_mb=args.bucket_mb)
    )
    prog = aicfc.compile(
        model, optimizer=optim.Adam(lr=1e-2), backend=args.backend, data_parallel=dp
    )
    data = np.random.default_rng(1)
    batch = args.shard if args.single else args.shard * world
    for step in range(args.steps):
        x = data.standard_normal((batch, IN)).astype(np.float32)
        y = data.integers(0, CLASSES, batch).astype(np.int32)
        if step == args.die_step and rank == args.die_rank:
            print(f"rank {rank}: dying before step {step}", file=sys.stderr, flush=True)
            os._exit(3)
        if not args.single:
            x, y = distributed.shard(x, y)
        prog.step(x, y)
    if args.out:
        distributed.save_checkpoint(prog, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
