"""What the training examples share: positive-number arguments, the training-loop options
(--schedule, --clip, --plot) and writing the loss and lr figure.

The examples import it by its name: a script run as `python examples/<name>.py` has
examples/ first on sys.path, and pytest's `pythonpath` (pyproject.toml) adds it for the
tests that load an example from its file.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

from aicfc.optim import lr_scheduler
from aicfc.runtime.files import WriteError, atomic_write


def positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse `type` accepting only a finite number > 0 of `kind` (int or float)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"  # argparse's "invalid <name> value" message
    return parse


def add_loop_arguments(parser: argparse.ArgumentParser, schedule: str) -> None:
    """--schedule (default `schedule`: "constant" or "cosine"), --clip MAX_NORM, --plot PNG."""
    parser.add_argument(
        "--schedule",
        choices=["constant", "cosine"],
        default=schedule,
        help=f"lr schedule: constant, or 5%% linear warm-up then cosine to 0 ({schedule})",
    )
    parser.add_argument(
        "--clip", type=positive(float), metavar="MAX_NORM", help="clip_grad_norm_ (off)"
    )
    parser.add_argument(
        "--plot", metavar="PNG", help="write the loss curves and the lr schedule to PNG"
    )


def make_schedule(kind: str, updates: int) -> lr_scheduler.LRScheduler | None:
    """None (constant lr) or warm-up over 5% of `updates` then cosine to 0."""
    return None if kind == "constant" else lr_scheduler.warmup_cosine(updates, 0.05)


def write_curves(path: str, program: str, draw: Callable[[Any, Any], None]) -> None:
    """Draw the loss (left) and lr (right) axes with `draw(ax_loss, ax_lr)` and write the
    figure to the PNG `path` atomically (matplotlib); exits naming `program` if it cannot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_lr) = plt.subplots(1, 2, figsize=(10, 4))
    try:
        draw(ax_loss, ax_lr)
        ax_loss.set(title="loss")
        ax_loss.legend()
        ax_lr.set(ylabel="lr", title="learning rate")
        fig.tight_layout()
        with atomic_write(path, "wb") as f:
            fig.savefig(f, format="png")
    except WriteError as e:
        sys.exit(f"{program}: {e}")
    finally:
        plt.close(fig)
