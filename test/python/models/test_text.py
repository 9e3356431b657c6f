"""aicfc.models.text: the stdlib character corpus, its split, baselines and bits per character."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch

from aicfc.models import text


def test_vocab_is_newline_and_printable_ascii():
    assert len(text.VOCAB) == 96 and text.VOCAB[0] == "\n" and text.VOCAB[1] == " "
    assert text.VOCAB[-1] == "~"
    s = "def f(x):\n    return x  # ok\n"
    np.testing.assert_array_equal(text.encode(s), [text.VOCAB.index(c) for c in s])
    assert text.decode(text.encode(s)) == s


def test_other_characters_are_dropped():
    assert text.decode(text.encode("caf\u00e9\t\r\n\u2014!")) == "caf\n!"
    assert text.encode("caf\u00e9".encode()).dtype == np.uint8


def test_split_is_by_path_crc32():
    paths = [f"pkg/mod{i}.py" for i in range(200)]
    held = [p for p in paths if text.is_held_out(p)]
    assert held == [p for p in paths if zlib.crc32(p.encode()) % 10 == 0]
    assert 5 <= len(held) <= 40  # about a tenth


def test_load_reads_sorted_files_skips_tests_and_splits_by_file(tmp_path):
    files = {
        "b.py": "bbb\n",
        "a.py": "aaa\n",
        "pkg/c.py": "ccc\n",
        "test/t.py": "TEST\n",
        "pkg/tests/u.py": "TEST\n",
        "site-packages/s.py": "SITE\n",
        "notes.txt": "TXT\n",
    }
    for rel, body in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    assert text.stdlib_files(tmp_path) == ["a.py", "b.py", "pkg/c.py"]
    corpus = text.StdlibCorpus.load(tmp_path)
    held = [p for p in ("a.py", "b.py", "pkg/c.py") if text.is_held_out(p)]
    train = [p for p in ("a.py", "b.py", "pkg/c.py") if not text.is_held_out(p)]
    assert text.decode(corpus.train) == "".join(files[p] for p in train)
    assert text.decode(corpus.held_out) == "".join(files[p] for p in held)
    assert (corpus.train_files, corpus.held_out_files) == (len(train), len(held))
    with pytest.raises(FileNotFoundError, match=r"no \.py files"):
        text.StdlibCorpus.load(tmp_path / "pkg" / "tests" / "none")


def test_unigram_and_bigram_baselines_by_hand():
    train = np.array([0, 0, 1, 0], np.uint8)  # a a b a, vocabulary {a, b, c}
    held = np.array([0, 1, 2], np.uint8)  # a b c
    # unigram: counts + 1 = a 4, b 2, c 1 over 7
    want = -(math.log2(4 / 7) + math.log2(2 / 7) + math.log2(1 / 7)) / 3
    assert text.unigram_bits(train, held, vocab=3) == pytest.approx(want, rel=1e-12)
    # bigram pairs aa, ab, ba: p(b|a) = (1+1)/(2+3), p(c|b) = (0+1)/(1+3)
    want = -(math.log2(2 / 5) + math.log2(1 / 4)) / 2
    assert text.bigram_bits(train, held, vocab=3) == pytest.approx(want, rel=1e-12)


def test_bits_per_char_is_cross_entropy_over_ln2():
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((3, 5, 7)) * 4).astype(np.float32)
    targets = rng.integers(0, 7, (3, 5))
    want = torch.nn.functional.cross_entropy(
        torch.from_numpy(logits.reshape(-1, 7)).double(), torch.from_numpy(targets.reshape(-1))
    ).item() / math.log(2)
    assert text.bits_per_char(logits, targets) == pytest.approx(want, rel=1e-12)


def test_batches_are_windows_and_their_next_characters():
    data = np.arange(100, dtype=np.uint8)
    x, y = text.random_batch(data, 4, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8) and x.dtype == np.int32
    np.testing.assert_array_equal(y, x + 1)
    assert np.all(np.diff(x, axis=1) == 1) and x.max() < 99
    starts = text.eval_windows(data, 5, 8)
    assert starts[0] == 0 and starts[-1] == 100 - 8 - 1 and np.all(np.diff(starts) > 0)
