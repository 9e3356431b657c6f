"""aicfc-lower-exec: graph + autodiff functions to exec programs (buffers, launches, copies).

Each `func.func` becomes an `exec.program` of the same name (architecture §4,
docs/design.md#the-execution-plan-is-ir):

- argument i -> `exec.buffer "<aicfc.name>"` with its `aicfc.role` (no role:
  an input; no name: "arg<i>") and a state's `aicfc.init` as `init`;
- `graph.constant` -> `exec.constant`;
- every other op -> one `exec.launch` of the kernel that `runtime/selector.py`
  picks from the registry for the target backend, writing fresh `exec.alloc`
  tmp buffers (destination-passing style), with `params` = the op's
  `kernel_params()` and `alias` = the op's alias policy when the kernel allows
  in-place execution (flag "inplace_ok");
- a result named after a param or state argument is that external's next
  value: `exec.copy %new -> %external` at the end of the `exec.graph` body
  (nothing when the result is the argument itself); any other result becomes
  `exec.output "<name>"` ("result<i>" when unnamed).

Copy-backs run in order at the end of the step, so the current value of an
external that a copy-back overwrites is snapshotted into a tmp first when
another copy-back (state swapped between two names) or an output reads it.
The func.func is removed; the module then holds exec.programs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from aicfc.dialects import exec as ex
from aicfc.dialects.autodiff import BackwardOp
from aicfc.dialects.base import AicfcOp
from aicfc.dialects.diagnostics import OpError, copy_location
from aicfc.dialects.flags import VIEW, OpFlag, op_info, static_flags
from aicfc.dialects.roles import (
    EXTERNAL_ROLES,
    NAME_ATTR,
    ROLE_ATTR,
    arg_init,
    arg_name,
    arg_role,
    result_names,
)
from aicfc.runtime import backend_names
from aicfc.runtime.selector import AutotuneCache, Capability, NoKernelError, Problem, select

# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------


def dtype_name(t: object) -> str:
    """The element type name of a tensor type, e.g. "f32" (the registry uses MLIR's names)."""
    assert isinstance(t, TensorType)
    return str(t.element_type)


def problem_of(op: AicfcOp) -> Problem:
    """What a kernel must accept to run `op`: dtype of result #0, shapes, params."""
    ins = [v.type for v in op.operands]
    outs = [r.type for r in op.results]
    return Problem(
        op=op.name,
        dtype=dtype_name(outs[0]),
        input_shapes=tuple(tuple(t.get_shape()) for t in ins),  # type: ignore[attr-defined]
        output_shapes=tuple(tuple(t.get_shape()) for t in outs),  # type: ignore[attr-defined]
        input_dtypes=tuple(dtype_name(t) for t in ins),
        params=op.kernel_params(),
    )


@dataclass
class _FuncLowering:
    """Lowers one func.func; `buffers` maps each tensor value to its exec buffer."""

    fn: func.FuncOp
    family: str
    capability: Capability
    autotune: AutotuneCache | None
    device: str
    buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    decls: list[Operation] = field(default_factory=list)
    body: list[Operation] = field(default_factory=list)
    outputs: list[Operation] = field(default_factory=list)

    def run(self) -> ex.ProgramOp:
        block = self.fn.body.blocks.first
        if block is None or len(self.fn.body.blocks) != 1:
            raise OpError(self.fn, "only a function with exactly one block can be lowered to exec")
        externals = self.lower_arguments(block.args)
        ret: func.ReturnOp | None = None
        for op in block.ops:
            if isinstance(op, func.ReturnOp):
                ret = op
            else:
                self.lower_op(op)
        assert ret is not None, "func.func verifies a terminator"
        self.lower_results(ret, externals)
        program = ex.ProgramOp(self.fn.sym_name.data)
        graph = ex.GraphOp()
        graph.block.add_ops(self.body)
        program.block.add_ops([*self.decls, graph, *self.outputs])
        copy_location(self.fn, program, graph)
        return program

    def lower_arguments(self, args: tuple[SSAValue, ...]) -> dict[str, SSAValue]:
        """Arguments -> exec.buffer; returns the param/state buffers by name."""
        by_name: dict[str, SSAValue] = {}
        mutable: dict[str, SSAValue] = {}
        for i, arg in enumerate(args):
            attrs = self.fn.arg_attrs.data[i].data if self.fn.arg_attrs is not None else {}
            for key in (ROLE_ATTR, NAME_ATTR):  # a non-string would silently read as absent
                if key in attrs and not isinstance(attrs[key], StringAttr):
                    raise OpError(
                        self.fn, f"argument #{i} has {key} = {attrs[key]}; expected a string"
                    )
            role = arg_role(arg) or "input"
            name = arg_name(arg) or f"arg{i}"
            if role not in EXTERNAL_ROLES:
                raise OpError(
                    self.fn,
                    f'argument #{i} has aicfc.role "{role}"; expected input, param or state',
                )
            if name in by_name:
                raise OpError(
                    self.fn, f'argument #{i} reuses the aicfc.name "{name}"; names must be unique'
                )
            if not isinstance(arg.type, TensorType):
                raise OpError(self.fn, f'argument #{i} ("{name}") must be a tensor, got {arg.type}')
            init = arg_init(arg)
            if init is not None and (role != "state" or init.type != arg.type):
                raise OpError(
                    self.fn,
                    f'argument #{i} ("{name}") has aicfc.init of type {init.type}; only a state '
                    f"has one, of its own type {arg.type}",
                )
            buf = ex.BufferOp(name, ex.from_tensor(arg.type, role), init)
            copy_location(self.fn, buf)
            buf.result.name_hint = arg.name_hint
            self.decls.append(buf)
            self.buffers[arg] = by_name[name] = buf.result
            if role != "input":
                mutable[name] = buf.result
        return mutable

    def lower_op(self, op: Operation) -> None:
        if isinstance(op, BackwardOp):
            raise OpError(op, "cannot be executed: run aicfc-expand-backward first")
        if static_flags(op) & OpFlag.IS_CONSTANT:
            value = op.properties["value"]
            assert isinstance(value, DenseIntOrFPElementsAttr)
            const = ex.ConstantOp(value)
            const.result.name_hint = op.results[0].name_hint
            copy_location(op, const)
            self.decls.append(const)
            self.buffers[op.results[0]] = const.result
            return
        if not isinstance(op, AicfcOp) or not op.results:
            raise OpError(
                op, "is not a graph or autodiff op with results; it cannot be lowered to exec"
            )
        try:
            chosen = select(
                problem_of(op), self.family, self.capability, self.autotune, self.device
            )
        except NoKernelError as e:
            raise OpError(op, str(e)) from None
        allocs = [ex.AllocOp(ex.from_tensor(r.type, ex.BufferRole.TMP)) for r in op.results]
        info = op_info(op)
        # an in-place kernel takes its op's policy; a view kernel (a byte copy, harmless
        # onto the same bytes when a backend does launch it) takes the view policy
        policy = info.alias if info else None
        takes = policy is not None and (
            chosen.spec.inplace_ok or (policy is VIEW and chosen.spec.view)
        )
        alias = policy.name if policy is not None and takes else None
        launch = ex.LaunchOp(
            chosen.spec.name,
            [self.buffers[v] for v in op.operands],
            [a.result for a in allocs],
            params=op.kernel_params(),
            alias=alias,
        )
        copy_location(op, launch, *allocs)
        self.decls.extend(allocs)
        self.body.append(launch)
        for r, a in zip(op.results, allocs, strict=True):
            a.result.name_hint = r.name_hint
            self.buffers[r] = a.result

    def lower_results(self, ret: func.ReturnOp, externals: dict[str, SSAValue]) -> None:
        names = result_names(self.fn)
        copies: list[tuple[SSAValue, SSAValue]] = []
        outputs: list[tuple[str, SSAValue]] = []
        written: set[str] = set()
        for j, (value, name) in enumerate(zip(ret.arguments, names, strict=True)):
            src = self.buffers[value]
            if name is not None and name in externals:
                if name in written:
                    raise OpError(ret, f'result #{j} is a second next value of "{name}"')
                want = ex.buffer_type(externals[name])
                have = ex.buffer_type(src)
                if not have.same_layout(want):
                    role = want.buffer_role.value
                    raise OpError(
                        ret,
                        f'result #{j} is named "{name}", the next value of that {role}, but it '
                        f"is {value.type} where the {role} is "
                        f"{TensorType(want.element_type, list(want.get_shape()))}",
                    )
                written.add(name)
                if src is not externals[name]:
                    copies.append((src, externals[name]))
                continue
            out_name = name if name is not None else f"result{j}"
            if any(out_name == n for n, _ in outputs):
                raise OpError(ret, f'result #{j} reuses the output name "{out_name}"')
            outputs.append((out_name, src))
        # The current value of an external that a copy-back overwrites (read by
        # another copy-back, as in a swap, or by an output) is snapshotted first.
        dests = {id(d) for _, d in copies}
        snaps: dict[int, SSAValue] = {}

        def current(v: SSAValue) -> SSAValue:
            if id(v) not in dests:
                return v
            if id(v) not in snaps:
                snap = ex.AllocOp(ex.buffer_type(v).with_role(ex.BufferRole.TMP))
                self.decls.append(snap)
                self.body.append(ex.CopyOp(v, snap.result))
                snaps[id(v)] = snap.result
            return snaps[id(v)]

        copies = [(current(src), dst) for src, dst in copies]
        for out_name, src in outputs:
            out = ex.OutputOp(out_name, current(src))
            copy_location(ret, out)
            self.outputs.append(out)
        for src, dst in copies:
            copy = ex.CopyOp(src, dst)
            copy_location(ret, copy)
            self.body.append(copy)


@dataclass(frozen=True)
class AicfcLowerExecPass(ModulePass):
    """Lower every func.func to an exec.program for `backend` ("numpy" or "cupy", or
    "cuda", the name of cupy's kernel family; runtime/backend_names.py): each op gets
    a kernel of the backend's kernel family.

    arch, tf32, tensor_core, cublaslt: the device capability the selector scores
    CUDA kernels against (cublaslt: nvmath-python's cuBLASLt is usable; tf32: TF32
    tensor-core GEMMs are allowed); autotune_cache: a JSON file of measured choices
    keyed by `device` (see runtime/selector.py); mma_small: let our tensor-core latency
    kernels (kernels/gemm_mma.cu) take the small products (off: on the H200 they measured
    slower than the FFMA split-K and cuBLASLt kernels, BENCHMARKS.md session 4). The API
    passes the backend's own values (`Backend.lower_exec_options()`), so the launches in
    the exec IR are the kernels that run.
    """

    name = "aicfc-lower-exec"

    backend: str = "numpy"
    arch: int = 90
    tf32: bool = False
    tensor_core: bool = True
    cublaslt: bool = True
    autotune_cache: str = ""
    device: str = ""
    mma_small: bool = False

    @property
    def kernel_family(self) -> str:
        """The kernel family of `backend` ("numpy" or "cuda")."""
        return backend_names.kernel_family(self.backend)

    def capability(self) -> Capability:
        if self.kernel_family == "numpy":
            return {}
        return {
            "arch": self.arch,
            "tf32": self.tf32,
            "tensor_core": self.tensor_core and self.arch >= 70,
            "cublaslt": self.cublaslt,
            "mma_small": self.mma_small,
        }

    def __post_init__(self) -> None:
        # A bad option is a command-line mistake: refuse it before any IR is read.
        try:
            backend_names.kernel_family(self.backend)
        except backend_names.UnknownBackendError as e:
            raise ValueError(f"aicfc-lower-exec: {e}") from None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        autotune = AutotuneCache(self.autotune_cache) if self.autotune_cache else None
        for fn in [o for o in op.body.block.ops if isinstance(o, func.FuncOp)]:
            program = _FuncLowering(
                fn, self.kernel_family, self.capability(), autotune, self.device
            ).run()
            op.body.block.insert_op_before(program, fn)
            op.body.block.erase_op(fn, safe_erase=False)
