"""The exec dialect: the execution plan that both runtimes run.

An `exec.program` declares its buffers, then one `exec.graph` region whose
body is captured once and replayed (on the GPU) or run in order (NumPy), then
its named outputs. Kernels run in destination-passing style: `exec.launch`
names a kernel of the registry, its input buffers, its output buffers and its
scalar parameters (docs/design.md#the-execution-plan-is-ir). In-place execution is visible:
an output buffer that is the same SSA value as an input buffer.

```mlir
exec.program @train_step {
  %x = exec.buffer "x" : !exec.buffer<64x64xf32, input>
  %w = exec.buffer "fc1.weight" : !exec.buffer<128x64xf32, param>
  %h = exec.alloc : !exec.buffer<64x128xf32, tmp>
  exec.graph {
    exec.launch "numpy.gemm_epilogue"(%x, %w) outs(%h) params {transpose_b = true}
      : (!exec.buffer<64x64xf32, input>, !exec.buffer<128x64xf32, param>)
      -> (!exec.buffer<64x128xf32, tmp>)
  }
  exec.output "h" %h : !exec.buffer<64x128xf32, tmp>
}
```

Roles: `input` (copied in before every step), `param` and `state` (persist
across steps; updated in place), `tmp` (step-local), `const` (written once at
load). Externals (input/param/state) have unique stable names.

Collectives (data-parallel training, docs/design.md#data-parallel-training): a program
may declare communicators (`exec.communicator "world" world_size = 2`), resources the
runtime binds at load like buffers, and its capture region may hold `exec.all_reduce`,
which packs gradient buffers into one flat bucket, reduces the bucket over the ranks
of a communicator and writes each rank's result back into the same buffers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, OpTrait, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from aicfc.dialects.flags import ALIAS_POLICIES, VIEW
from aicfc.dialects.params import ParamValue, attr_to_params, params_to_attr
from aicfc.dialects.tensors import itemsize, numel

# ----------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------


class BufferRole(StrEnum):
    INPUT = "input"
    PARAM = "param"
    STATE = "state"
    TMP = "tmp"
    CONST = "const"


EXTERNAL_ROLES = (BufferRole.INPUT, BufferRole.PARAM, BufferRole.STATE)


@irdl_attr_definition
class BufferRoleAttr(EnumAttribute[BufferRole]):
    name = "exec.role"


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """`!exec.buffer<64x128xf32, tmp>`: a dense row-major buffer with a role."""

    name = "exec.buffer"
    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    role: BufferRoleAttr

    def __init__(self, shape: Sequence[int], element_type: Attribute, role: BufferRole | str):
        super().__init__(
            ArrayAttr([IntAttr(d) for d in shape]),
            element_type,
            BufferRoleAttr(BufferRole(role)),
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            dims, element_type = parser.parse_ranked_shape()
            parser.parse_punctuation(",")
            role = parser.parse_str_enum(BufferRole)
        return [ArrayAttr([IntAttr(d) for d in dims]), element_type, BufferRoleAttr(role)]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            printer.print_string(f", {self.role.data.value}")

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def buffer_role(self) -> BufferRole:
        return self.role.data

    def nbytes(self) -> int:
        return numel(self.get_shape()) * itemsize(self.element_type)

    def same_layout(self, other: BufferType) -> bool:
        """Same shape and element type (roles may differ)."""
        return self.shape == other.shape and self.element_type == other.element_type

    def with_role(self, role: BufferRole | str) -> BufferType:
        return BufferType(self.get_shape(), self.element_type, role)

    def verify(self) -> None:
        if any(d.data < 0 for d in self.shape.data):
            dims = ", ".join("?" if d < 0 else str(d) for d in self.get_shape())
            raise VerifyException(f"exec.buffer: dims must be static, got [{dims}]")


@irdl_attr_definition
class CommunicatorType(ParametrizedAttribute, TypeAttribute):
    """`!exec.communicator`: a group of ranks that collectives run over (NCCL's ncclComm_t)."""

    name = "exec.communicator"


class ReduceOp(StrEnum):
    """What `exec.all_reduce` computes elementwise over the ranks (NCCL's ncclRedOp_t)."""

    SUM = "sum"
    MEAN = "mean"


def buffer_type(value: SSAValue) -> BufferType:
    assert isinstance(value.type, BufferType), f"expected an !exec.buffer, got {value.type}"
    return value.type


def from_tensor(t: Attribute, role: BufferRole | str) -> BufferType:
    """The buffer type that holds a value of tensor type `t`."""
    assert isinstance(t, TensorType)
    return BufferType(tuple(t.get_shape()), t.element_type, role)


def single_block(region: Region) -> Block:
    """The region's one block, created if the region is empty.

    An empty body prints as `{\n}` and parses back as a region without blocks,
    so both forms mean "no ops". A second block is rejected by xDSL's own
    verifier (an op that is not a terminator ends a block of a multi-block region).
    """
    if not region.blocks:
        region.add_block(Block())
    return region.block


@dataclass(frozen=True)
class InsideProgram(OpTrait):
    """The op belongs to an `exec.program` (buffers, launches and outputs mean nothing
    elsewhere); where inside it may sit is checked by exec.program and exec.graph."""

    def verify(self, op: Operation) -> None:
        parent = op.parent_op()
        if parent is None:  # detached, e.g. while a pass builds it
            return
        while parent is not None and not isinstance(parent, ProgramOp):
            parent = parent.parent_op()
        if parent is None:
            raise VerifyException(
                f"{op.name}: must be inside an exec.program, got {op.parent_op().name}"  # type: ignore[union-attr]
            )


# ----------------------------------------------------------------------------
# Ops
# ----------------------------------------------------------------------------


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """An executable step: buffer declarations, one `exec.graph`, named outputs.

    `arena_size` (bytes) is set by `aicfc-plan-memory`: planned tmp buffers are
    views at their `offset` into one arena of that size. A program is a symbol
    of a module, as a `func.func` is: it sits directly inside a `builtin.module`
    (the runtimes look programs up there), never inside a function or another op.

    ```mlir
    exec.program @train_step { ... }
    ```
    """

    name = "exec.program"
    sym_name = prop_def(SymbolNameConstraint())
    arena_size = opt_prop_def(IntegerAttr[I64])
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), NoTerminator(), SymbolOpInterface())
    assembly_format = "$sym_name (`arena` `=` $arena_size^)? attr-dict-with-keyword $body"

    def __init__(self, sym_name: str, body: Region | None = None):
        super().__init__(
            properties={"sym_name": StringAttr(sym_name)},
            regions=[body if body is not None else Region(Block())],
        )

    @property
    def block(self) -> Block:
        return single_block(self.body)

    def graph(self) -> GraphOp:
        for op in self.block.ops:
            if isinstance(op, GraphOp):
                return op
        raise VerifyException(f"exec.program @{self.sym_name.data}: has no exec.graph region")

    def externals(self) -> list[BufferOp]:
        return [op for op in self.block.ops if isinstance(op, BufferOp)]

    def outputs(self) -> list[OutputOp]:
        return [op for op in self.block.ops if isinstance(op, OutputOp)]

    def communicators(self) -> list[CommunicatorOp]:
        return [op for op in self.block.ops if isinstance(op, CommunicatorOp)]

    def verify_(self) -> None:
        where = f"exec.program @{self.sym_name.data}"
        parent = self.parent_op()
        if parent is not None and not isinstance(parent, ModuleOp):
            raise VerifyException(
                f"{where}: must be at module level (directly inside a builtin.module), "
                f"got inside {_op_label(parent)}"
            )
        graphs = [op for op in self.block.ops if isinstance(op, GraphOp)]
        if len(graphs) != 1:
            raise VerifyException(f"{where}: expected exactly one exec.graph, found {len(graphs)}")
        seen: dict[str, str] = {}
        for op in self.block.ops:
            if isinstance(op, BufferOp | OutputOp):
                kind = "buffer" if isinstance(op, BufferOp) else "output"
                key = f"{kind}:{op.buffer_name.data}"
                if key in seen:
                    raise VerifyException(
                        f'{where}: {kind} name "{op.buffer_name.data}" is declared twice'
                    )
                seen[key] = kind
            elif isinstance(op, CommunicatorOp):
                key = f"communicator:{op.comm_name.data}"
                if key in seen:
                    raise VerifyException(
                        f'{where}: communicator name "{op.comm_name.data}" is declared twice'
                    )
                seen[key] = "communicator"
            elif not isinstance(op, AllocOp | ConstantOp | GraphOp):
                raise VerifyException(
                    f"{where}: {op.name} is not allowed at program level (only exec.buffer, "
                    "exec.alloc, exec.constant, exec.communicator, exec.graph, exec.output)"
                )
        size = self.arena_size.value.data if self.arena_size is not None else None
        if size is not None and size < 0:
            raise VerifyException(f"{where}: arena size must be non-negative, got {size}")
        for op in self.block.ops:
            if isinstance(op, AllocOp) and op.offset is not None:
                if size is None:
                    raise VerifyException(f"{where}: an exec.alloc has an offset but no arena size")
                end = op.offset.value.data + buffer_type(op.result).nbytes()
                if op.offset.value.data < 0 or end > size:
                    raise VerifyException(
                        f"{where}: exec.alloc at offset {op.offset.value.data} ends at byte {end}, "
                        f"past the arena of {size} bytes"
                    )
        verify_disjoint_live_ranges(self, where)


@irdl_op_definition
class BufferOp(IRDLOperation):
    """An external buffer (role input, param or state) with a stable name; a state that
    does not start at zero carries its initial value (`init`, the argument's `aicfc.init`).

    ```mlir
    %w = exec.buffer "fc1.weight" : !exec.buffer<128x64xf32, param>
    %lr = exec.buffer "optim.0.lr" init = dense<1.0e-03> : tensor<f64> : !exec.buffer<f64, state>
    ```
    """

    name = "exec.buffer"
    buffer_name = prop_def(StringAttr)
    init = opt_prop_def(DenseIntOrFPElementsAttr)
    result = result_def(BufferType)
    traits = traits_def(InsideProgram())
    assembly_format = "$buffer_name (`init` `=` $init^)? attr-dict `:` type($result)"

    def __init__(self, name: str, type: BufferType, init: DenseIntOrFPElementsAttr | None = None):
        super().__init__(
            properties={"buffer_name": StringAttr(name), "init": init}, result_types=[type]
        )

    def verify_(self) -> None:
        t = buffer_type(self.result)
        role = t.buffer_role
        if role not in EXTERNAL_ROLES:
            raise VerifyException(
                f'exec.buffer "{self.buffer_name.data}": role must be input, param or state, '
                f"got {role.value} (use exec.alloc for tmp, exec.constant for const)"
            )
        if self.init is None:
            return
        if role != BufferRole.STATE:
            raise VerifyException(
                f'exec.buffer "{self.buffer_name.data}": only a state has an initial value '
                f"(init), this is a {role.value}"
            )
        if t != from_tensor(self.init.type, BufferRole.STATE):
            raise VerifyException(
                f'exec.buffer "{self.buffer_name.data}": init is {self.init.type}, the buffer '
                f"is {t}"
            )


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A step-local tmp buffer; after memory planning, a view at `offset` bytes into the arena.

    ```mlir
    %t = exec.alloc : !exec.buffer<64x128xf32, tmp>
    %u = exec.alloc offset = 32768 : !exec.buffer<64x128xf32, tmp>
    ```
    """

    name = "exec.alloc"
    offset = opt_prop_def(IntegerAttr[I64])
    result = result_def(BufferType)
    traits = traits_def(InsideProgram())
    assembly_format = "(`offset` `=` $offset^)? attr-dict `:` type($result)"

    def __init__(self, type: BufferType, offset: int | None = None):
        super().__init__(
            properties={"offset": IntegerAttr(offset, i64) if offset is not None else None},
            result_types=[type],
        )

    def verify_(self) -> None:
        if buffer_type(self.result).buffer_role != BufferRole.TMP:
            raise VerifyException(f"exec.alloc: role must be tmp, got {self.result.type}")


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A buffer with role const, written once when the program is loaded.

    ```mlir
    %c = exec.constant dense<1> : tensor<i64> -> !exec.buffer<i64, const>
    ```
    """

    name = "exec.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(BufferType)
    traits = traits_def(InsideProgram())
    assembly_format = "$value attr-dict `->` type($result)"

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(
            properties={"value": value}, result_types=[from_tensor(value.type, BufferRole.CONST)]
        )

    def verify_(self) -> None:
        t = buffer_type(self.result)
        if t != from_tensor(self.value.type, BufferRole.CONST):
            raise VerifyException(
                f"exec.constant: result {t} does not hold the value's type {self.value.type} "
                "with role const"
            )


@irdl_op_definition
class GraphOp(IRDLOperation):
    """The capture region: its launches run in order, captured once and replayed.

    ```mlir
    exec.graph { exec.launch ... }
    ```
    """

    name = "exec.graph"
    body = region_def()
    traits = traits_def(NoTerminator(), InsideProgram())
    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, body: Region | None = None):
        super().__init__(regions=[body if body is not None else Region(Block())])

    @property
    def block(self) -> Block:
        return single_block(self.body)

    def verify_(self) -> None:
        for op in self.block.ops:
            if not isinstance(op, LaunchOp | CopyOp | AllReduceOp):
                raise VerifyException(
                    f"exec.graph: {op.name} is not allowed inside the capture region "
                    "(only exec.launch, exec.copy and exec.all_reduce)"
                )


def _check_writable(op_name: str, what: str, value: SSAValue) -> None:
    role = buffer_type(value).buffer_role
    if role in (BufferRole.INPUT, BufferRole.CONST):
        owner = value.owner
        label = f' "{owner.buffer_name.data}"' if isinstance(owner, BufferOp) else ""
        raise VerifyException(
            f"{op_name}: {what} is the {role.value} buffer{label}; "
            f"{role.value} buffers are read-only"
        )


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a registered kernel: inputs, then outputs, then scalar parameters (one ABI).

    `alias` names the alias policy (dialects.flags.ALIAS_POLICIES) that
    `aicfc-fold-inplace` may apply; an output that is the same SSA value as an
    input runs in place.

    ```mlir
    exec.launch "numpy.relu"(%a) outs(%b) alias = "out0_in0"
      : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
    ```
    """

    name = "exec.launch"
    kernel = prop_def(StringAttr)
    inputs = var_operand_def(BufferType)
    outputs = var_operand_def(BufferType)
    params = opt_prop_def(DictionaryAttr)
    alias = opt_prop_def(StringAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(InsideProgram())
    assembly_format = (
        "$kernel `(` $inputs `)` `outs` `(` $outputs `)` (`params` $params^)? "
        "(`alias` `=` $alias^)? attr-dict `:` `(` type($inputs) `)` `->` `(` type($outputs) `)`"
    )

    def __init__(
        self,
        kernel: str,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        params: Mapping[str, ParamValue] | None = None,
        alias: str | None = None,
    ):
        super().__init__(
            operands=[list(inputs), list(outputs)],
            properties={
                "kernel": StringAttr(kernel),
                "params": params_to_attr(params) if params else None,
                "alias": StringAttr(alias) if alias is not None else None,
            },
        )

    @property
    def kernel_name(self) -> str:
        return self.kernel.data

    def scalar_params(self) -> dict[str, ParamValue]:
        return attr_to_params(self.params)

    def verify_(self) -> None:
        where = f'exec.launch "{self.kernel.data}"'
        if not self.kernel.data:
            raise VerifyException("exec.launch: kernel name is empty")
        for i, out in enumerate(self.outputs):
            _check_writable(where, f"output #{i}", out)
        if len({id(o) for o in self.outputs}) != len(self.outputs):
            raise VerifyException(f"{where}: the same buffer is written by two outputs")
        if self.alias is not None and self.alias.data not in ALIAS_POLICIES:
            raise VerifyException(
                f'{where}: unknown alias policy "{self.alias.data}" '
                f"(known: {', '.join(sorted(ALIAS_POLICIES))})"
            )
        attr_to_params(self.params)


@irdl_op_definition
class CopyOp(IRDLOperation):
    """dst = src (a device-to-device copy; `aicfc-fold-inplace` removes src == dst).

    ```mlir
    exec.copy %new -> %w : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, param>
    ```
    """

    name = "exec.copy"
    source = operand_def(BufferType)
    dest = operand_def(BufferType)
    traits = traits_def(InsideProgram())
    assembly_format = "$source `->` $dest attr-dict `:` type($source) `->` type($dest)"

    def __init__(self, source: SSAValue, dest: SSAValue):
        super().__init__(operands=[source, dest])

    def verify_(self) -> None:
        s, d = buffer_type(self.source), buffer_type(self.dest)
        if not s.same_layout(d):
            raise VerifyException(f"exec.copy: source {s} and dest {d} differ in shape or dtype")
        _check_writable("exec.copy", "dest", self.dest)


@irdl_op_definition
class CommunicatorOp(IRDLOperation):
    """A communicator of `world_size` ranks, a program resource bound at load.

    The runtime binds it by name to the communicator its backend was given (one NCCL
    communicator per process, or a simulated one on the CPU) and refuses a program
    whose `world_size` differs from that communicator's.

    ```mlir
    %world = exec.communicator "world" world_size = 2 : !exec.communicator
    ```
    """

    name = "exec.communicator"
    comm_name = prop_def(StringAttr)
    world_size = prop_def(IntegerAttr[I64])
    result = result_def(CommunicatorType)
    traits = traits_def(InsideProgram())
    assembly_format = "$comm_name `world_size` `=` $world_size attr-dict `:` type($result)"

    def __init__(self, name: str, world_size: int):
        super().__init__(
            properties={"comm_name": StringAttr(name), "world_size": IntegerAttr(world_size, i64)},
            result_types=[CommunicatorType()],
        )

    def verify_(self) -> None:
        if self.world_size.value.data < 1:
            raise VerifyException(
                f'exec.communicator "{self.comm_name.data}": world_size must be at least 1, '
                f"got {self.world_size.value.data}"
            )


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """Reduce `tensors` over the ranks of `communicator` through one flat `bucket`.

    bucket = concat(ravel(t) for t in tensors); bucket = reduce over ranks (`sum`,
    or `mean`: the sum divided by the world size, as DDP averages gradients);
    each tensor = its slice of the bucket. The tensors are read and written in
    place; the bucket is a tmp buffer of rank 1 holding exactly their elements,
    all of one element type (NCCL reduces one contiguous buffer per call, so
    many small gradients cost one launch: PyTorch DDP's gradient buckets).

    ```mlir
    exec.all_reduce "mean" %world tensors(%dw, %db) bucket(%b)
      : (!exec.buffer<4x16xf32, tmp>, !exec.buffer<4xf32, tmp>) -> !exec.buffer<68xf32, tmp>
    ```
    """

    name = "exec.all_reduce"
    communicator = operand_def(CommunicatorType())
    tensors = var_operand_def(BufferType)
    bucket = operand_def(BufferType)
    reduce = prop_def(StringAttr)
    traits = traits_def(InsideProgram())
    assembly_format = (
        "$reduce $communicator `tensors` `(` $tensors `)` `bucket` `(` $bucket `)` attr-dict "
        "`:` `(` type($tensors) `)` `->` type($bucket)"
    )

    def __init__(
        self,
        communicator: SSAValue,
        tensors: Sequence[SSAValue],
        bucket: SSAValue,
        reduce: ReduceOp | str = ReduceOp.MEAN,
    ):
        super().__init__(
            operands=[communicator, list(tensors), bucket],
            properties={"reduce": StringAttr(ReduceOp(reduce).value)},
        )

    @property
    def reduce_op(self) -> ReduceOp:
        return ReduceOp(self.reduce.data)

    def verify_(self) -> None:
        where = "exec.all_reduce"
        if self.reduce.data not in {r.value for r in ReduceOp}:
            known = ", ".join(r.value for r in ReduceOp)
            raise VerifyException(f'{where}: unknown reduce "{self.reduce.data}" (known: {known})')
        if not self.tensors:
            raise VerifyException(f"{where}: needs at least one tensor to reduce")
        bt = buffer_type(self.bucket)
        if bt.buffer_role != BufferRole.TMP or len(bt.get_shape()) != 1:
            raise VerifyException(
                f"{where}: the bucket must be a tmp buffer of rank 1, got {self.bucket.type}"
            )
        total = 0
        for i, t in enumerate(self.tensors):
            tt = buffer_type(t)
            _check_writable(where, f"tensor #{i}", t)
            if t is self.bucket or any(t is u for u in self.tensors[:i]):
                raise VerifyException(f"{where}: tensor #{i} is passed twice (or is the bucket)")
            if tt.element_type != bt.element_type:
                raise VerifyException(
                    f"{where}: tensor #{i} has element type {tt.element_type}, the bucket "
                    f"{bt.element_type}"
                )
            total += numel(tt.get_shape())
        if bt.get_shape()[0] != total:
            raise VerifyException(
                f"{where}: the bucket holds {bt.get_shape()[0]} elements, the tensors {total}"
            )

    def slices(self) -> list[tuple[int, int]]:
        """[start, stop) of each tensor in the bucket, in operand order."""
        out, at = [], 0
        for t in self.tensors:
            n = numel(buffer_type(t).get_shape())
            out.append((at, at + n))
            at += n
        return out


@irdl_op_definition
class OutputOp(IRDLOperation):
    """A named program output, read after the step.

    ```mlir
    exec.output "loss" %l : !exec.buffer<f32, tmp>
    ```
    """

    name = "exec.output"
    buffer_name = prop_def(StringAttr)
    value = operand_def(BufferType)
    traits = traits_def(InsideProgram())
    assembly_format = "$buffer_name $value attr-dict `:` type($value)"

    def __init__(self, name: str, value: SSAValue):
        super().__init__(properties={"buffer_name": StringAttr(name)}, operands=[value])


def programs(module: ModuleOp) -> list[ProgramOp]:
    """The exec.programs of `module`, in order (ProgramOp verifies each sits at its top level)."""
    return [op for op in module.ops if isinstance(op, ProgramOp)]


def launches(program: ProgramOp) -> list[Operation]:
    """The ops of the capture region in execution order."""
    return list(program.graph().block.ops)


def tmp_lifetimes(program: ProgramOp) -> dict[AllocOp, tuple[int, int]]:
    """[first, last] position in the capture region of every use of each tmp alloc.

    Launches and copies run (and are replayed) in a fixed order, so a lifetime is
    the closed interval from the first use to the last; an `exec.output` counts as
    position len(launches) (the buffer lives to the end of the step). An alloc that
    nothing uses gets (-1, -1): it is live nowhere. aicfc-plan-memory plans by this
    rule and exec.program's verifier checks planned offsets against it.
    """
    ops = launches(program)
    pos = {id(op): k for k, op in enumerate(ops)}
    end = len(ops)
    spans: dict[AllocOp, tuple[int, int]] = {}
    for op in program.block.ops:
        if isinstance(op, AllocOp):
            at = [pos.get(id(u.operation), end) for u in op.result.uses]
            spans[op] = (min(at), max(at)) if at else (-1, -1)
    return spans


def _writes(op: Operation) -> Sequence[SSAValue]:
    if isinstance(op, LaunchOp):
        return op.outputs
    if isinstance(op, CopyOp):
        return (op.dest,)
    return ()


def view_groups(program: ProgramOp) -> dict[AllocOp, AllocOp]:
    """Each tmp alloc that may share its storage with another, and the alloc whose storage
    it shares (the root of a chain of views).

    A launch with `alias = "view"` (a reshape: its output is its input's bytes read with
    another shape) joins output Y to input X's group when both are tmp allocs of the same
    size, the launch is Y's only writer, and no op from the launch to Y's last use writes
    any buffer of the group: Y then reads, at every use, the bytes X held when the launch
    ran. aicfc-plan-memory places a group as one buffer (the union of its lifetimes) and
    exec.program's verifier lets the members of one group share bytes.
    """
    ops = launches(program)
    pos = {id(op): k for k, op in enumerate(ops)}
    end = len(ops)
    written: dict[SSAValue, list[int]] = {}
    for k, op in enumerate(ops):
        for v in _writes(op):
            written.setdefault(v, []).append(k)
    root: dict[AllocOp, AllocOp] = {}
    members: dict[AllocOp, list[AllocOp]] = {}
    for k, op in enumerate(ops):
        if not (isinstance(op, LaunchOp) and op.alias is not None and op.alias.data == VIEW.name):
            continue
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            continue
        x, y = op.inputs[0].owner, op.outputs[0].owner
        if not (isinstance(x, AllocOp) and isinstance(y, AllocOp)) or x is y:
            continue
        if buffer_type(x.result).nbytes() != buffer_type(y.result).nbytes():
            continue
        if written.get(y.result) != [k]:
            continue
        top = root.get(x, x)
        group = [top, *members.get(top, [])]
        last = max(pos.get(id(u.operation), end) for u in y.result.uses)
        if any(k < w <= last for m in group for w in written.get(m.result, [])):
            continue
        root[y] = top
        members.setdefault(top, []).append(y)
    return root


def verify_disjoint_live_ranges(program: ProgramOp, where: str) -> None:
    """Planned tmp buffers share bytes only when their lifetimes are disjoint.

    That is the rule aicfc-plan-memory plans by (the members of one `view_groups` group,
    placed at one offset, count as one buffer); a hand-written or corrupted plan
    that breaks it would let one buffer silently overwrite another. Swept by
    offset, so only byte-overlapping pairs are compared.
    """
    spans = tmp_lifetimes(program)
    planned = sorted(
        (op.offset.value.data, op.offset.value.data + buffer_type(op.result).nbytes(), k, op)
        for k, op in enumerate(program.block.ops)
        if isinstance(op, AllocOp) and op.offset is not None and spans[op][0] >= 0
    )
    views = view_groups(program)
    for i, (start, end, _, a) in enumerate(planned):
        for start_b, end_b, _, b in planned[i + 1 :]:
            if start_b >= end:
                break
            if views.get(a, a) is views.get(b, b) and (start, end) == (start_b, end_b):
                continue  # one view group at one offset: the same bytes by construction
            (fa, la), (fb, lb) = spans[a], spans[b]
            if start_b < end_b and start < end and fa <= lb and fb <= la:
                raise VerifyException(
                    f"{where}: exec.alloc {_alloc_label(a)} (bytes {start}..{end}) and "
                    f"{_alloc_label(b)} (bytes {start_b}..{end_b}) share bytes but are both "
                    f"live at exec.graph position {max(fa, fb)}; planned buffers may overlap "
                    "only when their lifetimes are disjoint"
                )


def _op_label(op: Operation) -> str:
    """`func.func @f` for an op with a symbol name, else the op's name."""
    sym = op.properties.get("sym_name") or op.attributes.get("sym_name")
    return f"{op.name} @{sym.data}" if isinstance(sym, StringAttr) else op.name


def _alloc_label(op: AllocOp) -> str:
    hint = op.result.name_hint
    return f"%{hint}" if hint else f"of {op.result.type}"


Exec = Dialect(
    "exec",
    [
        ProgramOp,
        BufferOp,
        AllocOp,
        ConstantOp,
        CommunicatorOp,
        GraphOp,
        LaunchOp,
        CopyOp,
        AllReduceOp,
        OutputOp,
    ],
    [BufferType, BufferRoleAttr, CommunicatorType],
)
