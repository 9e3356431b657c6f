"""The CuPy backend: exec programs as CUDA kernels of the "cuda" kernel family.

    backend.py    CupyBackend, CupyExecutable: buffers, binding, capture and replay
    abi.py        the launch ABI: modules, C scalars, KernelLaunch, CudaKernelError
    launch.py     a registry entry's launcher (KernelSpec.launcher) -> bound launches
    launchers/    the launchers, one module per kernels/<family>.cu (plus common.py)
    context.py    DeviceContext: workspaces, tables and cuBLASLt on the current device
    cublaslt.py   the cuBLASLt handle and its planned matmuls (nvmath-python)
    capture.py    CUDA graph capture and the copies a captured step contains
    autotune.py   timing the GEMM candidates of a loaded program

Imports nothing of runtime/numpy/; found by name through aicfc/backends.py. CuPy
is imported lazily, so every module here imports (and the launchers run on the
CPU emulator) without a GPU.
"""
