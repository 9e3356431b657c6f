"""The kernel registry: every kernel either backend can launch, as plain data.

A `KernelSpec` records what a kernel implements (the graph/autodiff op, or
`exec.copy`), its kernel family ("numpy" or "cuda", runtime/backend_names.py:
the target it is written for, not the backend that runs it), for which dtypes
and layouts, what it refuses
(`Constraints`: alignment, minimum sizes, activations, ...), its flags
(`inplace_ok`, `tensor_core`, `library`, ...), the C ABI of its scalar
parameters and, for CUDA kernels, the `.cu` source and `extern "C"` symbol
(docs/design.md#kernel-selection). `aicfc-lower-exec` reads this table and
`runtime/selector.py` scores its entries, so this module imports no backend,
no xDSL and no NumPy. Activations come from the plain-data activation table
(dialects/activation_table.py): each one's kernels and which kernels apply it.

Launch ABI, the same for every kernel (architecture §5): input buffers in the
op's operand order, then output buffers in result order, then the scalar
parameters in `abi` order. NumPy kernels receive the scalars as keywords
(`AicfcOp.kernel_params()`), so their `abi` is empty.

The table is the NumPy reference kernels below plus the `KERNELS` tuple of
every module in `EXTENSION_MODULES` that exists: the faster NumPy kernels in
`runtime/registry_numpy.py`, the CUDA kernels in `runtime/registry_cuda.py`
(`KERNELS = (KernelSpec(...), ...)`); nothing here changes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from aicfc.dialects.activation_table import ACTIVATION_FACTS, EPILOGUE_ACTIVATIONS
from aicfc.runtime.backend_names import KERNEL_FAMILIES

LAYOUTS = ("row_major",)
"""Buffer layouts: exec buffers are dense row-major today."""

C_TYPES = ("int32_t", "int64_t", "uint32_t", "uint64_t", "float", "double", "bool")
"""C types a scalar parameter may have in a CUDA kernel's ABI."""

PARAM_DEFAULTS: dict[str, object] = {
    "transpose_a": False,
    "transpose_b": False,
    "act": "none",
    "keepdims": False,
    "causal": False,
    "dropout_p": 0.0,
    "nesterov": False,
    "decoupled_weight_decay": False,
    "out_dtype": "operands",
}
"""Values of kernel parameters that `kernel_params()` omits when at their default
(out_dtype "operands": results in the operands' dtype; "f32" for a widened product or
reduction, "bf16"/"f16" for a narrowed layer norm, dialects/wide_results.py)."""

WIDENS = (("out_dtype", ("operands", "f32")),)
"""param_values of a kernel that also writes the wide results in float32 (out_dtype "f32");
a kernel whose constraints do not name out_dtype is refused for a widened op (selector)."""
NARROWS = (("out_dtype", ("operands", "bf16", "f16")),)
"""param_values of a kernel that also stores the narrow results in bf16/f16 over float32
operands (out_dtype "bf16" or "f16", dialects/wide_results.py)."""

ParamScalar = int | float | bool | str | tuple[int, ...]


@dataclass(frozen=True)
class Constraints:
    """What a kernel refuses; every field's default refuses nothing.

    alignment:      bytes; the innermost-dimension byte size of every operand and
                    result must be a multiple (vectorised 16-byte loads need 16).
                    Base addresses are allocator-aligned (>= 256 bytes), so only
                    row sizes are checked.
    min_mnk:        smallest (M, N, K) of a GEMM kernel (operands 0 and 1 are
                    op(A) [M, K] and op(B) [K, N] after `transpose_a/b`).
    mnk_multiple:   M, N and K must be multiples of this (tensor-core tiles).
    max_short_side: a skinny-GEMM kernel: the smallest of M, N and K must be at
                    most this (0 = no limit).
    min_numel / max_numel: bounds on the element count of result #0.
    activations:    allowed values of the `act` parameter (None = any).
    operand_dtypes: (operand index, allowed dtypes) for operands whose dtype is
                    not the kernel dtype (e.g. cross-entropy labels).
    operand_ranks:  (operand index, allowed ranks) for kernels written for fixed ranks
                    (a GEMM of two matrices refuses a batched [B, T, D] operand).
    param_values:   (parameter, allowed values) for any other scalar parameter.
    min_arch:       smallest compute capability, as an int (80 = sm_80).
    requires:       capability keys that must be truthy (e.g. "tf32", "cublaslt").
    gemm_batch:     for a product kernel (matmul, gemm_epilogue): the largest batch of
                    matrices one launch takes (1: a single product, with the leading dims
                    of A folded into M where B is a matrix; 0: any batch of strided
                    products, runtime/selector.py `gemm_dims`); None: not a product kernel.
    last_dims:      (operand index, allowed sizes of its last dim), e.g. an attention
                    kernel's head dims.
    last_dim_range: (operand index, smallest, largest size of its last dim), e.g. the
                    classes of a wide-row loss kernel or a layer norm's D.
    equal_shapes:   operand indices that must all have one shape (attention's q, k, v).
    packed_head_dim_range: (operand index of a packed qkv [N, T, 3 H d], smallest, largest
                    head dim d, with H the `num_heads` parameter), e.g. packed attention's.
    max_matrix_rows: the first dim of every rank-2 operand at most this (0 = no limit): the
                    fused MLP step's batch and layer widths.
    max_operands:   at most this many operands (0 = no limit): a variadic op's size.
    """

    alignment: int = 1
    min_mnk: tuple[int, int, int] = (0, 0, 0)
    mnk_multiple: int = 1
    max_short_side: int = 0
    min_numel: int = 0
    max_numel: int | None = None
    activations: tuple[str, ...] | None = None
    operand_dtypes: tuple[tuple[int, tuple[str, ...]], ...] = ()
    operand_ranks: tuple[tuple[int, tuple[int, ...]], ...] = ()
    param_values: tuple[tuple[str, tuple[ParamScalar, ...]], ...] = ()
    min_arch: int = 0
    requires: tuple[str, ...] = ()
    gemm_batch: int | None = None
    last_dims: tuple[tuple[int, tuple[int, ...]], ...] = ()
    last_dim_range: tuple[tuple[int, int, int], ...] = ()
    equal_shapes: tuple[int, ...] = ()
    packed_head_dim_range: tuple[tuple[int, int, int], ...] = ()
    max_matrix_rows: int = 0
    max_operands: int = 0

    @property
    def is_gemm(self) -> bool:
        """True when M, N, K constraints apply (the kernel is a GEMM)."""
        return self.min_mnk != (0, 0, 0) or self.mnk_multiple != 1 or self.max_short_side > 0


@dataclass(frozen=True)
class KernelSpec:
    """One launchable kernel.

    name:       unique, "<family>.<kernel>" ("numpy.gemm_epilogue",
                "cuda.gemm_epilogue_f32_nn"); shown in `exec.launch`.
    op:         the op it implements ("graph.gemm_epilogue", "exec.copy").
    family:     its kernel family, "numpy" or "cuda" (KERNEL_FAMILIES).
    dtypes:     element types of result #0 it computes in ("f32", "f64", "i64").
    layouts:    buffer layouts it reads and writes (see LAYOUTS).
    transposes: supported (transpose_a, transpose_b) pairs, None = all or n/a.
    constraints: what it refuses (see Constraints).
    flags:      "inplace_ok" (an output may be the same buffer as the input
                named by the op's alias policy), "tensor_core", "library"
                (cuBLASLt/nvmath), "reference" (the NumPy definition), "auxiliary"
                (a second kernel that another entry's launcher binds after its own,
                such as a reduction of partials: never selected for `op` itself), "view"
                (the result is the input's bytes read with another shape: a backend may
                alias them instead of launching, runtime/schedule.py view_aliases), ...
    abi:        ordered (parameter name, C type) of the scalars passed after the
                buffers (CUDA kernels; empty for NumPy ones).
    source, symbol: the `kernels/*.cu` file and its `extern "C"` entry point.
    launcher:   "<module>:<function>", the function that binds the kernel's launches:
                for CUDA kernels one of runtime/cuda/launchers/<module>.py, the module
                of the source's family (`gemm_small` for gemm_small.cu; `cublaslt` for
                the library entries); for NumPy kernels one of
                runtime/numpy/kernels/<module>.py, or None where the kernel is the
                op's reference function. Data, resolved by the backend.
    priority:   breaks ties between equally scored candidates (higher wins).
    """

    name: str
    op: str
    family: str
    dtypes: tuple[str, ...]
    layouts: tuple[str, ...] = ("row_major",)
    transposes: tuple[tuple[bool, bool], ...] | None = None
    constraints: Constraints = field(default_factory=Constraints)
    flags: frozenset[str] = frozenset()
    abi: tuple[tuple[str, str], ...] = ()
    source: str | None = None
    symbol: str | None = None
    launcher: str | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        where = f"kernel {self.name!r}"
        if self.family not in KERNEL_FAMILIES:
            raise ValueError(
                f"{where}: the kernel family must be one of {KERNEL_FAMILIES}, got {self.family!r}"
            )
        if not self.name.startswith(self.family + "."):
            raise ValueError(f"{where}: the name must start with '{self.family}.'")
        if not self.dtypes:
            raise ValueError(f"{where}: no dtypes")
        for layout in self.layouts:
            if layout not in LAYOUTS:
                raise ValueError(f"{where}: unknown layout {layout!r} (known: {LAYOUTS})")
        for pname, ctype in self.abi:
            if ctype not in C_TYPES:
                raise ValueError(
                    f"{where}: parameter {pname!r} has C type {ctype!r}, not one of {C_TYPES}"
                )
        no_entry = self.source is None or self.symbol is None
        if self.family == "cuda" and no_entry and "library" not in self.flags:
            raise ValueError(
                f"{where}: a CUDA kernel needs source and symbol (or the 'library' flag)"
            )
        if self.family == "cuda" or self.launcher is not None:
            module, _, function = (self.launcher or "").partition(":")
            if not (module.isidentifier() and function.isidentifier()):
                kind = "a CUDA kernel needs" if self.family == "cuda" else "a NumPy kernel names"
                raise ValueError(
                    f"{where}: {kind} its launcher as '<module>:<function>', got {self.launcher!r}"
                )
            family = self.source.removesuffix(".cu") if self.source else None
            if family is not None and module != family:
                raise ValueError(
                    f"{where}: the launcher of a {self.source} kernel lives in module "
                    f"{family!r}, got {self.launcher!r}"
                )

    @property
    def inplace_ok(self) -> bool:
        return "inplace_ok" in self.flags

    @property
    def view(self) -> bool:
        return "view" in self.flags


F32 = ("f32",)


def cuda_kernel(
    name: str,
    op: str,
    source: str,
    symbol: str,
    abi: tuple[tuple[str, str], ...],
    dtypes: tuple[str, ...] = F32,
    constraints: Constraints | None = None,
    flags: tuple[str, ...] = (),
    *,
    launcher: str,
) -> KernelSpec:
    """The CUDA entry "cuda.<name>" of `op`: `symbol` of kernels/<source>, launched by
    `<launcher>` of runtime/cuda/launchers/<source's family>.py (the registry_cuda*
    modules' shorthand)."""
    return KernelSpec(
        name=f"cuda.{name}",
        op=op,
        family="cuda",
        dtypes=dtypes,
        constraints=constraints or Constraints(),
        flags=frozenset(flags),
        abi=abi,
        source=source,
        symbol=symbol,
        launcher=f"{source.removesuffix('.cu')}:{launcher}",
    )


# ----------------------------------------------------------------------------
# The NumPy reference kernels: one per op of runtime/reference.py's REFERENCE,
# plus copy. Each runs its op's reference function and writes the results into
# its output buffers, so any alias is safe (the result is complete before the
# copy): all carry "inplace_ok". The faster NumPy kernels
# (runtime/registry_numpy.py) join them through EXTENSION_MODULES.
# ----------------------------------------------------------------------------

_FLOATS = ("f16", "bf16", "f32", "f64")
_NUMBERS = ("f16", "bf16", "f32", "f64", "i32", "i64")
_INT_LABELS = ((1, ("i32", "i64")),)
_INT_IDS = ((0, ("i32", "i64")),)
_I64_OFFSET = ((3, ("i64",)),)

_NUMPY_OPS: tuple[tuple[str, tuple[str, ...], Constraints], ...] = (
    ("graph.matmul", _FLOATS, Constraints(param_values=WIDENS)),
    (
        "graph.gemm_epilogue",
        _FLOATS,
        Constraints(activations=("none", *EPILOGUE_ACTIVATIONS), param_values=WIDENS),
    ),
    ("graph.bias_add", _FLOATS, Constraints()),
    ("graph.cast", _FLOATS, Constraints()),
    ("graph.add", _NUMBERS, Constraints()),
    ("graph.sub", _NUMBERS, Constraints()),
    ("graph.mul", _NUMBERS, Constraints()),
    *((f.op, _FLOATS, Constraints()) for f in ACTIVATION_FACTS),
    ("graph.dropout", _FLOATS, Constraints(operand_dtypes=((1, ("i64",)),))),
    ("graph.reshape", _NUMBERS, Constraints()),
    ("graph.transpose", _NUMBERS, Constraints()),
    ("graph.broadcast_to", _NUMBERS, Constraints()),
    ("graph.softmax", _FLOATS, Constraints()),
    ("graph.reduce_sum", _NUMBERS, Constraints(param_values=WIDENS)),
    ("graph.cross_entropy", _FLOATS, Constraints(operand_dtypes=_INT_LABELS)),
    ("graph.mse_loss", _FLOATS, Constraints()),
    ("graph.scale", _FLOATS, Constraints()),
    ("graph.split", _NUMBERS, Constraints()),
    ("graph.concat", _NUMBERS, Constraints()),
    ("graph.embedding", _FLOATS, Constraints(operand_dtypes=_INT_IDS)),
    ("graph.layer_norm", _FLOATS, Constraints(param_values=NARROWS)),
    ("graph.add_layer_norm", _FLOATS, Constraints(param_values=NARROWS)),
    ("graph.causal_mask", _FLOATS, Constraints()),
    ("graph.scaled_dot_product_attention", _FLOATS, Constraints(operand_dtypes=_I64_OFFSET)),
    (
        "graph.packed_qkv_attention",
        _FLOATS,
        Constraints(operand_dtypes=((1, ("i64",)),), param_values=WIDENS),  # f32 lse: wide
    ),
    *((f.grad_op, _FLOATS, Constraints()) for f in ACTIVATION_FACTS),
    ("autodiff.softmax_grad", _FLOATS, Constraints()),
    ("autodiff.cross_entropy_grad", _FLOATS, Constraints(operand_dtypes=_INT_LABELS)),
    ("autodiff.cross_entropy_with_grad", _FLOATS, Constraints(operand_dtypes=_INT_LABELS)),
    ("autodiff.mse_loss_grad", _FLOATS, Constraints()),
    ("autodiff.dropout_grad", _FLOATS, Constraints(operand_dtypes=((1, ("i64",)),))),
    (
        "autodiff.epilogue_grad",
        _FLOATS,
        Constraints(activations=EPILOGUE_ACTIVATIONS, param_values=WIDENS),
    ),
    (
        "autodiff.gemm_epilogue_grad",
        _FLOATS,
        Constraints(activations=EPILOGUE_ACTIVATIONS, param_values=WIDENS),
    ),
    ("autodiff.embedding_grad", _FLOATS, Constraints(operand_dtypes=_INT_LABELS)),
    ("autodiff.layer_norm_grad", _FLOATS, Constraints()),
    ("autodiff.add_layer_norm_grad", _FLOATS, Constraints()),
    (
        "autodiff.scaled_dot_product_attention_grad",
        _FLOATS,
        Constraints(operand_dtypes=((6, ("i64",)),)),
    ),
    ("autodiff.packed_qkv_attention_grad", _FLOATS, Constraints(operand_dtypes=((4, ("i64",)),))),
    ("autodiff.adam_step", _FLOATS, Constraints()),
    ("autodiff.sgd_step", _FLOATS, Constraints()),
    ("autodiff.unscale_grad", _FLOATS, Constraints()),
    ("autodiff.amp_select", _NUMBERS, Constraints()),
    ("autodiff.update_scale", ("f32",), Constraints()),
    ("autodiff.mlp_train_step", _FLOATS, Constraints(operand_dtypes=_INT_LABELS)),
    ("autodiff.lr_schedule", ("i64",), Constraints()),
    ("autodiff.clip_grad_norm", _FLOATS, Constraints()),
    ("autodiff.accumulation_step", ("i64",), Constraints()),
    ("autodiff.accumulate_grad", _FLOATS, Constraints()),
    ("exec.copy", (*_NUMBERS, "i1"), Constraints()),
)

NUMPY_KERNELS: tuple[KernelSpec, ...] = tuple(
    KernelSpec(
        name="numpy." + op.split(".", 1)[1],
        op=op,
        family="numpy",
        dtypes=dtypes,
        constraints=constraints,
        flags=frozenset({"reference", "inplace_ok"}),
    )
    for op, dtypes, constraints in _NUMPY_OPS
)

EXTENSION_MODULES: tuple[str, ...] = (
    "aicfc.runtime.registry_numpy",
    "aicfc.runtime.registry_cuda",
)
"""Plain-data modules whose `KERNELS` tuple joins the registry when they exist."""


def _aggregate() -> tuple[KernelSpec, ...]:
    kernels = list(NUMPY_KERNELS)
    for module_name in EXTENSION_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:  # the module exists but its own import failed
                raise
            continue
        kernels.extend(module.KERNELS)
    seen: set[str] = set()
    for k in kernels:
        if k.name in seen:
            raise ValueError(f"kernel name {k.name!r} is registered twice")
        seen.add(k.name)
    return tuple(kernels)


REGISTRY: tuple[KernelSpec, ...] = _aggregate()
"""Every registered kernel (NumPy and, where registry_cuda exists, CUDA)."""

KERNELS_BY_NAME: dict[str, KernelSpec] = {k.name: k for k in REGISTRY}


def resolve_launcher(package: str, launcher: str) -> object:
    """The function that `launcher` ("<module>:<function>") names in `package`
    ("aicfc.runtime.cuda.launchers", "aicfc.runtime.numpy.kernels"): each backend
    resolves its kernels' launchers here, once per launcher.

    Raises LookupError naming the missing module (by its path in the source tree) or
    function; an error inside the module's own import propagates.
    """
    module_name, _, function = launcher.partition(":")
    folder = package.removeprefix("aicfc.").replace(".", "/")
    full = f"{package}.{module_name}"
    try:
        module = importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name != full:
            raise
        raise LookupError(f"launcher {launcher!r}: no module {folder}/{module_name}.py") from None
    found = getattr(module, function, None)
    if not callable(found):
        raise LookupError(
            f"launcher {launcher!r}: {folder}/{module_name}.py has no function {function!r}"
        )
    return found


class UnknownKernelError(KeyError):
    """A kernel name that is not in the registry."""

    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str) -> KernelSpec:
    """The kernel called `name`; raises UnknownKernelError naming it."""
    spec = KERNELS_BY_NAME.get(name)
    if spec is None:
        raise UnknownKernelError(f"kernel {name!r} is not registered")
    return spec


def candidates(
    op_name: str,
    family: str,
    dtype: str | None = None,
    registry: tuple[KernelSpec, ...] | None = None,
) -> list[KernelSpec]:
    """Kernels of kernel family `family` implementing `op_name` (and computing in `dtype`
    if given); "auxiliary" entries are never candidates.

    Sorted by priority (highest first), then name. `registry` defaults to REGISTRY
    (tests pass their own tables).
    """
    table = REGISTRY if registry is None else registry
    found = [
        k
        for k in table
        if k.op == op_name
        and k.family == family
        and (dtype is None or dtype in k.dtypes)
        and "auxiliary" not in k.flags
    ]
    return sorted(found, key=lambda k: (-k.priority, k.name))
