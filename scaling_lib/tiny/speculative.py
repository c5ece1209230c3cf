"""Greedy speculative decoding on the tiny JAX decoder: a draft proposes γ tokens, the target checks them in one pass.

Symbols as in the book (book/notation.md): γ the lookahead (the argument `lookahead`, the local name k below), α the
acceptance rate. One speculative step on a sequence of n tokens (Leviathan et al. 2023, greedy case):
  1. the draft model extends the sequence greedily by γ tokens d_1 .. d_γ (γ cheap forward passes);
  2. the target scores the γ + 1 positions n-1 .. n+γ-1 in ONE forward pass; its logits there are its own greedy
     choices t_1 .. t_{γ+1} after each prefix;
  3. keep d_1 .. d_j for the longest j with d_i = t_i, then append t_{j+1} (the correction, or when j = γ the bonus
     token): every step yields between 1 and γ + 1 tokens, and every token kept is one the target would have chosen.
So the output equals the target's own greedy decoding token for token, whatever the draft; a better draft only
accepts more per step. The acceptance rate α is accepted / drafted, the quantity `speculative.expected_tokens_per_step`
takes as `acceptance`.

Clarity over speed: there is no KV cache here, so each target pass recomputes the whole buffer (n + γ tokens) where
a server would run only the γ + 1 new positions against its cache; the logits are the same. Both models run
`model.forward` on a buffer padded to a fixed length, so each model compiles once per buffer size (rounded up to a
multiple of `BUFFER_QUANTUM` tokens). Padding is harmless because attention is causal: logits at position p depend
on tokens 0..p only.
"""

from dataclasses import dataclass, replace

import jax.numpy as jnp
import numpy as np

from .model import Params, forward

BUFFER_QUANTUM = 64  # token buffers are padded to a multiple of this, so prompts of similar length share a compile


def truncated_draft(params: Params, n_layers: int = 1) -> Params:
    """The target's first `n_layers` layers with its own embedding, final norm and unembedding: a free draft model.

    (An "early exit" drafter: it shares the vocabulary and the residual stream of the target, so it agrees with the
    target more often than an unrelated small model would.)

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    if not isinstance(params, Params):
        raise ValueError(f"params must be scaling_lib.tiny.model.Params, got {type(params).__name__}")
    total = params.config.n_layers
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or not 1 <= n_layers <= total:
        raise ValueError(f"n_layers={n_layers!r} must be an integer in [1, {total}] (the target's layer count)")
    stacked = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")
    sliced = {name: getattr(params, name)[:n_layers] for name in stacked}
    config = params.config.with_(n_layers=n_layers, name=f"{params.config.name}-first{n_layers}")
    return replace(params, config=config, **sliced)


@dataclass(frozen=True)
class SpeculativeResult:
    """Tokens made by greedy speculative decoding of one prompt, and what it cost.

    tokens: the n_tokens new tokens; target_calls: target forward passes (speculative steps); drafted and accepted:
    draft tokens proposed and kept, over all steps.
    """

    tokens: np.ndarray
    lookahead: int
    target_calls: int
    drafted: int
    accepted: int

    @property
    def acceptance_rate(self) -> float:
        """accepted / drafted: the per-token acceptance α of `speculative.expected_tokens_per_step`."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def tokens_per_target_call(self) -> float:
        """New tokens per target forward pass (plain greedy decoding makes exactly 1)."""
        return len(self.tokens) / self.target_calls


def greedy_at(params, buffer, position):
    """The model's greedy token after buffer[0, :position + 1]: the argmax of its logits
    at `position` of the padded [1, S] buffer (one fixed-shape forward pass).

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    return int(jnp.argmax(forward(params, buffer)[0, position], axis=-1))


def verify(target, buffer, n, k):
    """The target checks the k drafted tokens buffer[0, n:n + k] in ONE forward pass:
    its own greedy choice after each of the k + 1 prefixes ending at n - 1 .. n + k - 1,
    the longest run of drafted tokens that agrees, and the target's token after it.
    Returns (j, token): j drafted tokens accepted, the target's token at n + j.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    logits = forward(target, buffer)[0, n - 1 : n + k]  # [k + 1, V], one pass
    choices = np.asarray(jnp.argmax(logits, axis=-1))  # the target's token after each
    agree = np.cumprod(buffer[0, n : n + k] == choices[:k])  # 1 up to the first miss
    j = int(agree.sum())
    return j, int(choices[j])


def speculative_step(target, draft, buffer, n, k):
    """One step on a buffer whose first n tokens are final: the draft writes k guesses
    at n .. n + k - 1, the target verifies them and writes its own token at n + j.
    Returns j, the guesses accepted; the buffer then holds n + j + 1 final tokens.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    for i in range(k):  # k cheap draft passes, one token each
        buffer[0, n + i] = greedy_at(draft, buffer, n + i - 1)
    j, token = verify(target, buffer, n, k)
    buffer[0, n + j] = token  # the target's correction, or its bonus token if j = k
    return j


def speculative_generate(target: Params, draft: Params, prompt, n_tokens: int, lookahead: int) -> SpeculativeResult:
    """Greedy speculative decoding of one prompt (1-D token ids): n_tokens tokens, γ = lookahead drafted per step.

    Equal, token for token, to `model.generate(target, prompt[None], n_tokens)` (greedy): see the module docstring.

    Defined in chapter 10, *Speculative decoding, mixture of experts and quantization*.
    """
    for name, p in (("target", target), ("draft", draft)):
        if not isinstance(p, Params):
            raise ValueError(f"{name} must be scaling_lib.tiny.model.Params, got {type(p).__name__}")
    if draft.config.vocab_size != target.config.vocab_size:
        raise ValueError(f"the draft's vocab_size={draft.config.vocab_size} differs from the target's "
                         f"{target.config.vocab_size}: drafted ids must mean the same tokens to both models")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive integer, got {n_tokens!r}")
    if isinstance(lookahead, bool) or not isinstance(lookahead, (int, np.integer)) or lookahead < 1:
        raise ValueError(f"lookahead must be a positive integer number of drafted tokens, got {lookahead!r}")
    prompt = np.asarray(prompt)
    if prompt.ndim != 1 or prompt.size == 0 or not np.issubdtype(prompt.dtype, np.integer):
        raise ValueError(f"prompt must be a non-empty 1-D array of token ids, got {prompt.dtype}{list(prompt.shape)}")
    k, start = int(lookahead), len(prompt)
    # Room for the prompt, the output, and a last step that drafts γ (k) tokens past it.
    size = -(-(start + n_tokens + k) // BUFFER_QUANTUM) * BUFFER_QUANTUM
    buffer = np.zeros((1, size), np.int32)
    buffer[0, :start] = prompt
    n = start  # tokens in the buffer that are final
    calls = drafted = accepted = 0
    while n < start + n_tokens:
        j = speculative_step(target, draft, buffer, n, k)
        calls, drafted, accepted = calls + 1, drafted + k, accepted + j
        n += j + 1
    tokens = buffer[0, start:start + n_tokens].copy()
    return SpeculativeResult(tokens=tokens, lookahead=k, target_calls=calls, drafted=drafted, accepted=accepted)


def acceptance_rate(target: Params, draft: Params, prompts, n_tokens: int, lookahead: int) -> float:
    """Measured per-token acceptance over several prompts: total accepted / total drafted."""
    results = [speculative_generate(target, draft, p, n_tokens, lookahead) for p in prompts]
    if not results:
        raise ValueError("prompts is empty; pass at least one prompt")
    return sum(r.accepted for r in results) / sum(r.drafted for r in results)
