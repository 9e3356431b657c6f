"""The CuPy backend: exec programs as CUDA kernels of the "cuda" kernel family.

    backend.py    CupyBackend, CupyExecutable: buffers, binding, capture and replay
    abi.py        the launch ABI: modules, C scalars, KernelLaunch, CudaKernelError
    launch.py     the launchers: one exec launch -> bound CUDA launches
    cublaslt.py   the cuBLASLt handle and its planned matmuls (nvmath-python)
    capture.py    CUDA graph capture and the copies a captured step contains
    autotune.py   timing the GEMM candidates of a loaded program

Imports nothing of runtime/numpy/; found by name through aicfc/backends.py. CuPy
is imported lazily, so every module here imports without a GPU.
"""
