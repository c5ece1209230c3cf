"""The JetStream-style engine (scaling_lib.tiny.engine): prefill, insert, generate, and a continuous-batching loop
whose every request's tokens equal greedy generation of that request alone (`tiny.model.generate`)."""

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


def test_prefill_then_insert_then_generate_continues_the_prompt():
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


def test_buckets_are_powers_of_two_and_bad_use_is_named():
    assert [bucket(n) for n in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 32]
    engine = Engine(PARAMS, max_batch=1, max_len=16)
    with pytest.raises(ValueError, match="max_len"):
        engine.prefill(np.arange(20) % 256)
    with pytest.raises(ValueError, match="1-D"):
        engine.prefill(np.zeros((2, 3), int))
    state = engine.insert(engine.prefill(PROMPTS[0]), engine.init_decode_state(), 0)
    with pytest.raises(ValueError, match="busy"):
        engine.insert(engine.prefill(PROMPTS[2]), state, 0)
    with pytest.raises(ValueError, match="outside"):
        engine.insert(engine.prefill(PROMPTS[2]), state, 3)
    with pytest.raises(ValueError, match="one count per prompt"):
        serve(engine, PROMPTS[:2], [1])


# --- every entrance of the engine checks what it is handed before JAX sees it (issue 21) --------------------------
@pytest.fixture(scope="module")
def engine_and_prefix():
    engine = Engine(PARAMS, max_batch=2, max_len=16)
    return engine, engine.prefill(PROMPTS[0])


def test_insert_of_a_prefix_from_a_model_with_other_kv_heads_raises_instead_of_broadcasting(engine_and_prefix):
    engine, _ = engine_and_prefix
    other = Engine(tiny.init_params(tiny.tiny_config(n_kv_heads=1), seed=0), max_batch=2, max_len=16)
    with pytest.raises(ValueError, match=r"prefix's cache is float32\[2, 1, 16, 1, 16\] but this engine's is "
                                         r"float32\[2, 1, 16, 2, 16\]"):
        engine.insert(other.prefill(PROMPTS[0]), engine.init_decode_state(), 0)
    longer = Engine(PARAMS, max_batch=2, max_len=32)  # another max_len: the same check
    with pytest.raises(ValueError, match="prefix's cache"):
        engine.insert(longer.prefill(PROMPTS[0]), engine.init_decode_state(), 0)
    with pytest.raises(ValueError, match="state's cache"):  # a state of another engine
        engine.insert(engine_and_prefix[1], longer.init_decode_state(), 0)


@pytest.mark.parametrize("slot, says", [(1.5, "fractional"), (True, "got True"), (None, "got None"),
                                        ("0", "the string '0'"), (-1, "non-negative"), (2, "outside the 2 decode slots")])
def test_insert_and_release_refuse_a_slot_that_is_not_an_index_of_the_engine(engine_and_prefix, slot, says):
    engine, prefix = engine_and_prefix
    state = engine.init_decode_state()
    with pytest.raises(ValueError, match="slot") as err:
        engine.insert(prefix, state, slot)
    assert says in str(err.value)
    with pytest.raises(ValueError, match=says):
        engine.release(state, slot)


def test_release_of_a_slot_that_does_not_exist_or_is_free_raises(engine_and_prefix):
    engine, prefix = engine_and_prefix
    state = engine.insert(prefix, engine.init_decode_state(), 1)
    with pytest.raises(ValueError, match="slot=99 is outside the 2 decode slots"):
        engine.release(state, 99)
    with pytest.raises(ValueError, match="slot 0 is not in use"):
        engine.release(state, 0)
    assert engine.release(state, 1).active == (False, False)


def test_engine_refuses_token_ids_outside_the_vocabulary_before_the_int32_cast(engine_and_prefix):
    engine, prefix = engine_and_prefix
    for prompt in (np.array([1, 2**40]), [1, 2**32], np.array([3, -1])):  # 2**32 and 2**40 wrap to 0 in int32
        with pytest.raises(ValueError, match=r"token ids must lie in \[0, 256\)"):
            engine.prefill(prompt)
    with pytest.raises(ValueError, match="empty prompt"):
        engine.prefill([])
    with pytest.raises(ValueError, match="first_token=256"):
        engine.insert(Prefix(prefix.cache, prefix.length, 256), engine.init_decode_state(), 0)


def test_engine_entrances_refuse_the_wrong_objects(engine_and_prefix):
    engine, prefix = engine_and_prefix
    with pytest.raises(ValueError, match="prefix must be a Prefix"):
        engine.insert(prefix.cache, engine.init_decode_state(), 0)
    for call in (lambda: engine.generate(None), lambda: engine.release((), 0), lambda: engine.insert(prefix, {}, 0)):
        with pytest.raises(ValueError, match="state must be a DecodeState"):
            call()
    with pytest.raises(ValueError, match="params must be tiny.model.Params"):
        Engine(None, 2, 16)


def test_serve_checks_its_arguments_and_each_requests_room_up_front():
    engine = Engine(PARAMS, max_batch=2, max_len=16)
    prompt = PROMPTS[3]  # 12 tokens: 12 + 5 - 1 = 16 positions fit exactly, one more token does not
    assert len(serve(engine, [prompt], np.int64(5)).tokens[0]) == 5  # a NumPy count applies to every request
    with pytest.raises(ValueError, match="request 0 needs 12 prompt \\+ 5 generated cache positions, more than "
                                         "max_len=16"):
        serve(engine, [prompt], 6)
    for call, says in ((lambda: serve(None, PROMPTS, 2), "engine must be an Engine"),
                       (lambda: serve(engine, None, 2), "prompts must be a list"),
                       (lambda: serve(engine, PROMPTS[:2], [1]), "1 max_new_tokens for 2 prompts"),
                       (lambda: serve(engine, PROMPTS[:1], "2"), "max_new_tokens"),
                       (lambda: bucket(3, 0), "smallest must be a positive integer")):
        with pytest.raises(ValueError, match=says):
            call()
