"""Every kernels/*.cu compiles with nvcc for sm_90 (CI has nvcc but no GPU).

Each source goes through nvcc to PTX and ptxas to sm_90 machine code (so both
front-end and assembler errors fail), and the PTX must define every
`extern "C"` symbol that runtime/registry_cuda.py names in that file, and the
`aicfc_abi_version` constant equal to the runtime's KERNEL_ABI_VERSION.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aicfc.runtime import registry
from aicfc.runtime.cuda.abi import KERNEL_ABI_VERSION

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
SOURCES = sorted(p.name for p in KERNELS.glob("*.cu"))
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit missing)")


def test_sources_exist_and_registry_names_only_them():
    assert SOURCES, f"no .cu files in {KERNELS}"
    named = {k.source for k in registry.REGISTRY if k.family == "cuda" and k.source}
    assert named <= set(SOURCES)


@pytest.mark.parametrize("source", SOURCES)
def test_compiles_for_sm90_and_defines_its_registered_symbols(source, tmp_path):
    ptx = tmp_path / (source + ".ptx")
    cmd = [NVCC, "-arch=sm_90", "--ptx", "-I", str(KERNELS), "-o", str(ptx), str(KERNELS / source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"nvcc failed on {source}:\n{done.stderr}"
    ptxas = Path(NVCC).with_name("ptxas")
    cubin = tmp_path / (source + ".cubin")
    done = subprocess.run(
        [str(ptxas), "-arch=sm_90", "-o", str(cubin), str(ptx)], capture_output=True, text=True
    )
    assert done.returncode == 0, f"ptxas failed on {source}:\n{done.stderr}"
    text = ptx.read_text()
    entries = set(re.findall(r"\.entry\s+(\w+)\s*\(", text))
    wanted = {k.symbol for k in registry.REGISTRY if k.family == "cuda" and k.source == source}
    assert wanted <= entries, f"{source} lacks {sorted(wanted - entries)}"
    version = re.search(r"\.const\s+\.align\s+4\s+\.u32\s+aicfc_abi_version\s*=\s*(\d+)", text)
    assert version is not None, f"{source} does not export aicfc_abi_version"
    assert int(version.group(1)) == KERNEL_ABI_VERSION
