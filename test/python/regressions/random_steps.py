"""Random small train steps (graph IR text) for the differential regression tests.

A step draws 2-9 ops over x, t [M, D], labels y [M], params w0, w1 [D, D],
b0 [D] and the dropout offset, picking operands mostly from the newest value
of each shape (chains) and otherwise from any (fan-out, diamonds); then a loss
(mse, cross-entropy or their sum), one autodiff.backward with respect to 1-4
values drawn with repeats (params, and the input x), SGD updates for some of
the params, the advanced offset and a few intermediates as outputs.
"""

from __future__ import annotations

import random

SHAPES = ((1, 1), (1, 3), (2, 2), (3, 3), (2, 3), (3, 1))


def random_step(rng: random.Random, dtype: str = "f64") -> tuple[str, int]:
    """(func.func text, number of classes of the labels y)."""
    m, d = rng.choice(SHAPES)

    def tt(*shape: int) -> str:
        return "tensor<" + "".join(f"{n}x" for n in shape) + dtype + ">"

    pools: dict[str, list[str]] = {"md": ["%x"], "d": ["%b0"], "dd": ["%w0", "%w1"], "dm": []}
    lines: list[str] = []
    count = [0]

    def new(kind: str) -> str:
        count[0] += 1
        pools[kind].append(f"%v{count[0]}")
        return pools[kind][-1]

    def pick(kind: str) -> str:
        return pools[kind][-1] if rng.random() < 0.5 else rng.choice(pools[kind])

    def lhs() -> tuple[str, str, str]:
        """An [M, D] operand or a transposed [D, M] one: (value, flag, type)."""
        if pools["dm"] and rng.random() < 0.3:
            return pick("dm"), " transpose_a", tt(d, m)
        return pick("md"), "", tt(m, d)

    for _ in range(rng.randint(2, 9)):
        kind = rng.randrange(11)
        if kind == 0:
            a, ta, at = lhs()
            tb = " transpose_b" if rng.random() < 0.5 else ""
            w = pick("dd")
            lines.append(
                f"{new('md')} = graph.matmul {a}, {w}{ta}{tb} : ({at}, {tt(d, d)}) -> {tt(m, d)}"
            )
        elif kind == 1:
            a, b = pick("md"), pick("d")
            lines.append(
                f"{new('md')} = graph.bias_add {a}, {b} : ({tt(m, d)}, {tt(d)}) -> {tt(m, d)}"
            )
        elif kind == 2:
            op, a = rng.choice(["relu", "gelu", "tanh"]), pick("md")
            lines.append(f"{new('md')} = graph.{op} {a} : {tt(m, d)}")
        elif kind == 3:
            op, a, b = rng.choice(["add", "sub", "mul"]), pick("md"), pick("md")
            lines.append(f"{new('md')} = graph.{op} {a}, {b} : {tt(m, d)}")
        elif kind == 4:
            a = pick("md")
            lines.append(
                f"{new('md')} = graph.dropout {a}, %off p = 0.25 seed = 3 : {tt(m, d)}, tensor<i64>"
            )
        elif kind == 5:
            a, axis = pick("md"), rng.choice([0, 1, -1])
            lines.append(f"{new('md')} = graph.softmax {a} axis = {axis} : {tt(m, d)}")
        elif kind == 6:
            a = pick("md")
            lines.append(f"{new('d')} = graph.reduce_sum {a} axes = [0] : {tt(m, d)} -> {tt(d)}")
        elif kind == 7:
            a = pick("d")
            lines.append(f"{new('md')} = graph.broadcast_to {a} : {tt(d)} -> {tt(m, d)}")
        elif kind == 8:
            a, flat = pick("md"), f"%flat{count[0]}"
            lines.append(f"{flat} = graph.reshape {a} : {tt(m, d)} -> {tt(m * d)}")
            lines.append(f"{new('md')} = graph.reshape {flat} : {tt(m * d)} -> {tt(m, d)}")
        elif kind == 9:
            a = pick("md")
            lines.append(
                f"{new('dm')} = graph.transpose {a} perm = [1, 0] : {tt(m, d)} -> {tt(d, m)}"
            )
        else:
            a, ta, at = lhs()
            tb = " transpose_b" if rng.random() < 0.5 else ""
            act = rng.choice(["relu", "gelu", None])
            bias = pick("d") if rng.random() < 0.6 else None
            w = pick("dd")
            results = new("md")
            result_types = tt(m, d)
            if act and rng.random() < 0.5:
                results += ", " + new("md")
                result_types = f"({tt(m, d)}, {tt(m, d)})"
            operand_types = f"({at}, {tt(d, d)}{', ' + tt(d) if bias else ''})"
            lines.append(
                f"{results} = graph.gemm_epilogue {a}, {w}{' bias ' + bias if bias else ''}"
                f"{' act = ' + act if act else ''}{ta}{tb} : {operand_types} -> {result_types}"
            )
    scalar = f"tensor<{dtype}>"
    labels = f"tensor<{m}xi32>"
    loss_kind = rng.randrange(3)
    if loss_kind != 1:
        lines.append(f"%l1 = graph.mse_loss {pick('md')}, %t : {tt(m, d)} -> {scalar}")
    if loss_kind != 0:
        lines.append(
            f"%l2 = graph.cross_entropy {pick('md')}, %y : ({tt(m, d)}, {labels}) -> {scalar}"
        )
    loss = {0: "%l1", 1: "%l2", 2: "%loss"}[loss_kind]
    if loss_kind == 2:
        lines.append(f"%loss = graph.add %l1, %l2 : {scalar}")
    shape_of = {"%w0": tt(d, d), "%w1": tt(d, d), "%b0": tt(d), "%x": tt(m, d)}
    wrt = [rng.choice(list(shape_of)) for _ in range(rng.randint(1, 4))]
    types = ", ".join(shape_of[w] for w in wrt)
    grads = [f"%g#{i}" for i in range(len(wrt))]
    lines.append(
        f"%g:{len(wrt)} = autodiff.backward {loss} wrt {', '.join(wrt)} "
        f": {scalar}, ({types}) -> ({types})"
    )
    results = [(loss, scalar, "loss")] + [
        (g, shape_of[w], f"d{i}") for i, (g, w) in enumerate(zip(grads, wrt, strict=True))
    ]
    lines += [
        "%h_lr = graph.constant dense<0.1> : tensor<f64>",
        "%h_zero = graph.constant dense<0.0> : tensor<f64>",
        f"%h_scale = graph.constant dense<1.0> : {scalar}",
        "%h_apply = graph.constant dense<1.0> : tensor<f32>",
    ]
    for w, g in dict(zip(wrt, grads, strict=True)).items():
        if w != "%x" and rng.random() < 0.7:
            t = shape_of[w]
            lines.append(
                f"{w}_next = autodiff.sgd_step {w}, {g} lr(%h_lr) momentum(%h_zero) "
                f"weight_decay(%h_zero) grad_scale(%h_scale) apply(%h_apply) : {t}, "
                f"tensor<f64>, {scalar}, tensor<f32>"
            )
            results.append((f"{w}_next", t, w[1:]))
    lines.append("%one = graph.constant dense<1> : tensor<i64>")
    lines.append("%off_next = graph.add %off, %one : tensor<i64>")
    results.append(("%off_next", "tensor<i64>", "off"))
    for j, v in enumerate(rng.sample(pools["md"], k=min(2, len(pools["md"])))):
        results.append((v, tt(m, d), f"out{j}"))
    args = [
        ("x", tt(m, d), "input"),
        ("t", tt(m, d), "input"),
        ("y", labels, "input"),
        ("w0", tt(d, d), "param"),
        ("w1", tt(d, d), "param"),
        ("b0", tt(d), "param"),
        ("off", "tensor<i64>", "state"),
    ]
    arg_text = ", ".join(
        f'%{n}: {t} {{aicfc.role = "{r}", aicfc.name = "{n}"}}' for n, t, r in args
    )
    res_text = ", ".join(f'{t} {{aicfc.name = "{n}"}}' for _, t, n in results)
    body = "\n  ".join(lines)
    ret = (
        f"func.return {', '.join(v for v, _, _ in results)} : {', '.join(t for _, t, _ in results)}"
    )
    return f"func.func @f({arg_text}) -> ({res_text}) {{\n  {body}\n  {ret}\n}}\n", d
