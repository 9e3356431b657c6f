"""The kernel registry: plain data, one NumPy reference kernel per reference op (and `_out`
kernels beside them), extensible by data."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from aicfc.runtime import registry
from aicfc.runtime.reference import REFERENCE, reference_for
from aicfc.runtime.registry import Constraints, KernelSpec, candidates


def test_every_reference_op_has_a_numpy_kernel_named_after_it():
    for cls in REFERENCE:
        spec = registry.get("numpy." + cls.name.split(".", 1)[1])
        assert spec.op == cls.name
        assert spec.family == "numpy"
        assert "inplace_ok" in spec.flags
    copy = registry.get("numpy.copy")
    assert copy.op == "exec.copy"
    assert {"f32", "i64"} <= set(copy.dtypes)


def test_numpy_kernels_cover_exactly_the_reference_ops_and_copy():
    ops = {k.op for k in registry.REGISTRY if k.family == "numpy"}
    assert ops == {cls.name for cls in REFERENCE} | {"exec.copy"}
    for k in registry.NUMPY_KERNELS:
        assert k.launcher is None and "reference" in k.flags


def test_each_numpy_kernel_runs_the_reference_of_its_op_class():
    for k in registry.REGISTRY:
        if k.family == "numpy" and k.op != "exec.copy":
            assert reference_for(k.op) is next(f for c, f in REFERENCE.items() if c.name == k.op)
    with pytest.raises(KeyError, match=r"'graph\.nope' has no NumPy reference"):
        reference_for("graph.nope")


def test_candidates_filter_by_op_backend_and_dtype():
    # the `_out` kernel first (priority 10), then the reference
    assert [k.name for k in candidates("graph.relu", "numpy", "f32")] == [
        "numpy.relu_out",
        "numpy.relu",
    ]
    assert [k.name for k in candidates("graph.relu", "numpy", "f16")] == ["numpy.relu"]
    assert [k.name for k in candidates("graph.relu", "numpy", "bf16")] == ["numpy.relu"]
    assert candidates("graph.relu", "numpy", "f8") == []
    assert candidates("graph.relu", "tpu") == []
    assert [k.name for k in candidates("graph.add", "numpy", "i64")] == [
        "numpy.add_out",
        "numpy.add",
    ]
    assert [k.name for k in candidates("graph.softmax", "numpy", "f32")] == ["numpy.softmax"]
    assert candidates("graph.matmul", "numpy", "i64") == []


def test_candidates_sort_by_priority_then_name():
    table = (
        KernelSpec(
            "cuda.b", "graph.relu", "cuda", ("f32",), source="x.cu", symbol="b", launcher="x:f"
        ),
        KernelSpec(
            "cuda.a", "graph.relu", "cuda", ("f32",), source="x.cu", symbol="a", launcher="x:f"
        ),
        KernelSpec(
            "cuda.c",
            "graph.relu",
            "cuda",
            ("f32",),
            source="x.cu",
            symbol="c",
            launcher="x:f",
            priority=5,
        ),
    )
    assert [k.name for k in candidates("graph.relu", "cuda", registry=table)] == [
        "cuda.c",
        "cuda.a",
        "cuda.b",
    ]


def test_unknown_kernel_is_named():
    with pytest.raises(registry.UnknownKernelError, match=r"'numpy\.conv2d' is not registered"):
        registry.get("numpy.conv2d")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "tpu", "name": "tpu.x"}, "the kernel family must be one of"),
        ({"name": "numpy.x", "family": "cuda"}, "must start with 'cuda.'"),
        ({"dtypes": ()}, "no dtypes"),
        ({"layouts": ("col_major",)}, "unknown layout 'col_major'"),
        ({"abi": (("m", "size_t*"),)}, "parameter 'm' has C type 'size_t\\*'"),
        ({"source": None}, "needs source and symbol"),
        ({"launcher": None}, "needs its launcher as '<module>:<function>', got None"),
        ({"launcher": "x.launch"}, "needs its launcher as '<module>:<function>', got 'x.launch'"),
        ({"launcher": "gemm:launch"}, "launcher of a x.cu kernel lives in module 'x'"),
        (
            {"name": "numpy.x", "family": "numpy", "launcher": "gemm.matmul"},
            "a NumPy kernel names its launcher as '<module>:<function>', got 'gemm.matmul'",
        ),
    ],
)
def test_malformed_specs_are_refused_at_definition(kwargs, message):
    base = dict(
        name="cuda.x",
        op="graph.relu",
        family="cuda",
        dtypes=("f32",),
        source="x.cu",
        symbol="x",
        launcher="x:launch_x",
    )
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        KernelSpec(**base)


def test_a_library_kernel_needs_no_source():
    spec = KernelSpec(
        "cuda.lt", "graph.matmul", "cuda", ("f32",), flags=frozenset({"library"}), launcher="lt:f"
    )
    assert spec.source is None


def test_extension_module_joins_the_registry_by_data(monkeypatch):
    fake = types.ModuleType("fake_registry_ext")
    fake.KERNELS = (  # type: ignore[attr-defined]
        KernelSpec(
            "cuda.relu_f32",
            "graph.relu",
            "cuda",
            ("f32",),
            constraints=Constraints(alignment=16),
            flags=frozenset({"inplace_ok"}),
            abi=(("n", "int64_t"),),
            source="elementwise.cu",
            symbol="aicfc_relu_f32",
            launcher="elementwise:launch_elementwise",
        ),
    )
    monkeypatch.setitem(sys.modules, "fake_registry_ext", fake)
    monkeypatch.setattr(registry, "EXTENSION_MODULES", ("fake_registry_ext", "no_such_module_x"))
    table = registry._aggregate()
    names = [k.name for k in table]
    assert "cuda.relu_f32" in names and "numpy.relu" in names
    assert len(table) == len(registry.NUMPY_KERNELS) + 1  # no numpy `_out` kernels either


def test_extension_with_a_duplicate_name_is_an_error(monkeypatch):
    fake = types.ModuleType("fake_registry_dup")
    fake.KERNELS = (registry.get("numpy.relu"),)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_registry_dup", fake)
    monkeypatch.setattr(registry, "EXTENSION_MODULES", ("fake_registry_dup",))
    with pytest.raises(ValueError, match=r"'numpy\.relu' is registered twice"):
        registry._aggregate()


def test_registry_and_selector_import_no_backend():
    code = (
        "import sys, aicfc.runtime.registry, aicfc.runtime.selector, aicfc.runtime;"
        "bad = [m for m in ('cupy', 'numpy', 'xdsl', 'aicfc.runtime.numpy.backend',"
        " 'aicfc.runtime.cuda.backend', 'aicfc.runtime.backend') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
