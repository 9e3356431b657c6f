"""The NumPy backend: exec programs on the CPU with the reference kernels (backend.py).

Imports nothing of runtime/cuda/; found by name through aicfc/backends.py.
"""
