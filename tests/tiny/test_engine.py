"""The JetStream-style engine (scaling_lib.tiny.engine): prefill, insert, generate, and a continuous-batching loop
whose every request's tokens equal greedy generation of that request alone (`tiny.model.generate`), and its table of
bad inputs."""

from types import SimpleNamespace

import numpy as np
import pytest

from scaling_lib.tiny import model as tiny
from scaling_lib.tiny.engine import Engine, Prefix, bucket, serve

PARAMS = tiny.init_params(tiny.tiny_config(), seed=0)
RNG = np.random.default_rng(0)
PROMPTS = [RNG.integers(0, 256, n) for n in (5, 9, 3, 12, 7, 16, 4)]
COUNTS = [6, 3, 8, 1, 5, 4, 7]


@pytest.fixture(scope="module")
def served():
    return serve(Engine(PARAMS, max_batch=3, max_len=32), PROMPTS, COUNTS)


def test_continuous_batching_equals_per_request_greedy_generation(served):
    for prompt, count, tokens in zip(PROMPTS, COUNTS, served.tokens):
        np.testing.assert_array_equal(tokens, np.asarray(tiny.generate(PARAMS, prompt[None], count))[0])


def test_requests_join_as_slots_free_up_and_never_exceed_the_batch(served):
    assert served.max_concurrent == 3
    inserts = [e for e in served.events if e[1] == "insert"]
    finishes = {request: step for step, event, request, _ in served.events if event == "finish"}
    assert [request for _, _, request, _ in inserts] == list(range(len(PROMPTS)))  # first come, first served
    assert inserts[3][0] > 0  # the fourth request waited for a free slot
    assert set(finishes) == set(range(len(PROMPTS)))
    # Every step makes one token for each busy slot: total tokens = prefill firsts + steps' outputs.
    assert sum(COUNTS) == len(PROMPTS) + sum(
        sum(1 for request, (start, end) in _spans(served).items() if start < s <= end) for s in range(1, served.steps + 1))


def _spans(result):
    start = {r: s for s, e, r, _ in result.events if e == "insert"}
    return {r: (start[r], s) for s, e, r, _ in result.events if e == "finish"}


def test_prefill_then_insert_then_generate_continues_the_prompt_and_release_frees_the_slot():
    engine = Engine(PARAMS, max_batch=2, max_len=24)
    prompt = PROMPTS[1]
    prefix = engine.prefill(prompt)
    state = engine.insert(prefix, engine.init_decode_state(), slot=1)
    tokens = [prefix.first_token]
    for _ in range(4):
        state, produced = engine.generate(state)
        tokens.append(int(produced[1]))
    np.testing.assert_array_equal(tokens, np.asarray(tiny.generate(PARAMS, prompt[None], 5))[0])
    assert state.active == (False, True) and int(state.cache.positions[0]) == 0  # the idle slot stays at 0
    assert engine.release(state, 1).active == (False, False)
    assert [bucket(n) for n in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 32]  # prompts padded to powers of two
    # serve checks each request's room up front: 12 prompt + 5 generated - 1 = 16 positions fit max_len 16 exactly
    small = Engine(PARAMS, max_batch=2, max_len=16)
    assert len(serve(small, [PROMPTS[3]], np.int64(5)).tokens[0]) == 5  # a NumPy count applies to every request


@pytest.fixture(scope="module")
def world():
    """An engine of 2 slots and 16 positions, a prefix of it, and engines that differ from it."""
    engine = Engine(PARAMS, max_batch=2, max_len=16)
    other_heads = Engine(tiny.init_params(tiny.tiny_config(n_kv_heads=1), seed=0), max_batch=2, max_len=16)
    longer = Engine(PARAMS, max_batch=2, max_len=32)
    return SimpleNamespace(engine=engine, prefix=engine.prefill(PROMPTS[0]), other_heads=other_heads, longer=longer)


def _busy(w, slot):
    return w.engine.insert(w.prefix, w.engine.init_decode_state(), slot)


# Every refusal of scaling_lib.tiny.engine, checked before JAX sees the input: (the call, what its ValueError says).
BAD_INPUTS = [
    pytest.param(lambda w: w.engine.prefill(np.arange(20) % 256), "max_len", id="a prompt longer than max_len"),
    pytest.param(lambda w: w.engine.prefill(np.zeros((2, 3), int)), "1-D", id="a batch of prompts"),
    pytest.param(lambda w: w.engine.prefill([]), "empty prompt", id="an empty prompt"),
    *(pytest.param(lambda w, prompt=prompt: w.engine.prefill(prompt), r"token ids must lie in \[0, 256\)",
                   id=f"a token id outside the vocabulary: {name}")
      for name, prompt in (("2**40", np.array([1, 2**40])), ("2**32 in a list", [1, 2**32]),
                           ("-1", np.array([3, -1])))),
    pytest.param(lambda w: w.engine.insert(Prefix(w.prefix.cache, w.prefix.length, 256), w.engine.init_decode_state(),
                                           0), "first_token=256", id="a first token outside the vocabulary"),
    pytest.param(lambda w: w.engine.insert(w.other_heads.prefill(PROMPTS[0]), w.engine.init_decode_state(), 0),
                 r"prefix's cache is float32\[2, 1, 16, 1, 16\] but this engine's is float32\[2, 1, 16, 2, 16\]",
                 id="a prefix of a model with other KV heads, not broadcast"),
    pytest.param(lambda w: w.engine.insert(w.longer.prefill(PROMPTS[0]), w.engine.init_decode_state(), 0),
                 "prefix's cache", id="a prefix of an engine with another max_len"),
    pytest.param(lambda w: w.engine.insert(w.prefix, w.longer.init_decode_state(), 0), "state's cache",
                 id="a state of another engine"),
    pytest.param(lambda w: w.engine.insert(w.prefix, _busy(w, 0), 0), "busy", id="a busy slot"),
    *(pytest.param(lambda w, slot=slot: w.engine.insert(w.prefix, w.engine.init_decode_state(), slot), says,
                   id=f"insert into slot {slot!r}")
      for slot, says in ((1.5, "fractional"), (True, "got True"), (None, "got None"), ("0", "the string '0'"),
                         (-1, "non-negative"), (2, "outside the 2 decode slots"))),
    *(pytest.param(lambda w, slot=slot: w.engine.release(w.engine.init_decode_state(), slot), says,
                   id=f"release slot {slot!r}")
      for slot, says in ((1.5, "fractional"), (True, "got True"), (None, "got None"), ("0", "the string '0'"),
                         (-1, "non-negative"), (2, "outside the 2 decode slots"), (99, "slot=99 is outside the 2"))),
    pytest.param(lambda w: w.engine.release(_busy(w, 1), 0), "slot 0 is not in use", id="release a free slot"),
    pytest.param(lambda w: w.engine.insert(w.prefix.cache, w.engine.init_decode_state(), 0), "prefix must be a Prefix",
                 id="a cache for a prefix"),
    pytest.param(lambda w: w.engine.generate(None), "state must be a DecodeState", id="generate: no state"),
    pytest.param(lambda w: w.engine.release((), 0), "state must be a DecodeState", id="release: a tuple"),
    pytest.param(lambda w: w.engine.insert(w.prefix, {}, 0), "state must be a DecodeState", id="insert: a dict"),
    pytest.param(lambda w: Engine(None, 2, 16), "params must be tiny.model.Params", id="an engine without params"),
    pytest.param(lambda w: serve(w.engine, [PROMPTS[3]], 6),
                 r"request 0 needs 12 prompt \+ 5 generated cache positions, more than max_len=16",
                 id="a request with no room, refused before it starts"),
    pytest.param(lambda w: serve(None, PROMPTS, 2), "engine must be an Engine", id="serve: no engine"),
    pytest.param(lambda w: serve(w.engine, None, 2), "prompts must be a list", id="serve: no prompts"),
    pytest.param(lambda w: serve(w.engine, PROMPTS[:2], [1]), "1 max_new_tokens for 2 prompts",
                 id="serve: one count for two prompts"),
    pytest.param(lambda w: serve(w.engine, PROMPTS[:2], [1]), "one count per prompt", id="serve: which says the fix"),
    pytest.param(lambda w: serve(w.engine, PROMPTS[:1], "2"), "max_new_tokens", id="serve: a string count"),
    pytest.param(lambda w: bucket(3, 0), "smallest must be a positive integer", id="buckets from 0"),
]


@pytest.mark.parametrize("call, says", BAD_INPUTS)
def test_bad_inputs_are_refused_before_jax_sees_them(world, call, says):
    with pytest.raises(ValueError, match=says):
        call(world)
