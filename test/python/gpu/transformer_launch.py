"""Launch geometry of the transformer kernels, as their .cu headers state it.

layernorm.cu, embedding.cu, cross_entropy.cu and attention.cu have no registry
entries or launchers yet (issue 11 defines their ops); these helpers give each
kernel's grid, block, dynamic shared memory and workspace size from the shapes, for
the emulated tests, the GPU tests and tools/bench_transformer_kernels.py. They are
meant to move into the launchers (runtime/cuda/launchers/) unchanged.
"""

from __future__ import annotations

TILE = 64
"""attention.cu's query and key tile."""

EMBEDDING_CHUNK = 256
"""embedding.cu's positions per chunk (at most 256: one per thread)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# --- layernorm.cu ----------------------------------------------------------


def layer_norm_block(d: int) -> tuple[int, int]:
    """(team, rows per block): 16 elements a thread, a team of 32 to 512 threads."""
    team = max(32, pow2_at_least(cdiv(d, 16)))
    if team > 512:
        raise ValueError(f"layer norm over D = {d}: layernorm.cu takes D <= 8192")
    return team, max(1, 256 // team)


def layer_norm_grid(n: int, d: int) -> tuple[int]:
    return (cdiv(n, layer_norm_block(d)[1]),)


def layer_norm_grad_grid(n: int, d: int, sm_count: int) -> tuple[int]:
    """At most two blocks per multiprocessor: the number of dw/db partials."""
    return (min(cdiv(n, layer_norm_block(d)[1]), 2 * sm_count),)


def layer_norm_grad_workspace(blocks: int, d: int) -> int:
    """Bytes of the dw, db partials [2][blocks][D]."""
    return 4 * 2 * blocks * d


def layer_norm_param_grad_grid(d: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) of aicfc_layer_norm_param_grad_f32."""
    return (cdiv(d, 32), 2), (32, 32)


# --- embedding.cu ----------------------------------------------------------


def embedding_grid(n: int) -> tuple[int]:
    return (max(1, cdiv(n, 8)),)


def embedding_chunks_grid(n: int, d: int, chunk: int = EMBEDDING_CHUNK) -> tuple[int, int]:
    return cdiv(n, chunk), cdiv(d, 128)


def embedding_split(v: int, d: int, sm_count: int) -> int:
    """8 warps share a (v, column slice) pair when there are few pairs for the device."""
    return 8 if v * cdiv(d, 128) <= 4 * sm_count else 1


def embedding_combine_grid(v: int, d: int, split: int) -> tuple[int]:
    return (cdiv(v * cdiv(d, 128), 8 // split),)


def embedding_map_bytes(n: int, v: int, chunk: int = EMBEDDING_CHUNK) -> int:
    return cdiv(4 * v * cdiv(n, chunk), 256) * 256


def embedding_workspace(n: int, v: int, d: int, chunk: int = EMBEDDING_CHUNK) -> int:
    """Bytes: the int32 slot map [V][C], then the partials [C][min(chunk, V)][D]."""
    return embedding_map_bytes(n, v, chunk) + 4 * cdiv(n, chunk) * min(chunk, v) * d


# --- cross_entropy.cu ------------------------------------------------------


def cross_entropy_block(v: int) -> tuple[int, int]:
    """(team, rows per block): about 32 classes a thread, a team of 32 to 1024."""
    team = min(1024, max(32, pow2_at_least(cdiv(v, 32))))
    return team, max(1, 256 // team)


def cross_entropy_grid(n: int, v: int) -> tuple[int]:
    return (cdiv(n, cross_entropy_block(v)[1]),)


def cross_entropy_workspace(n: int, v: int) -> int:
    """Bytes: the ticket, then one float partial per block from byte 256."""
    return 256 + 4 * cross_entropy_grid(n, v)[0]


# --- attention.cu ----------------------------------------------------------


def attention_grid(bh: int, t: int) -> tuple[int, int]:
    return bh, cdiv(t, TILE)


def attention_fwd_shared(d: int) -> int:
    return 4 * (3 * TILE * d + TILE * TILE)


def attention_bwd_threads(d: int) -> int:
    return 256 if d == 128 else 128


def attention_bwd_shared(d: int) -> int:
    return 4 * (4 * TILE * d + 2 * TILE * TILE + 2 * TILE)


def attention_delta_grid(rows: int, d: int) -> tuple[int]:
    return (cdiv(rows, 256 // (d // 4)),)
