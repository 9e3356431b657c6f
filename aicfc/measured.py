"""The measured report: what a real batch and the trained weights say.

Why an analysis at all: docs/design.md#operator-analysis.


The static report (passes/analysis/) can only say where information *may*
collapse. This module runs the inference function on a batch with the NumPy
interpreter (runtime/interpreter.py), captures the output of every ReLU/GELU
(fused epilogue activations included) and measures:

- active fraction: the share of outputs > 0. For GELU the same test is used:
  GELU(x) = x Phi(x) > 0 exactly when x > 0, so "active" means the gate
  Phi(x) > 1/2. A unit (one feature of the last dimension) is *dead* when it
  is never active on the batch, *rarely active* when it is active on fewer
  than `Thresholds.rare_fraction` of the batch's samples.
- effective rank of each Linear weight W [M, N] with singular values s:
  erank = exp(H(p)), p_i = s_i / sum_j s_j, H(p) = -sum_i p_i log p_i
  (Roy and Vetterli, "The effective rank: a measure of effective
  dimensionality", EUSIPCO 2007). 1 <= erank <= min(M, N).
- numerical rank: #{i : s_i > s_max * max(M, N) * eps}, eps the machine
  epsilon of W's dtype (numpy.linalg.matrix_rank's default tolerance).
- energy rank: the fewest singular values holding `Thresholds.energy` of
  sum_i s_i^2 (the rank a truncated SVD needs to keep that share of ||W||_F^2).

Candidates appear only when the numbers cross the thresholds of `Thresholds`,
and carry the numbers. Removing a ReLU unit that is dead on the batch leaves
the network's outputs on that batch unchanged (its output is exactly 0); for
GELU the removal is approximate (its negative outputs are small, not 0), and
for inputs outside the batch a dead unit may wake up: the batch should be
representative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import builtin, func
from xdsl.ir import SSAValue

from aicfc.dialects.base import AicfcOp
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.roles import arg_name, arg_role, functions
from aicfc.dialects.tensors import fmt_shape
from aicfc.passes.analysis import (
    Candidate,
    FunctionReport,
    Node,
    Report,
    analyze_function,
    analyze_module,
)
from aicfc.runtime.interpreter import run_func

LIST_LIMIT = 16
"""Unit indices listed per layer before the list is cut with "..."."""


@dataclass(frozen=True)
class Thresholds:
    """When a measurement becomes a candidate (all stated in the report).

    rare_fraction:   a unit active on fewer than this share of samples is rarely active.
    reduce_fraction: hidden dimension reduction when at least this share of a layer's
                     units are dead or rarely active.
    low_rank_ratio:  low-rank approximation when erank <= low_rank_ratio * min(M, N)
                     or the numerical rank is below min(M, N) ...
    energy:          ... and a rank-r factorisation keeping this share of sum s_i^2 has
                     fewer parameters than W (r (M + N) < M N).
    """

    rare_fraction: float = 0.01
    reduce_fraction: float = 0.10
    low_rank_ratio: float = 0.5
    energy: float = 0.99


@dataclass(frozen=True)
class ActivationStats:
    """Activity of one ReLU/GELU output [samples..., units] on the batch."""

    node: int
    label: str
    kind: str
    shape: tuple[int, ...]
    samples: int
    units: int
    active_fraction: float
    unit_active: tuple[float, ...]
    dead_units: tuple[int, ...]
    rare_units: tuple[int, ...]


@dataclass(frozen=True)
class WeightRank:
    """Spectrum facts of one Linear weight [M, N] (see the module docstring)."""

    node: int
    label: str
    name: str
    shape: tuple[int, int]
    dtype: str
    singular_values: tuple[float, ...]
    effective_rank: float
    numerical_rank: int
    tolerance: float
    energy_rank: int

    @property
    def full_rank(self) -> int:
        return min(self.shape)


@dataclass
class Measurement:
    """The measured report of one function; str() is its text."""

    function: str
    batch: int
    activations: list[ActivationStats]
    ranks: list[WeightRank]
    candidates: list[Candidate]
    thresholds: Thresholds = field(default_factory=Thresholds)

    def __str__(self) -> str:
        t = self.thresholds
        out = [f"Measured report of @{self.function} on a batch of {self.batch} inputs", ""]
        out.append(
            "Activations (active = output > 0, for GELU too: GELU(x) > 0 exactly when x > 0):"
        )
        out += [_activation_line(a, t) for a in self.activations] or ["- none"]
        out += [
            "",
            "Linear weights (effective rank = exp(entropy of s / sum(s)), Roy and Vetterli "
            "2007; numerical rank = #{s_i > s_max * max(M, N) * eps}, numpy.linalg.matrix_rank's "
            f"default; energy rank = fewest singular values holding {t.energy:.0%} of sum s_i^2):",
        ]
        out += [_rank_line(r) for r in self.ranks] or ["- none"]
        out += [
            "",
            f"Measured optimization candidates (thresholds: dead or rarely active units >= "
            f"{t.reduce_fraction:.0%} of a layer; effective rank <= {t.low_rank_ratio} min(M, N) "
            f"or numerical rank < min(M, N), with a rank-r factorisation smaller than W):"
            + ("" if self.candidates else " none"),
        ]
        out += [str(c) for c in self.candidates]
        return "\n".join(out)


def _indices(units: Sequence[int]) -> str:
    shown = ", ".join(str(u) for u in units[:LIST_LIMIT])
    return shown + (", ..." if len(units) > LIST_LIMIT else "")


def _activation_line(a: ActivationStats, t: Thresholds) -> str:
    line = (
        f"- {a.label} {fmt_shape(a.shape)}: {a.active_fraction:.1%} of outputs active; "
        f"{len(a.dead_units)} of {a.units} units dead (never active)"
    )
    if a.dead_units:
        line += f": {_indices(a.dead_units)}"
    line += f"; {len(a.rare_units)} rarely active (on < {t.rare_fraction:.0%} of the inputs)"
    if a.rare_units:
        line += f": {_indices(a.rare_units)}"
    return line


def _rank_line(r: WeightRank) -> str:
    return (
        f"- {r.label} {r.name} {fmt_shape(r.shape)}: effective rank {r.effective_rank:.1f} of "
        f"{r.full_rank}; numerical rank {r.numerical_rank} (tol {r.tolerance:.2e}, "
        f"eps({r.dtype})); energy rank {r.energy_rank}"
    )


# ----------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------


def is_measured_activation(node: Node) -> bool:
    """ReLU/GELU nodes and Linear nodes with a fused activation (not tanh: a bijection)."""
    if node.kind == "Linear":
        return node.activation is not None
    op = node.ops[-1]
    f = static_flags(op)
    if f & OpFlag.IS_FUSED and op.properties.get("act") is None:
        return False
    return bool(f & OpFlag.IS_ACTIVATION) and not f & OpFlag.IS_INVERTIBLE


def run_capturing(
    fn: func.FuncOp, values: Mapping[str, np.ndarray], captured: Sequence[SSAValue]
) -> list[np.ndarray]:
    """Run `fn` on `values` (by aicfc.name) and return the arrays of `captured` values.

    A clone of `fn` returns the captured values after its own results, so the
    interpreter runs unchanged; `fn` itself is not modified.
    """
    mapper: dict[SSAValue, SSAValue] = {}
    clone = fn.clone(value_mapper=mapper)
    block = clone.body.blocks.first
    assert block is not None and isinstance(block.last_op, func.ReturnOp)
    ret = block.last_op
    n = len(ret.arguments)
    block.insert_op_before(func.ReturnOp(*ret.arguments, *(mapper[v] for v in captured)), ret)
    block.erase_op(ret)
    return run_func(clone, values)[n:]


def activation_stats(node: Node, out: np.ndarray, t: Thresholds) -> ActivationStats:
    units = out.shape[-1] if out.ndim else 1
    active = (out > 0).reshape(-1, units)
    samples = active.shape[0]
    per_unit = active.mean(axis=0)
    counts = active.sum(axis=0)
    dead = tuple(int(u) for u in np.flatnonzero(counts == 0))
    rare = tuple(int(u) for u in np.flatnonzero((counts > 0) & (per_unit < t.rare_fraction)))
    return ActivationStats(
        node=node.index,
        label=node.label,
        kind=node.activation or node.kind,
        shape=tuple(out.shape),
        samples=samples,
        units=units,
        active_fraction=float(active.mean()),
        unit_active=tuple(float(x) for x in per_unit),
        dead_units=dead,
        rare_units=rare,
    )


def effective_rank(s: np.ndarray) -> float:
    """exp(entropy of s / sum(s)) (Roy and Vetterli 2007); 0 for an all-zero spectrum."""
    s = np.asarray(s, dtype=np.float64)
    total = s.sum()
    if total <= 0:
        return 0.0
    p = s[s > 0] / total
    return float(math.exp(-(p * np.log(p)).sum()))


def energy_rank(s: np.ndarray, energy: float) -> int:
    """Fewest leading singular values whose squares hold `energy` of sum s_i^2."""
    e = np.asarray(s, dtype=np.float64) ** 2
    if e.sum() <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(e) / e.sum(), energy - 1e-12) + 1)


def weight_rank(node: Node, name: str, w: np.ndarray, t: Thresholds) -> WeightRank:
    s = np.linalg.svd(w, compute_uv=False)
    m, n = w.shape
    tol = float(s.max() * max(m, n) * np.finfo(w.dtype).eps) if s.size else 0.0
    return WeightRank(
        node=node.index,
        label=node.label,
        name=name,
        shape=(m, n),
        dtype=str(w.dtype),
        singular_values=tuple(float(x) for x in s),
        effective_rank=effective_rank(s),
        numerical_rank=int((s > tol).sum()),
        tolerance=tol,
        energy_rank=energy_rank(s, t.energy),
    )


# ----------------------------------------------------------------------------
# Candidates
# ----------------------------------------------------------------------------


def _linear_around(report: FunctionReport, node: Node) -> tuple[Node | None, Node | None]:
    """(the Linear producing the activation's input, the Linear reading its output)."""
    producer = node if node.kind == "Linear" else None
    if producer is None:
        src = node.ops[0].operands[0]
        producer = next((n for n in report.nodes if n.kind == "Linear" and n.output is src), None)
    uses = [u.operation for u in node.output.uses]
    consumer = None
    if len(uses) == 1:
        consumer = next(
            (n for n in report.nodes if n.kind == "Linear" and n.ops[0] is uses[0]), None
        )
        if consumer is not None and consumer.ops[0].operands[0] is not node.output:
            consumer = None
    return producer, consumer


def _collapses_negatives(node: Node) -> bool:
    """The node's activation (fused or not) has the COLLAPSES_INFO flag (relu; not gelu)."""
    op = node.ops[-1]
    flags = op.semantic_flags() if isinstance(op, AicfcOp) else static_flags(op)
    return bool(flags & OpFlag.COLLAPSES_INFO)


def _reduce_candidate(
    report: FunctionReport, a: ActivationStats, batch: int, t: Thresholds
) -> Candidate | None:
    idle = len(a.dead_units) + len(a.rare_units)
    if a.units == 0 or idle / a.units < t.reduce_fraction:
        return None
    node = report.nodes[a.node]
    producer, consumer = _linear_around(report, node)
    because = (
        f"{idle} of {a.units} units ({idle / a.units:.1%}) are dead ({len(a.dead_units)}) or "
        f"active on < {t.rare_fraction:.0%} of the {batch} inputs ({len(a.rare_units)})"
    )
    d = len(a.dead_units)
    if d and producer is not None and producer.in_features is not None:
        saved = d * (producer.in_features + (1 if len(producer.params) > 1 else 0))
        where = f"rows of {producer.label}"
        if consumer is not None and consumer.out_features is not None:
            saved += d * consumer.out_features
            where += f" and columns of {consumer.label}"
        # exact where the activation maps every input <= 0 to 0 (it collapses the
        # negative half-line, as relu): a dead unit then outputs only zeros
        exact = (
            "the outputs on this batch stay the same"
            if _collapses_negatives(node)
            else f"approximate: {a.kind}'s negative outputs are small, not 0"
        )
        because += (
            f"; removing the {d} dead units ({where}) saves {saved} parameters and makes "
            f"{a.units} -> {a.units - d} ({exact})"
        )
    return Candidate(f"hidden dimension reduction at {a.label}", because, (a.node,))


def _low_rank_candidate(r: WeightRank, t: Thresholds) -> Candidate | None:
    k = r.full_rank
    low = r.effective_rank <= t.low_rank_ratio * k or r.numerical_rank < k
    m, n = r.shape
    rank = r.energy_rank
    if not low or rank * (m + n) >= m * n:
        return None
    return Candidate(
        f"low-rank approximation of {r.label} weight {r.name} {fmt_shape(r.shape)}",
        f"effective rank {r.effective_rank:.1f} and numerical rank {r.numerical_rank} of "
        f"min(M, N) = {k}; rank {rank} keeps {t.energy:.0%} of sum s_i^2 and needs "
        f"{rank} * ({m} + {n}) = {rank * (m + n)} instead of {m * n} weight parameters",
        (r.node,),
    )


def measure_function(
    fn: func.FuncOp,
    values: Mapping[str, np.ndarray],
    thresholds: Thresholds | None = None,
    report: FunctionReport | None = None,
) -> Measurement:
    """Measure `fn` (an inference function) on `values`: its inputs and params by aicfc.name.

    Raises runtime.interpreter.InterpreterError when a value is missing or has
    the wrong shape or dtype (the message names the argument), and KeyError
    when a Linear weight is not among `values`.
    """
    t = thresholds or Thresholds()
    report = report or analyze_function(fn)
    acts = [n for n in report.nodes if is_measured_activation(n)]
    outs = run_capturing(fn, values, [n.output for n in acts])
    stats = [activation_stats(n, o, t) for n, o in zip(acts, outs, strict=True)]
    ranks = []
    for n in report.linears():
        w = n.ops[0].operands[1]
        name = arg_name(w) or n.params[0].name
        ranks.append(weight_rank(n, name, np.asarray(values[name]), t))
    batch = _batch_size(fn, values)
    candidates = [c for a in stats if (c := _reduce_candidate(report, a, batch, t)) is not None]
    candidates += [c for r in ranks if (c := _low_rank_candidate(r, t)) is not None]
    return Measurement(report.name, batch, stats, ranks, candidates, t)


def _batch_size(fn: func.FuncOp, values: Mapping[str, np.ndarray]) -> int:
    """Leading dimension of the first input argument (the batch)."""
    for a in fn.args:
        if arg_role(a) in (None, "input"):
            name = arg_name(a)
            if name is not None and name in values and np.ndim(values[name]):
                return int(np.shape(values[name])[0])
    return 1


def measure(
    module: builtin.ModuleOp,
    values: Mapping[str, np.ndarray],
    function: str = "predict",
    thresholds: Thresholds | None = None,
) -> Report:
    """The static report of `@function` plus its measured report on a real batch
    (`aicfc.analysis.measure`; Program.report(x) calls it too).

    values: the function's inputs and trained params by `aicfc.name` ("x",
    "0.weight", ...), shaped and typed as its arguments. The function runs on
    the NumPy interpreter (see the module docstring for what is measured, the
    definitions and the thresholds).

    Raises KeyError for an unknown function and
    runtime.interpreter.InterpreterError for a missing or mistyped value.
    """
    report = analyze_module(module, function)
    fn = next(f for f in functions(module) if f.sym_name.data == function)
    report.measurements.append(measure_function(fn, values, thresholds, report.functions[0]))
    return report
