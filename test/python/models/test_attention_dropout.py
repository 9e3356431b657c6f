"""Dropout in nn.CausalSelfAttention follows graph.dropout's mask, through the fused op.

The train step of an attention layer with dropout p (on the probabilities and on the
output) is compared with a torch computation written here, which applies the keep masks
of graph.dropout's definition (runtime/reference.py `dropout_keep`: Philox4x32-10 keyed
by the layer's key, a hash of its name: nn.dropout_key, counted from the step's
rng.offset, which starts at nn.dropout_offset) to the flattened [N, H, T, T]
probabilities and to the [N, T, D] output, scaled by 1/(1-p). aicfc-fuse turns the chain
into graph.scaled_dot_product_attention with dropout_p, so this checks that op's mask,
forward and backward. Three SGD steps: the losses and the parameters after them match
(float32 on both sides, 1e-5 relative), and the offset advances by one per step.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

import aicfc
from aicfc import nn, optim
from aicfc.runtime.reference import dropout_keep
from support import rel_err

N, T, D, H, P = 2, 6, 8, 2, 0.3
TOL = 1e-5


def keep(shape: tuple[int, ...], offset: int, seed: int) -> torch.Tensor:
    mask = dropout_keep(math.prod(shape), offset, P, seed).reshape(shape)
    return torch.from_numpy(mask.astype(np.float32) / (1.0 - P))


def torch_attention(
    params: dict[str, torch.Tensor], x: torch.Tensor, offset: int, seeds: tuple[int, int]
) -> torch.Tensor:
    q, k, v = F.linear(x, params["c_attn.weight"], params["c_attn.bias"]).split(D, dim=2)
    q, k, v = (z.view(N, T, H, D // H).transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
    att = att.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")).softmax(dim=-1)
    att = att * keep((N, H, T, T), offset, seeds[0])
    y = (att @ v).transpose(1, 2).reshape(N, T, D)
    return F.linear(y, params["c_proj.weight"], params["c_proj.bias"]) * keep(
        (N, T, D), offset, seeds[1]
    )


def test_attention_dropout_follows_graph_dropouts_mask():
    aicfc.manual_seed(0)
    model = nn.CausalSelfAttention(D, H, block_size=T, dropout=P)
    seeds = (model.attn_dropout.key("attn_dropout"), model.resid_dropout.key("resid_dropout"))
    assert seeds == (nn.dropout_key("attn_dropout"), nn.dropout_key("resid_dropout"))
    start = nn.dropout_offset(model)
    prog = aicfc.compile(model, loss="mse", optimizer=optim.SGD(lr=0.5), backend="numpy")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, T, D)).astype(np.float32)
    y = rng.standard_normal((N, T, D)).astype(np.float32)
    params = {k: torch.from_numpy(v).requires_grad_() for k, v in model.state_dict().items()}
    for step in range(3):
        ours = prog.step(x, y)
        ref = F.mse_loss(
            torch_attention(params, torch.from_numpy(x), start + step, seeds),
            torch.from_numpy(y),
        )
        grads = torch.autograd.grad(ref, list(params.values()))
        with torch.no_grad():
            params = {
                k: (p - 0.5 * g).requires_grad_()
                for (k, p), g in zip(params.items(), grads, strict=True)
            }
        assert abs(ours - ref.item()) <= TOL * ref.item(), f"step {step}: {ours} vs {ref.item()}"
    assert int(prog.state_dict()["rng.offset"]) == start + 3
    for name, value in prog.parameters().items():
        err = rel_err(value, params[name].detach().numpy())
        assert err <= TOL, f"{name}: {err:.2e}"


def test_the_chain_is_fused_with_its_dropout():
    """aicfc-fuse forms one fused attention op carrying the layer's dropout (so the step
    above ran the fused op's mask, forward and backward): graph.packed_qkv_attention, the
    heads' layout around graph.scaled_dot_product_attention folded in."""
    aicfc.manual_seed(0)
    model = nn.CausalSelfAttention(D, H, block_size=T, dropout=P)
    prog = aicfc.compile(model, loss="mse", optimizer=optim.SGD(lr=0.5), backend="numpy")
    fused = prog.mlir("fused", batch_size=N)
    assert fused.count("graph.packed_qkv_attention") == 1
    assert "graph.scaled_dot_product_attention" not in fused
    assert "graph.softmax" not in fused and "graph.causal_mask" not in fused
    assert f"seed = {nn.dropout_key('attn_dropout')}" in fused and "causal" in fused


def test_predict_has_no_dropout():
    aicfc.manual_seed(0)
    model = nn.CausalSelfAttention(D, H, block_size=T, dropout=0.9)
    prog = aicfc.compile(model, loss="mse", backend="numpy")
    x = np.random.default_rng(2).standard_normal((N, T, D)).astype(np.float32)
    params = {k: torch.from_numpy(v) for k, v in model.state_dict().items()}
    with torch.no_grad():
        q, k, v = F.linear(
            torch.from_numpy(x), params["c_attn.weight"], params["c_attn.bias"]
        ).split(D, dim=2)
        q, k, v = (z.view(N, T, H, D // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(N, T, D)
        want = F.linear(y, params["c_proj.weight"], params["c_proj.bias"]).numpy()
    assert rel_err(prog.predict(x), want) <= TOL
