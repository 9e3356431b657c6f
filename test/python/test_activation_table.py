"""The activation table and its readers agree with the kernels and with each other.

kernels/common.cuh is parsed, not trusted: its `#define AICFC_ACT_<NAME> <code>` lines and
the `X(name, AICFC_ACT_<NAME>)` rows of `AICFC_ACTIVATIONS` must be exactly the table's
(dialects/activation_table.py), since a launcher passes the table's code as the `act` scalar
and the kernels switch on the header's. The readers that derive from the table (flags, the
launchers' codes, cuBLASLt's epilogues, the registry's constraints) are checked against the
rows here; test_op_completeness.py checks that each row has all of its pieces.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aicfc.dialects.activation_table import (
    ACTIVATION_FACTS,
    CUBLASLT_ACTIVATIONS,
    EPILOGUE_ACTIVATIONS,
    one_of,
)
from aicfc.dialects.flags import OpFlag, static_flags
from aicfc.dialects.graph import ACTIVATIONS, Activation
from aicfc.runtime import registry

ROOT = Path(__file__).resolve().parents[2]
COMMON = ROOT / "kernels" / "common.cuh"
NAMES = [f.name for f in ACTIVATION_FACTS]


def header_codes(text: str) -> dict[str, int]:
    """{name: code} of the `#define AICFC_ACT_<NAME> <code>` lines."""
    return {
        m.group(1).lower(): int(m.group(2))
        for m in re.finditer(r"^#define\s+AICFC_ACT_(\w+)\s+(\d+)\s*$", text, re.M)
    }


def header_rows(text: str) -> list[tuple[str, str]]:
    """(name, code macro) of each X(...) row of the AICFC_ACTIVATIONS(X) macro."""
    m = re.search(r"#define\s+AICFC_ACTIVATIONS\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    assert m is not None, "kernels/common.cuh defines no AICFC_ACTIVATIONS(X) macro"
    return re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*\)", m.group(1))


def test_the_header_codes_are_the_tables():
    codes = header_codes(COMMON.read_text())
    expected = {"none": 0, **{f.name: f.code for f in ACTIVATION_FACTS}}
    assert codes == expected, (
        f"kernels/common.cuh defines the activation codes {codes}, the table "
        f"(dialects/activation_table.py) has {expected}"
    )


def test_the_header_lists_each_activation_once_with_its_code():
    rows = header_rows(COMMON.read_text())
    assert [name for name, _ in rows] == NAMES, (
        f"AICFC_ACTIVATIONS in kernels/common.cuh lists {[n for n, _ in rows]}, the table {NAMES}"
    )
    for name, macro in rows:
        assert macro == f"AICFC_ACT_{name.upper()}", f"X({name}, {macro}): expected its own code"


def test_the_parsers_see_a_wrong_code():
    """The header checks can fail: a changed code or a missing row is seen."""
    text = COMMON.read_text().replace("#define AICFC_ACT_GELU 2", "#define AICFC_ACT_GELU 7")
    assert header_codes(text)["gelu"] == 7
    dropped = re.sub(r"\s*X\(gelu, AICFC_ACT_GELU\)\s*\\", "", COMMON.read_text())
    assert "gelu" not in [n for n, _ in header_rows(dropped)]


def test_every_activation_but_none_has_one_row_with_its_ops():
    assert {a.value for a in Activation} == {"none", *NAMES}
    assert set(ACTIVATIONS) == set(Activation) - {Activation.NONE}
    for act, row in ACTIVATIONS.items():
        assert row.act == act
        assert row.forward.name == row.facts.op, f"{act}: forward op {row.forward.name}"
        assert row.grad.name == row.facts.grad_op, f"{act}: gradient op {row.grad.name}"


@pytest.mark.parametrize("act", list(ACTIVATIONS), ids=str)
def test_the_op_flags_follow_the_row(act):
    row = ACTIVATIONS[act]
    collapses = row.facts.collapses_info
    for cls in (row.forward, row.grad):
        assert bool(static_flags(cls) & OpFlag.COLLAPSES_INFO) == collapses, cls.name
    assert static_flags(row.forward) & OpFlag.IS_ACTIVATION
    assert static_flags(row.grad) & OpFlag.IS_ACTIVATION_GRAD


def test_the_registry_constraints_follow_the_rows():
    by_name = {k.name: k for k in registry.REGISTRY}
    assert by_name["numpy.gemm_epilogue"].constraints.activations == (
        "none",
        *EPILOGUE_ACTIVATIONS,
    )
    assert by_name["numpy.epilogue_grad"].constraints.activations == EPILOGUE_ACTIVATIONS
    assert by_name["cuda.epilogue_grad_f32"].constraints.activations == EPILOGUE_ACTIVATIONS
    split = tuple(a for a in EPILOGUE_ACTIVATIONS if a not in CUBLASLT_ACTIVATIONS)
    for k in registry.REGISTRY:
        if k.op == "graph.gemm_epilogue" and k.family == "cuda":
            if "split_epilogue" in k.flags:  # cuBLASLt's product, then our activation
                assert k.constraints.activations == split, k.name
                continue
            # f32 cuBLASLt takes its own epilogues; bf16/f16 cuBLASLt (the only low-precision
            # products) every epilogue activation, ours following the GEMM where it has none
            lt_f32 = "cublaslt" in k.flags and k.dtypes == ("f32",)
            allowed = CUBLASLT_ACTIVATIONS if lt_f32 else EPILOGUE_ACTIVATIONS
            assert k.constraints.activations == ("none", *allowed), k.name
    assert split == ("gelu", "silu")
    # what is true today, written out: relu and gelu fuse, only relu in cuBLASLt
    assert {"relu", "gelu"} <= set(EPILOGUE_ACTIVATIONS) and "tanh" not in EPILOGUE_ACTIVATIONS
    assert "relu" in CUBLASLT_ACTIVATIONS and "gelu" not in CUBLASLT_ACTIVATIONS


def test_the_launch_codes_and_cublaslt_epilogues_are_the_tables():
    from aicfc.runtime.cuda.cublaslt import EPILOGUES
    from aicfc.runtime.cuda.launchers.common import ACT_CODES

    assert header_codes(COMMON.read_text()) == ACT_CODES
    assert set(EPILOGUES) == {"none", *CUBLASLT_ACTIVATIONS}
    assert EPILOGUES["relu"] == ("RELU", "RELU_BIAS")


def test_one_of_reads_as_prose():
    assert one_of(("relu",)) == "relu"
    assert one_of(("relu", "gelu")) == "relu or gelu"
    assert one_of(("relu", "gelu", "silu")) == "relu, gelu or silu"
