"""aicfc-fuse-train-step: the fused MLP step computes the unfused one, and forms only where
the CUDA kernel takes it.

On the NumPy backend the fused op's reference runs the replaced ops in their order, so
a program fused with `force=true` must give the unfused program's losses, parameters
and optimizer states bit for bit, over several steps of fresh random batches. For the
CUDA kernel family the pass is compiled only (no GPU needed): the small config becomes
one launch of cuda.mlp_train_step_f32; a width or batch of 257, more than 8 layers, and
steps with something the pattern or kernel does not take (dropout, MSE, SGD, clipping,
accumulation, kept gradients, Tanh layers, Linear layers without a bias, data parallel)
keep the per-layer kernels.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim
from aicfc.passes.pipelines import Step, stage_names, train_pipeline, with_data_parallel
from aicfc.program import Program

FUSED_KERNEL = "cuda.mlp_train_step_f32"


def mlp(widths: tuple[int, ...], act: type[nn.Module] = nn.ReLU, bias: bool = True) -> nn.Module:
    rng = np.random.default_rng(sum(widths))
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        lin = nn.Linear(a, b, bias=bias)
        bound = 1.0 / np.sqrt(a)
        state = {"weight": rng.uniform(-bound, bound, (b, a)).astype(np.float32)}
        if bias:
            state["bias"] = rng.uniform(-bound, bound, b).astype(np.float32)
        lin.load_state_dict(state)
        layers.append(lin)
        if i < len(widths) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def numpy_program(model: nn.Module, optimizer: optim.Optimizer, fused: bool) -> Program:
    prog = aicfc.compile(model, "cross_entropy", optimizer, backend="numpy")
    if fused:  # a test's override of the pipeline, before anything compiles
        steps = train_pipeline("numpy", fuse_train_step=True)
        prog._steps = tuple(
            Step(s.stage, "aicfc-fuse-train-step{backend=numpy force=true}")
            if s.stage == "fused-step"
            else s
            for s in steps
        )
        prog.stages = stage_names(prog._steps)
    return prog


def kernels(prog: Program) -> list[str]:
    """The kernels of the last compiled train step's exec program, in order."""
    return re.findall(r'exec\.launch "([^"]+)"', prog.mlir("planned"))


CASES = [
    ("relu-784-256-256-10", (784, 256, 256, 10), nn.ReLU, True, optim.Adam(lr=1e-3)),
    ("gelu-ragged", (37, 100, 255, 10), nn.GELU, True, optim.Adam(lr=3e-3)),
    ("adamw", (20, 10, 7), nn.ReLU, True, optim.AdamW(lr=1e-2, weight_decay=0.1)),
    ("one-layer", (13, 5), nn.ReLU, True, optim.Adam(lr=1e-2, weight_decay=0.01)),
]


@pytest.mark.parametrize(
    ("widths", "act", "bias", "optimizer"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_fused_step_equals_the_unfused_program_bit_for_bit(widths, act, bias, optimizer):
    unfused = numpy_program(mlp(widths, act, bias), optimizer, fused=False)
    fused = numpy_program(mlp(widths, act, bias), optimizer, fused=True)
    rng = np.random.default_rng(7)
    for _ in range(3):
        batch = int(rng.integers(1, 40))
        x = rng.standard_normal((batch, widths[0])).astype(np.float32)
        y = rng.integers(0, widths[-1], batch)
        assert fused.step(x, y) == unfused.step(x, y)
    assert kernels(fused) == ["numpy.mlp_train_step"]
    assert "numpy.mlp_train_step" not in kernels(unfused)
    want, got = unfused.state_dict(), fused.state_dict()
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert any(
        not np.array_equal(v, mlp(widths, act, bias).state_dict().get(k, v)) for k, v in got.items()
    )


def cuda_launches(
    model: nn.Module, batch: int, optimizer: optim.Optimizer | None = None, **kw
) -> list[str]:
    """The kernels of the cupy pipeline's exec program for `model` (compiled, not run)."""
    prog = aicfc.compile(model, kw.pop("loss", "cross_entropy"), optimizer, backend="numpy", **kw)
    graph = aicfc.parse(prog.mlir("graph", batch_size=batch))
    lowered = aicfc.run_pipeline(graph, "aicfc-train-pipeline{backend=cupy fuse_train_step=true}")
    return [op.kernel.data for op in lowered.walk() if op.name == "exec.launch"]


def test_the_small_config_is_one_launch_of_the_fused_kernel():
    assert cuda_launches(mlp((784, 256, 256, 10)), 128) == [FUSED_KERNEL]


@pytest.mark.parametrize(
    ("widths", "batch"),
    [((784, 256, 256, 10), 256), ((30, 256, 256), 1), ((7, 10, 100, 255, 256, 10), 7)],
)
def test_widths_and_batch_up_to_256_are_fused(widths, batch):
    assert cuda_launches(mlp(widths), batch) == [FUSED_KERNEL]


@pytest.mark.parametrize(
    ("widths", "batch"),
    [
        ((784, 257, 256, 10), 128),  # a hidden width of 257
        ((784, 256, 257), 128),  # 257 classes
        ((784, 256, 10), 257),  # a batch of 257
        ((8,) * 10 + (4,), 16),  # 10 layers, more than the kernel's 8
    ],
    ids=["width-257", "classes-257", "batch-257", "ten-layers"],
)
def test_past_the_kernels_limits_the_per_layer_kernels_stay(widths, batch):
    launches = cuda_launches(mlp(widths), batch)
    assert FUSED_KERNEL not in launches
    assert any("gemm" in k for k in launches) and any("adam" in k for k in launches)


@pytest.mark.parametrize(
    "case", ["dropout", "mse", "sgd", "clip", "accumulate", "keep_gradients", "tanh", "no_bias"]
)
def test_steps_the_kernel_does_not_do_stay_unfused(case):
    widths = (20, 16, 4)
    model = mlp(widths, nn.Tanh if case == "tanh" else nn.ReLU, bias=case != "no_bias")
    if case == "dropout":
        model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 4))
    kw: dict[str, object] = {
        "mse": {"loss": "mse"},
        "clip": {"clip_grad_norm": 1.0},
        "accumulate": {"accumulate": 2},
        "keep_gradients": {"keep_gradients": True},
    }.get(case, {})
    optimizer = optim.SGD(lr=0.1) if case == "sgd" else None
    launches = cuda_launches(model, 8, optimizer, **kw)
    assert FUSED_KERNEL not in launches and len(launches) > 3


def test_a_data_parallel_step_has_no_fused_step_stage():
    fused = train_pipeline("cupy", fuse_train_step=True)
    stages = [s.stage for s in with_data_parallel(fused, 2)]
    assert "fused-step" not in stages and "fused-step" in [s.stage for s in fused]
    assert "fused-step" not in [s.stage for s in train_pipeline("cupy")]  # only when asked


def test_numpy_pipeline_leaves_the_step_unfused_by_default():
    prog = numpy_program(mlp((12, 8, 3)), optim.Adam(lr=1e-3), fused=False)
    rng = np.random.default_rng(3)
    prog.step(rng.standard_normal((5, 12)).astype(np.float32), rng.integers(0, 3, 5))
    assert "autodiff.mlp_train_step" not in prog.mlir("canonical")
    assert "fused-step" not in prog.stages
