"""A fixed-size state per sequence (`mixers`): what it holds is all a recurrent layer needs, its size does not grow
with the context, and the shapes it is built from are refused when they make no mixer.

The oracle for "all it needs": causal linear attention computed two ways in plain NumPy, quadratically over every
(query, key) pair as attention is, and recurrently from a state of H x H per head, agree; the state has exactly the
elements `mixers.lightning_attention` counts. The parameter counts and state sizes of the published hybrids are
checked against their model cards and a hand count in test_hf_families.py."""

import numpy as np
import pytest

from scaling_lib import mixers
from scaling_lib.flops import decode_step_flops
from scaling_lib.memory import kv_cache_bytes, sequence_cache_bytes, state_bytes_per_sequence
from scaling_lib.models import Transformer

from tests import for_each


def _linear_attention_pairs(q, k, v):
    """o_t = sum over s <= t of (q_t . k_s) v_s for every head: attention without the softmax, every pair scored."""
    scores = np.einsum("thd,shd->hts", q, k) * np.tril(np.ones((q.shape[0], q.shape[0])))
    return np.einsum("hts,she->the", scores, v)


def _linear_attention_recurrent(q, k, v):
    """The same outputs from a state S (H x H per head) updated once per token: S += k_t v_t^T, o_t = q_t S."""
    state = np.zeros((q.shape[1], q.shape[2], v.shape[2]))
    out = np.empty((q.shape[0], q.shape[1], v.shape[2]))
    for t in range(q.shape[0]):
        state += np.einsum("hd,he->hde", k[t], v[t])
        out[t] = np.einsum("hd,hde->he", q[t], state)
    return out, state


def test_a_recurrent_state_of_h_by_h_per_head_gives_what_attention_over_every_pair_gives():
    rng = np.random.default_rng(0)
    tokens, heads, width = 64, 4, 16
    q, k, v = (rng.standard_normal((tokens, heads, width)) for _ in range(3))
    out, state = _linear_attention_recurrent(q, k, v)
    np.testing.assert_allclose(out, _linear_attention_pairs(q, k, v), rtol=1e-10, atol=1e-10)
    assert state.size == mixers.lightning_attention(d_model=64, n_heads=heads, head_dim=width).state_elements


HYBRID = Transformer(n_layers=8, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256,
                     n_attention_layers=2, n_state_layers=6, state=mixers.mamba2(64, 4, 32, 1, 16, 4))


def test_the_state_stays_the_same_size_while_the_attention_layers_cache_grows():
    state = state_bytes_per_sequence(HYBRID)
    kv_per_token = 2 * 2 * 2 * 16 * 2  # K and V, 2 attention layers, 2 KV heads of 16, bf16
    for tokens in (1, 1000, 100_000):
        assert kv_cache_bytes(HYBRID, tokens) == tokens * kv_per_token
        assert sequence_cache_bytes(HYBRID, tokens) - kv_cache_bytes(HYBRID, tokens) == state
    # decode FLOPs: the recurrence costs the same at any context, only the 2 attention layers grow with it
    growth = decode_step_flops(HYBRID, 2000).attention - decode_step_flops(HYBRID, 1000).attention
    assert growth == 2 * 1000 * 4 * HYBRID.n_heads * HYBRID.head_dim


@for_each([
    (lambda: mixers.StateMixer("rnn", 1, 1, 1), r"\bkind must be one of lightning, gated-deltanet, mamba, mamba2\b"),
    (lambda: mixers.StateMixer("mamba", 0, 1, 1), r"\bStateMixer\.params\b"),
    (lambda: mixers.mamba(64, 128, 16, 4, 4, conv_bias=1), r"\bconv_bias\b"),
    (lambda: mixers.mamba2(64, 0, 32, 1, 16, 4), r"\bn_heads\b"),
    (lambda: mixers.gated_deltanet(64, 2, 16, 4, 16, conv_kernel=0), r"\bconv_kernel\b"),
    (lambda: mixers.SparseIndexer(64, 128, topk=0), r"\bSparseIndexer\.topk\b"),
    (lambda: HYBRID.with_(state=None), r"\bn_state_layers=6 with state=None: give both\b"),
    (lambda: HYBRID.with_(n_attention_layers=3), r"\bexceed n_layers=8: each layer has one token mixer\b"),
    (lambda: HYBRID.with_(state="mamba"), r"\bstate must be a mixers\.StateMixer\b"),
    (lambda: HYBRID.with_(n_attention_layers=0, n_state_layers=0, state=None), r"\bmixes no tokens\b"),
], ids=str)
def test_shapes_that_make_no_mixer_are_refused_naming_what_to_change(call, says):
    with pytest.raises(ValueError, match=says):
        call()
