"""Models built from aicfc.nn: `gpt.GPT`, a decoder-only transformer language model, and
`text`, the character corpus and baselines of examples/train_char_gpt.py."""

from __future__ import annotations

from aicfc.models.gpt import GPT, GPTConfig, generate

__all__ = ["GPT", "GPTConfig", "generate"]
