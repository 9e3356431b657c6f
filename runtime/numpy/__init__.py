"""The NumPy backend: exec programs on the CPU (backend.py), its kernels (kernels/).

Imports nothing of runtime/cuda/; found by name through aicfc/backends.py.
"""
