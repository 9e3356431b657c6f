"""Checkpoints: one safetensors file with everything that determines the next step.

`Program.save(path)` writes `Program.state_dict()` (params, optimizer state, the
hyperparameters, the schedule's and accumulation's counters and buffers, `rng.offset`)
with safetensors' NumPy API, atomically (runtime/files.py: temporary file, fsync,
rename), and a metadata header that says what it belongs to:

| key            | value                                                               |
|----------------|---------------------------------------------------------------------|
| format         | "aicfc.checkpoint"                                                  |
| format_version | FORMAT_VERSION ("1"); a reader refuses a newer one                  |
| aicfc_version  | the writer's `aicfc.__version__`                                    |
| params, states | JSON [[name, shape, dtype], ...] of the model's params and the states |
| dropout_keys   | JSON {layer: Philox key}: the masks' keys, which are not state      |
| training       | JSON: optimizer class and flags, loss, schedule, clipping, accumulation |

`Program.load(path)` (or `aicfc.load(path)` then `Program.load(checkpoint)`) checks all of
it before writing anything: a file that is not a checkpoint (truncated, corrupt, another
format), a newer format version, another model (params), another training setup (states,
dropout keys, schedule, ...) are each a `CheckpointError` naming the file and what
differs, and the Program is unchanged. Loaded values go into the fixed buffers, so a
captured graph continues without a re-capture (docs/design.md#complete-checkpoints).
Checkpoints load across precisions (the params are fp32 masters in every one): fp16's
loss-scale state is the one difference allowed; an fp16 program keeps its current scale
when the file has none.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save as safetensors_bytes

from aicfc.nn import dropout_keys
from aicfc.passes.aicfc_loss_scale import LOSS_SCALE_STATES
from aicfc.runtime.files import atomic_write

if TYPE_CHECKING:
    from aicfc.program import Program

FORMAT = "aicfc.checkpoint"
FORMAT_VERSION = 1
"""The checkpoint layout this aicfc writes and the newest it reads."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that does not fit the Program (names the file)."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read from `path`: its arrays by name and its metadata header."""

    path: str
    state: dict[str, np.ndarray]
    metadata: dict[str, str]

    @property
    def version(self) -> int:
        return int(self.metadata["format_version"])


def _specs(arrays: dict[str, np.ndarray], names: list[str]) -> list[list[Any]]:
    return [[n, list(arrays[n].shape), str(arrays[n].dtype)] for n in names]


def training_facts(program: Program) -> dict[str, Any]:
    """What the next step depends on besides the state: optimizer class and flags, loss,
    schedule, clipping, accumulation."""
    opt, o = program.optimizer, program.options
    return {
        "optimizer": type(opt).__name__,
        "decoupled_weight_decay": bool(getattr(opt, "decoupled_weight_decay", False)),
        "nesterov": bool(getattr(opt, "nesterov", False)),
        "loss": program.loss,
        "lr_scheduler": list(o.lr_scheduler.properties()) if o.lr_scheduler else None,
        "clip_grad_norm": o.clip_grad_norm,
        "accumulate": o.accumulate,
    }


def metadata_of(program: Program, state: dict[str, np.ndarray]) -> dict[str, str]:
    from aicfc import __version__

    params = list(program.param_names)
    return {
        "format": FORMAT,
        "format_version": str(FORMAT_VERSION),
        "aicfc_version": __version__,
        "params": json.dumps(_specs(state, params)),
        "states": json.dumps(_specs(state, [n for n in state if n not in params])),
        "dropout_keys": json.dumps(dropout_keys(program.model)),
        "training": json.dumps(training_facts(program)),
    }


def save_checkpoint(program: Program, path: str | os.PathLike[str]) -> None:
    """Write `program`'s checkpoint to `path` atomically (WriteError naming it on failure)."""
    # np.require keeps a 0-d state 0-d (np.ascontiguousarray would make it [1])
    state = {n: np.require(v, requirements="C") for n, v in program.state_dict().items()}
    data = safetensors_bytes(state, metadata=metadata_of(program, state))
    with atomic_write(path, "wb") as f:
        f.write(data)


def read(path: str | os.PathLike[str]) -> Checkpoint:
    """The checkpoint at `path` (aicfc.load); CheckpointError naming the file for one that
    is missing, not safetensors, truncated or damaged, not an aicfc checkpoint, or of a
    newer format version."""
    where = f"checkpoint '{os.fspath(path)}'"
    try:
        with safe_open(os.fspath(path), framework="numpy") as f:
            metadata = dict(f.metadata() or {})
            state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    except FileNotFoundError:
        raise CheckpointError(f"{where}: no such file") from None
    except OSError as e:
        raise CheckpointError(f"{where}: cannot read it: {e.strerror or e}") from None
    except (SafetensorError, ValueError) as e:
        raise CheckpointError(
            f"{where}: not a readable safetensors file (truncated or damaged?): {e}"
        ) from None
    if metadata.get("format") != FORMAT:
        raise CheckpointError(
            f"{where}: not an aicfc checkpoint (its safetensors header has no format "
            f"{FORMAT!r}; write one with Program.save)"
        )
    try:
        version = int(metadata["format_version"])
        specs = json.loads(metadata["params"]) + json.loads(metadata["states"])
        json.loads(metadata["dropout_keys"])
        json.loads(metadata["training"])
    except (KeyError, ValueError, TypeError) as e:
        raise CheckpointError(f"{where}: its metadata header is damaged ({e!r})") from None
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{where}: format version {version} was written by a newer aicfc "
            f"({metadata.get('aicfc_version', '?')}); this aicfc reads versions up to "
            f"{FORMAT_VERSION}"
        )
    listed = {n: (tuple(shape), dtype) for n, shape, dtype in specs}
    found = {n: (tuple(a.shape), str(a.dtype)) for n, a in state.items()}
    if listed != found:
        raise CheckpointError(f"{where}: its tensors do not match its header (damaged)")
    return Checkpoint(os.fspath(path), state, metadata)


def _differences(what: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    missing = [n for n in ours if n not in theirs]
    extra = [n for n in theirs if n not in ours]
    changed = [
        f"{n} is {theirs[n]} there, {ours[n]} here"
        for n in ours
        if n in theirs and theirs[n] != ours[n]
    ]
    out = []
    if missing:
        out.append(f"{what} missing from it: {', '.join(missing)}")
    if extra:
        out.append(f"{what} this Program does not have: {', '.join(extra)}")
    if changed:
        out.append(f"{what} that differ: {'; '.join(changed)}")
    return out


def check_fits(program: Program, ckpt: Checkpoint) -> None:
    """CheckpointError naming what of `ckpt` does not fit `program` (nothing is written)."""
    where = f"checkpoint '{ckpt.path}'"
    meta = ckpt.metadata
    ours = program.state_dict()
    params = list(program.param_names)

    def spec(specs: list[list[Any]]) -> dict[str, str]:
        return {n: f"{dtype}{list(shape)}" for n, shape, dtype in specs}

    model = _differences("params", spec(_specs(ours, params)), spec(json.loads(meta["params"])))
    if model:
        raise CheckpointError(f"{where} is of another model: " + "; ".join(model))
    setup = _differences(  # fp16's loss scale may be missing or extra: across precisions
        "states",
        spec(_specs(ours, [n for n in ours if n not in params and n not in LOSS_SCALE_STATES])),
        {n: s for n, s in spec(json.loads(meta["states"])).items() if n not in LOSS_SCALE_STATES},
    )
    keys = {n: str(k) for n, k in dropout_keys(program.model).items()}
    setup += _differences(
        "dropout keys",
        keys,
        {n: str(k) for n, k in json.loads(meta["dropout_keys"]).items()},
    )
    facts = {k: json.dumps(v) for k, v in training_facts(program).items()}
    setup += _differences(
        "training settings",
        facts,
        {k: json.dumps(v) for k, v in json.loads(meta["training"]).items()},
    )
    if setup:
        raise CheckpointError(f"{where} was written by another training setup: " + "; ".join(setup))


def load_checkpoint(program: Program, source: str | os.PathLike[str] | Checkpoint) -> None:
    """Check `source` against `program`, then write its state into the fixed buffers."""
    ckpt = source if isinstance(source, Checkpoint) else read(source)
    check_fits(program, ckpt)
    ours = program.state_dict()
    # check_fits matched every name but fp16's loss scale: an fp32/bf16 checkpoint leaves
    # an fp16 program's scale as it is, an fp16 one's scale is not loaded elsewhere
    state = {n: v for n, v in ckpt.state.items() if n in ours}
    program.load_state_dict(state, strict=False)
