"""Nothing silently wrong (issue 14): each input that used to return a wrong number, or fail with a TypeError from deep
inside, now gets a ValueError naming the argument; and inputs that are fine (NumPy integers) are accepted.

One test per row of the issue's list, plus the rules of `scaling_lib._validate` themselves.
"""

import math

import numpy as np
import pytest

from scaling_lib import _validate
from scaling_lib.collectives import collective_time
from scaling_lib.inference import decode_step_time, prefill_time
from scaling_lib.kv_levers import cross_layer_kv_bytes, evenly_ragged_lengths, kv_footprint, local_global_kv_bytes
from scaling_lib.memory import kv_cache_bytes, max_batch_size
from scaling_lib.models import Transformer
from scaling_lib.moe import as_moe, routing_all_to_all
from scaling_lib.roofline import attention_bytes
from scaling_lib.sharding import decode_step_components
from scaling_lib.simulator import ServingConfig, Workload, simulate, trace_workload
from scaling_lib.units import parse_quantity

CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=8, max_context_len=4096)
WORKLOAD = trace_workload([(0.0, 100, 10), (0.1, 200, 5)])


# --- the closed-form rows of the issue ---------------------------------------------------------------------------
@pytest.mark.parametrize("mesh_shape", [(-2, -4), (0.5, 16), (2.0, 4.5)])
def test_decode_step_components_refuses_negative_or_fractional_mesh_axes(mesh_shape):
    # (-2) x (-4) and 0.5 x 16 both multiply to 8 chips: the product check alone let them through.
    with pytest.raises(ValueError, match=r"mesh_shape axis \d"):
        decode_step_components("llama3-70b", "tpu-v5e", 8, 16, 8192, mesh_shape=mesh_shape)


def test_collective_time_refuses_a_fractional_number_of_shards():
    with pytest.raises(ValueError, match="n_shards must be a positive integer, got 2.5"):
        collective_time("all-gather", 1e6, "tpu-v5e", 2.5)


def test_routing_all_to_all_refuses_expert_shards_that_do_not_divide_the_experts():
    with pytest.raises(ValueError, match=r"expert_shards=3 does not divide n_experts=16; pick one of \[1, 2, 4, 8, 16\]"):
        routing_all_to_all(as_moe("sb7-worked", 16, 2), "tpu-v5e", batch=16, expert_shards=3)


def test_attention_bytes_refuses_kv_heads_that_do_not_divide_the_query_heads():
    with pytest.raises(ValueError, match="n_kv_heads=7 does not divide n_heads=64"):
        attention_bytes(1, 8192, n_heads=64, n_kv_heads=7, head_dim=128)


def test_max_batch_size_refuses_half_a_chip():
    with pytest.raises(ValueError, match="n_chips must be a positive integer, got 0.5"):
        max_batch_size("llama3-8b", "h100", n_chips=0.5, context_len=4096)


def test_cross_layer_sharing_refuses_a_fractional_group():
    with pytest.raises(ValueError, match="share_every must be a positive integer, got 1.5"):
        kv_footprint("llama3-8b", [1024], share_every=1.5)
    with pytest.raises(ValueError, match="share_every"):
        cross_layer_kv_bytes("llama3-8b", 1024, share_every=1.5)


@pytest.mark.parametrize("call", [
    lambda: local_global_kv_bytes("llama3-8b", 4096, 1024, 6, batch=2.9),
    lambda: cross_layer_kv_bytes("llama3-8b", 4096, 2, batch=2.9),
    lambda: evenly_ragged_lengths(4096, 2.9),
])
def test_a_fractional_batch_is_refused_not_floored(call):
    with pytest.raises(ValueError, match="batch must be a positive integer, got 2.9"):
        call()


def test_workload_refuses_lengths_that_would_wrap_around_int64():
    with pytest.raises(ValueError, match="output_len"):
        Workload([0.0], [10], [2**63])
    with pytest.raises(ValueError, match="prompt_len"):
        Workload([0.0], [2**62], [2**62])  # each fits int64, their sum does not


def test_a_number_typed_as_a_string_gets_a_clear_value_error():
    with pytest.raises(ValueError, match=r"mfu must be a number, got the string '0.4'; pass 0.4 without quotes"):
        prefill_time("llama3-70b", "tpu-v5e", 16, 8192, mfu="0.4")
    with pytest.raises(ValueError, match=r"n_chips must be a number, got the string '16'"):
        prefill_time("llama3-70b", "tpu-v5e", "16", 8192, mfu=0.4)


def test_numpy_integers_and_floats_are_accepted_like_python_numbers():
    assert kv_cache_bytes("llama3-8b", np.int64(100), batch=np.int32(3)) == kv_cache_bytes("llama3-8b", 100, 3)
    assert decode_step_time("llama3-70b", "tpu-v5e", np.int64(16), np.int64(32), np.float64(8192.0)) == \
        decode_step_time("llama3-70b", "tpu-v5e", 16, 32, 8192)
    assert prefill_time("llama3-70b", "tpu-v5e", np.int16(16), np.int64(8192), np.float32(0.5)) == \
        pytest.approx(prefill_time("llama3-70b", "tpu-v5e", 16, 8192, 0.5), rel=1e-7)
    small = Transformer(n_layers=np.int64(2), d_model=np.int32(64), d_ff=128, n_heads=4, n_kv_heads=np.int8(2),
                        head_dim=16, vocab_size=256)
    assert small.n_layers == 2 and type(small.n_layers) is int and type(small.n_kv_heads) is int
    assert collective_time("all-gather", np.float64(1e6), "tpu-v5e", np.int64(8)) == \
        collective_time("all-gather", 1e6, "tpu-v5e", 8)


@pytest.mark.parametrize("engine, kwargs, error, message", [
    ("interleaved", dict(n_prefill_servers=2), TypeError, "n_prefill_servers"),  # simulate_disaggregated's arguments
    ("chunked", dict(n_decode_servers=2), TypeError, "n_decode_servers"),
    ("naive", dict(transfer_bandwidth=1e9), TypeError, "transfer_bandwidth"),
    ("interleaved", dict(prefill_config=CONFIG), TypeError, "prefill_config"),
    ("disaggregated", dict(n_servers=3), ValueError, "n_servers applies to the co-located engines.*simulate_disaggregated"),
])
def test_simulate_refuses_arguments_that_do_not_apply_to_the_engine(engine, kwargs, error, message):
    with pytest.raises(error, match=message):
        simulate(CONFIG, WORKLOAD, engine, **kwargs)


def test_parse_quantity_refuses_a_decimal_comma_with_a_hint():
    with pytest.raises(ValueError, match=r"'1,5 ms'.*thousands separator.*decimal point as '\.', e\.g\. '1\.5 ms'"):
        parse_quantity("1,5 ms")
    # Thousands separators in groups of three are unambiguous and still read.
    assert parse_quantity("1,536 tokens") == (1536.0, "count")
    assert parse_quantity("12,345,678 B") == (12345678.0, "bytes")
    with pytest.raises(ValueError, match="decimal point"):
        parse_quantity("1,53 s")
    with pytest.raises(ValueError, match="decimal point"):
        parse_quantity("0,5")


# --- the rules of _validate ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.inf])
def test_reals_must_be_finite(value):
    with pytest.raises(ValueError, match="x must be a finite number"):
        _validate.real("x", value)
    with pytest.raises(ValueError, match="x must be a finite number"):
        _validate.positive("x", value)


@pytest.mark.parametrize("value", [True, False, None, [1], (2,), 1j, b"3", object()])
def test_non_numbers_are_refused(value):
    for check in (_validate.real, _validate.positive, _validate.positive_int, _validate.non_negative_int,
                  _validate.probability, _validate.fraction):
        with pytest.raises(ValueError, match="^x must be"):
            check("x", value)


@pytest.mark.parametrize("value, expected", [(3, 3), (np.int64(3), 3), (np.uint8(3), 3), (3.0, 3), (1e6, 10**6),
                                             (np.float32(4.0), 4)])
def test_integers_accept_numpy_and_whole_floats_and_return_python_ints(value, expected):
    result = _validate.positive_int("n", value)
    assert result == expected and type(result) is int
    assert type(_validate.non_negative_int("n", value)) is int


@pytest.mark.parametrize("value", [2.5, 0.5, np.float64(1.0001), float(2**60), 2**63, -(2**63)])
def test_integers_refuse_fractions_and_counts_beyond_2_to_53(value):
    with pytest.raises(ValueError, match="^n"):
        _validate.positive_int("n", value)


def test_divides_names_both_numbers_and_the_divisors():
    assert _validate.divides("k", 4, "n", 12) == 4
    with pytest.raises(ValueError, match=r"k=5 does not divide n=12; pick one of \[1, 2, 3, 4, 6, 12\]"):
        _validate.divides("k", 5, "n", 12)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        _validate.divides("k", 0, "n", 12)


def test_fraction_and_probability_bounds():
    assert _validate.fraction("mfu", 1) == 1.0 and _validate.probability("a", 0) == 0.0
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\], got 0: it is the share of peak"):
        _validate.fraction("mfu", 0, "the share of peak")
    with pytest.raises(ValueError, match=r"a must be a probability in \[0, 1\], got 1.5"):
        _validate.probability("a", 1.5)


def test_axes_and_choice():
    assert _validate.axes("mesh", [2, np.int64(4)]) == (2, 4)
    with pytest.raises(ValueError, match=r"mesh must be 1 to 3 positive integer axis sizes"):
        _validate.axes("mesh", (2, 2, 2, 2), max_axes=3)
    with pytest.raises(ValueError, match=r"mesh must be 1 or more"):
        _validate.axes("mesh", 8)
    with pytest.raises(ValueError, match=r"unknown layout \['1d-ws'\]"):
        _validate.choice("layout", ["1d-ws"], {"1d-ws": 1})
    assert math.isfinite(_validate.real("x", -1e300))
