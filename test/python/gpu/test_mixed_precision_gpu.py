"""Mixed precision on the GPU (issue 13): the bf16/f16 kernels against the NumPy (ml_dtypes)
reference, and bf16/fp16 training against the NumPy backend's bf16/fp16 program.

Tolerances, stated per test: casts and exact elementwise math bitwise; cuBLASLt bf16
products within 2^-7 (bf16: 8 significant bits, one rounding of the fp32-accumulated
result, plus summation order) and f16 within 2^-10, norm-wise against the float64 product
of the same rounded operands; training losses within 2 % per step of the NumPy backend's
program of the same precision (same init and batches) over 100 steps.

Buffers of dtype bfloat16 need CuPy with ml_dtypes' bfloat16 (CuPy 14); the tests that
allocate them say so where CuPy lacks it. The cast kernels move 16-bit words, so their
test runs on any CuPy.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.dialects import autodiff as ad
from aicfc.dialects import graph as g
from aicfc.runtime import reference, registry
from aicfc.runtime.cuda.context import DeviceContext
from aicfc.runtime.cuda.launch import launches_for
from gpu.gpu_support import gpu

pytestmark = gpu

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"bf16": BF16, "f16": np.dtype(np.float16), "f32": np.dtype(np.float32)}
WORD = {"bf16": np.uint16, "f16": np.uint16, "f32": np.uint32}


def cupy_bf16_reason() -> str | None:
    import cupy

    try:
        cupy.zeros(2, BF16)
    except Exception as e:  # TypeError / ValueError: an unsupported dtype
        return f"CuPy {cupy.__version__} has no bfloat16 arrays ({type(e).__name__}: {e})"
    return None


def need(dt: str) -> None:
    if dt == "bf16" and (reason := cupy_bf16_reason()) is not None:
        pytest.skip(reason)


def run(kernel: str, ins: list[Any], outs: list[Any], params: dict[str, Any]) -> None:
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    for la in launches_for(registry.get(kernel), ins, outs, params, DeviceContext()):
        la(stream)
    stream.synchronize()


@pytest.mark.parametrize(
    ("src", "dst"), [("f32", "bf16"), ("bf16", "f32"), ("f32", "f16"), ("f16", "f32")]
)
def test_cast_kernels_are_bitwise_the_reference(src: str, dst: str) -> None:
    import cupy

    rng = np.random.default_rng(1)
    x32 = np.concatenate(
        [
            (rng.standard_normal(100_003) * 100).astype(np.float32),
            np.array([1 + 2**-8, 1 + 3 * 2**-8, 70000.0, 65520.0, np.inf, -0.0], np.float32),
        ]
    )
    with np.errstate(over="ignore"):
        x = x32.astype(DTYPES[src])
    (want,) = reference.cast(x, dtype=dst)
    d_x = cupy.asarray(x.view(WORD[src]))  # 16-bit words: the kernel reads raw bits
    d_y = cupy.zeros(x.shape, WORD[dst])
    run(f"cuda.cast_{src}_{dst}", [d_x], [d_y], {"dtype": dst})
    np.testing.assert_array_equal(cupy.asnumpy(d_y), want.view(WORD[dst]))


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize(("m", "n", "k"), [(64, 48, 96), (1024, 1024, 1024)])
def test_cublaslt_low_precision_gemm_epilogue(dt: str, act: str, m: int, n: int, k: int) -> None:
    import cupy

    need(dt)
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, k)).astype(DTYPES[dt])
    w = rng.standard_normal((n, k)).astype(DTYPES[dt])  # a Linear weight: transpose_b
    bias = rng.standard_normal(n).astype(DTYPES[dt])
    y = cupy.zeros((m, n), DTYPES[dt])
    params = {"act": act, "transpose_b": True}
    run(f"cuda.gemm_epilogue_cublaslt_{dt}", [cupy.asarray(v) for v in (a, w, bias)], [y], params)
    exact = reference.gemm_epilogue(
        a.astype(np.float64),
        w.astype(np.float64),
        bias.astype(np.float64),
        act=act,
        transpose_b=True,
    )[0]
    got = cupy.asnumpy(y).astype(np.float64)
    tol = {"bf16": 2.0**-7, "f16": 2.0**-10}[dt]
    assert np.linalg.norm(got - exact) <= tol * np.linalg.norm(exact)
    # and the NumPy backend's meaning of the same op agrees as closely
    (ref,) = reference.REFERENCE[g.GemmEpilogueOp](a, w, bias, act=act, transpose_b=True)[:1]
    assert np.linalg.norm(got - ref.astype(np.float64)) <= tol * np.linalg.norm(exact)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_low_precision_epilogue_grad_and_reduce_sum(dt: str) -> None:
    import cupy

    need(dt)
    rng = np.random.default_rng(7)
    dy = rng.standard_normal((300, 130)).astype(DTYPES[dt])
    y = rng.standard_normal((300, 130)).astype(DTYPES[dt])
    dz, db = cupy.zeros((300, 130), DTYPES[dt]), cupy.zeros(130, DTYPES[dt])
    run(f"cuda.epilogue_grad_{dt}", [cupy.asarray(dy), cupy.asarray(y)], [dz, db], {"act": "relu"})
    want_dz, _ = reference.REFERENCE[ad.EpilogueGradOp](dy, y, act="relu")
    np.testing.assert_array_equal(cupy.asnumpy(dz).view(np.uint16), want_dz.view(np.uint16))
    exact = (dy.astype(np.float64) * (y.astype(np.float64) > 0)).sum(0)
    unit = {"bf16": 2.0**-8, "f16": 2.0**-11}[dt]
    got = cupy.asnumpy(db).astype(np.float64)
    assert np.linalg.norm(got - exact) <= unit * np.linalg.norm(exact)


def digits_losses(backend: str, precision: str, steps: int = 100) -> np.ndarray:
    from sklearn.datasets import load_digits

    d = load_digits()
    x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    aicfc.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10)
    )
    prog = aicfc.compile(
        model, optimizer=optim.Adam(lr=1e-3), backend=backend, precision=precision, cache_dir=False
    )
    rng = np.random.default_rng(0)
    return np.array([prog.step(x[i], y[i]) for i in (rng.choice(len(x), 64) for _ in range(steps))])


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_digits_on_the_gpu_follows_numpy(precision: str) -> None:
    need("bf16" if precision == "bf16" else "f16")
    gpu_losses = digits_losses("cupy", precision)
    cpu_losses = digits_losses("numpy", precision)
    assert np.isfinite(gpu_losses).all()
    rel = np.abs(gpu_losses - cpu_losses) / cpu_losses
    assert rel.max() <= 0.02, (rel.argmax(), rel.max())
    assert gpu_losses[-10:].mean() < 0.5 * gpu_losses[:10].mean()  # it trained


F32_SUM = 2.0**-18
"""A float32 result of bf16/f16 products against the float64 one: fp32 accumulation (its
order is cuBLASLt's, K up to 1024), no rounding to the low dtype (2^-8 / 2^-11)."""


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize(("op", "act"), [("matmul", "none"), ("gemm_epilogue", "none"),
                                         ("gemm_epilogue", "relu")])  # fmt: skip
@pytest.mark.parametrize(("m", "n", "k"), [(128, 10, 256), (1024, 1024, 1024)])
def test_cublaslt_wide_product_writes_fp32(dt: str, op: str, act: str, m: int, n: int, k: int):
    """cuda.<op>_cublaslt_<dt>_f32 (aicfc-fold-casts): bf16/f16 A and B, a float32 D (and
    bias), against float64 from the same low values and the NumPy reference."""
    import cupy

    need(dt)
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((m, k)).astype(DTYPES[dt])
    w = rng.standard_normal((n, k)).astype(DTYPES[dt])
    ins = [a, w]
    params: dict[str, Any] = {"transpose_b": True, "out_dtype": "f32"}
    if op == "gemm_epilogue":
        ins.append(rng.standard_normal(n).astype(np.float32))
        params["act"] = act
    y = cupy.zeros((m, n), np.float32)
    run(f"cuda.{op}_cublaslt_{dt}_f32", [cupy.asarray(v) for v in ins], [y], params)
    exact = a.astype(np.float64) @ w.astype(np.float64).T
    if op == "gemm_epilogue":
        exact = exact + ins[2]
        exact = np.maximum(exact, 0.0) if act == "relu" else exact
    got = cupy.asnumpy(y)
    assert got.dtype == np.float32
    assert np.linalg.norm(got - exact) <= F32_SUM * np.linalg.norm(exact)
    cls = g.MatmulOp if op == "matmul" else g.GemmEpilogueOp
    ref = reference.REFERENCE[cls](*ins, **params)[0]
    assert ref.dtype == np.float32
    assert np.linalg.norm(got - ref) <= F32_SUM * np.linalg.norm(exact)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("shape", [(128, 10), (16384, 384)])
def test_wide_reduce_sum_and_epilogue_grad_write_fp32(dt: str, shape: tuple[int, int]) -> None:
    """reduce_sum_<dt>_f32 (row chunks at [16384, 384]) and epilogue_grad_<dt>_f32: the
    float32 sums of the low values, against float64."""
    import cupy

    need(dt)
    rng = np.random.default_rng(shape[0])
    x = rng.standard_normal(shape).astype(DTYPES[dt])
    out = cupy.zeros(shape[1], np.float32)
    run(f"cuda.reduce_sum_{dt}_f32", [cupy.asarray(x)], [out], {"axes": (0,), "out_dtype": "f32"})
    exact = x.astype(np.float64).sum(0)
    assert np.linalg.norm(cupy.asnumpy(out) - exact) <= F32_SUM * np.linalg.norm(exact)
    y = rng.standard_normal(shape).astype(DTYPES[dt])
    dz, db = cupy.zeros(shape, DTYPES[dt]), cupy.zeros(shape[1], np.float32)
    run(f"cuda.epilogue_grad_{dt}_f32", [cupy.asarray(x), cupy.asarray(y)], [dz, db],
        {"act": "relu", "out_dtype": "f32"})  # fmt: skip
    exact = (x.astype(np.float64) * (y.astype(np.float64) > 0)).sum(0)
    assert np.linalg.norm(cupy.asnumpy(db) - exact) <= F32_SUM * np.linalg.norm(exact)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("apply", [1.0, 0.0])
def test_adam_writes_the_low_precision_copy_of_its_update(dt: str, apply: float) -> None:
    """The multi-tensor Adam with a bf16/f16 copy, in place as the train step runs it: the
    fp32 results within 1e-6 of the NumPy reference (the bias corrections' pow on the
    device), the copy bitwise the device's own param' rounded to nearest even (ml_dtypes'
    astype), and with apply = 0 everything, the copy too, bit-identical to before."""
    import cupy

    need(dt)
    rng = np.random.default_rng(31)
    n = 100_003
    p, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    m = (0.1 * rng.standard_normal(n)).astype(np.float32)
    v = np.abs(0.01 * rng.standard_normal(n)).astype(np.float32)
    hyper = [np.asarray(h, np.float64) for h in (1e-3, 0.9, 0.999, 1e-8, 0.0)]
    host = [
        p,
        g,
        m,
        v,
        np.asarray(4.0, np.float32),
        *hyper,
        *(np.asarray(x, np.float32) for x in (1.0, apply)),
    ]
    copy = p.astype(DTYPES[dt])
    want = reference.adam_step(*host, copy)
    ins = [cupy.asarray(a) for a in host] + [cupy.asarray(copy)]
    outs = [ins[0], ins[2], ins[3], ins[4], ins[12]]
    run("cuda.adam_step_multi_tensor_f32", ins, outs, {})
    got = [cupy.asnumpy(a) for a in outs]
    for k in range(3):
        err = np.abs(got[k] - want[k]).max() / np.abs(want[k]).max()
        assert err <= 1e-6, (k, err)
    assert got[4].tobytes() == got[0].astype(DTYPES[dt]).tobytes()
    if apply == 0.0:
        assert got[0].tobytes() == p.tobytes() and got[4].tobytes() == copy.tobytes()


def test_bf16_digits_step_reads_the_copies_the_optimizer_writes() -> None:
    """The bf16 digits MLP on the GPU with aicfc-fold-weight-casts (the default pipeline): no
    cast of a parameter is launched, and after 30 steps every bf16 copy is bitwise its fp32
    master rounded (what a cast would have produced); the losses follow the NumPy program
    within 2 % (test_mixed_precision_digits_on_the_gpu_follows_numpy's tolerance)."""
    from sklearn.datasets import load_digits

    need("bf16")
    d = load_digits()
    x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    losses = {}
    for backend in ("cupy", "numpy"):
        aicfc.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        prog = aicfc.compile(
            model, optimizer=optim.Adam(lr=1e-3), backend=backend, precision="bf16", cache_dir=False
        )
        rng = np.random.default_rng(0)
        losses[backend] = np.array(
            [prog.step(x[i], y[i]) for i in (rng.choice(len(x), 64) for _ in range(30))]
        )
        if backend == "cupy":
            planned = prog.mlir("planned")
            assert "low_copy" in prog.mlir("weight-copies")
            assert not any(
                "cast_f32_bf16" in line and "weight" in line for line in planned.splitlines()
            )
            state = prog.store.state_dict()
            # every param has a copy but the logits' bias, read in f32 (aicfc-fold-casts)
            held = [n for n in prog.param_names if f"{n}.bf16" in state]
            assert held == list(prog.param_names[:-1])
            for name in held:
                assert state[f"{name}.bf16"].tobytes() == state[name].astype(BF16).tobytes(), name
    rel = np.abs(losses["cupy"] - losses["numpy"]) / losses["numpy"]
    assert rel.max() <= 0.02, (rel.argmax(), rel.max())
