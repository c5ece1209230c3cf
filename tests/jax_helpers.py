"""Helpers shared by the JAX model tests (not a test module)."""

import numpy as np

from scaling_lib import model


def cached_greedy(params, prompt, n_new, lengths=None):
    """Prefill, then greedy decode_step: (tokens [B, n_new], the logits that chose them [B, n_new, V])."""
    logits, cache = model.prefill(params, prompt, lengths, cache_len=prompt.shape[1] + n_new)
    last = np.asarray(logits)[np.arange(prompt.shape[0]), np.asarray(cache.positions) - 1]
    tokens, chosen_by = [], []
    for _ in range(n_new):
        token = last.argmax(-1).astype(np.int32)
        tokens.append(token)
        chosen_by.append(last)
        last, cache = model.decode_step(params, token, cache)
        last = np.asarray(last)
    return np.stack(tokens, 1), np.stack(chosen_by, 1)
