"""The CuPy backend on the GPU: capture and replay, checkpoints (docs/design.md#capture-rules).

Programs are built with the public API (`aicfc.Program` on a `CupyBackend`),
so the whole pipeline runs: fuse, expand-backward, lower-exec{backend=cuda},
fold-inplace, plan-memory, then load, capture and replay.

Tolerances (norm-wise relative error of all params together):
- graph replay against the eager mode of the same backend: 1e-6 (the same
  kernels on the same buffers; only launch order granularity differs);
- CuPy (strict fp32) against the NumPy backend after 10 Adam steps: 1e-4
  (float32 rounding differs per kernel; Adam's m/sqrt(v) amplifies it only
  for near-zero gradients);
- TF32 against NumPy after 10 steps: 2e-2.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.backends import get_backend
from aicfc.program import Program
from aicfc.runtime.errors import ExecError, InputError
from aicfc.runtime.plan import LaunchStep
from gpu.gpu_support import gpu, per_layer, rel_err

pytestmark = gpu

IN, HIDDEN, OUT, BATCH = 64, 96, 10, 48


def make_model(dropout: float = 0.0, seed: int = 0) -> nn.Module:
    aicfc.manual_seed(seed)
    layers: list[nn.Module] = [nn.Linear(IN, HIDDEN), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers += [nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, OUT)]
    return nn.Sequential(*layers)


def backend(**options: Any) -> Any:
    from aicfc.runtime.cuda.backend import CupyBackend

    return CupyBackend(**options)


def program(kind: str, dropout: float = 0.0, opt: Any = None, **options: Any) -> Program:
    """A program of `make_model`; on cupy with the per-layer kernels (`per_layer`: these
    tests check their launches; the fused step has test_mlp_fused_gpu.py)."""
    be = get_backend("numpy") if kind == "numpy" else backend(**options)
    prog = Program(make_model(dropout), "cross_entropy", opt or optim.Adam(lr=3e-3), be)
    return prog if kind == "numpy" else per_layer(prog)


def batches(n: int, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((BATCH, IN)).astype(np.float32), rng.integers(0, OUT, BATCH))
        for _ in range(n)
    ]


def params_err(a: Program, b: Program) -> float:
    pa, pb = a.parameters(), b.parameters()
    return rel_err(
        np.concatenate([pa[k].ravel() for k in pa]), np.concatenate([pb[k].ravel() for k in pb])
    )


def train(p: Program, data: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    return [p.step(x, y) for x, y in data]


def test_auto_picks_cupy_where_a_gpu_is_usable():
    assert get_backend("auto").name == "cupy"
    assert aicfc.compile(make_model(), backend="auto").backend.name == "cupy"


def test_aliased_buffers_have_equal_device_pointers():
    """param', exp_avg', exp_avg_sq', step' are the param's own buffers.

    docs/design.md#in-place-folding
    """
    p = program("cupy")
    p.step(*batches(1)[0])
    exe = p.executable()
    adam = [s for s in exe.plan.steps if isinstance(s, LaunchStep) and "adam" in s.kernel]
    assert len(adam) == 6  # three Linear layers, weight and bias each
    for s in adam:
        for out, inp in zip(
            s.outputs, (s.inputs[0], s.inputs[2], s.inputs[3], s.inputs[4]), strict=True
        ):
            assert exe.arrays[out].data.ptr == exe.arrays[inp].data.ptr
        name = exe.plan.buffers[s.inputs[0]].name
        assert exe.arrays[s.inputs[0]].data.ptr == p.store[name].data.ptr
    # aicfc-hoist-updates issues the updates as soon as their gradients exist, in at most
    # max_runs = 4 groups, each one multi-tensor launch (six parameters in four launches).
    assert exe.kernels.count("cuda.adam_step_multi_tensor_f32") == 4


def test_train_mode_does_not_copy_params_in_between_replays():
    """Params live in fixed buffers; outside values are not copied in.

    docs/design.md#inputs-only-replay
    """
    p = program("cupy")
    data = batches(4)
    train(p, data[:2])
    exe = p.executable()
    assert exe.captured
    ptr = exe.buffer("0.weight").data.ptr
    outside = p.state_dict()["0.weight"]
    outside += 100.0  # a host copy changed by the user is not the training buffer
    with pytest.raises(InputError, match=r"unknown input .0\.weight"):
        exe.run({"x": data[2][0], "y": data[2][1].astype(np.int32), "0.weight": outside})
    before = p.parameters()["0.weight"]
    p.step(*data[2])
    after = p.parameters()["0.weight"]
    assert exe.buffer("0.weight").data.ptr == ptr
    assert 0 < np.abs(after - before).max() < 0.1  # one Adam step from the device values


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_replays_equal_eager_steps_and_the_numpy_backend(dropout):
    """N replays == N eager steps == the NumPy backend's N steps.

    docs/design.md#device-side-counters
    """
    data = batches(10)
    graph = program("cupy", dropout)
    eager = program("cupy", dropout, graph=False, sync_each_launch=True)
    ref = program("numpy", dropout)
    lg, le, ln = train(graph, data), train(eager, data), train(ref, data)
    assert graph.executable().replays == len(data) - 1
    assert params_err(graph, eager) < 1e-6
    assert rel_err(np.array(lg), np.array(le)) < 1e-6
    assert params_err(graph, ref) < 1e-4
    assert rel_err(np.array(lg), np.array(ln)) < 1e-4
    sg, sn = graph.state_dict(), ref.state_dict()
    for k in sn:
        if k.endswith(".step") or k == "rng.offset":
            np.testing.assert_array_equal(sg[k], sn[k])


def test_sgd_with_momentum_matches_numpy():
    opt = optim.SGD(lr=0.05, momentum=0.9)
    data = batches(6)
    g, n = program("cupy", opt=opt), program("numpy", opt=opt)
    train(g, data), train(n, data)
    assert params_err(g, n) < 1e-5


def test_tf32_trains_close_to_numpy_and_uses_tensor_core_kernels():
    data = batches(10)
    t, n = program("cupy", tf32=True), program("numpy")
    train(t, data), train(n, data)
    assert any("tf32" in k for k in t.executable().kernels)
    assert params_err(t, n) < 2e-2


def test_checkpoint_continues_the_same_trajectory_without_recapture():
    data = batches(10)
    a = program("cupy")
    train(a, data[:5])
    ckpt = a.state_dict()
    b = program("cupy")
    b.step(*data[0])  # captured on its own initial weights
    exe = b.executable()
    graphs_before = dict(exe.graphs)
    b.load_state_dict(ckpt)
    assert exe.graphs == graphs_before  # loading writes the fixed buffers: no new capture
    la, lb = train(a, data[5:]), train(b, data[5:])
    assert la == lb
    assert params_err(a, b) == 0.0


def test_a_held_output_is_not_overwritten_by_the_next_replay():
    p = program("cupy")
    data = batches(3)
    p.step(*data[0])
    exe = p.executable()
    first = exe.run({"x": data[1][0], "y": data[1][1].astype(np.int32)})
    kept = first["loss"].copy()
    exe.run({"x": data[2][0], "y": data[2][1].astype(np.int32)})
    assert first["loss"] == kept


def test_predict_shares_the_trained_params_and_matches_numpy():
    data = batches(5)
    g, n = program("cupy"), program("numpy")
    train(g, data), train(n, data)
    x = data[0][0]
    assert rel_err(g.predict(x), n.predict(x)) < 1e-4
    y1 = g.predict(x)
    g.step(*data[1])
    y2 = g.predict(x)  # the replayed predict graph reads the updated params
    assert not np.array_equal(y1, y2)


def test_a_numpy_lowered_program_is_refused_with_the_kernel_name():
    from xdsl.dialects.builtin import ModuleOp

    from aicfc.builder import build_train_step
    from aicfc.context import make_context
    from aicfc.dialects import exec as ex
    from aicfc.passes.pipelines import run_steps, train_pipeline

    fn = build_train_step(make_model(), "cross_entropy", optim.Adam(), (BATCH, IN), np.float32)
    module = ModuleOp([fn])
    run_steps(make_context(), module, train_pipeline("numpy"))
    prog = next(op for op in module.ops if isinstance(op, ex.ProgramOp))
    be = backend()
    with pytest.raises(ExecError, match=r'kernel "numpy\.[a-z_]+" is a numpy kernel'):
        be.load(prog, be.create_store())


def test_autotune_cache_overrides_the_gemm_choice(tmp_path):
    from aicfc.runtime.cuda import autotune

    p = program("cupy")
    data = batches(2)
    p.step(*data[0])
    path = tmp_path / "tune.json"
    results = autotune.tune_executable(p.executable(), str(path), repeats=5)
    assert results and path.exists()
    tuned = per_layer(
        Program(
            make_model(), "cross_entropy", optim.Adam(lr=3e-3), backend(autotune_cache=str(path))
        )
    )
    ref = program("numpy")
    train(tuned, data), train(ref, data)
    assert params_err(tuned, ref) < 1e-4
    chosen = {r.kernel for r in results}
    assert chosen & set(tuned.executable().kernels)
    assert chosen & set(ir_kernels(tuned))  # the IR names the tuned kernels


def ir_kernels(p: Program) -> list[str]:
    return re.findall(r'exec\.launch "([\w.]+)"', p.mlir("exec"))


def device_batches(data: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[Any, Any]]:
    import cupy

    return [(cupy.asarray(x), cupy.asarray(y)) for x, y in data]


def test_device_batches_train_exactly_like_host_batches():
    data = batches(6)
    host, dev = program("cupy"), program("cupy")
    lh = train(host, data)
    ld = [dev.step(x, y) for x, y in device_batches(data)]
    assert ld == lh  # the same kernels on the same values
    assert params_err(host, dev) == 0.0
    exe = dev.executable()
    assert exe.replays == len(data) - 1
    # no host input copies in the replayed graph, and no device copies inside it: every
    # batch came from new addresses (runtime/cuda/step_io.py)
    assert list(exe.graphs) == [((), True, ())]


def test_async_steps_queue_and_keep_each_loss():
    import cupy

    data = batches(6)
    p, ref = program("cupy"), program("cupy")
    held = [p.step(x, y, sync=False) for x, y in device_batches(data)]
    assert all(isinstance(h, cupy.ndarray) and h.shape == () for h in held)
    assert [float(h) for h in held] == train(ref, data)  # none overwritten by a later step
    assert params_err(p, ref) == 0.0


def test_mixed_host_and_device_inputs_and_a_batch_already_in_the_input_buffer():
    import cupy

    data = batches(4)
    p, ref = program("cupy"), program("cupy")
    expected = train(ref, data)
    got = [p.step(*data[0])]
    got.append(p.step(cupy.asarray(data[1][0]), data[1][1]))  # device x, host y
    exe = p.executable()
    x, y = exe.buffer("x"), exe.buffer("y")
    for xb, yb in data[2:]:
        x[...] = cupy.asarray(xb)  # the batch written into the program's own buffers
        y[...] = cupy.asarray(yb.astype(np.int32))
        got.append(p.step(x, y))
    assert got == expected
    assert ((), True, ()) in exe.graphs and (("y",), True, ()) in exe.graphs


def test_predict_takes_device_inputs_and_can_return_device_outputs():
    import cupy

    data = batches(3)
    g = program("cupy")
    train(g, data)
    x = data[0][0]
    host = g.predict(x)
    assert isinstance(g.predict(cupy.asarray(x)), np.ndarray)
    out = g.predict(cupy.asarray(x), sync=False)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_array_equal(out.get(), host)


def test_device_labels_are_checked_by_a_synchronous_step():
    import cupy

    p = program("cupy")
    x, y = batches(1)[0]
    bad = cupy.asarray(y).copy()
    bad[3] = OUT
    with pytest.raises(InputError, match=r"labels must be in \[0, 10\)"):
        p.step(cupy.asarray(x), bad)
    loss = p.step(cupy.asarray(x), bad, sync=False)  # not read back: the kernel flags it
    assert np.isnan(float(loss))


def test_the_exec_ir_names_the_kernels_that_run():
    p = program("cupy")
    p.step(*batches(1)[0])
    launched = {k for k in p.executable().kernels if k != "exec.copy"}
    assert launched == set(ir_kernels(p))
    assert "cuda.cross_entropy_with_grad_f32_i32" in launched


def wide_program(be: Any) -> Program:
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
    return Program(model, "cross_entropy", optim.Adam(lr=1e-3), be)


def test_without_nvmath_the_ir_has_no_cublaslt_and_a_cublaslt_ir_is_refused():
    from aicfc.runtime.cuda import cublaslt
    from aicfc.runtime.cuda.abi import CudaKernelError

    reason = cublaslt.available()
    if reason:
        pytest.skip(f"needs a program with cuBLASLt kernels: {reason}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 64)).astype(np.float32)
    y = rng.integers(0, 10, 1024)
    with_lt = wide_program(backend())
    with_lt.step(x, y)
    assert any("cublaslt" in k for k in ir_kernels(with_lt))
    be = backend()
    be._nvmath_reason = "nvmath-python is not installed (test)"
    without = wide_program(be)
    without.step(x, y)  # compiled for this backend: our own kernels only
    assert not any("cublaslt" in k for k in ir_kernels(without))
    prog = next(op for op in with_lt._last["train_step"].stages["planned"].ops)
    with pytest.raises(CudaKernelError, match=r"cublaslt.*needs capability 'cublaslt'"):
        be.load(prog, be.create_store())  # type: ignore[arg-type]


def test_compile_tf32_reaches_the_cuda_backend():
    data = batches(1)
    strict = aicfc.compile(make_model(), backend="cupy")
    tf32 = aicfc.compile(make_model(), backend="cupy", tf32=True)
    strict.step(*data[0]), tf32.step(*data[0])
    assert not any("tf32" in k for k in ir_kernels(strict))
    assert any("tf32" in k for k in ir_kernels(tf32))
    assert any("tf32" in k for k in tf32.executable().kernels)


def test_a_silu_mlp_trains_like_the_numpy_backend():
    """Linear + SiLU layers (our fused GEMM epilogue and epilogue_grad; cuBLASLt has no
    SiLU epilogue, so no cuBLASLt kernel carries act = silu) after 10 Adam steps."""

    def model() -> nn.Module:
        aicfc.manual_seed(5)
        return nn.Sequential(
            nn.Linear(IN, HIDDEN),
            nn.SiLU(),
            nn.Linear(HIDDEN, HIDDEN),
            nn.SiLU(),
            nn.Linear(HIDDEN, OUT),
        )

    ours = per_layer(Program(model(), "cross_entropy", optim.Adam(lr=3e-3), backend()))
    ref = Program(model(), "cross_entropy", optim.Adam(lr=3e-3), get_backend("numpy"))
    data = batches(10, seed=7)
    losses, ref_losses = train(ours, data), train(ref, data)
    assert np.allclose(losses, ref_losses, rtol=1e-4)
    assert params_err(ours, ref) < 1e-4
    ir = ours.mlir("exec", batch_size=BATCH)
    silu_launches = [line for line in ir.splitlines() if 'act = "silu"' in line]
    assert len(silu_launches) == 4, silu_launches  # two layers, forward and backward
    assert not any("cublaslt" in line for line in silu_launches)
