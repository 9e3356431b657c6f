"""The dropout mask of runtime/reference.py against published values, not against itself.

Every other dropout test (interpreter, NumPy runtime, CUDA kernel, the torch
comparison in test_vjp.py) takes its expected mask from `reference.dropout_keep`,
so a wrong Philox passed them all (a 9-round Philox left the CPU suite green).
Here:

- `philox4x32_10` reproduces, bit for bit, the three Philox4x32-10 known-answer
  vectors of Random123's kat_vectors file (Salmon et al., "Parallel random
  numbers: as easy as 1, 2, 3", SC 2011);
- `dropout_keep(n, offset, p, seed)` keeps element i iff (w >> 8) >= round(p * 2^24),
  w being word i % 4 of Philox4x32-10 with counter (i // 4 low, high, offset low,
  high) and key (seed low, high), as its docstring says: on the all-zero vector
  the words are the published ones; elsewhere the layout is written out here;
- the kept fraction of 2^16 elements is within 4 standard deviations of 1 - p.
"""

from __future__ import annotations

import numpy as np
import pytest

from aicfc.runtime.reference import dropout_keep, philox4x32_10

# (counter words, key words, output words) from Random123's kat_vectors.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "words"), KAT, ids=["zeros", "ones", "pi"])
def test_philox_reproduces_the_random123_known_answers(counter, key, words):
    out = philox4x32_10(np.array([counter], np.uint32), key)
    assert out.dtype == np.uint32
    assert out[0].tolist() == list(words)


def test_dropout_keep_on_the_all_zero_vector():
    # Counter (0, 0, 0, 0), key (0, 0): the first KAT vector. round(0.5 * 2^24) = 0x800000.
    words = np.array(KAT[0][2], np.uint32)
    assert dropout_keep(4, 0, 0.5, 0).tolist() == [False, True, True, True]
    assert ((words >> 8) >= 0x800000).tolist() == [False, True, True, True]


@pytest.mark.parametrize(
    ("offset", "seed", "p"), [(3, 42, 0.25), ((5 << 32) + 7, (9 << 32) + 11, 0.6)]
)
def test_dropout_keep_takes_offset_and_seed_where_its_docstring_says(offset, seed, p):
    n = 10  # three blocks of four words, the last one cut
    blocks = np.array(
        [[q, 0, offset & 0xFFFFFFFF, offset >> 32] for q in range((n + 3) // 4)], np.uint32
    )
    words = philox4x32_10(blocks, (seed & 0xFFFFFFFF, seed >> 32)).reshape(-1)[:n]
    want = (words >> 8) >= round(p * (1 << 24))
    assert dropout_keep(n, offset, p, seed).tolist() == want.tolist()


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_kept_fraction_is_one_minus_p(p):
    n = 1 << 16
    kept = float(dropout_keep(n, 17, p, 1234).mean())
    assert abs(kept - (1 - p)) <= 4 * np.sqrt(p * (1 - p) / n)
