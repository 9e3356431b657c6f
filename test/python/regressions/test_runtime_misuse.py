"""Regressions: runtime misuse that crashed with a raw NumPy error or gave a silent wrong result.

Each case was found by feeding the NumPy runtime, aicfc.run and aicfc-run what a
user may write by hand (exec IR, npz files, state dicts) and now gets an error
that names the kernel, input or file at fault.
"""

from __future__ import annotations

import numpy as np
import pytest

import aicfc
from aicfc.backends import get_backend
from aicfc.ir import parse_module
from aicfc.runtime.errors import ExecError
from aicfc.runtime.reference import cross_entropy, cross_entropy_grad
from aicfc.tools.aicfc_run import main as aicfc_run

RELU_INTO = """
exec.program @p {{
  %x = exec.buffer "x" : !exec.buffer<4x{src}, input>
  %o = exec.alloc : !exec.buffer<4x{dst}, tmp>
  exec.graph {{
    exec.launch "numpy.relu"(%x) outs(%o)
      : (!exec.buffer<4x{src}, input>) -> (!exec.buffer<4x{dst}, tmp>)
  }}
  exec.output "o" %o : !exec.buffer<4x{dst}, tmp>
}}
"""


@pytest.mark.parametrize(
    ("src", "dst", "np_src"),
    [("f32", "i32", np.float32), ("f64", "f32", np.float64)],
    ids=["float_into_int_buffer_was_a_TypeError", "f64_into_f32_buffer_was_cast_silently"],
)
def test_kernel_result_of_another_dtype_than_its_buffer_is_named(src, dst, np_src):
    backend = get_backend("numpy")
    program = parse_module(RELU_INTO.format(src=src, dst=dst)).body.block.first_op
    exe = backend.load(program, backend.create_store())  # type: ignore[arg-type]
    want = {"i32": "int32", "f32": "float32"}[dst]
    for _ in range(2):  # a failed first call leaves the launch checked on the next one too
        with pytest.raises(ExecError) as e:
            exe.run({"x": np.ones(4, np_src)})
        assert (
            f'kernel "numpy.relu" result #0 is {np.dtype(np_src)}[4], its buffer is {want}[4]'
            in str(e.value)
        )


CE_STEP = """
func.func @ce(%x: tensor<3x4xf32> {aicfc.role = "input", aicfc.name = "x"},
              %y: tensor<3xi32> {aicfc.role = "input", aicfc.name = "y"})
    -> (tensor<f32> {aicfc.name = "loss"}) {
  %l = graph.cross_entropy %x, %y : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<f32>
  func.return %l : tensor<f32>
}
"""


@pytest.mark.parametrize("bad", [-1, 4])
def test_out_of_range_labels_are_refused_not_wrapped(bad):
    # -1 used to index the last class (a plausible, wrong loss); 4 an IndexError.
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    y = np.array([0, bad, 2], np.int32)
    with pytest.raises(ExecError, match=r"labels must be in \[0, 4\) for 4 classes, got values"):
        aicfc.run(CE_STEP, "ce", {"x": x, "y": y})
    with pytest.raises(ValueError, match=r"labels must be in \[0, 4\)"):
        cross_entropy(x, y)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 4\)"):
        cross_entropy_grad(x, y, np.float32(1.0))
    # in-range labels still give the mean of logsumexp(x) - x[y]
    ok = np.array([0, 3, 2], np.int32)
    want = np.mean(np.log(np.exp(x.astype(np.float64)).sum(1)) - x[np.arange(3), ok])
    got = aicfc.run(CE_STEP, "ce", {"x": x, "y": ok})["loss"]
    assert abs(float(got) - want) <= 1e-6 * abs(want)


@pytest.mark.parametrize("state", [[1, 2, 3], None, "0.weight"])
def test_load_state_dict_of_a_non_mapping_is_a_clear_type_error(state):
    prog = aicfc.compile(aicfc.nn.Sequential(aicfc.nn.Linear(2, 2)), backend="numpy")
    before = prog.state_dict()
    with pytest.raises(TypeError, match="expected a mapping of buffer names to arrays"):
        prog.load_state_dict(state)  # type: ignore[arg-type]
    after = prog.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_aicfc_run_output_to_an_unwritable_path_is_an_error_not_a_crash(tmp_path, capsys):
    step = tmp_path / "ce.mlir"
    step.write_text(CE_STEP)
    out = tmp_path / "no" / "such" / "dir" / "out.npz"
    assert aicfc_run([str(step), "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"aicfc-run: error: cannot write '{out}': No such file or directory" in err
    assert "internal error" not in err and "Traceback" not in err


HUGE = "tensor<100000x100000x100000xf32>"  # 4e15 bytes: past any host address space


@pytest.mark.parametrize(
    ("role", "where"),
    [("input", "input buffer x"), ("param", 'param "x"')],
)
def test_a_buffer_too_large_for_the_host_is_named(role, where):
    # was "aicfc-run: internal error: MemoryError: Unable to allocate 3.55 PiB ..."
    text = f"""
    func.func @f(%x: {HUGE} {{aicfc.role = "{role}", aicfc.name = "x"}}) -> {HUGE} {{
      %y = graph.relu %x : {HUGE}
      func.return %y : {HUGE}
    }}"""
    arena = r"@f: the arena \(uint8\[4000000000000000\], 4000000000000000 bytes\) does not fit"
    with pytest.raises(ExecError, match=arena):  # the planned tmp %y comes first
        aicfc.execute.LoadedFunction.load(parse_module(text), "f", "numpy", inplace=False)
    program = parse_module(text.replace(f"%y = graph.relu %x : {HUGE}\n", "").replace("%y", "%x"))
    with pytest.raises(
        ExecError,
        match=f"@f: {where} \\(float32\\[100000, 100000, 100000\\], "
        "4000000000000000 bytes\\) does not fit in host memory",
    ):
        aicfc.execute.LoadedFunction.load(program, "f", "numpy")


READ_BEFORE_WRITE = {
    "launch input": """
  exec.graph {
    exec.launch "numpy.relu"(%u) outs(%t) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "t" %t : !exec.buffer<4xf32, tmp>""",
    "in-place launch": """
  exec.graph {
    exec.launch "numpy.relu"(%u) outs(%u) : (!exec.buffer<4xf32, tmp>) -> (!exec.buffer<4xf32, tmp>)
  }
  exec.output "u" %u : !exec.buffer<4xf32, tmp>""",
    "copy source": """
  exec.graph {
    exec.copy %u -> %t : !exec.buffer<4xf32, tmp> -> !exec.buffer<4xf32, tmp>
  }
  exec.output "t" %t : !exec.buffer<4xf32, tmp>""",
    "output": """
  exec.graph {
  }
  exec.output "u" %u : !exec.buffer<4xf32, tmp>""",
}


@pytest.mark.parametrize("case", sorted(READ_BEFORE_WRITE))
def test_a_tmp_read_before_any_write_is_refused_at_load(case):
    # It ran, reading zeros (or, once planned into an arena, another buffer's bytes).
    text = (
        "exec.program @p {\n"
        "  %u = exec.alloc : !exec.buffer<4xf32, tmp>\n"
        "  %t = exec.alloc : !exec.buffer<4xf32, tmp>" + READ_BEFORE_WRITE[case] + "\n}\n"
    )
    backend = get_backend("numpy")
    program = parse_module(text, "rbw.mlir").body.block.first_op
    with pytest.raises(ExecError, match=r"@p: tmp buffer %u is read by .* before anything writes"):
        backend.load(program, backend.create_store())  # type: ignore[arg-type]
