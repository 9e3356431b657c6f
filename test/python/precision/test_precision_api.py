"""aicfc.compile(precision=...): the values it takes, `prog.precision`, the pipeline it
runs, and checkpoints across precisions (the state dict holds the fp32 masters)."""

from __future__ import annotations

import numpy as np
import pytest

import aicfc
from aicfc import nn, optim


def model() -> nn.Sequential:
    aicfc.manual_seed(3)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


def compile_(precision: str) -> aicfc.Program:
    return aicfc.compile(
        model(),
        optimizer=optim.Adam(lr=1e-2),
        backend="numpy",
        precision=precision,
        cache_dir=False,
    )


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 4, 16).astype(np.int64)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_precision_is_kept_and_names_the_autocast_stage(precision: str) -> None:
    prog = compile_(precision)
    assert prog.precision == precision
    assert ("amp.scale" in prog.state_dict()) == (precision == "fp16")
    assert ("autocast" in prog.stages) == (precision in ("bf16", "fp16"))
    assert prog.tf32 is False  # the NumPy backend is strict fp32 for "tf32" (docs of compile)
    x, y = data()
    assert np.isfinite(prog.step(x, y))
    exec_ir = prog.mlir("exec")
    low = {"bf16": "bf16", "fp16": "f16"}.get(precision)
    if low:
        assert f"x{low}, tmp>" in exec_ir and '"numpy.cast"' in exec_ir
    else:
        assert "numpy.cast" not in exec_ir


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"unknown precision 'int8'; expected one of fp32, tf32, bf16, fp16"
    ):
        compile_("int8")


def test_state_dict_holds_fp32_masters_and_loads_across_precisions() -> None:
    x, y = data()
    low = compile_("bf16")
    for _ in range(3):
        low.step(x, y)
    state = low.state_dict()
    # every tensor but the f64 hyperparameters (`optim.<g>.<key>`, any precision) is fp32
    tensors = {k: v for k, v in state.items() if not k.startswith("optim.")}
    assert len(tensors) < len(state)
    assert {v.dtype for v in tensors.values()} == {np.dtype(np.float32)}
    # fp32 masters keep more than bf16 holds: the update of 1e-2-sized steps is not bf16-rounded
    w = state["0.weight"]
    assert np.any(w.astype(np.dtype("bfloat16")).astype(np.float32) != w)
    full = compile_("fp32")
    full.load_state_dict(state)
    np.testing.assert_array_equal(full.state_dict()["0.weight"], w)
    back = compile_("fp16")  # fp16 adds the loss-scaling state, which the checkpoint lacks
    keys = back.load_state_dict(full.state_dict(), strict=False)
    assert sorted(keys.missing_keys) == ["amp.growth_tracker", "amp.scale"]
    assert keys.unexpected_keys == []
    for k, v in state.items():
        np.testing.assert_array_equal(back.state_dict()[k], v)
    assert float(back.state_dict()["amp.scale"]) == 65536.0
    # the same checkpoint gives nearly the same next loss in both precisions
    a, b = full.step(x, y), low.step(x, y)
    assert abs(a - b) <= 0.02 * abs(a)


def test_tf32_true_with_the_default_precision_reports_tf32() -> None:
    """The backend decides: NumPy is strict fp32 whatever is asked, so it stays "fp32";
    a backend that runs TF32 products reports "tf32" (see test_cupy_backend_gpu)."""
    prog = aicfc.compile(model(), backend="numpy", tf32=True, cache_dir=False)
    assert (prog.tf32, prog.precision) == (False, "fp32")


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_low_precision_with_float64_params_is_refused(precision: str) -> None:
    aicfc.manual_seed(0)
    f64 = nn.Sequential(nn.Linear(4, 3, dtype=np.float64))
    with pytest.raises(
        TypeError, match=rf"precision='{precision}' needs float32 parameters.*float64"
    ):
        aicfc.compile(f64, backend="numpy", precision=precision, cache_dir=False)


def test_fp16_with_gradient_accumulation_is_refused() -> None:
    with pytest.raises(ValueError, match=r"precision='fp16' with accumulate=2 is not supported"):
        aicfc.compile(model(), backend="numpy", precision="fp16", accumulate=2, cache_dir=False)
    bf16 = aicfc.compile(model(), backend="numpy", precision="bf16", accumulate=2, cache_dir=False)
    x, y = data()
    assert np.isfinite(bf16.step(x, y))


def test_fp16_with_data_parallel_is_refused() -> None:
    from aicfc.distributed import DataParallel
    from aicfc.runtime.collectives import ThreadGroup

    with pytest.raises(ValueError, match=r"precision='fp16' with data_parallel is not supported"):
        aicfc.compile(
            model(),
            backend="numpy",
            precision="fp16",
            data_parallel=DataParallel(ThreadGroup(2).communicators[0]),
            cache_dir=False,
        )


@pytest.mark.parametrize(
    ("written", "read"), [("fp16", "fp32"), ("fp32", "fp16"), ("bf16", "fp16")]
)
def test_a_checkpoint_file_loads_across_fp16_and_the_others(
    written: str, read: str, tmp_path
) -> None:
    """Program.save / Program.load (the file, checked) across precisions: every param and
    optimizer state arrives; fp16's loss scale is not carried to the others, and an fp16
    program keeps its own scale when the file has none."""
    x, y = data()
    src = compile_(written)
    for _ in range(3):
        src.step(x, y)
    path = tmp_path / "ckpt.safetensors"
    src.save(path)
    dst = compile_(read)
    if read == "fp16":
        dst.step(*data(1))  # a scale of its own to keep: 2^16 unless an overflow halved it
        scale = float(dst.state_dict()["amp.scale"])
    dst.load(path)
    got, want = dst.state_dict(), src.state_dict()
    for name, value in want.items():
        if not name.startswith("amp."):
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert ("amp.scale" in got) == (read == "fp16")
    if read == "fp16":
        assert float(got["amp.scale"]) == scale
