"""aicfc-opt's command line as a new user meets it: --help, --version, option errors in
the user's terms, "did you mean", argument checks at parse time, backend names,
expand-backward's allow_unused, and the analysis report's honest totals."""

from __future__ import annotations

from pathlib import Path

import pytest

import aicfc
from aicfc.tools import aicfc_opt

STEP = """\
func.func @train_step(%x: tensor<4x3xf32> {aicfc.role = "input", aicfc.name = "x"},
                      %y: tensor<4xi32> {aicfc.role = "input", aicfc.name = "y"},
                      %w: tensor<2x3xf32> {aicfc.role = "param", aicfc.name = "fc.weight"},
                      %u: tensor<2x3xf32> {aicfc.role = "param", aicfc.name = "unused"})
    -> (tensor<f32> {aicfc.name = "loss"}, tensor<2x3xf32>, tensor<2x3xf32>) {
  %h = graph.matmul %x, %w transpose_b : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %r = graph.relu %h : tensor<4x2xf32>
  %l = graph.cross_entropy %r, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  %g:2 = autodiff.backward %l wrt %w, %u
      : tensor<f32>, (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  func.return %l, %g#0, %g#1 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>
}
"""


@pytest.fixture
def step(tmp_path: Path) -> str:
    path = tmp_path / "step.mlir"
    path.write_text(STEP)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = aicfc_opt.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- help and version -------------------------------------------------------------------


def test_help_lists_aicfc_passes_and_only_the_curated_xdsl_ones(capsys):
    with pytest.raises(SystemExit) as info:
        aicfc_opt.main(["--help"])
    assert info.value.code == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, even at '-'
    assert (
        "aicfc'spasses:aicfc-fuse,aicfc-expand-backward,aicfc-hoist-updates,aicfc-lower-exec"
        in text
    )
    assert "xDSL's:canonicalize,cse,dce." in text
    assert "docs/passes.md" in text
    assert "convert-riscv" not in text and "csl-stencil" not in text
    assert "Availabletargetsare:mlir" in text


def test_version_prints_aicfcs_version(capsys):
    with pytest.raises(SystemExit):
        aicfc_opt.main(["--version"])
    assert capsys.readouterr().out.startswith(f"aicfc-opt {aicfc.__version__} (xDSL 0.74")


# --- option errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("passes", "message"),
    [
        (
            "aicfc-fuse{patterns=1}",
            "option 'patterns' of aicfc-fuse expects a string (one of all, forward, backward), "
            "got 1",
        ),
        (
            "aicfc-fold-inplace{enable=maybe}",
            "option 'enable' of aicfc-fold-inplace expects a boolean (true or false), got maybe",
        ),
        (
            "aicfc-plan-memory{alignment=1.5}",
            "option 'alignment' of aicfc-plan-memory expects an integer, got 1.5",
        ),
        ("aicfc-fuse{zz=1}", "aicfc-fuse has no option 'zz' (its options: patterns, exclude)"),
        ("cse{bogus=true}", "cse has no option 'bogus' (it takes no options)"),
        (
            "aicfc-lower-exec{backend=tpu}",
            "aicfc-lower-exec: unknown backend 'tpu'; expected one of numpy, cupy, cuda "
            "(cuda, the kernel family of cupy, selects cupy)",
        ),
        (
            "aicfc-lower-exec{backend=1}",
            "option 'backend' of aicfc-lower-exec expects a string (one of numpy, cupy, cuda)",
        ),
        (
            "aicfc-train-pipeline{backend=tpu}",
            "aicfc-train-pipeline: unknown backend 'tpu'; expected one of numpy, cupy, cuda "
            "(cuda, the kernel family of cupy, selects cupy)",
        ),
    ],
)
def test_bad_options_are_command_line_errors_in_the_users_terms(capsys, step, passes, message):
    code, out, err = run(capsys, step, "-p", passes)
    assert code == 1 and out == ""
    assert err.startswith(f"aicfc-opt: error: bad pass options in '{passes}': {message}")
    assert err.count("\n") == 1
    assert "Incompatible types" not in err and "<class" not in err


def test_analyze_unknown_function_is_a_command_line_error(capsys, step):
    code, _, err = run(capsys, step, "-p", "aicfc-analyze{function=nope}")
    assert code == 1
    assert err == (
        "aicfc-opt: error: aicfc-analyze: no function @nope in the module "
        "(functions: @train_step)\n"
    )


# --- parse-time checks --------------------------------------------------------------------


def test_misspelled_op_gets_a_suggestion(capsys, tmp_path):
    path = tmp_path / "typo.mlir"
    path.write_text(STEP.replace("graph.matmul", "graph.matmull"))
    code, _, err = run(capsys, str(path))
    assert code == 1
    assert err == (
        f"{path}:6:22: error: Operation graph.matmull is not registered; "
        "did you mean graph.matmul?\n"
    )


def test_unknown_dialect_op_has_no_suggestion(capsys, tmp_path):
    path = tmp_path / "foreign.mlir"
    path.write_text("func.func @f(%x: tensor<4xf32>) {\n  %y = foo.bar %x : tensor<4xf32>\n}\n")
    code, _, err = run(capsys, str(path))
    assert code == 1 and "foo.bar is not registered" in err and "did you mean" not in err


def test_bad_role_is_reported_at_the_argument_when_parsed(capsys, tmp_path):
    path = tmp_path / "role.mlir"
    path.write_text(
        STEP.replace('"param", aicfc.name = "unused"', '"parameter", aicfc.name = "unused"')
    )
    code, _, err = run(capsys, str(path))  # no pass: parse and verify only
    assert code == 1
    assert err == (
        f"{path}:4:23: error: 'func.func' argument %u (#3, counting from 0) of @train_step "
        'has aicfc.role "parameter"; expected input, param or state\n'
    )


def test_duplicate_name_is_reported_at_the_second_argument(capsys, tmp_path):
    path = tmp_path / "names.mlir"
    path.write_text(STEP.replace('aicfc.name = "unused"', 'aicfc.name = "fc.weight"'))
    code, _, err = run(capsys, str(path))
    assert code == 1
    assert err == (
        f"{path}:4:23: error: 'func.func' argument #3 reuses the aicfc.name \"fc.weight\"; "
        "names must be unique (argument %u of @train_step, counting from 0; "
        "argument #2 (%w) has it first)\n"
    )


def test_argument_checks_in_the_python_parser_too():
    bad = STEP.replace('aicfc.name = "unused"', 'aicfc.name = "x"')
    with pytest.raises(aicfc.IRError, match=r'step.mlir:4:23: .*reuses the aicfc.name "x"'):
        aicfc.parse(bad, name="step.mlir")


# --- backend names ----------------------------------------------------------------------------


def test_cupy_and_cuda_lower_to_the_same_kernels(capsys, step):
    outputs = []
    for backend in ("cuda", "cupy"):
        code, out, err = run(capsys, step, "-p", f"aicfc-train-pipeline{{backend={backend}}}")
        assert code == 0, err
        outputs.append(out)
        code, lowered, err = run(
            capsys,
            step,
            "-p",
            f"aicfc-fuse,aicfc-expand-backward,aicfc-lower-exec{{backend={backend}}}",
        )
        assert code == 0, err
        assert 'exec.launch "cuda.' in lowered and 'exec.launch "numpy.' not in lowered
    assert outputs[0] == outputs[1]


# --- autodiff.backward with a wrt value the loss does not use ----------------------------------


def test_expand_backward_allow_unused_false_names_the_value(capsys, step):
    code, _, err = run(capsys, step, "-p", "aicfc-expand-backward{allow_unused=false}")
    assert code == 1
    assert err == (
        f"{step}:9:3: error: 'autodiff.backward' the loss does not depend on wrt value %u "
        '(aicfc.name "unused"), so its gradient is always zero (fix the wrt list or the '
        "forward, or run aicfc-expand-backward{allow_unused=true})\n"
    )


def test_expand_backward_allows_unused_by_default(capsys, step):
    code, out, _ = run(capsys, step, "-p", "aicfc-expand-backward")
    assert code == 0
    assert "%du = graph.constant dense<0.000000e+00> : tensor<2x3xf32>" in out


# --- aicfc-analyze --------------------------------------------------------------------------------


def test_analyze_says_backward_is_not_counted_before_expansion(capsys, step):
    code, out, _ = run(capsys, step, "-p", "aicfc-analyze", "-o", "/dev/null")
    assert code == 0
    assert "autodiff.backward not expanded: backward FLOPs not counted" in out
    assert "(graph ops: the forward pass only)" in out
    assert "builtin.module" not in out  # -o sends the IR elsewhere: stdout is the report


def test_analyze_after_expansion_counts_the_whole_function(capsys, step):
    code, out, _ = run(capsys, step, "-p", "aicfc-expand-backward,aicfc-analyze", "-o", "/dev/null")
    assert code == 0
    assert "not expanded" not in out
    totals = dict(line.split(": ", 1) for line in out.splitlines() if line.startswith("Total "))
    graph_flops = int(totals["Total FLOPs"].split()[0])
    lines = out.splitlines()
    training = lines[next(i for i, line in enumerate(lines) if line.startswith("Training")) + 1]
    training_flops = int(training.split()[1].rstrip(","))
    whole = next(line for line in out.splitlines() if "Whole function" in line)
    assert f"FLOPs {graph_flops + training_flops}," in whole
    assert "including 1 gradient node" in totals["Total FLOPs"]


def test_missing_closing_brace_says_so(capsys, tmp_path):
    """Regression: xDSL's message was 'error:  in block definition' (empty and cryptic)."""
    path = tmp_path / "open.mlir"
    path.write_text("func.func @f(%x: tensor<4xf32>) {\n  %y = graph.relu %x : tensor<4xf32>\n")
    code, _, err = run(capsys, str(path))
    assert code == 1
    assert err == (
        f"{path}:3:1: error: expected '}}' to close the region (or a block label such as ^bb0:)\n"
    )
