"""Inference-only probe: rl.evaluate with each query at sequence index t scaled by max(1, log(t + 1) / log(L))
(log-n attention scaling: sharper attention past the lengths trained). L from env LOGN_L (0: off).
    LOGN_L=128 PYTHONPATH=. python logn_eval.py <rl.evaluate args>"""
import math
import os
import sys

import torch

import model.gpt as gpt
from rl import evaluate

L = int(os.environ.get("LOGN_L", "0"))
original = gpt.attention


def forward(self, x, cache=None, layer: int = 0):
    B, T, C = x.shape
    q, k, v = self.c_attn(x).split(C, dim=2)
    q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
    start = cache.pos if cache is not None else 0
    if L:
        t = torch.arange(start, start + T, dtype=q.dtype, device=q.device)
        q = q * torch.clamp(torch.log(t + 1) / math.log(L), min=1.0).view(1, 1, T, 1)
    if cache is None:
        y = gpt.attention(q, k, v, is_causal=True)
    else:
        end = start + T
        cache.k[layer, :, :, start:end] = k
        cache.v[layer, :, :, start:end] = v
        k, v = cache.k[layer, :, :, :end], cache.v[layer, :, :, :end]
        y = gpt.attention(q, k, v, is_causal=(start == 0 and T > 1))
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return self.resid_dropout(self.c_proj(y))


gpt.CausalSelfAttention.forward = forward
sys.exit(evaluate.main(sys.argv[1:]))
