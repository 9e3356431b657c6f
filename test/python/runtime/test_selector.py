"""Kernel selection: refusals name their reason, rules score, priority breaks ties,
the autotune cache overrides only with a feasible kernel."""

from __future__ import annotations

import json
import warnings

import pytest

from aicfc.runtime.registry import Constraints, KernelSpec
from aicfc.runtime.selector import (
    AutotuneCache,
    AutotuneCacheWarning,
    NoKernelError,
    Problem,
    refusal,
    select,
    shape_bucket,
)

CAP = {"arch": 90, "tf32": False, "tensor_core": True}


def cuda(name, op="graph.matmul", dtypes=("f32",), **kw):
    return KernelSpec(
        f"cuda.{name}", op, "cuda", dtypes, source="gemm.cu", symbol=name, launcher="gemm:f", **kw
    )


def gemm(m, n, k, dtype="f32", ta=False, tb=False, act=None):
    a = (k, m) if ta else (m, k)
    b = (n, k) if tb else (k, n)
    params = {}
    if ta:
        params["transpose_a"] = True
    if tb:
        params["transpose_b"] = True
    if act is not None:
        params["act"] = act
    return Problem(
        "graph.gemm_epilogue" if act else "graph.matmul",
        dtype,
        (a, b),
        ((m, n),),
        (dtype, dtype),
        params,
    )


def test_problem_mnk_follows_transposes():
    assert gemm(8, 16, 32).mnk() == (8, 16, 32)
    assert gemm(8, 16, 32, ta=True, tb=True).mnk() == (8, 16, 32)
    assert Problem("graph.relu", "f32", ((4,),), ((4,),)).mnk() is None


@pytest.mark.parametrize(
    ("spec", "problem", "reason"),
    [
        (cuda("k", dtypes=("f16",)), gemm(8, 8, 8), "dtype f32 not in f16"),
        (
            cuda("k", transposes=((False, False),)),
            gemm(8, 8, 8, tb=True),
            "transposes (transpose_a=False, transpose_b=True) not supported",
        ),
        (
            cuda("k", op="graph.gemm_epilogue", constraints=Constraints(activations=("relu",))),
            gemm(8, 8, 8, act="gelu"),
            "activation gelu not in relu",
        ),
        (
            cuda("k", constraints=Constraints(alignment=16)),
            gemm(8, 6, 8),
            "row of 24 bytes is not a multiple of the 16-byte alignment",
        ),
        (
            cuda("k", constraints=Constraints(min_mnk=(64, 64, 64))),
            gemm(128, 32, 128),
            "(M, N, K) = (128, 32, 128) below the minimum (64, 64, 64)",
        ),
        (
            cuda("k", constraints=Constraints(mnk_multiple=16)),
            gemm(32, 32, 24),
            "not multiples of 16",
        ),
        (cuda("k", constraints=Constraints(min_arch=100)), gemm(8, 8, 8), "needs sm_100"),
        (cuda("k", constraints=Constraints(requires=("nvmath",))), gemm(8, 8, 8), "'nvmath'"),
        (
            cuda(
                "k",
                op="graph.cross_entropy",
                constraints=Constraints(operand_dtypes=((1, ("i32",)),)),
            ),
            Problem("graph.cross_entropy", "f32", ((4, 3), (4,)), ((),), ("f32", "i64")),
            "operand #1 dtype i64 not in i32",
        ),
        (
            cuda("k", constraints=Constraints(max_numel=32)),
            gemm(8, 8, 8),
            "64 elements outside [0, 32]",
        ),
    ],
)
def test_each_constraint_refuses_with_its_reason(spec, problem, reason):
    why = refusal(spec, problem, CAP)
    assert why is not None and reason in why


def test_a_kernel_whose_constraints_hold_is_accepted():
    spec = cuda(
        "k",
        transposes=((False, True),),
        constraints=Constraints(alignment=16, min_mnk=(8, 8, 8), mnk_multiple=8, min_arch=80),
    )
    assert refusal(spec, gemm(16, 32, 64, tb=True), CAP) is None


def test_tensor_core_kernel_wins_on_a_tensor_core_device_and_loses_without():
    table = (
        cuda("simt", priority=1),
        cuda("tc", flags=frozenset({"tensor_core"})),
    )
    p = gemm(64, 64, 64)
    assert select(p, "cuda", CAP, registry=table).spec.name == "cuda.tc"
    no_tc = {"arch": 60, "tensor_core": False}
    assert select(p, "cuda", no_tc, registry=table).spec.name == "cuda.simt"


def test_specialised_kernel_wins_when_it_fits_and_generic_otherwise():
    table = (cuda("generic"), cuda("tiled", constraints=Constraints(mnk_multiple=32)))
    assert select(gemm(64, 64, 64), "cuda", CAP, registry=table).spec.name == "cuda.tiled"
    chosen = select(gemm(64, 64, 60), "cuda", CAP, registry=table)
    assert chosen.spec.name == "cuda.generic"
    assert chosen.refused == (("cuda.tiled", "(M, N, K) = (64, 64, 60) not multiples of 32"),)


def test_priority_breaks_ties_then_name():
    table = (cuda("b"), cuda("a"), cuda("c", priority=3))
    assert select(gemm(8, 8, 8), "cuda", CAP, registry=table).spec.name == "cuda.c"
    table = (cuda("b"), cuda("a"))
    assert select(gemm(8, 8, 8), "cuda", CAP, registry=table).spec.name == "cuda.a"


def test_no_kernel_error_lists_every_refusal():
    table = (cuda("h", dtypes=("f16",)), cuda("b", dtypes=("bf16",)))
    with pytest.raises(NoKernelError) as e:
        select(gemm(8, 8, 8), "cuda", CAP, registry=table)
    msg = str(e.value)
    assert msg.startswith("has no kernel for dtype f32 in kernel family cuda (")
    assert "cuda.h: dtype f32 not in f16" in msg and "cuda.b: dtype f32 not in bf16" in msg
    with pytest.raises(NoKernelError, match=r"has no kernel in kernel family cuda$"):
        select(gemm(8, 8, 8), "cuda", CAP, registry=())
    table = (cuda("t", constraints=Constraints(mnk_multiple=16)),)
    with pytest.raises(NoKernelError, match="that accepts this f32 instance"):
        select(gemm(8, 8, 8), "cuda", CAP, registry=table)


def test_shape_bucket_rounds_dims_up_to_powers_of_two():
    assert shape_bucket(gemm(100, 64, 3)) == "128x4,4x64"
    p = Problem("graph.add", "i64", ((), ()), ((),))
    assert shape_bucket(p) == "scalar,scalar"


def test_autotune_cache_overrides_with_a_feasible_kernel(tmp_path):
    table = (cuda("tc", flags=frozenset({"tensor_core"})), cuda("simt"))
    p = gemm(100, 64, 40)
    cache = AutotuneCache(tmp_path / "tune.json")
    cache.record(p, "h200", "cuda.simt")
    cache.save()
    reloaded = AutotuneCache(tmp_path / "tune.json")
    assert reloaded.entries == {"graph.matmul|128x64,64x64|f32|h200": "cuda.simt"}
    chosen = select(p, "cuda", CAP, reloaded, device="h200", registry=table)
    assert (chosen.spec.name, chosen.source) == ("cuda.simt", "autotune")
    # Same bucket, other device: the rules decide.
    chosen = select(p, "cuda", CAP, reloaded, device="a100", registry=table)
    assert (chosen.spec.name, chosen.source) == ("cuda.tc", "rules")


def test_autotune_entry_naming_an_infeasible_kernel_is_ignored(tmp_path):
    table = (cuda("any"), cuda("tiled", constraints=Constraints(mnk_multiple=64)))
    p = gemm(8, 8, 8)
    cache = AutotuneCache()
    cache.record(p, "", "cuda.tiled")
    chosen = select(p, "cuda", CAP, cache, registry=table)
    assert (chosen.spec.name, chosen.source) == ("cuda.any", "rules")


def test_malformed_autotune_file_is_ignored_with_one_warning_naming_it(tmp_path):
    """Tuning results are recomputable: a damaged cache warns once and reads as empty
    (it raised ValueError, which aicfc-opt reported as an internal error)."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": 7, "entries": {}}))
    with pytest.warns(AutotuneCacheWarning, match=r"autotune cache '.*bad\.json' cannot be used"):
        assert AutotuneCache(path).entries == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second read of the same file is silent
        assert AutotuneCache(path).entries == {}
    other = tmp_path / "other.json"
    other.write_text("{not json")
    with pytest.warns(AutotuneCacheWarning, match=r"other\.json' cannot be used \(Expecting"):
        AutotuneCache(other)
    assert AutotuneCache(tmp_path / "missing.json").entries == {}


def test_numpy_selection_prefers_the_out_kernel_and_falls_back_to_the_reference():
    p = Problem("graph.gemm_epilogue", "f64", ((4, 3), (3, 5), (5,)), ((4, 5),), ("f64",) * 3)
    chosen = select(p, "numpy")
    assert chosen.spec.name == "numpy.gemm_epilogue_out" and chosen.source == "rules"
    half = Problem("graph.gemm_epilogue", "f16", ((4, 3), (3, 5), (5,)), ((4, 5),), ("f16",) * 3)
    assert select(half, "numpy").spec.name == "numpy.gemm_epilogue"
