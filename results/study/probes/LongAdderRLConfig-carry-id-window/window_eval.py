"""Inference-only probe: rl.evaluate with attention limited to a window of columns. A query of position id s
attends only to keys whose id is within WINDOW of s (coupled ids: a column's digits of a, b and the sum share
one id), and, with SEPARATORS=1, to every non-digit token ("+", "=") too. The number of keys a query reads then
stops growing with the sum. Optionally log-n scaled as well (LOGN_L, as the logn probe).
    WINDOW=4 SEPARATORS=1 PYTHONPATH=. python window_eval.py <rl.evaluate args>"""
import math
import os
import sys

import torch
import torch.nn.functional as F

import model.gpt as gpt
from rl import evaluate

W = int(os.environ.get("WINDOW", "0"))  # 0: no window
SEPARATORS = os.environ.get("SEPARATORS", "1") == "1"
L = int(os.environ.get("LOGN_L", "0"))
state = {}  # the current pass's query ids and tokens; the keys' ids and tokens (all cached so far)
original_hidden = gpt.GPT._hidden


def hidden(self, idx, cache, pos, check_pos):
    start = cache.pos if cache is not None else 0
    if start == 0:
        state["k_ids"], state["k_tok"] = pos, idx
    else:
        if state["k_ids"].shape[0] != idx.shape[0]:  # samples repeated after the prefill
            n = idx.shape[0] // state["k_ids"].shape[0]
            state["k_ids"] = state["k_ids"].repeat_interleave(n, 0)
            state["k_tok"] = state["k_tok"].repeat_interleave(n, 0)
        state["k_ids"] = torch.cat([state["k_ids"], pos], 1)
        state["k_tok"] = torch.cat([state["k_tok"], idx], 1)
    state["q_ids"] = pos
    return original_hidden(self, idx, cache, pos, check_pos)


def keep_mask(start: int, T: int):
    q, k = state["q_ids"], state["k_ids"][:, :start + T]  # (B, T), (B, Tk)
    keep = (q[:, :, None] - k[:, None, :]).abs() <= W
    if SEPARATORS:
        keep |= (state["k_tok"][:, :start + T] >= 10)[:, None, :]
    causal = torch.ones(T, start + T, dtype=torch.bool, device=q.device).tril(diagonal=start)
    return (keep & causal)[:, None]  # (B, 1, T, Tk)


def forward(self, x, cache=None, layer: int = 0, mask=None):  # (mask: the setting's, None here)
    B, T, C = x.shape
    q, k, v = self.c_attn(x).split(C, dim=2)
    q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
    start = cache.pos if cache is not None else 0
    if L:
        t = torch.arange(start, start + T, dtype=q.dtype, device=q.device)
        q = q * torch.clamp(torch.log(t + 1) / math.log(L), min=1.0).view(1, 1, T, 1)
    if cache is not None:
        cache.k[layer, :, :, start:start + T] = k
        cache.v[layer, :, :, start:start + T] = v
        k, v = cache.k[layer, :, :, :start + T], cache.v[layer, :, :, :start + T]
    if W:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep_mask(start, T))
    else:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=(start == 0 and T > 1))
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return self.resid_dropout(self.c_proj(y))


gpt.GPT._hidden = hidden
gpt.CausalSelfAttention.forward = forward
sys.exit(evaluate.main(sys.argv[1:]))
