"""Token mixers that keep a fixed-size state per sequence instead of a growing KV cache, and DeepSeek's sparse-attention
indexer.

A softmax-attention layer caches a key and a value for every token it has seen, so its cache grows with the context
S. A *recurrent* mixer (linear attention, gated DeltaNet, Mamba, Mamba-2) folds every token into a state of fixed
size instead: the same bytes per sequence at S = 10 and at S = 10^6. Hybrid models keep a few softmax layers (for
recall) and make the rest recurrent, so their cache is

    KV(S) = S x (bytes per token of the attention layers only) + (state bytes per sequence)

and decode reads the state once per step and writes it back, whatever S is (chapter 6, *A fixed-size state*).

Per layer, for one sequence (elements; times the state's bytes each):

    lightning attention (MiniMax-01/M1)   N x H x H                    (one H x H key-value product per head)
    gated DeltaNet (Qwen3-Next)           N_v x H_k x H_v + conv       (one H_k x H_v matrix per value head)
    Mamba (Mamba-1, Jamba)                D_in x N_s + conv            (N_s numbers per inner channel)
    Mamba-2 (Nemotron-H)                  N_h x P x N_s + conv         (N_s numbers per channel of each head)
    conv = the causal convolution's window: (kernel - 1) x its channels

Sources: Gu & Dao 2023 (Mamba, arXiv 2312.00752), Dao & Gu 2024 (Mamba-2, arXiv 2405.21060), Yang, Kautz &
Hatamizadeh 2024 (Gated DeltaNet, arXiv 2412.06464), MiniMax 2025 (lightning attention, arXiv 2501.08313); the
projections' shapes are those of the Hugging Face implementations the published configs load (transformers'
`jamba`, `nemotron_h`, `qwen3_next`, `minimax`). Norm gains (O(width) per layer) are not counted, as everywhere in
the book (`models.param_breakdown`).

FLOPs of the recurrence itself (besides the projections, which are matmuls counted with the weights): a
multiply-add to update each state element and one to read it out, 4 FLOPs per element and token (6 for the delta
rule, which also multiplies the state by the key before updating it); elementwise decays and gates are left out, as
softmax is for attention (`flops`).
"""

import math
from dataclasses import dataclass

from ._validate import flag, non_negative_int, positive_int

STATE_KINDS = ("lightning", "gated-deltanet", "mamba", "mamba2")


@dataclass(frozen=True)
class StateMixer:
    """One recurrent token mixer (the same in every layer that has one): its kind, its weights, the state it keeps
    for one sequence and the FLOPs of its recurrence per token.

    `state_elements` counts the recurrent state plus the convolution window, per sequence and layer; `params` the
    weights of one layer's mixer (projections, convolution, per-channel decay and skip terms; norms not counted);
    `flops_per_token` the recurrence's FLOPs per token and layer (the projections are in `params`: 2 FLOPs per weight)."""

    kind: str
    params: int
    state_elements: int
    flops_per_token: int

    def __post_init__(self):
        if self.kind not in STATE_KINDS:
            raise ValueError(f"StateMixer.kind must be one of {', '.join(STATE_KINDS)}, got {self.kind!r}")
        for name in ("params", "state_elements", "flops_per_token"):
            object.__setattr__(self, name, positive_int(f"StateMixer.{name}", getattr(self, name)))


def lightning_attention(d_model: int, n_heads: int, head_dim: int) -> StateMixer:
    """MiniMax's lightning (linear) attention: q, k, v and an output gate of N x H each from D, an output projection
    N H x D: 5 D N H weights; a state of N H^2 per sequence (each head's sum of k^T v). MiniMax 2025."""
    d, n, h = (positive_int(name, v) for name, v in (("d_model", d_model), ("n_heads", n_heads),
                                                       ("head_dim", head_dim)))
    state = n * h * h
    return StateMixer("lightning", params=5 * d * n * h, state_elements=state, flops_per_token=4 * state)


def gated_deltanet(d_model: int, n_key_heads: int, key_head_dim: int, n_value_heads: int, value_head_dim: int,
                   conv_kernel: int) -> StateMixer:
    """Gated DeltaNet (Qwen3-Next's linear-attention layers): q, k (N_k H_k each), v and the output gate z (N_v H_v
    each) and two scalars per value head (beta, the decay) from D; a causal convolution over q, k, v; an output
    projection N_v H_v x D. State: an H_k x H_v matrix per value head, plus (kernel - 1) x (2 N_k H_k + N_v H_v) of
    convolution window. Yang, Kautz & Hatamizadeh 2024."""
    d = positive_int("d_model", d_model)
    key_dim = positive_int("n_key_heads", n_key_heads) * positive_int("key_head_dim", key_head_dim)
    n_v = positive_int("n_value_heads", n_value_heads)
    value_dim = n_v * positive_int("value_head_dim", value_head_dim)
    kernel = positive_int("conv_kernel", conv_kernel)
    conv_dim = 2 * key_dim + value_dim
    params = d * (2 * key_dim + 2 * value_dim) + d * 2 * n_v + conv_dim * kernel + 2 * n_v + value_dim * d
    recurrent = n_v * key_head_dim * value_head_dim
    return StateMixer("gated-deltanet", params=params, state_elements=recurrent + conv_dim * (kernel - 1),
                      flops_per_token=6 * recurrent)


def mamba(d_model: int, d_inner: int, d_state: int, conv_kernel: int, dt_rank: int, conv_bias: bool = True,
          proj_bias: bool = False) -> StateMixer:
    """Mamba (selective state space, Jamba's Mamba layers): in_proj D x 2 D_in, a depthwise convolution, x_proj
    D_in x (R + 2 N_s) and dt_proj R x D_in (R the step's rank), A (D_in x N_s), the skip D (D_in), out_proj D_in x D.
    State: D_in x N_s, plus (kernel - 1) x D_in of convolution window. Gu & Dao 2023."""
    d, di = positive_int("d_model", d_model), positive_int("d_inner", d_inner)
    n_s, kernel, rank = (positive_int(name, v) for name, v in (("d_state", d_state), ("conv_kernel", conv_kernel),
                                                                 ("dt_rank", dt_rank)))
    params = (d * 2 * di + di * kernel + di * (rank + 2 * n_s) + rank * di + di + di * n_s + di + di * d
              + (di if flag("conv_bias", conv_bias) else 0) + (2 * di + d if flag("proj_bias", proj_bias) else 0))
    return StateMixer("mamba", params=params, state_elements=di * n_s + di * (kernel - 1),
                      flops_per_token=4 * di * n_s)


def mamba2(d_model: int, n_heads: int, head_dim: int, n_groups: int, d_state: int, conv_kernel: int,
           conv_bias: bool = True, proj_bias: bool = False) -> StateMixer:
    """Mamba-2 (Nemotron-H's Mamba layers): in_proj D x (2 D_in + 2 G N_s + N_h) (x, the gate z, B and C per group,
    one step size per head), a depthwise convolution over x, B and C, per-head A, skip and step bias, out_proj
    D_in x D, with D_in = N_h P. State: N_h x P x N_s, plus (kernel - 1) x (D_in + 2 G N_s) of convolution window.
    Dao & Gu 2024."""
    d, n_h, p = (positive_int(name, v) for name, v in (("d_model", d_model), ("n_heads", n_heads),
                                                         ("head_dim", head_dim)))
    groups, n_s, kernel = (positive_int(name, v) for name, v in (("n_groups", n_groups), ("d_state", d_state),
                                                                   ("conv_kernel", conv_kernel)))
    di = n_h * p
    conv_dim = di + 2 * groups * n_s
    in_proj = 2 * di + 2 * groups * n_s + n_h
    params = (d * in_proj + conv_dim * kernel + 3 * n_h + di * d + (conv_dim if flag("conv_bias", conv_bias) else 0)
              + (in_proj + d if flag("proj_bias", proj_bias) else 0))
    recurrent = n_h * p * n_s
    return StateMixer("mamba2", params=params, state_elements=recurrent + conv_dim * (kernel - 1),
                      flops_per_token=4 * recurrent)


# DeepSeek-V3.2's indexer caches its key in fp8 with one fp32 scale per 128 values (DeepSeek-V3.2-Exp's inference
# code; vLLM stores 128 + 4 bytes per token and layer).
INDEXER_SCALE_BYTES, INDEXER_SCALE_BLOCK = 4, 128


@dataclass(frozen=True)
class SparseIndexer:
    """DeepSeek Sparse Attention (DeepSeek-V3.2): a small "lightning indexer" scores every cached token with
    `n_heads` heads of `head_dim` over an fp8 key it caches per token and layer, and each query then attends to the
    `topk` best-scored tokens only (DeepSeek-AI 2025, DeepSeek-V3.2-Exp).

    Per layer: weights q_lora_rank x N_I H_I (queries from MLA's query latent), D x H_I (its key), D x N_I (the heads'
    weights); cache: H_I bytes of fp8 key plus a 4-byte scale per 128 values, per token; FLOPs: 2 N_I H_I per
    (query, cached token) pair. Defined in chapter 6, *A fixed-size state* (beside latent attention).
    """

    n_heads: int
    head_dim: int
    topk: int

    def __post_init__(self):
        for name in ("n_heads", "head_dim", "topk"):
            object.__setattr__(self, name, positive_int(f"SparseIndexer.{name}", getattr(self, name)))

    @property
    def key_bytes(self) -> int:
        """Bytes the indexer caches per token and layer: the fp8 key and its scales."""
        return self.head_dim + INDEXER_SCALE_BYTES * math.ceil(self.head_dim / INDEXER_SCALE_BLOCK)

    def params(self, d_model: int, q_lora_rank: int | None) -> int:
        """Weights of one layer's indexer (its LayerNorm not counted)."""
        d = positive_int("d_model", d_model)
        q_in = d if q_lora_rank is None else non_negative_int("q_lora_rank", q_lora_rank)
        return q_in * self.n_heads * self.head_dim + d * self.head_dim + d * self.n_heads

    @property
    def flops_per_pair(self) -> int:
        """FLOPs of scoring one cached token for one query (all indexer heads)."""
        return 2 * self.n_heads * self.head_dim
