"""FLOPs of a transformer pass: a full forward, one cached decode step, and n generated tokens with or without a cache.

Two kinds of work, counted separately because they scale differently (Scaling Book ch. 7, "sampling"):
  matmul     every token is multiplied by every weight it touches: 2 FLOPs (a multiply and an add) per weight,
             2 x tokens x P_mm, with P_mm = `matmul_params(model)`;
  attention  every (query, key) pair of every layer costs 4 N H FLOPs (2 N H for Q K^T and 2 N H for P V):
             4 B x pairs x N H x L, as in `roofline.attention_flops`.
Softmax, norms, RoPE, activations and residual adds are left out: they are O(tokens x D) or O(pairs x N), one to two
orders of magnitude below the two terms above for any real shape (chapter 2 measures what XLA adds for them).

Generating n tokens after a prompt of T_0 (Scaling Book ch. 7):
  naive    rerun the whole forward pass over T_0 + j tokens to produce token j + 1: the matmuls grow as n^2 and the
           attention as n^3;
  cached   one forward pass over the prompt (prefill), then n - 1 decode steps that each push one token through the
           weights and attend to the cached keys and values: matmuls linear in n, attention quadratic.

`skip_masked` chooses what "attention FLOPs" means. False (the default) counts every (query, key) pair that a
masked implementation computes and then throws away: a T x T score matrix per forward pass, and every allocated cache
slot per decode step. That is what the book's tiny JAX model runs and what XLA counts. True counts only the pairs
the causal (and sliding-window) mask keeps, what a kernel that skips masked blocks does: about half in prefill.
"""

from dataclasses import dataclass

from ._validate import MAX_CURVE_POINTS, at_most, flag, positive_int
from .models import get_model, param_breakdown
from .roofline import attention_flops, matmul_flops


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one program, split into weight matmuls and attention (Q K^T and P V); both in FLOPs."""

    matmul: float
    attention: float

    @property
    def total(self) -> float:
        return self.matmul + self.attention

    def __add__(self, other: "FlopCount") -> "FlopCount":
        return FlopCount(self.matmul + other.matmul, self.attention + other.attention)



def matmul_params(model) -> int:
    """P_mm = L (D H (2N + 2K) + 3 D F k [+ D E router]) + D V: the weights each token is multiplied by (a hybrid's
    recurrent mixers included: their projections are matmuls too).

    That is `models.active_param_count` without the input embedding table, which is a lookup (a gather, no FLOPs),
    while the output projection D x V is a matmul (it is the same table when embeddings are tied).

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    m = get_model(model)
    blocks = param_breakdown(m, active_only=True)
    return blocks.attention + blocks.state + blocks.feed_forward + blocks.router + m.d_model * m.vocab_size


def attention_pairs(query_len: int, kv_len: int, window=None, skip_masked: bool = False) -> int:
    """(query, key) pairs scored for `query_len` queries that are the LAST query_len of `kv_len` positions.

    skip_masked=False: query_len x kv_len (the masked ones are computed too). True: only pairs the causal mask keeps
    (query i sees keys 0..i), and with a sliding window w at most w keys per query:
    sum over the queries of min(position + 1, w).
    """
    query_len, kv_len = positive_int("query_len", query_len), positive_int("kv_len", kv_len)
    if query_len > kv_len:
        raise ValueError(f"query_len={query_len} exceeds kv_len={kv_len}: the queries are the last positions of the "
                         "context, so kv_len must count them too")
    if not flag("skip_masked", skip_masked):
        return query_len * kv_len
    width = kv_len if window is None else min(positive_int("window", window), kv_len)

    def visible_up_to(p):  # sum over positions 0..p-1 of min(position + 1, width)
        ramp = min(p, width)
        return ramp * (ramp + 1) // 2 + (p - ramp) * width

    return visible_up_to(kv_len) - visible_up_to(kv_len - query_len)


def chunked_attention_pairs(query_len: int, kv_len: int, chunk: int, skip_masked: bool = False) -> int:
    """(query, key) pairs scored under chunked attention (Llama 4): a query at position p sees the keys of its own
    chunk of `chunk` tokens up to itself, (p mod c) + 1 of them; summed over the last query_len of kv_len positions.
    skip_masked=False: query_len x kv_len, every pair a masked implementation computes (as `attention_pairs`)."""
    query_len, kv_len, chunk = (positive_int(n, v) for n, v in (("query_len", query_len), ("kv_len", kv_len),
                                                                ("chunk", chunk)))
    if query_len > kv_len:
        raise ValueError(f"query_len={query_len} exceeds kv_len={kv_len}: the queries are the last positions of the "
                         "context, so kv_len must count them too")
    if not flag("skip_masked", skip_masked):
        return query_len * kv_len

    def visible_up_to(p):  # sum over positions 0..p-1 of (position mod chunk) + 1
        whole, rest = divmod(p, chunk)
        return whole * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2

    return visible_up_to(kv_len) - visible_up_to(kv_len - query_len)


def _attention(m, query_len: int, kv_len: int, batch: int, skip_masked: bool) -> float:
    """Token-mixing FLOPs summed over the layers: 2 B N (H + H_v) per scored pair (4 B N H when H_v = H), global
    layers scoring every causal pair, local layers at most the window's or their chunk's; under DeepSeek's sparse
    attention at most top-k pairs per query plus the indexer's 2 N_I H_I per causal pair; a hybrid's state layers
    their recurrence's FLOPs per token (`mixers.StateMixer.flops_per_token`), whatever the context."""
    n_global, n_attention = m.n_global_layers, m.attention_layers
    per_layer_width = (m.head_dim + m.value_head_dim) / 2  # = H for standard attention
    total = 0.0
    if m.indexer is not None:
        causal = attention_pairs(query_len, kv_len, None, skip_masked=True)
        total += n_attention * batch * causal * m.indexer.flops_per_pair
        pairs = attention_pairs(query_len, kv_len, m.indexer.topk, skip_masked=True)
        return total + n_attention * attention_flops(1, pairs, m.n_heads, per_layer_width, batch)
    if n_global:
        pairs = attention_pairs(query_len, kv_len, None, skip_masked)
        total += n_global * attention_flops(1, pairs, m.n_heads, per_layer_width, batch)
    if n_attention - n_global:
        if m.chunked_attention:
            pairs = chunked_attention_pairs(query_len, kv_len, m.sliding_window, skip_masked)
        else:
            pairs = attention_pairs(query_len, kv_len, m.sliding_window, skip_masked)
        total += (n_attention - n_global) * attention_flops(1, pairs, m.n_heads, per_layer_width, batch)
    if m.state is not None:
        total += batch * query_len * m.n_state_layers * m.state.flops_per_token
    return total


def forward_flops(model, tokens: int, batch: int = 1, skip_masked: bool = False) -> FlopCount:
    """A full causal pass over `tokens` tokens per sequence (prefill, or one step of naive sampling).

    matmul = 2 B T P_mm; attention = 4 B L N H x pairs, pairs = T^2 (or the causally visible T(T+1)/2 when
    skip_masked). Scaling Book ch. 7; 2 FLOPs per parameter per token is Kaplan et al. 2020's rule of thumb.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    m = get_model(model)
    tokens, batch = positive_int("tokens", tokens), positive_int("batch", batch)
    return FlopCount(matmul=matmul_flops(batch * tokens, matmul_params(m), 1),
                     attention=_attention(m, tokens, tokens, batch, skip_masked))


def decode_step_flops(model, context_len: int, batch: int = 1, skip_masked: bool = False) -> FlopCount:
    """One cached decode step: one new token per sequence attending to `context_len` keys (the new one included).

    matmul = 2 B P_mm; attention = 4 B L N H S, with S = context_len: the cache slots the step reads (a fixed-size
    cache reads all its slots; pass the number of valid tokens for a kernel that reads only those). With skip_masked
    and a sliding window w, S is capped at w.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    m = get_model(model)
    context_len, batch = positive_int("context_len", context_len), positive_int("batch", batch)
    return FlopCount(matmul=matmul_flops(batch, matmul_params(m), 1),
                     attention=_attention(m, 1, context_len, batch, skip_masked))


def generation_flops_curve(model, prompt_len: int, n_tokens: int, batch: int = 1, cached: bool = True,
                           skip_masked: bool = False, cache_len=None) -> list:
    """Cumulative FLOPs after 1, 2, ..., n generated tokens: a list of n `FlopCount`s (entry i: i + 1 tokens).

    cached=False, naive sampling: token j + 1 (j = 0..n-1) costs `forward_flops(T_0 + j)`, a full pass over the
    sequence so far. cached=True: the prefill `forward_flops(T_0)` gives token 1, then decode step j (j = 1..n-1)
    costs `decode_step_flops(S)` with S = T_0 + j keys, or all `cache_len` slots of a fixed-size cache when given.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    prompt_len, n_tokens = positive_int("prompt_len", prompt_len), positive_int("n_tokens", n_tokens)
    at_most("n_tokens", n_tokens, MAX_CURVE_POINTS, "the curve has one entry per generated token")
    cached = flag("cached", cached)
    if cache_len is not None and not cached:
        raise ValueError("cache_len applies to cached generation only; drop it or pass cached=True")
    if cache_len is not None and positive_int("cache_len", cache_len) < prompt_len + n_tokens - 1:
        raise ValueError(f"cache_len={cache_len} cannot hold the prompt and the decoded tokens "
                         f"({prompt_len} + {n_tokens - 1}); pass cache_len >= {prompt_len + n_tokens - 1}")
    m = get_model(model)
    first = forward_flops(m, prompt_len, batch, skip_masked)  # validates batch and skip_masked
    p_mm = matmul_params(m)
    matmul, attention = first.matmul, first.attention
    curve = [first]
    for j in range(1, n_tokens):  # the sums of decode_step_flops / forward_flops, with the model looked up once
        if cached:
            matmul += matmul_flops(batch, p_mm, 1)
            attention += _attention(m, 1, prompt_len + j if cache_len is None else cache_len, batch, skip_masked)
        else:
            matmul += matmul_flops(batch * (prompt_len + j), p_mm, 1)
            attention += _attention(m, prompt_len + j, prompt_len + j, batch, skip_masked)
        curve.append(FlopCount(matmul, attention))
    return curve


def naive_generation_flops(model, prompt_len: int, n_tokens: int, batch: int = 1,
                           skip_masked: bool = False) -> FlopCount:
    """Generate n tokens with no cache: token j + 1 (j = 0..n-1) costs a forward pass over T_0 + j tokens.

    Sum over j of `forward_flops(T_0 + j)`: matmuls ~ P_mm n^2 and attention ~ (4/3) L N H n^3 for n >> T_0
    (Scaling Book ch. 7: naive sampling is quadratic in the FFW and cubic in attention).

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    return generation_flops_curve(model, prompt_len, n_tokens, batch, cached=False, skip_masked=skip_masked)[-1]


def cached_generation_flops(model, prompt_len: int, n_tokens: int, batch: int = 1, skip_masked: bool = False,
                            cache_len=None) -> FlopCount:
    """Generate n tokens with a KV cache: prefill the prompt (its logits give token 1), then n - 1 decode steps.

    Step j (j = 1..n-1) attends to T_0 + j keys, or to all `cache_len` slots of a fixed-size cache when cache_len is
    given (as the tiny JAX model does). Matmuls ~ 2 P_mm n and attention ~ 2 L N H n^2: linear and quadratic.

    Defined in chapter 2, *Sampling and the KV cache*.
    """
    return generation_flops_curve(model, prompt_len, n_tokens, batch, cached=True, skip_masked=skip_masked,
                                  cache_len=cache_len)[-1]
