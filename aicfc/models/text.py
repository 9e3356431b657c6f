"""A character corpus that every Python has without a download, its baselines and metrics.

The corpus is the running interpreter's own standard library: every `.py` file under
`sysconfig.get_paths()["stdlib"]`, in the order of their relative paths (POSIX
separators), skipping the test suites (folders named `test`, `tests`, `idle_test`),
`site-packages`/`dist-packages` and `__pycache__`. A file is held out when the CRC-32
of its relative path is 0 mod 10 (about a tenth of the files): the split depends on
the path alone, so it is the same on every machine for every file both have. The text
differs between Python versions (CPython 3.11.7 here: 734 files, 12.1 M characters, 75
held out with 1.17 M), so figures measured on one version are not exactly those of
another; `StdlibCorpus.describe()` says which one was read.

Characters: the 96 of `VOCAB` (newline and the printable ASCII range 32..126); the few
other bytes (UTF-8 of non-ASCII letters in comments and strings: about 2,500 of 12 M) are
dropped. Ids are uint8 indices into VOCAB.
"""

from __future__ import annotations

import math
import os
import platform
import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from aicfc.program import Program

VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
"""The 96 characters of the corpus, id = index (newline is id 0, space id 1)."""

SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages"})
HELD_OUT_MODULUS = 10

_BYTE_TO_ID = np.full(256, -1, np.int16)
for _i, _c in enumerate(VOCAB):
    _BYTE_TO_ID[ord(_c)] = _i


def encode(text: str | bytes) -> np.ndarray:
    """Ids (uint8) of the VOCAB characters of `text`, every other character dropped."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    ids = _BYTE_TO_ID[np.frombuffer(raw, np.uint8)]
    return ids[ids >= 0].astype(np.uint8)


def decode(ids: np.ndarray | list[int]) -> str:
    return "".join(VOCAB[int(i)] for i in ids)


def is_held_out(relative_path: str) -> bool:
    """The split rule: CRC-32 of the POSIX relative path is 0 mod HELD_OUT_MODULUS."""
    return zlib.crc32(relative_path.encode("utf-8")) % HELD_OUT_MODULUS == 0


def stdlib_files(root: str | Path) -> list[str]:
    """Relative POSIX paths of the corpus's .py files under `root`, sorted."""
    root = Path(root)
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and d != "__pycache__"]
        rel = Path(folder).relative_to(root)
        found += [(rel / f).as_posix() for f in files if f.endswith(".py")]
    return sorted(found)


@dataclass(frozen=True)
class StdlibCorpus:
    """The encoded corpus: `train` and `held_out` are uint8 ids, files in path order."""

    root: str
    python: str
    train: np.ndarray
    held_out: np.ndarray
    train_files: int
    held_out_files: int

    @classmethod
    def load(cls, root: str | Path | None = None) -> StdlibCorpus:
        """Read and encode the standard library under `root` (default: this Python's).

        Raises FileNotFoundError when `root` holds no .py file.
        """
        root = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
        files = stdlib_files(root)
        if not files:
            raise FileNotFoundError(f"no .py files under {root} (the corpus is the stdlib)")
        parts: dict[bool, list[bytes]] = {False: [], True: []}
        for rel in files:
            parts[is_held_out(rel)].append((root / rel).read_bytes())
        return cls(
            root=str(root),
            python=f"{platform.python_implementation()} {platform.python_version()}",
            train=encode(b"".join(parts[False])),
            held_out=encode(b"".join(parts[True])),
            train_files=len(parts[False]),
            held_out_files=len(parts[True]),
        )

    def describe(self) -> str:
        return (
            f"{self.python} standard library ({self.root}): {self.train_files} files, "
            f"{self.train.size:,} characters to train on; {self.held_out_files} files, "
            f"{self.held_out.size:,} characters held out"
        )


def random_batch(
    data: np.ndarray, batch: int, block: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`batch` windows at uniform random offsets: x = data[i : i+block], y the next ids
    (x shifted by one), both int32 [batch, block] (nanoGPT's get_batch)."""
    starts = rng.integers(0, data.size - block, size=batch)
    return _windows(data, starts, block)


def _windows(data: np.ndarray, starts: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    idx = starts[:, None] + np.arange(block)[None, :]
    return data[idx].astype(np.int32), data[idx + 1].astype(np.int32)


def eval_windows(data: np.ndarray, count: int, block: int) -> np.ndarray:
    """Start offsets of `count` windows spread evenly over `data` (a fixed evaluation set)."""
    return np.linspace(0, data.size - block - 1, count).astype(np.int64)


def bits_per_char(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean cross-entropy of `targets` [...] under `logits` [..., V], in bits (float64)."""
    z = logits.astype(np.float64).reshape(-1, logits.shape[-1])
    z = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    nats = lse - z[np.arange(z.shape[0]), targets.reshape(-1)]
    return float(nats.mean() / math.log(2))


def held_out_bits(prog: Program, data: np.ndarray, block: int, batch: int, windows: int) -> float:
    """The model's mean bits per character over `windows` fixed windows of held-out `data`
    (every position of each window, as nanoGPT's estimate_loss), predicted `batch` at a time.
    `windows` must be a multiple of `batch` (one @predict shape)."""
    if windows % batch:
        raise ValueError(f"held_out_bits: windows={windows} is not a multiple of batch={batch}")
    starts = eval_windows(data, windows, block)
    total = 0.0
    for i in range(0, windows, batch):
        x, y = _windows(data, starts[i : i + batch], block)
        total += bits_per_char(np.asarray(prog.predict(x)), y)
    return total / (windows // batch)


def unigram_bits(train: np.ndarray, held_out: np.ndarray, vocab: int = len(VOCAB)) -> float:
    """Held-out bits per character of the unigram model p(c) = (n(c) + 1) / (N + V) fitted on
    `train` (add-one smoothing)."""
    counts = np.bincount(train, minlength=vocab).astype(np.float64) + 1.0
    logp = np.log2(counts / counts.sum())
    return float(-logp[held_out].mean())


def bigram_bits(train: np.ndarray, held_out: np.ndarray, vocab: int = len(VOCAB)) -> float:
    """Held-out bits per character of the bigram model p(c | b) = (n(b, c) + 1) / (n(b) + V)
    fitted on `train` (add-one smoothing); the first held-out character is not scored."""
    pairs = train[:-1].astype(np.int64) * vocab + train[1:]
    counts = np.bincount(pairs, minlength=vocab * vocab).reshape(vocab, vocab) + 1.0
    logp = np.log2(counts / counts.sum(axis=1, keepdims=True))
    return float(-logp[held_out[:-1], held_out[1:]].mean())


__all__ = [
    "VOCAB",
    "StdlibCorpus",
    "bigram_bits",
    "bits_per_char",
    "decode",
    "encode",
    "eval_windows",
    "held_out_bits",
    "is_held_out",
    "random_batch",
    "stdlib_files",
    "unigram_bits",
]
