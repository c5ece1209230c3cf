"""Model shapes and parameter counting.

Symbols (book/notation.md): L layers, D model width, F feed-forward width, N query heads, K key/value heads,
H head dimension, V vocabulary, E experts, k active experts, G = N/K query heads per KV head.

Sources: LLaMA-2 (Touvron et al. 2023) and LLaMA-3 (Meta 2024) model cards, as quoted in the Scaling Book ch. 7;
PaLM (Chowdhery et al. 2022) as used by Pope et al. 2022.
"""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer with a gated (SwiGLU-style) feed-forward block and grouped-query attention.

    n_kv_heads == n_heads is multi-head attention, 1 is multiquery, anything dividing n_heads is GQA.
    n_experts > 1 makes every feed-forward block a mixture of experts with n_active_experts routed per token.
    sliding_window, when set, limits every attention layer to the last `sliding_window` positions.
    """

    n_layers: int
    d_model: int
    d_ff: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    n_experts: int = 1
    n_active_experts: int = 1
    tied_embeddings: bool = False
    sliding_window: int | None = None
    name: str = "custom"
    source: str = ""

    def __post_init__(self):
        for field_name in ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size",
                           "n_experts", "n_active_experts"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{field_name} must be a positive integer, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} does not divide n_heads={self.n_heads}; grouped-query attention "
                f"shares each KV head among n_heads / n_kv_heads query heads, so pick a divisor of {self.n_heads}"
            )
        if self.n_active_experts > self.n_experts:
            raise ValueError(
                f"n_active_experts={self.n_active_experts} exceeds n_experts={self.n_experts}; "
                "a token cannot be routed to more experts than exist"
            )
        if self.sliding_window is not None and (
            isinstance(self.sliding_window, bool) or not isinstance(self.sliding_window, int)
            or self.sliding_window <= 0
        ):
            raise ValueError(f"sliding_window must be a positive integer or None, got {self.sliding_window!r}")

    @property
    def group_size(self) -> int:
        """G = N / K, query heads per key/value head."""
        return self.n_heads // self.n_kv_heads

    def with_(self, **changes) -> "Transformer":
        """A copy with some fields changed (validated again), e.g. `model.with_(n_kv_heads=8)`."""
        return replace(self, **changes)


@dataclass(frozen=True)
class ParamCount:
    """Parameters by block. `embeddings` counts the input table, plus the output projection unless tied."""

    attention: int
    feed_forward: int
    router: int
    embeddings: int

    @property
    def total(self) -> int:
        return self.attention + self.feed_forward + self.router + self.embeddings


def param_breakdown(model: Transformer, active_only: bool = False) -> ParamCount:
    """Count parameters by block.

    attention per layer: D*H*(2N + 2K)  (W_Q: D x NH, W_K and W_V: D x KH each, W_O: NH x D)
    feed-forward per layer: 3*D*F per expert (gated: W_in, W_gate, W_out), times E (or k when active_only)
    router per layer: D*E when E > 1
    embeddings: V*D for the input table, plus V*D for the output projection when untied.
    Norm gains and biases (O(L*D), under 0.01% of any model here) are not counted.
    """
    m = model
    experts = m.n_active_experts if active_only else m.n_experts
    attention = m.n_layers * m.d_model * m.head_dim * (2 * m.n_heads + 2 * m.n_kv_heads)
    feed_forward = m.n_layers * 3 * m.d_model * m.d_ff * experts
    router = m.n_layers * m.d_model * m.n_experts if m.n_experts > 1 else 0
    embeddings = m.vocab_size * m.d_model * (1 if m.tied_embeddings else 2)
    return ParamCount(attention, feed_forward, router, embeddings)


def param_count(model: Transformer) -> int:
    """Total parameters, counting every expert and both embedding tables (one if tied); see `param_breakdown`."""
    return param_breakdown(model).total


def active_param_count(model: Transformer) -> int:
    """Parameters one token touches: like `param_count` but with k of the E experts. Equal for dense models."""
    return param_breakdown(model, active_only=True).total


_LLAMA_CARD = "Scaling Book ch. 7 (LLaMA model card values)"
_PALM = "Chowdhery et al. 2022 (PaLM), as used by Pope et al. 2022; SwiGLU, multiquery, d_ff = 4 D, tied embeddings"
MODELS = {
    "llama2-13b": Transformer(n_layers=40, d_model=5120, d_ff=13824, n_heads=40, n_kv_heads=40, head_dim=128,
                              vocab_size=32000, name="llama2-13b", source=_LLAMA_CARD),
    "llama3-8b": Transformer(n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, head_dim=128,
                             vocab_size=128256, name="llama3-8b", source=_LLAMA_CARD),
    "llama3-70b": Transformer(n_layers=80, d_model=8192, d_ff=28672, n_heads=64, n_kv_heads=8, head_dim=128,
                              vocab_size=128256, name="llama3-70b", source=_LLAMA_CARD),
    "palm-8b": Transformer(n_layers=32, d_model=4096, d_ff=16384, n_heads=16, n_kv_heads=1, head_dim=256,
                           vocab_size=256000, tied_embeddings=True, name="palm-8b", source=_PALM),
    "palm-62b": Transformer(n_layers=64, d_model=8192, d_ff=32768, n_heads=32, n_kv_heads=1, head_dim=256,
                            vocab_size=256000, tied_embeddings=True, name="palm-62b", source=_PALM),
    "palm-540b": Transformer(n_layers=118, d_model=18432, d_ff=73728, n_heads=48, n_kv_heads=1, head_dim=256,
                             vocab_size=256000, tied_embeddings=True, name="palm-540b", source=_PALM),
}


def model_names() -> tuple:
    return tuple(MODELS)


def get_model(name) -> Transformer:
    """Look a model up by name (case-insensitive). A `Transformer` passes through unchanged."""
    if isinstance(name, Transformer):
        return name
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)} "
                         "(or build your own with scaling_lib.models.Transformer(...))")
    return MODELS[key]


# The model the Scaling Book ch. 7 invents for its worked problems ("based on LLaMA-2 13B"): 64 layers, D = 4,096,
# F = 4 D, 32 query heads, 8 KV heads of dimension 256, a 32,128-token vocabulary. Its answers count the embedding
# once (D x V), so it is stored with tied embeddings: 18.4e9 parameters dense, 212e9 as a 16-expert top-2 MoE.
MODELS["sb7-worked"] = Transformer(n_layers=64, d_model=4096, d_ff=16384, n_heads=32, n_kv_heads=8, head_dim=256,
                                   vocab_size=32128, tied_embeddings=True, name="sb7-worked",
                                   source="Scaling Book ch. 7, worked problems (model 'based on LLaMA-2 13B')")


# Pope et al. 2022 (sec. 4.2, Table 1) compare PaLM 540B with a multihead variant of about the same size: every one
# of the 48 query heads keeps its own key/value head, and the head dimension is halved (256 -> 128) so the attention
# weights stay roughly the same size (5.2e10 vs 5.5e10 parameters). Its KV cache is 48 x 128 / 256 = 24x PaLM's.
_PALM_540B = MODELS["palm-540b"]
MODELS["palm-540b-multihead"] = _PALM_540B.with_(
    n_kv_heads=_PALM_540B.n_heads, head_dim=128, name="palm-540b-multihead",
    source="Pope et al. 2022, sec. 4.2 / Table 1: PaLM 540B's multihead comparison model, 48 heads x 128 head dim",
)
