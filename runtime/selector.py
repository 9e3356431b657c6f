"""Kernel selection: hard rules refuse, soft rules score, an autotune cache may override.

For one op instance (a `Problem`: op, dtype, shapes, scalar parameters) and a
device `capability` dict (e.g. {"arch": 90, "tf32": False, "tensor_core": True,
"cublaslt": True}; the backend reports its own, runtime/backend.py
`Backend.lower_exec_options`),
every registered candidate is first checked against its `Constraints` (dtype,
layout, transposes, activations, alignment, minimum sizes, arch, required
capabilities); a refusal says why. The survivors are scored by `SCORE_RULES`
(data: name, points, predicate); the highest score wins, then the higher
`priority`, then the name (docs/design.md#kernel-selection: rules plus capability). An
`AutotuneCache` (a small JSON file keyed by op, shape bucket, dtype and device)
overrides the choice when it names a feasible candidate.

Imports no backend (no CuPy, no xDSL): `aicfc-lower-exec` calls it at compile
time and the CuPy backend may call it again at load time.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aicfc.runtime.files import WriteError, locked, write_text
from aicfc.runtime.registry import PARAM_DEFAULTS, REGISTRY, KernelSpec, candidates

Capability = Mapping[str, object]

DEFAULT_CAPABILITY: dict[str, dict[str, object]] = {
    "numpy": {},
    "cuda": {"arch": 90, "tf32": False, "tensor_core": True, "cublaslt": True},
}
"""Kernel family -> the capability assumed when none is given (H100/H200-class GPU with
nvmath-python's cuBLASLt for cuda)."""

TENSOR_TILE = 64
"""A tensor-core kernel earns its bonus only when M and N both reach this: a 10-wide
layer would leave its 128x128 (WMMA) or 64-wide (cuBLASLt) MMA tiles mostly empty."""

SMALL_GEMM_MACS = 1 << 26
"""Products up to this many multiply-adds (M*N*K) are "small": latency-bound, where
a kernel that spreads them over many blocks (skinny, split-K) beats a tiled one."""

SPLIT_K_MIN_K = 256
SPLIT_K_MAX_TILES = 64
"""The split-K rule's shape: K of at least 256 (four chunks of 64), at most 64 output
tiles of 32x32 (half the H200's multiprocessors)."""

MMA_MAX_TILES = 200
"""Our mma latency kernels (flag "mma_small") earn their rule, where the capability asks
for them (`mma_small`, aicfc-lower-exec's option; off by default: on the H200 the small
MLP step took 69.6 us in TF32 and 65.1 in bf16 with them against 52.7 and 43.6 without,
BENCHMARKS.md session 4), on small products of at most
this many 32x32 output tiles: the small MLP's largest result (256 x 784, its first weight
gradient) has 200. Larger results fill the device with cuBLASLt's bigger tiles; gpt-tiny's
2048 x 128 products (256 tiles, K of 65 to 128) keep cuBLASLt until measured otherwise."""

SPLIT_EPILOGUE_MIN_MACS = 1 << 28
"""A split epilogue (cuBLASLt's product + bias, then our activation kernel: flag
"split_epilogue") pays from this many multiply-adds up. Its second launch reads and
writes M N floats again and adds a node to the graph's chain; on nanoGPT's MLP
(16384 x 1536 x 384, 9.7G MACs) our fused tiles ran at 27 TFLOP/s (~700 us, H200, TF32),
where cuBLASLt's product takes ~70 us and the activation pass ~50 us. gpt-tiny's MLP
(2048 x 512 x 128, 134M MACs) is latency-bound and keeps the one fused launch."""

_ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i32": 4, "i64": 8}


@dataclass(frozen=True)
class GemmDims:
    """A product as the GEMM kernels run it: `batch` products C_i [M, N] = op(A_i) op(B_i),
    A_i at element offset i * stride_a of A (0: one A for every i), B_i likewise, C_i at
    i * M * N. A single product has batch 1 and both strides 0."""

    batch: int
    m: int
    n: int
    k: int
    stride_a: int = 0
    stride_b: int = 0


def _prod(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def gemm_dims(
    a: tuple[int, ...], b: tuple[int, ...], transpose_a: bool, transpose_b: bool
) -> GemmDims | None:
    """The GEMM of op(A) @ op(B) for A, B of shapes `a`, `b` (torch.matmul semantics: the
    transposes apply to the last two dims, the dims before them broadcast), or None when
    no kernel can run it as strided products: a rank below 2, or batch dims where one
    operand has some but not all of the result's (a broadcast that needs more than one
    stride per operand).

    A of rank >= 3 times a matrix B, A not transposed, is one product with A's leading
    dims folded into M (free in row-major: `Linear` on [B, T, D]). Raises ValueError when
    the two operands disagree on K.
    """
    if len(a) < 2 or len(b) < 2:
        return None
    kb, n = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if len(b) == 2 and len(a) > 2 and not transpose_a:
        m, k = _prod(a[:-1]), a[-1]
        batch_a: tuple[int, ...] = ()
        batch_b: tuple[int, ...] = ()
    else:
        m, k = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
        batch_a, batch_b = a[:-2], b[:-2]
    if k != kb:
        raise ValueError(f"the operands disagree on K: op(A) has K = {k}, op(B) K = {kb}")
    rank = max(len(batch_a), len(batch_b))
    pa = (1,) * (rank - len(batch_a)) + batch_a
    pb = (1,) * (rank - len(batch_b)) + batch_b
    if any(x != y and 1 not in (x, y) for x, y in zip(pa, pb, strict=True)):
        return None
    out = tuple(max(x, y) for x, y in zip(pa, pb, strict=True))
    batch = _prod(out)

    def stride(dims: tuple[int, ...], matrix: int) -> int | None:
        if _prod(dims) == 1:
            return 0
        return matrix if dims == out else None

    sa, sb = stride(pa, m * k), stride(pb, k * n)
    if sa is None or sb is None:
        return None
    return GemmDims(batch, m, n, k, sa if batch > 1 else 0, sb if batch > 1 else 0)


@dataclass(frozen=True)
class Problem:
    """One op instance to run: what a kernel must accept.

    op:            op name ("graph.matmul", "exec.copy").
    dtype:         element type of result #0 ("f32").
    input_shapes / output_shapes: static shapes of the operand and result buffers.
    input_dtypes:  element type of each operand.
    params:        the launch's scalar parameters (`kernel_params()`).
    layout:        layout of the buffers ("row_major").
    """

    op: str
    dtype: str
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...] = ()
    params: Mapping[str, object] = field(default_factory=dict)
    layout: str = "row_major"

    def param(self, key: str) -> object:
        return self.params.get(key, PARAM_DEFAULTS.get(key))

    def gemm(self) -> GemmDims | None:
        """The GEMM of operands 0 and 1 (`gemm_dims`), or None if they are not matrices
        (or batches of them that strided products can run, or they disagree on K)."""
        if len(self.input_shapes) < 2:
            return None
        try:
            return gemm_dims(
                self.input_shapes[0],
                self.input_shapes[1],
                bool(self.param("transpose_a")),
                bool(self.param("transpose_b")),
            )
        except ValueError:
            return None

    def mnk(self) -> tuple[int, int, int] | None:
        """(M, N, K) of one product op(A) @ op(B) of operands 0 and 1 (leading dims of A
        folded into M where B is a matrix), or None if they are not matrices."""
        g = self.gemm()
        return None if g is None else (g.m, g.n, g.k)

    def macs(self) -> int | None:
        """batch*M*N*K of a GEMM-like problem, or None if operands 0 and 1 are not matrices."""
        g = self.gemm()
        return None if g is None else g.batch * g.m * g.n * g.k

    def numel(self) -> int:
        n = 1
        for d in self.output_shapes[0] if self.output_shapes else ():
            n *= d
        return n


def refusal(spec: KernelSpec, problem: Problem, capability: Capability) -> str | None:
    """Why `spec` cannot run `problem` on a device with `capability`, or None if it can."""
    c = spec.constraints
    if spec.op != problem.op:
        return f"implements {spec.op}, not {problem.op}"
    if problem.dtype not in spec.dtypes:
        return f"dtype {problem.dtype} not in {', '.join(spec.dtypes)}"
    if problem.layout not in spec.layouts:
        return f"layout {problem.layout} not in {', '.join(spec.layouts)}"
    for index, allowed in c.operand_dtypes:
        if index < len(problem.input_dtypes) and problem.input_dtypes[index] not in allowed:
            return (
                f"operand #{index} dtype {problem.input_dtypes[index]} not in {', '.join(allowed)}"
            )
    for index, ranks in c.operand_ranks:
        if index < len(problem.input_shapes) and len(problem.input_shapes[index]) not in ranks:
            rank = len(problem.input_shapes[index])
            return f"operand #{index} has rank {rank}, not {' or '.join(map(str, ranks))}"
    if spec.transposes is not None:
        pair = (bool(problem.param("transpose_a")), bool(problem.param("transpose_b")))
        if pair not in spec.transposes:
            return f"transposes (transpose_a={pair[0]}, transpose_b={pair[1]}) not supported"
    if problem.param("out_dtype") != PARAM_DEFAULTS["out_dtype"] and not any(
        key == "out_dtype" for key, _ in c.param_values
    ):  # a widened product or reduction (dialects/wide_results.py)
        return f"writes no result in {problem.param('out_dtype')} over its operands' dtype"
    if c.activations is not None and problem.param("act") not in c.activations:
        return f"activation {problem.param('act')} not in {', '.join(c.activations)}"
    for key, values in c.param_values:
        if problem.param(key) not in values:
            return f"{key}={problem.param(key)!r} not in {values}"
    if c.alignment > 1:
        for shape, dt in _all_buffers(problem):
            row = (shape[-1] if shape else 1) * _ITEMSIZE.get(dt, 1)
            if row % c.alignment:
                return f"row of {row} bytes is not a multiple of the {c.alignment}-byte alignment"
    if c.gemm_batch is not None:
        g = problem.gemm()
        if g is None:
            return (
                f"operands {list(problem.input_shapes[0])} and {list(problem.input_shapes[1])} "
                "are not a product that strided GEMMs run (batch dims broadcast partly?)"
            )
        if c.gemm_batch and g.batch > c.gemm_batch:
            return f"a batch of {g.batch} products; the kernel runs {c.gemm_batch}"
    for index, sizes in c.last_dims:
        shape = problem.input_shapes[index] if index < len(problem.input_shapes) else ()
        if not shape or shape[-1] not in sizes:
            return f"operand #{index} has last dim {shape[-1] if shape else None}, not in {sizes}"
    for index, least, most in c.last_dim_range:
        shape = problem.input_shapes[index] if index < len(problem.input_shapes) else ()
        if not shape or not least <= shape[-1] <= most:
            last = shape[-1] if shape else None
            return f"operand #{index} has last dim {last}, outside [{least}, {most}]"
    for index, least, most in c.packed_head_dim_range:
        shape = problem.input_shapes[index] if index < len(problem.input_shapes) else ()
        heads = problem.param("num_heads")
        d = shape[-1] // (3 * heads) if shape and isinstance(heads, int) and heads > 0 else None
        if d is None or not least <= d <= most:
            return f"operand #{index} has head dim {d}, outside [{least}, {most}]"
    if c.max_operands and len(problem.input_shapes) > c.max_operands:
        return f"{len(problem.input_shapes)} operands, more than {c.max_operands}"
    if c.max_matrix_rows:
        for i, shape in enumerate(problem.input_shapes):
            if len(shape) == 2 and shape[0] > c.max_matrix_rows:
                return f"operand #{i} has {shape[0]} rows, more than {c.max_matrix_rows}"
    if c.equal_shapes:
        shapes = {problem.input_shapes[i] for i in c.equal_shapes if i < len(problem.input_shapes)}
        if len(shapes) > 1:
            return f"operands {c.equal_shapes} must have one shape, got {sorted(shapes)}"
    if c.is_gemm:
        mnk = problem.mnk()
        if mnk is None:
            return "operands 0 and 1 are not matrices"
        if any(d < lo for d, lo in zip(mnk, c.min_mnk, strict=True)):
            return f"(M, N, K) = {mnk} below the minimum {c.min_mnk}"
        if any(d % c.mnk_multiple for d in mnk):
            return f"(M, N, K) = {mnk} not multiples of {c.mnk_multiple}"
        if c.max_short_side and min(mnk) > c.max_short_side:
            return f"(M, N, K) = {mnk} has no side of at most {c.max_short_side} (not skinny)"
    n = problem.numel()
    if n < c.min_numel or (c.max_numel is not None and n > c.max_numel):
        return f"{n} elements outside [{c.min_numel}, {c.max_numel}]"
    arch = capability.get("arch", 0)
    if c.min_arch and (not isinstance(arch, int) or arch < c.min_arch):
        return f"needs sm_{c.min_arch}, device is sm_{arch}"
    for key in c.requires:
        if not capability.get(key):
            return f"needs capability {key!r}"
    return None


def _all_buffers(problem: Problem) -> list[tuple[tuple[int, ...], str]]:
    dts = list(problem.input_dtypes) or [problem.dtype] * len(problem.input_shapes)
    return list(zip(problem.input_shapes, dts, strict=True)) + [
        (s, problem.dtype) for s in problem.output_shapes
    ]


@dataclass(frozen=True)
class ScoreRule:
    """`points` are added when `applies(spec, problem, capability)` holds."""

    name: str
    points: int
    applies: Callable[[KernelSpec, Problem, Capability], bool]


def _fills_tensor_tiles(p: Problem) -> bool:
    mnk = p.mnk()
    return mnk is None or (
        mnk[0] >= TENSOR_TILE and mnk[1] >= TENSOR_TILE and mnk[2] >= TENSOR_TILE // 2
    )


def _small(p: Problem) -> bool:
    macs = p.macs()
    return macs is not None and macs <= SMALL_GEMM_MACS


def _batched_small(p: Problem) -> bool:
    """A batch of products that is small all together (each one smaller still): our
    batched tile kernel, one block per 64x64 tile of each product, fills the GPU at once."""
    g = p.gemm()
    return g is not None and g.batch > 1 and _small(p)


def _split_k_pays(p: Problem) -> bool:
    """A small product with few 32x32 tiles and a K long enough to split four ways, where
    a split-K kernel fills the GPU (measured on the H200: it lost to cuBLASLt at K = 128
    with 64 and 200 tiles, BENCHMARKS.md)."""
    mnk = p.mnk()
    if mnk is None or not _small(p):
        return False
    m, n, k = mnk
    return k >= SPLIT_K_MIN_K and -(-m // 32) * -(-n // 32) <= SPLIT_K_MAX_TILES


def _mma_pays(p: Problem) -> bool:
    """A small product with at most MMA_MAX_TILES output tiles of 32x32."""
    mnk = p.mnk()
    return mnk is not None and _small(p) and -(-mnk[0] // 32) * -(-mnk[1] // 32) <= MMA_MAX_TILES


def _split_epilogue_pays(p: Problem) -> bool:
    macs = p.macs()
    return macs is not None and macs >= SPLIT_EPILOGUE_MIN_MACS


SCORE_RULES: tuple[ScoreRule, ...] = (
    ScoreRule(
        "tensor cores on a tensor-core device, for a product that fills their tiles",
        20,
        lambda s, p, cap: (
            "tensor_core" in s.flags and bool(cap.get("tensor_core")) and _fills_tensor_tiles(p)
        ),
    ),
    ScoreRule(
        "TF32 allowed for an f32 tensor-core kernel whose tiles are filled",
        5,
        lambda s, p, cap: "tf32" in s.flags and bool(cap.get("tf32")) and _fills_tensor_tiles(p),
    ),
    ScoreRule(
        "skinny kernel for a small skinny product (one side <= 32)",
        16,
        lambda s, p, cap: "skinny" in s.flags and _small(p),
    ),
    ScoreRule(
        "a small backward product and its epilogue in one launch, not two dependent ones",
        30,
        lambda s, p, cap: "one_launch_epilogue_grad" in s.flags and _small(p),
    ),
    ScoreRule(
        "split-K kernel for a small product with few tiles and a long K",
        10,
        lambda s, p, cap: "split_k" in s.flags and _split_k_pays(p),
    ),
    ScoreRule(
        "our tensor-core latency kernel (mma.sync, split-K over many blocks) for a small "
        "product of few tiles on a tensor-core device",
        16,
        lambda s, p, cap: "mma_small" in s.flags and bool(cap.get("tensor_core")) and _mma_pays(p),
    ),
    ScoreRule(
        "batched tile kernel for a small batch of products",
        10,
        lambda s, p, cap: "batched" in s.flags and _batched_small(p),
    ),
    ScoreRule(
        "vendor library (cuBLASLt's tuned kernels)",
        8,
        lambda s, p, cap: "library" in s.flags,
    ),
    ScoreRule(
        "specialised: its alignment requirement holds",
        4,
        lambda s, p, cap: s.constraints.alignment > 1,
    ),
    ScoreRule(
        "specialised: its GEMM tile constraints hold",
        4,
        lambda s, p, cap: s.constraints.is_gemm,
    ),
    ScoreRule(
        "fuses the whole op in one launch",
        2,
        lambda s, p, cap: "fused" in s.flags,
    ),
    ScoreRule(
        "a split epilogue's second launch outweighs the library's speed on a product "
        "below SPLIT_EPILOGUE_MIN_MACS",
        -16,
        lambda s, p, cap: "split_epilogue" in s.flags and not _split_epilogue_pays(p),
    ),
)
"""Soft rules, applied only to kernels that passed `refusal` (so a specialised
kernel whose constraints hold beats a generic one). With the CUDA registry, strict
fp32: small skinny products go to the skinny kernel (16 + 4 + 2), small ones with few
tiles and a long K to split-K (10 + 2) over cuBLASLt (8 + 2, priority 10), the rest
to cuBLASLt over our 128x128 tile (4 + 2); with TF32 allowed, products that fill the
tensor-core tiles (M, N >= 64, K >= 32) go to cuBLASLt TF32 (20 + 5 + 8 + 2) or,
without nvmath, our WMMA kernel. A small gemm_epilogue_grad (the backward's dX product
with its epilogue) goes to the one-launch split-K kernel (30 + 2, over cuBLASLt TF32 and
then epilogue_grad, 20 + 5 + 8): at that size the dependent second launch costs more than
tensor cores save. A batch of products (rank >= 3 operands that do not fold
into one product) goes to our batched 64x64 tile kernel while the whole batch is small
(10), else to cuBLASLt's strided-batched matmul (8). A gemm_epilogue with GELU or SiLU
(no cuBLASLt epilogue) goes to the split cuBLASLt entry from SPLIT_EPILOGUE_MIN_MACS up
(TF32: 20 + 5 + 8 over our WMMA kernel's 20 + 5 + 2; strict: 8 over the 128x128 tile's
4 + 2), below it to our fused kernels (the split entry's 16 points off). Our mma kernels
(kernels/gemm_mma.cu, flag "mma_small": split-K tiles of 32x32 on mma.sync, bf16/f16 and,
where TF32 is allowed, tf32) take the small products of their dtype: 16 points over
cuBLASLt's 8, plus the tensor-core and split-K points where those hold (the small MLP's
128 x 256 x 784 in bf16: 20 + 10 + 16 + 2 against 20 + 8 + 2); with TF32 they beat the
skinny kernel only where K splits (28 against 22), and a large product's cuBLASLt row wins
(not small, or more than MMA_MAX_TILES tiles: no 16; past 2^18 outputs they refuse)."""


def score(spec: KernelSpec, problem: Problem, capability: Capability) -> int:
    """The rule points of a feasible candidate (see SCORE_RULES)."""
    return sum(r.points for r in SCORE_RULES if r.applies(spec, problem, capability))


def shape_bucket(problem: Problem) -> str:
    """The input shapes with every dim rounded up to a power of two: "64x128,128x128"."""

    def up(d: int) -> int:
        return 1 if d <= 1 else 1 << (d - 1).bit_length()

    return ",".join("x".join(str(up(d)) for d in s) or "scalar" for s in problem.input_shapes)


class AutotuneCacheWarning(UserWarning):
    """An autotune cache file that cannot be read: it is ignored (its results are
    recomputable) and rewritten whole by the next save."""


_WARNED: set[str] = set()
"""Cache files already reported in this process (each is reported once)."""


class AutotuneCache:
    """Measured best kernels keyed by (op, shape bucket, dtype, device), stored as JSON.

    The file is {"version": 1, "entries": {"<op>|<bucket>|<dtype>|<device>": "<kernel>"}}.
    A missing file is an empty cache; an unreadable or malformed one is an empty cache
    too, reported once per process by an AutotuneCacheWarning naming the file.
    `save` merges with what other processes saved meanwhile, under a lock, and
    replaces the file atomically (runtime/files.py), creating its folder if missing.
    """

    VERSION = 1

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path).expanduser() if path else None
        self.entries: dict[str, str] = _read_entries(self.path) if self.path else {}

    @staticmethod
    def key(problem: Problem, device: str) -> str:
        dtype = problem.dtype
        out = problem.param("out_dtype")
        if out != PARAM_DEFAULTS["out_dtype"] and problem.input_dtypes:
            # a widened op ("bf16->f32", result #0's dtype) or a narrowed one ("f32->bf16",
            # its narrow results' dtype): entries of their own
            dtype = f"{problem.input_dtypes[0]}->{dtype if out == 'f32' else out}"
        return f"{problem.op}|{shape_bucket(problem)}|{dtype}|{device}"

    def lookup(self, problem: Problem, device: str) -> str | None:
        return self.entries.get(self.key(problem, device))

    def record(self, problem: Problem, device: str, kernel: str) -> None:
        self.entries[self.key(problem, device)] = kernel

    def save(self, path: str | Path | None = None) -> None:
        """Write the entries, merged over those the file holds now (ours win), to `path`
        (default: the cache's own). Raises WriteError naming the file."""
        target = Path(path).expanduser() if path else self.path
        if target is None:
            raise ValueError("autotune cache: no path to save to")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)  # ~/.cache/aicfc on first use
        except OSError as e:
            raise WriteError(target, e.strerror or str(e), e.errno) from None
        with locked(target):  # another process may be tuning too: read-merge-write
            self.entries = {**_read_entries(target), **self.entries}
            text = json.dumps({"version": self.VERSION, "entries": self.entries}, indent=1)
            write_text(target, text)


def _read_entries(path: Path) -> dict[str, str]:
    """The entries of cache file `path` ({} when it is missing, unreadable or malformed;
    the last two warn once, see AutotuneCache)."""
    try:
        data = json.loads(path.read_text())
        if not (
            isinstance(data, dict)
            and data.get("version") == AutotuneCache.VERSION
            and isinstance(data.get("entries"), dict)
        ):
            raise ValueError(f"expected {{'version': {AutotuneCache.VERSION}, 'entries': {{...}}}}")
        return {str(k): str(v) for k, v in data["entries"].items()}
    except FileNotFoundError:
        return {}
    except OSError as e:
        problem = e.strerror or str(e)
    except ValueError as e:  # not JSON (JSONDecodeError, UnicodeDecodeError) or another shape
        problem = str(e)
    if str(path) not in _WARNED:
        _WARNED.add(str(path))
        warnings.warn(
            AutotuneCacheWarning(
                f"autotune cache '{path}' cannot be used ({problem}); it is ignored, and the "
                "next tuning run rewrites it"
            ),
            stacklevel=3,
        )
    return {}


def autotune_device(device: str, capability: Capability) -> str:
    """The device part of an autotune key: `device`, plus " tf32" when TF32 is allowed
    (a measurement with TF32 kernels in the race must not decide a strict-fp32 compile)."""
    return f"{device} tf32" if capability.get("tf32") else device


class NoKernelError(LookupError):
    """No registered kernel can run a problem; `reasons` holds (kernel, why) per candidate."""

    def __init__(self, problem: Problem, family: str, reasons: list[tuple[str, str]]):
        self.problem, self.family, self.reasons = problem, family, reasons
        why = "; ".join(f"{name}: {r}" for name, r in reasons)
        if not reasons:
            msg = f"has no kernel in kernel family {family}"
        elif all(r.startswith("dtype ") for _, r in reasons):
            msg = f"has no kernel for dtype {problem.dtype} in kernel family {family} ({why})"
        else:
            msg = (
                f"has no kernel in kernel family {family} that accepts this {problem.dtype} "
                f"instance ({why})"
            )
        super().__init__(msg)

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Selection:
    """The chosen kernel, its score, and whether the rules or the autotune cache chose it."""

    spec: KernelSpec
    score: int
    source: str
    refused: tuple[tuple[str, str], ...] = ()


def select(
    problem: Problem,
    family: str,
    capability: Capability | None = None,
    autotune: AutotuneCache | None = None,
    device: str = "",
    registry: tuple[KernelSpec, ...] = REGISTRY,
) -> Selection:
    """The best kernel of kernel family `family` ("numpy", "cuda") for `problem`.

    Raises NoKernelError (with each candidate's refusal) when none fits.
    """
    cap = DEFAULT_CAPABILITY.get(family, {}) if capability is None else capability
    feasible: list[tuple[int, KernelSpec]] = []
    refused: list[tuple[str, str]] = []
    for spec in candidates(problem.op, family, registry=registry):
        why = refusal(spec, problem, cap)
        if why is None:
            feasible.append((score(spec, problem, cap), spec))
        else:
            refused.append((spec.name, why))
    if not feasible:
        raise NoKernelError(problem, family, refused)
    if autotune is not None:
        tuned = autotune.lookup(problem, autotune_device(device, cap))
        for s, spec in feasible:
            if spec.name == tuned:
                return Selection(spec, s, "autotune", tuple(refused))
    best_score, best = min(feasible, key=lambda sk: (-sk[0], -sk[1].priority, sk[1].name))
    return Selection(best, best_score, "rules", tuple(refused))
