"""The NumPy kernels that write into their output buffers, one module per kernel family.

    common.py       the kernel signature, Scratch (work arrays), Unsupported, checks
    gemm.py         matmul and gemm_epilogue: BLAS into the destination, epilogue in place
    elementwise.py  arithmetic, activations, their gradients, epilogue_grad
    reduce.py       reduce_sum
    norm.py         layer_norm, add_layer_norm, layer_norm_grad, add_layer_norm_grad
    attention.py    scaled_dot_product_attention and its gradient (no dropout)
    loss.py         softmax cross-entropy (with its gradient), MSE
    optim.py        Adam/AdamW and SGD, in place
    layout.py       reshape, transpose, broadcast_to, split, concat
    embedding.py    embedding and embedding_grad

A registry entry (runtime/registry_numpy.py) names its kernel as "<module>:<function>"
(`KernelSpec.launcher`), resolved by runtime/numpy/backend.py; the contract every
kernel follows is in common.py.
"""
