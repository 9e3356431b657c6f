"""The CUDA launchers, one module per kernel family (`kernels/<family>.cu`).

    common.py       the launcher signature, LoadContext, ACT_CODES, shape checks, grids
    gemm.py         gemm.cu: tiled SIMT GEMMs (and the GEMM operands every GEMM reads)
    gemm_tf32.py    gemm_tf32.cu: WMMA TF32 GEMMs
    gemm_small.py   gemm_small.cu: skinny and split-K GEMMs
    cublaslt.py     the cuBLASLt entries (flag "library")
    elementwise.py  elementwise.cu: arithmetic, activations, bias_add, copy, permute
    cast.py         cast.cu: graph.cast between f32 and bf16/f16
    amp.py          amp.cu: fp16's dynamic loss scaling (unscale, select, scale update)
    loss.py         loss.cu: cross-entropy, softmax, MSE
    reduce.py       reduce.cu: epilogue_grad, reduce_sum
    dropout.py      dropout.cu
    optim.py        optim.cu: SGD, multi-tensor Adam
    layernorm.py    layernorm.cu: layer norm (and the fused residual add), its backward
    embedding.py    embedding.cu: the gather and its deterministic two-launch backward
    attention.py    attention.cu: tiled attention (head dims 32, 64, 128), the attention params
    attention_rows.py  attention_rows.cu: attention a warp per row (any head dim <= 128)
    cross_entropy.py   cross_entropy.cu: the fused softmax cross-entropy over many classes

A registry entry names its launcher as "<module>:<function>" (`KernelSpec.launcher`,
resolved by runtime/cuda/launch.py), so adding a kernel adds a row to the
registry and, if its launch differs, a function to its family's module.
"""
