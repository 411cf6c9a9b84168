"""The policy network: a small GPT (nanoGPT layout) with a KV cache for fast batched sampling.

This file owns only the network. It knows nothing about arithmetic or RL: tokens in, logits out,
and `generate`, which samples continuations of equal-length prompts.

    model = GPT(GPTConfig(vocab_size=14, n_position=64))
    logits = model(idx)                                       # (B, T) -> (B, T, V)
    logits = model(idx, pos=pos)                              # position ids pos (B, T) chosen by the task
    new = model.generate(idx, 5, temperature=1.0, end_token=12, pad_token=13)   # (B, 5)
    optimizer = model.configure_optimizer(lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99))

(12 and 13 are the end token "$" and the pad "." of the adder's vocabulary, see rl/math_env.py.)

Layout as in GPT-2 / nanoGPT: pre-LayerNorm blocks, causal self-attention through
`F.scaled_dot_product_attention`, a 4x GELU MLP, learned absolute position embeddings and
(optionally) the token embedding tied to the output head.

Position ids: by default token t reads the embedding of position t (GPT-2). A caller may pass its
own ids `pos` (B, T), any integers in [0, n_position), repeated or out of order: the task chooses
them (coupled ids for length generalisation, rl/long_env.py). `generate` then takes the ids of the
prompt and of every answer position in advance, (B, P + max_new_tokens), so that each decoded token
reads its own id from the KV cache's step.

Log-n attention (GPTConfig.logn_attention = L, off by default): the query at sequence index t is scaled by
max(1, ln(t + 1) / ln(L)) (`logn_scale`), so that a long sequence's attention is as sharp as one of L tokens;
a cached decode scales each new query by its own index. Evaluating a model trained without it with it
(python -m rl.evaluate --logn_attention) carried the adder's sums far past their trained widths (docs/results.md).

A window of position ids (GPTConfig.attention_window = W, off by default): a token attends only to the tokens
before it whose ids are within W of its own, and to the global tokens the caller names, if any (`window_mask`; a
cached decode keeps every token's id, KVCache.ids, .glob; Longformer's sliding window with global attention). With
coupled ids that is the digits of the columns around its own, however long the numbers, so a query's softmax
spreads over as many keys at 100 digits as at 10 (docs/results.md, "A window of columns").

A grouped pass (`PromptGroups`): rows that begin with the same prompt, as the G answers to one problem do, read it
once. forward(idx, groups=...) runs each distinct prompt through the blocks once and each row's continuation after
it, the continuation's attention reading its prompt's keys and values (`CausalSelfAttention.grouped`): a full pass's
logits from the prompt's last token on, to float rounding, with the linear layers seeing U * P + N * T tokens
instead of N * (P + T). The update's prefix_sharing setting (rl/update.py) forwards its micro-batches so, and
ppo_critic's critic (`hidden(groups=...)`: the same pass without the token head). Its decode does the same for
sampling: generate(share_prompts=True) keeps one copy of each prompt's keys and values for its G rows
(`KVCache.share_prompts`, `shared_prompt_attention`), where the plain decode copies them G times.

Initial weights as GPT-2's (std 0.02, the residual projections scaled down with depth), the query and key
projections times GPTConfig.qk_init_scale (1 by default). A logit is q . k, a product of two small matrices: each
grows only as fast as the other is large, so at GPT-2's scale attention starts near uniform and the adder's warm
start sat on a plateau for its first 125-150 steps; at 4 it left it after 68-80 (docs/results.md).

How it runs (not what it computes) is set per model by `configure_runtime`, so that every caller
(sampler, learner, evaluation, warm start, reference, critic) computes the same way:
  autocast_dtype  None: fp32; torch.bfloat16: every forward under bf16 autocast (matmuls in bf16,
                  LayerNorm and softmax in fp32), the KV cache in bf16. Log-probs are taken in fp32
                  from the logits by the callers, so the sampler's and the learner's agree.
  cuda_graphs     on CUDA, `generate` captures its whole decode (prefill and every token: the answer
                  length is known, so shapes are static and nothing syncs) once per batch shape as a
                  CUDA graph and replays it: one launch instead of ~70 kernels a token. Same tokens as
                  the eager loop from the same generator state. Ignored on the CPU.

ModelSettings: the model's settings as a run sets them (its shape, `model_args()`, and how it runs), each
with its reason, and their checks (ValueError, one line).
"""

import contextlib
import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


def check_attention_window(window: int):
    """ValueError (one line) unless window is 0 (off) or a number of position ids, 1 or more."""
    if window < 0:
        raise ValueError(f"attention_window must be 0 (off) or a number of position ids of 1 or more, got {window}")


def window_global_tokens(vocab_size: int) -> list:
    """The tokens a window of ids never hides with attention_globals: every task's vocabulary has the digits 0-9 at
    ids 0-9 (rl/math_env.py), and the others ("+", "=", the end, shown work's separators) say which part of the
    problem a digit is in: a digit of b has the same id as the same column's digit of a, and a model trained without
    a window tells them apart by the "+" before b. Read through a window without them, such models broke past 5
    digits (docs/results.md)."""
    return list(range(10, vocab_size))


def check_logn_attention(base: int):
    """ValueError (one line) unless base is 0 (off) or a length of 2 or more (ln 1 = 0 cannot divide)."""
    if base == 1 or base < 0:
        raise ValueError(f"logn_attention must be 0 (off) or a sequence length of 2 or more, got {base}")


@dataclass
class GPTConfig:
    vocab_size: int
    n_position: int = 64
    n_layer: int = 4
    n_head: int = 8
    n_embed: int = 256
    dropout: float = 0.0
    bias: bool = False
    tie_weights: bool = True
    logn_attention: int = 0
    attention_window: int = 0
    global_tokens: tuple = ()  # token ids every query reads whatever attention_window hides (Longformer's global)
    qk_init_scale: float = 1.0  # the query and key projections' initial weights in multiples of GPT-2's

    def __post_init__(self):
        check_logn_attention(self.logn_attention)
        if not self.qk_init_scale > 0:
            raise ValueError(f"qk_init_scale must be positive, got {self.qk_init_scale}")
        check_attention_window(self.attention_window)
        if any(not 0 <= t < self.vocab_size for t in self.global_tokens):
            raise ValueError(f"global_tokens {list(self.global_tokens)} outside the vocabulary "
                             f"0..{self.vocab_size - 1}")
        if self.n_embed % self.n_head != 0:
            heads = [h for h in range(1, 33) if self.n_embed % h == 0]
            raise ValueError(f"n_embed={self.n_embed} is not divisible by n_head={self.n_head}; "
                             f"pick n_head among {heads}")


@dataclass
class ModelSettings:
    """The policy's shape (what GPTConfig takes, saved with every snapshot) and how it runs."""
    n_layer: int = 4
    """transformer blocks (> 0)"""
    n_head: int = 8
    """attention heads per block; must divide n_embed (> 0)"""
    n_embed: int = 256
    """width of the residual stream (> 0)"""
    n_position: int = 64
    """position embeddings: the longest sequence the model can read (prompt + answer must fit) (> 0)"""
    dropout: float = 0.0
    """dropout probability of the warm start; RL samples and updates in eval mode, so it never applies there
    (in [0, 1])"""
    bias: bool = False
    """biases in Linear and LayerNorm layers (nanoGPT found none to be slightly better and faster)"""
    tie_weights: bool = True
    """share the token embedding with the output head"""
    vocab_size: int = 0
    """derived from the task (digits, operator, '=', end, pad); do not set"""
    max_seq_len: int = 0
    """derived from the task: prompt plus answer plus end token; do not set"""
    precision: str = "auto"
    """'auto' (bf16 autocast and TF32 on CUDA, fp32 on the CPU), 'fp32' or 'bf16': every forward of sampling,
    update and evaluation alike, so PPO's ratios compare like with like (a CPU without bf16 instructions emulates
    bf16: a run there says so at its start)"""
    cuda_graphs: bool = True
    """on CUDA, decode (sampling and evaluation) by replaying a CUDA graph captured once per batch shape:
    one launch instead of ~70 a token; the CPU ignores it"""
    logn_attention: int = 0
    """0: off; L: each query at sequence index t scaled by max(1, ln(t + 1) / ln(L)), so attention stays as sharp past
    L tokens as at L (log-n scaling; `logn_scale`); python -m rl.evaluate --logn_attention applies it to any file
    (>= 0; not 1)"""
    attention_window: int = 0
    """0: off; W: a token attends only to the tokens before it whose position ids are within W of its own (with
    coupled ids, the columns around its own), so the keys a query reads stop growing with the sequence
    (`window_mask`); python -m rl.evaluate --attention_window applies it to any file (>= 0)"""
    qk_init_scale: float = 1.0
    """the query and key projections start at this multiple of GPT-2's initial weights (std 0.02), so attention
    starts away from uniform: at 4 the adder's warm start at its GPU settings reached validation 0.9 in 199 / 169 /
    257 steps against 370 / 261 / 274 at 1 (seeds 0 / 1 / 1337; docs/results.md "The warm start's plateau") (> 0)"""
    attention_globals: bool = False
    """with attention_window, the non-digit tokens ("+", "=") stay visible to every query (Longformer's global
    tokens): a model trained without a window needs them to be read through one; trained with it, none did"""
    matmul_attention: bool = False
    """attention in plain matmuls instead of F.scaled_dot_product_attention: for answers of a dozen tokens flash
    attention's tiles are mostly padding (a kernel profile on an H200 put it at 85% of sampling's GPU time)"""
    sft_cuda_graphs: bool = False
    """on one CUDA device, replay each warm-start step (forward, backward, clipping, AdamW) as one captured CUDA graph
    (no dropout, one width): eager steps are launch-bound, 17-25 ms on an H200 with their checks; not yet measured"""
    compile: bool = False
    """torch.compile every full pass (the update's, the warm start's, log-probs'), prefix_sharing's grouped pass and
    generate's cached passes (inside its CUDA graph), fusing the casts and elementwise kernels that bound a small
    model's update and decode on a GPU, after compiling once (20-50 s for a test model on a 2-core CPU; the decode's
    not yet measured on a GPU)"""

    def model_args(self) -> dict:
        """GPTConfig's arguments: what a snapshot stores of the model."""
        keys = ("vocab_size", "n_position", "n_layer", "n_head", "n_embed", "dropout", "bias", "tie_weights")
        # (logn_attention, attention_window and qk_init_scale only when set: the files made before them keep their
        # model_args, and the caches of warm starts made before them stay valid)
        return {**{k: getattr(self, k) for k in keys},
                **{k: getattr(self, k) for k in ("logn_attention", "attention_window") if getattr(self, k)},
                **({"qk_init_scale": self.qk_init_scale} if self.qk_init_scale != 1.0 else {}),
                **({"global_tokens": window_global_tokens(self.vocab_size)}
                   if self.attention_window and self.attention_globals else {})}

    def check_model(self, vocab_size: int):
        """ValueError (one line) for a shape GPTConfig refuses with the task's vocabulary, or a precision
        no device runs; vocab_size and max_seq_len are the task's to set."""
        if self.vocab_size or self.max_seq_len:
            raise ValueError("vocab_size and max_seq_len are derived from the task; do not set them")
        if self.attention_globals and not self.attention_window:
            raise ValueError("attention_globals keeps tokens visible through a window; set attention_window too")
        GPTConfig(**{**self.model_args(), "vocab_size": vocab_size})
        autocast_dtype_for(self.precision, "cpu")


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW, the same code and arithmetic, without torch._dynamo. torch wraps an optimizer's step,
    zero_grad, add_param_group, state_dict and load_state_dict so that torch.compile will not trace into them; each
    wrapper imports torch._dynamo on its first call (about 1 s: docs/results.md) and does nothing else unless
    torch.compile traces its caller. Nothing here compiles an optimizer (`compile` covers the model's passes), so
    these are the methods without the wrappers, and step runs without autograd as its wrapper runs it."""

    add_param_group = inspect.unwrap(torch.optim.Optimizer.add_param_group)
    zero_grad = inspect.unwrap(torch.optim.Optimizer.zero_grad)
    state_dict = inspect.unwrap(torch.optim.Optimizer.state_dict)
    load_state_dict = inspect.unwrap(torch.optim.Optimizer.load_state_dict)
    _step = inspect.unwrap(torch.optim.AdamW.step)

    @torch.no_grad()
    def step(self, closure=None):
        return self._step(closure)


def configure_optimizer(module: nn.Module, *, lr: float, weight_decay: float, betas: tuple) -> AdamW:
    """AdamW with weight decay on matrices and embeddings only (nanoGPT's split): biases and
    LayerNorm gains are not decayed. The one optimizer of the warm start, of RL and of a critic."""
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    # The fused kernel updates every tensor in one pass (CPU and CUDA); the per-tensor Python
    # loop it replaces costs more than the arithmetic for a model this small.
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return AdamW(groups, lr=lr, betas=betas, fused=fused)


PRECISIONS = ("auto", "fp32", "bf16")


def autocast_dtype_for(precision: str, device_type: str):
    """The config's precision -> GPT.configure_runtime's autocast_dtype (None: fp32). 'auto' is bf16 autocast
    on CUDA (and TF32 for what stays fp32) and fp32 on the CPU, whose bf16 matmuls are slower than fp32's.
    ValueError (one line) for an unknown name."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    bf16 = precision == "bf16" or (precision == "auto" and device_type == "cuda")
    if device_type == "cuda":
        # fp32 matmuls (a critic's head, anything outside autocast) on TF32 tensor cores under 'auto';
        # 'fp32' means fp32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "auto"
        # cuDNN's attention (torch's first choice for bf16 on an H100) builds a plan for every new shape: the
        # update's batch changes size every step (rows without signal are not forwarded), and on one H100 the
        # bf16 step then took 0.32 s against fp32's 0.055 s, and failed at 65,536 rows. Flash attention has none.
        torch.backends.cuda.enable_cudnn_sdp(False)
    return torch.bfloat16 if bf16 else None


class KVCache:
    """Preallocated keys and values of every layer, so decoding appends without reallocating.

    k, v: (n_layer, B, n_head, T_max, head_dim). `pos` is how many positions are filled; all rows
    share it because every prompt in a batch has the same length (the task format guarantees it).
    """

    def __init__(self, config: GPTConfig, batch_size: int, max_len: int, device, dtype):
        self.group = self.prompt_len = 0  # share_prompts's n and P once it has run: rows read their prompt's copy
        shape = (config.n_layer, batch_size, config.n_head, max_len, config.n_embed // config.n_head)
        self.k = torch.empty(shape, device=device, dtype=dtype)
        self.v = torch.empty(shape, device=device, dtype=dtype)
        # the position id of every cached token, for attention_window's mask (B, T_max)
        window = config.attention_window
        self.ids = torch.zeros(batch_size, max_len, dtype=torch.long, device=device) if window else None
        self.glob = torch.zeros(batch_size, max_len, dtype=torch.bool, device=device) if window else None
        self.pos = 0

    def repeat_interleave(self, n: int):
        """Copy each row n times (rows i*n ... i*n+n-1 continue row i): one prompt, n samples."""
        if n > 1:
            self.k, self.v = (repeat_rows(t, n, dim=1) for t in (self.k, self.v))
            if self.ids is not None:
                self.ids, self.glob = repeat_rows(self.ids, n), repeat_rows(self.glob, n)

    def share_prompts(self, n: int, max_new_tokens: int):
        """n rows continue each of the B prompts filled so far (rows i*n ... i*n+n-1 continue row i), as
        repeat_interleave's, but the prompts' keys and values stay one copy each: every row's own tokens go to
        own_k, own_v (n_layer, B * n, n_head, max_new_tokens, head_dim), and attention reads its prompt's and its
        own (`shared_prompt_attention`). Not with a window (its mask reads every row's ids)."""
        assert self.ids is None, "a window's mask reads every row's cached ids"
        L, B, H, _, hd = self.k.shape
        self.group, self.prompt_len = n, self.pos
        self.own_k, self.own_v = (torch.empty(L, B * n, H, max_new_tokens, hd, device=t.device, dtype=t.dtype)
                                  for t in (self.k, self.v))


@dataclass
class PromptGroups:
    """Rows of a batch that begin with the same `length` tokens (at the same position ids), as the G answers to one
    prompt do: first (U,) the index of one row of each distinct prompt, inverse (N,) each row's prompt as an index
    into first. GPT.forward(idx, groups=...) then reads each prompt once (a grouped pass). The caller vouches that
    the rows so grouped do share their prompt: nothing here reads the tokens to check (a host sync on CUDA)."""
    length: int
    first: torch.Tensor
    inverse: torch.Tensor

    @classmethod
    def of_rows(cls, rows: torch.Tensor, group_size: int, length: int, device=None) -> "PromptGroups":
        """The groups of the rows `rows` (n,), indices on the host into a batch whose rows i*G ... i*G+G-1 share a
        prompt (G = group_size: the G answers sampled to one prompt): made from the indices alone, so nothing is
        read from a device. first is the first of each prompt's rows among them, as an index into rows."""
        prompts, inverse = torch.unique(rows // group_size, return_inverse=True)
        first = torch.full((len(prompts),), len(rows)).scatter_reduce(0, inverse, torch.arange(len(rows)), "amin")
        return cls(length, first.to(device, non_blocking=True), inverse.to(device, non_blocking=True))


@dataclass
class GroupedLayout:
    """How a grouped pass lays its tokens out, for attention: U prompts of P tokens, then N continuations of T;
    inverse (N,) each continuation's prompt; prompt_mask (U, 1, P, P) and rest_mask (N, 1, T, P + T): the keys a
    query reads (prompt_mask None: plain causal)."""
    U: int
    P: int
    N: int
    T: int
    inverse: torch.Tensor
    prompt_mask: torch.Tensor
    rest_mask: torch.Tensor


MAX_ATTENTION_BATCH = 32768  # rows of one CUDA attention call (flash attention's grid holds the batch in one dimension)


def attention(q, k, v, *, is_causal: bool, dropout_p: float = 0.0, matmul: bool = False, mask=None):
    """Attention over (B, n_head, T, head_dim): F.scaled_dot_product_attention (in pieces of MAX_ATTENTION_BATCH
    rows on CUDA: at 65,536 rows a bf16 call failed with "CUDA error: invalid argument" on an H200), or with
    `matmul` (and no dropout) `matmul_attention`. mask (B, 1, T, Tk) bool: the keys each query may read (then
    is_causal is False: the mask is causal itself)."""
    if matmul and dropout_p == 0.0:
        return matmul_attention(q, k, v, is_causal=is_causal, mask=mask)
    sdpa = lambda q, k, v, m=None: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=is_causal,
                                                                    dropout_p=dropout_p)
    tensors = (q, k, v) if mask is None else (q, k, v, mask)
    if not q.is_cuda or len(q) <= MAX_ATTENTION_BATCH:
        return sdpa(*tensors)
    return torch.cat([sdpa(*parts) for parts in zip(*(t.split(MAX_ATTENTION_BATCH) for t in tensors))])


def matmul_attention(q, k, v, *, is_causal: bool, mask=None):
    """softmax(q k^T / sqrt(head_dim), causal mask aligned top-left as SDPA's) v in plain matmuls. The answers here
    are a dozen tokens: flash attention tiles T in blocks of 64-128 and launches one block per (row, head), and a
    kernel profile at 4,096 x 8 answers (H200, bf16) put it at 85% of sampling's GPU time and 65% of the update's.
    GPT.configure_runtime(matmul_attention=True) turns it on (the setting of the same name)."""
    att = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5  # (B, n_head, Tq, Tk)
    if is_causal:
        keep = torch.ones(att.shape[-2:], dtype=torch.bool, device=q.device).tril()
        att = att.masked_fill(~keep, float("-inf"))
    if mask is not None:
        att = att.masked_fill(~mask, float("-inf"))
    return att.softmax(dim=-1).to(v.dtype) @ v


def shared_prompt_attention(q, prompt_k, prompt_v, own_k, own_v):
    """One decoded token's attention (the softmax of matmul_attention) over its prompt's keys, one copy for the G
    rows that continue it, and its own row's: q (N, H, 1, hd), prompt_k/_v (B, H, P, hd), own_k/_v (N, H, t, hd),
    N = B * G -> (N, H, 1, hd). The G rows' queries meet their prompt's keys in one (G, hd) x (hd, P) product,
    where a copied cache makes G products of one row each (and a cache G times the prompts' size)."""
    (N, H, _, hd), (B, _, P, _) = q.shape, prompt_k.shape
    G, scale = N // B, hd ** -0.5
    q_groups = q.view(B, G, H, hd).transpose(1, 2)  # (B, H, G, hd)
    prompt_att = (q_groups @ prompt_k.transpose(-2, -1)) * scale  # (B, H, G, P)
    own_att = (q @ own_k.transpose(-2, -1)) * scale  # (N, H, 1, t)
    att = torch.cat([prompt_att.transpose(1, 2).reshape(N, H, 1, P), own_att], dim=-1).softmax(dim=-1)
    att = att.to(prompt_v.dtype)
    prompt_y = att[..., :P].reshape(B, G, H, P).transpose(1, 2) @ prompt_v  # (B, H, G, hd)
    return prompt_y.transpose(1, 2).reshape(N, H, 1, hd) + att[..., P:] @ own_v


def logn_scale(start: int, T: int, base: int, like: torch.Tensor) -> torch.Tensor:
    """(1, 1, T, 1): max(1, ln(t + 1) / ln(base)) for the sequence indices t = start .. start + T - 1, in like's
    dtype and device. A query at index t attends over t + 1 keys, and softmax's weights spread as that number grows:
    scaling the query's logits by ln(n) keeps the largest weight where it is (Nakanishi 2025, "Scalable-Softmax";
    Qwen's log-n attention), up to `base` tokens unchanged."""
    t = torch.arange(start + 1, start + T + 1, dtype=torch.float32, device=like.device)
    return (t.log() / math.log(base)).clamp(min=1.0).to(like.dtype).view(1, 1, T, 1)


def window_mask(ids: torch.Tensor, glob: torch.Tensor, cache, window: int) -> torch.Tensor:
    """(B, 1, T, start + T) bool: query i may read key j iff j is not after i and either their position ids differ
    by at most `window` or j is a global token. ids, glob (B, T): the position ids of the T tokens read now, after
    the cache's `start` (whose ids it keeps, `KVCache.ids`, `.glob`), and which of them are global tokens. With
    coupled ids a column's digits share an id, so a query reads the digits of the columns around its own (and the
    global tokens, "+" and "=" with attention_globals) and no more, however long the numbers: the keys it reads, and so
    how much its softmax spreads, stop growing with the sequence (docs/results.md, "A window of columns")."""
    start, T = (cache.pos if cache is not None else 0), ids.shape[1]
    keys, key_glob = ids, glob
    if cache is not None:
        cache.ids[:, start:start + T], cache.glob[:, start:start + T] = ids, glob
        keys, key_glob = cache.ids[:, :start + T], cache.glob[:, :start + T]
    return key_window(ids, keys, key_glob, window)


def key_window(ids: torch.Tensor, keys: torch.Tensor, key_glob: torch.Tensor, window: int) -> torch.Tensor:
    """window_mask's rule for queries with ids (B, T) that come last among the keys with ids `keys` (B, S), S >= T,
    key_glob (B, S) marking the global ones: (B, 1, T, S) bool."""
    T, S = ids.shape[1], keys.shape[1]
    near = (ids[:, :, None] - keys[:, None, :]).abs() <= window  # (B, T, S)
    near |= key_glob[:, None, :]
    causal = torch.ones(T, S, dtype=torch.bool, device=ids.device).tril(diagonal=S - T)
    return (near & causal)[:, None]


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.logn_attention = config.logn_attention
        self.c_attn = nn.Linear(config.n_embed, 3 * config.n_embed, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embed, config.n_embed, bias=config.bias)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)
        self.matmul_attention = False  # set by GPT.configure_runtime

    def forward(self, x, cache: KVCache = None, layer: int = 0, mask=None):
        """mask: `window_mask`'s, or None for plain causal attention; a `GroupedLayout` in its place: x is a grouped
        pass's (M, C) tokens (`grouped`)."""
        if isinstance(mask, GroupedLayout):
            return self.grouped(x, mask)
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        dropout_p = self.dropout if self.training else 0.0
        if self.logn_attention:
            q = q * logn_scale(cache.pos if cache is not None else 0, T, self.logn_attention, q)
        if cache is None:
            y = attention(q, k, v, is_causal=mask is None, dropout_p=dropout_p, matmul=self.matmul_attention,
                          mask=mask)
        elif cache.group:  # a decoded token of rows that share their prompt's cache (KVCache.share_prompts)
            assert T == 1, "a shared cache takes one token at a time"
            P = cache.prompt_len
            t = cache.pos - P  # this token's index among the row's own
            cache.own_k[layer, :, :, t:t + 1], cache.own_v[layer, :, :, t:t + 1] = k, v
            y = shared_prompt_attention(q, cache.k[layer, :, :, :P], cache.v[layer, :, :, :P],
                                        cache.own_k[layer, :, :, :t + 1], cache.own_v[layer, :, :, :t + 1])
        else:
            start, end = cache.pos, cache.pos + T
            cache.k[layer, :, :, start:end] = k
            cache.v[layer, :, :, start:end] = v
            k, v = cache.k[layer, :, :, :end], cache.v[layer, :, :, :end]
            # A prefill from an empty cache is an ordinary causal pass; a later single token may
            # attend to everything already cached, so it needs no mask at all (but a window's, when set).
            assert start == 0 or T == 1, "the cache takes a prompt, then one token at a time"
            # (a branch, not a bool passed on: under torch.compile start and T are symbolic, and SDPA takes a bool)
            causal = True if mask is None and start == 0 and T > 1 else False
            y = attention(q, k, v, is_causal=causal, matmul=self.matmul_attention, mask=mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))

    def grouped(self, x, g: "GroupedLayout"):
        """Attention of a grouped pass (GPT.forward with `groups`): x (U * P + N * T, C) holds the U prompts' tokens,
        then the N rows' continuations. A prompt attends to itself (causal); a continuation token reads its row's
        prompt's keys and values, computed once for all the rows that share it and gathered, then its own row's up
        to itself: what the same row's token reads in a full pass."""
        C, H, n = x.shape[1], self.n_head, g.U * g.P
        q, k, v = self.c_attn(x).split(C, dim=1)
        heads = lambda t, B, T: t.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, head_dim)
        qp, kp, vp = (heads(t[:n], g.U, g.P) for t in (q, k, v))
        qr, kr, vr = (heads(t[n:], g.N, g.T) for t in (q, k, v))
        if self.logn_attention:  # each query at its sequence index, as in a full pass
            qp = qp * logn_scale(0, g.P, self.logn_attention, qp)
            qr = qr * logn_scale(g.P, g.T, self.logn_attention, qr)
        yp = attention(qp, kp, vp, is_causal=g.prompt_mask is None, matmul=self.matmul_attention, mask=g.prompt_mask)
        # (N, H, P + T, head_dim) by index_select, whose backward is a scatter-add (t[inverse]'s index_put: 2-3x slower)
        kr, vr = (torch.cat([t.index_select(0, g.inverse), r], dim=2) for t, r in ((kp, kr), (vp, vr)))
        yr = attention(qr, kr, vr, is_causal=False, matmul=self.matmul_attention, mask=g.rest_mask)
        y = torch.cat([yp.transpose(1, 2).reshape(n, C), yr.transpose(1, 2).reshape(g.N * g.T, C)])
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embed, 4 * config.n_embed, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embed, config.n_embed, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embed, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embed, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, cache=None, layer=0, mask=None):
        x = x + self.attn(self.ln_1(x), cache, layer, mask)
        return x + self.mlp(self.ln_2(x))


def compiled(fn):
    """fn through torch.compile with dynamic shapes, traced without duck sizing. Duck sizing gives input sizes that
    happen to be equal one symbol: a first call of 32 prompts, the head size of n_embed=256 over n_head=8, made
    the cache's batch and head sizes one, and the static head size of the weights then fixed the batch at 32, so
    every other batch compiled anew (as did a batch equal to the prompt length), until torch.compile's limit of 8
    graphs a function sent the rest back to eager. Without it a graph guards only on what its ops ask of sizes."""
    traced = torch.compile(fn, dynamic=True)

    def call(*args):
        with torch.fx.experimental._config.patch(use_duck_shape=False):  # (read when a call traces)
            return traced(*args)
    return call


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embed)
        self.wpe = nn.Embedding(config.n_position, config.n_embed)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embed, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embed, config.vocab_size, bias=False)
        # which tokens are global (attention_window): a table lookup, graph-safe; not in the state dict
        is_global = torch.zeros(config.vocab_size, dtype=torch.bool)
        is_global[list(config.global_tokens)] = True
        self.register_buffer("is_global", is_global, persistent=False)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        # GPT-2: scale the residual projections by 1/sqrt(2 * n_layer) so the residual stream's
        # variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        # Scaled, not drawn again: every other weight is the one of scale 1 (no random number more is taken).
        with torch.no_grad():
            for block in self.blocks:
                block.attn.c_attn.weight[:2 * config.n_embed] *= config.qk_init_scale  # rows: q, then k (then v)
        self.configure_runtime()

    def configure_runtime(self, *, autocast_dtype=None, cuda_graphs: bool = False, matmul_attention: bool = False,
                          compile: bool = False):
        """How this model runs (module docstring): autocast_dtype None (fp32) or torch.bfloat16;
        cuda_graphs: replay generate's decode as CUDA graphs on CUDA; matmul_attention: attention in plain
        matmuls (`matmul_attention`) instead of F.scaled_dot_product_attention; compile: every full pass (no
        cache) and grouped pass through torch.compile, one graph each for any batch size (and number of prompts),
        and every cached pass (generate's prefill and its decoded tokens, captured inside its CUDA graph on CUDA)
        through a third: one graph for a prefill and one for a decoded token at any position (and with a shared
        cache one more, for its first own token, which torch.compile specializes as a read of one key). Forgets any
        captured or compiled graph."""
        self.autocast_dtype, self.cuda_graphs, self.matmul_attention = autocast_dtype, cuda_graphs, matmul_attention
        for block in self.blocks:
            block.attn.matmul_attention = matmul_attention
        self._graphs = {}  # generate's captured decodes, by everything that shapes them
        self.graph_captures = 0  # decodes captured so far (a capture costs an eager run and the capture itself)
        self._compiled = compiled(self._full_pass) if compile else None
        self._compiled_grouped = compiled(self._grouped_layers) if compile else None
        # (a function of its own: torch.compile keeps its graphs, and its limit of them, per function)
        self._compiled_cached = compiled(self._cached_pass) if compile else None

    def __getstate__(self):  # a copy (the frozen reference) or a pickle carries no captured or compiled graph
        return {**self.__dict__, "_graphs": {}, "_compiled": None, "_compiled_grouped": None, "_compiled_cached": None}

    def autocast(self):
        """The context every forward runs in: bf16 autocast when configured, else nothing. The autocast
        cache stays off: a cast cached across a graph capture would freeze the weights the graph reads."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.wte.weight.device.type, dtype=self.autocast_dtype, cache_enabled=False)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def configure_optimizer(self, *, lr: float, weight_decay: float, betas: tuple) -> AdamW:
        return configure_optimizer(self, lr=lr, weight_decay=weight_decay, betas=betas)

    def forward(self, idx, cache: KVCache = None, pos=None, *, check_pos: bool = True, groups: PromptGroups = None):
        """idx (B, T) token ids -> logits (B, T, V). With a cache, idx continues what it holds.
        pos (B, T): the position id of each token; None: cache.pos + 0, 1, ..., T - 1.
        groups (`PromptGroups`, no cache): rows that share their first P = groups.length tokens; each prompt is
        read once for all its rows (a grouped pass: `_grouped_pass`), and only the logits from the prompt's last
        token on come back, (B, T - P + 1, V): those of a full pass's [:, P - 1:], to float rounding."""
        if groups is not None:
            return self._grouped_pass(idx, pos, groups, check_pos, head=True)
        compiled = self._compiled if cache is None else self._compiled_cached
        if compiled is not None:
            if pos is not None:  # read on the host, so checked here rather than in the compiled pass
                check_positions(idx, pos, self.config.n_position, values=check_pos and (cache is None or not cache.pos))
            if cache is None:
                return compiled(idx, pos)
            # (the prefill takes a copy of the prompts, made here under generate's inference mode: torch.compile
            # guards a view's base and a tensor's dispatch keys, which differ for a tensor made outside inference
            # mode; a copy is one kind of input whatever the caller passed, so one prefill graph serves them all)
            return compiled(idx.clone() if not cache.pos else idx, pos, cache)
        return self._full_pass(idx, pos, cache, check_pos)

    def _full_pass(self, idx, pos=None, cache: KVCache = None, check_pos: bool = False):
        with self.autocast():  # (one context for the trunk and the head: hidden's would be a second)
            return self.lm_head(self._hidden(idx, cache, pos, check_pos))

    def _cached_pass(self, idx, pos, cache: KVCache):
        """A pass that reads and fills `cache` (checked): what `compile` compiles for generate. The cache's arrays are
        the graph's inputs, written in place; its position, an int, is symbolic (one graph for every position), and
        torch.compile replays its increment after the graph."""
        return self._full_pass(idx, pos, cache, False)

    def _grouped_pass(self, idx, pos, groups: PromptGroups, check_pos: bool, head: bool):
        """forward with groups: the U distinct prompts and the N rows' continuations go through every block as one
        batch of U * P + N * T tokens (one matmul each, as a full pass of N * (P + T)); attention alone splits them
        (CausalSelfAttention.grouped). The linear layers, a small model's cost, then see U * P + N * T tokens
        instead of N * (P + T): about half as many for the adder's groups of 8 (8-token prompts, 4 read of its
        5-token answers). No dropout: the rows of a group would share the prompt's (RL updates in eval mode).
        head=False: the final LayerNorm's output (N, T - P + 1, C) instead of the logits (hidden's)."""
        if self.training and self.config.dropout > 0:
            raise ValueError("a grouped pass has no dropout: rows sharing a prompt would share its dropout mask; "
                             "call model.eval() first")
        (N, L), P = idx.shape, groups.length
        if not 0 < P < L:
            raise ValueError(f"a grouped pass needs a prompt of 1 to {L - 1} tokens, got {P}")
        if pos is None:
            if L > self.config.n_position:
                raise ValueError(f"sequence of {L} tokens exceeds n_position={self.config.n_position}")
            pos = torch.arange(L, device=idx.device).expand(N, L)
        else:
            check_positions(idx, pos, self.config.n_position, values=check_pos)
        if self._compiled_grouped is not None:
            return self._compiled_grouped(idx, pos, groups.first, groups.inverse, P, head)
        return self._grouped_layers(idx, pos, groups.first, groups.inverse, P, head)

    def _grouped_layers(self, idx, pos, first, inverse, P: int, head: bool = True):
        """The grouped pass past its checks: what `compile` compiles (one graph for any N and U)."""
        N, L = idx.shape
        T, U = L - P, len(first)
        prompts, pos_p = idx[first, :P], pos[first, :P]
        window = self.config.attention_window
        prompt_mask = rest_mask = None
        if window:
            glob = self.is_global[idx]
            prompt_mask = window_mask(pos_p, glob[first, :P], None, window)
            keys = lambda t: torch.cat([t[first, :P][inverse], t[:, P:]], dim=1)
            rest_mask = key_window(pos[:, P:], keys(pos), keys(glob), window)
        else:  # continuation token i (at index P + i) reads keys 0 .. P + i
            keep = torch.ones(T, L, dtype=torch.bool, device=idx.device).tril(diagonal=P)
            rest_mask = keep.expand(N, 1, T, L)  # (a row's own: attention splits a large batch along it)
        layout = GroupedLayout(U, P, N, T, inverse, prompt_mask, rest_mask)
        C = self.config.n_embed
        with self.autocast():
            x = torch.cat([(self.wte(prompts) + self.wpe(pos_p)).view(U * P, C),
                           (self.wte(idx[:, P:]) + self.wpe(pos[:, P:])).reshape(N * T, C)])
            x = self.drop(x)
            for block in self.blocks:
                x = block(x, None, 0, layout)
            x = self.ln_f(x)
            last = x[:U * P].view(U, P, C)[:, -1:].index_select(0, inverse)  # (N, 1, C): its prompt's last
            x = torch.cat([last, x[U * P:].view(N, T, C)], dim=1)
            return self.lm_head(x) if head else x

    def hidden(self, idx, cache: KVCache = None, pos=None, *, check_pos: bool = True, groups: PromptGroups = None):
        """idx (B, T) -> the final LayerNorm's output (B, T, C), what the output head reads; with groups (a grouped
        pass, as forward's) (B, T - P + 1, C), from the prompt's last token on.
        check_pos=False: the caller has checked pos (a check reads it on the host: no sync in a graph)."""
        if groups is not None:
            return self._grouped_pass(idx, pos, groups, check_pos, head=False)
        with self.autocast():
            return self._hidden(idx, cache, pos, check_pos)

    def _hidden(self, idx, cache, pos, check_pos):
        B, T = idx.shape
        start = cache.pos if cache is not None else 0
        if pos is None:
            if start + T > self.config.n_position:
                raise ValueError(f"sequence of {start + T} tokens exceeds n_position={self.config.n_position}")
            pos = torch.arange(start, start + T, device=idx.device)
        else:
            # the values checked on a whole pass or a prefill, not on every decoded token (a host sync each);
            # generate checks the ids of the tokens it will decode before its loop
            check_positions(idx, pos, self.config.n_position, values=start == 0 and check_pos)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        window = self.config.attention_window
        mask = window_mask(pos.expand(B, T), self.is_global[idx], cache, window) if window else None
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer, mask)
        if cache is not None:
            cache.pos += T
        return self.ln_f(x)

    @torch.inference_mode()
    def generate(self, idx, max_new_tokens, *, temperature=1.0, top_k=None, greedy=False, end_token=None,
                 pad_token=None, generator=None, num_samples=1, use_cache=True, with_stats=False,
                 with_nonfinite=False, pos=None, share_prompts=False):
        """Sample `max_new_tokens` continuations of the prompts idx (B, P).

        Returns (B * num_samples, max_new_tokens): num_samples continuations of each prompt, those of
        prompt i in rows i*num_samples ... (i+1)*num_samples - 1. The prompts are read once and
        their cache copied, instead of reading every copy of a prompt separately.
        Rows that have emitted `end_token` are finished: their later positions are `pad_token`.
        `greedy` takes the argmax; otherwise tokens are drawn from softmax(logits / temperature),
        restricted to the `top_k` most likely when given. `generator` makes sampling reproducible.
        With `with_stats`, also returns the log-probability of each drawn token and the entropy of
        the distribution it was drawn from, each (B * num_samples, max_new_tokens): free by-products
        of sampling (the log-probs are those of the sampling distribution, temperature included).
        The loop always runs max_new_tokens steps: a correct answer uses all of them anyway, and a
        data-dependent early exit would cost a host/device sync per token on a GPU.
        Non-finite logits (overflowed weights, or finite logits over a small temperature) never make
        this raise (see `draw`); `with_nonfinite` adds a last output (B * num_samples,) bool, True for a
        row that met one at any step, or logits so large (about 3e38 / V) that their sum overflows: its
        tokens mean nothing. The other rows are exactly what they would be without this check.
        `pos` (B, P + max_new_tokens): the position ids of the prompt and of every token to be written
        (known in advance from the task); None: 0, 1, 2, ... as in training.
        `share_prompts` (with num_samples > 1, a cache and no attention window): the num_samples rows of a prompt
        read its cached keys and values as one copy (`KVCache.share_prompts`) instead of copying them num_samples
        times: the same logits to float rounding (the products are grouped otherwise), so a sampled token may
        differ where two tokens' probabilities nearly tie.
        With `configure_runtime(cuda_graphs=True)` on CUDA, the decode is a replayed CUDA graph (module
        docstring): the same tokens, drawn from the same stream, as this loop run eagerly. Outputs are
        then fresh tensors (the graph's own are overwritten by its next replay).
        """
        B, P = idx.shape
        prompt_pos, pos = generation_position_ids(pos, (B, P), max_new_tokens, num_samples, self.config.n_position)
        args = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, greedy=greedy,
                    end_token=end_token, pad_token=pad_token, num_samples=num_samples, use_cache=use_cache,
                    with_stats=with_stats,
                    share_prompts=share_prompts and num_samples > 1 and use_cache and not self.config.attention_window)
        if self.cuda_graphs and idx.is_cuda and use_cache:
            out, logps, entropy, nonfinite = self._graphed_decode(idx, prompt_pos, pos, generator, args)
        else:
            out, logps, entropy, nonfinite = self._decode(idx, prompt_pos, pos, generator, **args)
        outputs = ((out, logps, entropy) if with_stats else (out,)) + ((nonfinite,) if with_nonfinite else ())
        return outputs if len(outputs) > 1 else out

    def _decode(self, idx, prompt_pos, pos, generator, *, max_new_tokens, temperature, top_k, greedy, end_token,
                pad_token, num_samples, use_cache, with_stats, share_prompts=False):
        """generate's loop on checked inputs: (out, logps, entropy, nonfinite), nothing read on the host, so
        that it can be captured as one CUDA graph. logps and entropy: None without with_stats, zeros when greedy."""
        B, P = idx.shape
        N = B * num_samples
        cache_dtype = self.autocast_dtype or self.wte.weight.dtype
        cache_len = P if share_prompts else P + max_new_tokens  # (shared: the rows' own tokens go elsewhere)
        cache = KVCache(self.config, B, cache_len, idx.device, cache_dtype) if use_cache else None
        logits = repeat_rows(self(idx, cache, prompt_pos, check_pos=False)[:, -1, :], num_samples)
        if share_prompts:
            cache.share_prompts(num_samples, max_new_tokens)
        elif use_cache:
            cache.repeat_interleave(num_samples)
        seq = repeat_rows(idx, num_samples)  # only read without a cache
        finished = torch.zeros(N, dtype=torch.bool, device=idx.device)
        out = torch.empty(N, max_new_tokens, dtype=idx.dtype, device=idx.device)
        logps = torch.zeros(N, max_new_tokens, device=idx.device) if with_stats else None
        entropy = torch.zeros_like(logps) if with_stats else None
        sums = torch.empty(max_new_tokens, N, device=idx.device)  # of each row's logits, each step
        for t in range(max_new_tokens):
            if not greedy:
                logits = logits.float() / temperature
            # Finite iff every logit is (bar finite ones so large that their sum overflows, which only broken
            # weights give): one reduction a token, on the device, read after the loop: no host sync per token
            torch.sum(logits, dim=-1, dtype=sums.dtype, out=sums[t])
            if greedy:
                next_token = logits.argmax(dim=-1)  # (which never raises, whatever the logits)
            else:
                next_token, logp = draw(logits, top_k, generator)
                if with_stats:
                    logps[:, t] = logp.gather(1, next_token[:, None]).squeeze(1)
                    entropy[:, t] = -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(dim=-1)
            if end_token is not None:
                if pad_token is not None:
                    next_token = next_token.masked_fill(finished, pad_token)
                finished = finished | (next_token == end_token)
            out[:, t] = next_token
            if t + 1 < max_new_tokens:
                seq = next_token[:, None] if use_cache else torch.cat([seq, next_token[:, None]], dim=1)
                ids = None if pos is None else pos[:, P + t:P + t + 1] if use_cache else pos[:, :P + t + 1]
                logits = self(seq, cache, ids, check_pos=False)[:, -1, :]
        nonfinite = ~sums.isfinite().all(dim=0)  # (N,): every step's sums, checked once
        return out, logps, entropy, nonfinite

    def _graphed_decode(self, idx, prompt_pos, pos, generator, args: dict):
        """_decode as a CUDA graph, captured on the first call of each shape and replayed after. Batches are
        padded to a power of two (rows copied from the first prompt, their answers dropped), so that the
        varying sizes of dynamic sampling's refills share a few graphs. The graph draws from the device's
        default generator, which is graph-safe: it takes `generator`'s state before a replay, and
        `generator` then the state the replay leaves, as if it had drawn (for a batch already a power of
        two, exactly the eager loop's tokens)."""
        B = len(idx)
        size = 1 << (B - 1).bit_length()
        if size != B:
            pad = lambda t: None if t is None else torch.cat([t, t[:1].expand(size - B, *t.shape[1:])])
            idx, prompt_pos, pos = pad(idx), pad(prompt_pos), pad(pos)
        key = (tuple(idx.shape), None if pos is None else tuple(pos.shape), self.autocast_dtype,
               self.wte.weight.data_ptr(), tuple(sorted(args.items())))
        graph = self._graphs.pop(key, None)
        if graph is None:
            if len(self._graphs) >= MAX_GRAPHS:  # the least recently used goes, and its memory with it
                self._graphs.pop(next(iter(self._graphs)))
            graph = DecodeGraph(self, idx, prompt_pos, pos, args)
            self.graph_captures += 1
        self._graphs[key] = graph  # (re)inserted last: dicts keep order, so the first key is the least recent
        rows = B * args["num_samples"]
        return tuple(None if t is None else t[:rows] for t in graph.replay(idx, prompt_pos, pos, generator))


MAX_GRAPHS = 16  # captured decodes kept per model: evaluation's two batch sizes, sampling's rounds, the benchmarks


class DecodeGraph:
    """One captured decode (GPT._decode) for fixed shapes and settings: static inputs copied in, the
    graph replayed, its outputs cloned out. The default CUDA generator carries the random stream."""

    def __init__(self, model: GPT, idx, prompt_pos, pos, args: dict):
        self.model, self.args = model, args
        self.idx = idx.clone()
        self.prompt_pos = None if prompt_pos is None else prompt_pos.clone()
        self.pos = None if pos is None else pos.clone()
        device = idx.device
        default = torch.cuda.default_generators[device.index if device.index is not None
                                                else torch.cuda.current_device()]
        saved = default.get_state()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up on a side stream, as capture asks (lazy inits, autotuning)
            self.run()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = self.run()
        default.set_state(saved)  # warm-up and capture drew nothing anyone sees
        self.default = default

    def run(self):
        return self.model._decode(self.idx, self.prompt_pos, self.pos, None, **self.args)

    def replay(self, idx, prompt_pos, pos, generator):
        self.idx.copy_(idx)
        if pos is not None:
            self.prompt_pos.copy_(prompt_pos)
            self.pos.copy_(pos)
        saved = self.default.get_state()
        if generator is not None:
            self.default.set_state(generator.get_state())
        self.graph.replay()
        if generator is not None:
            generator.set_state(self.default.get_state())
            self.default.set_state(saved)
        return tuple(None if t is None else t.clone() for t in self.outputs)


def repeat_rows(t: torch.Tensor, n: int, dim: int = 0) -> torch.Tensor:
    """t.repeat_interleave(n, dim) (each row n times in a row), as a view expanded and copied: the same
    values, without the output-size computation that syncs with a CUDA device. contiguous(): with one row
    (t.shape[dim] == 1) reshape returns the expanded view itself, n rows sharing memory, which a KV cache
    written in place refuses; with more it has copied already, and contiguous() is free."""
    if n == 1:
        return t
    shape = list(t.shape)
    expanded = t.unsqueeze(dim + 1).expand(*shape[:dim + 1], n, *shape[dim + 1:])
    return expanded.reshape(*shape[:dim], shape[dim] * n, *shape[dim + 1:]).contiguous()


def check_positions(idx: torch.Tensor, pos: torch.Tensor, n_position: int, *, values: bool):
    """ValueError (one line) for position ids not shaped like the tokens idx, or (values: a read on the host)
    outside the embedding table."""
    if pos.shape != idx.shape:
        raise ValueError(f"position ids of shape {tuple(pos.shape)} for tokens of shape {tuple(idx.shape)}")
    if values:
        check_position_ids(pos, n_position)


def check_position_ids(pos: torch.Tensor, n_position: int):
    """ValueError (one line) for a position id outside the embedding table [0, n_position)."""
    low, high = torch.stack([pos.min(), pos.max()]).tolist()  # one read of the device
    if low < 0 or high >= n_position:
        raise ValueError(f"position ids {low}..{high} outside the {n_position} embeddings (n_position={n_position})")


def generation_position_ids(pos, prompt_shape: tuple, max_new_tokens: int, num_samples: int, n_position: int):
    """generate's ids pos (B, P + max_new_tokens), checked -> those of the prompts (B, P) and those of every
    sampled row (B * num_samples, P + max_new_tokens); (None, None) for none."""
    if pos is None:
        return None, None
    P, shape = prompt_shape[1], (prompt_shape[0], prompt_shape[1] + max_new_tokens)
    if pos.shape != shape:
        raise ValueError(f"generate takes the position ids of prompt and answer, {shape}, got {tuple(pos.shape)}")
    check_position_ids(pos, n_position)
    return pos[:, :P], repeat_rows(pos, num_samples)


def draw(logits, top_k=None, generator=None):
    """One token per row of logits (B, V) from their softmax, restricted to the top_k most likely when
    given: (B,) tokens and the (B, V) log-probs they were drawn from. A non-finite logit counts as 0
    (torch.multinomial raises on nan, inf or negative probabilities); generate flags its row."""
    logits = logits.nan_to_num(0.0, 0.0, 0.0)  # the identity on finite logits
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, [-1]]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    logp = F.log_softmax(logits, dim=-1)
    # torch.multinomial's own path for one draw (argmax of p / q, q ~ Exp(1)), without its two validity
    # checks read on the host (two syncs a token on CUDA, and no graph capture): the same tokens from the
    # same generator state. p is valid here: finite, non-negative, and every row sums to 1.
    p = logp.exp()
    q = torch.empty_like(p).exponential_(1, generator=generator)
    return torch.div(p, q).argmax(dim=-1), logp


class Critic(nn.Module):
    """A value function for PPO: V of every prefix, from a GPT trunk and a scalar head on its final
    hidden state. `from_policy` starts the trunk from the policy's weights (as InstructGPT starts its
    critic from a trained model) and the head at zero, so every value starts at 0."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.trunk = GPT(config)
        # The trunk's token head is never used; with untied weights it would be a parameter without a
        # gradient, which DDP's reduction refuses. (Tied, its weight is the embedding's, which stays.)
        del self.trunk.lm_head
        self.value_head = nn.Linear(config.n_embed, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_policy(cls, policy: GPT) -> "Critic":
        critic = cls(policy.config).to(policy.wte.weight.device)
        critic.trunk.configure_runtime(autocast_dtype=policy.autocast_dtype,  # computes as the policy does
                                       matmul_attention=policy.matmul_attention)
        critic.trunk.load_state_dict({k: v for k, v in policy.state_dict().items() if not k.startswith("lm_head.")})
        return critic

    def forward(self, idx, pos=None, groups: PromptGroups = None):
        """idx (B, T) -> values (B, T): V at each position, of the prefix up to and including it.
        pos (B, T): position ids as GPT.forward takes them; groups: a grouped pass (GPT.forward's), the values from the
        prompt's last token on, (B, T - P + 1)."""
        return self.value_head(self.trunk.hidden(idx, pos=pos, groups=groups)).squeeze(-1)
