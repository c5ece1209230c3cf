"""Bad input gets a ValueError that names the problem and the fix, never a wrong number."""

import pytest

from scaling_lib.dtypes import bytes_per_element
from scaling_lib.hardware import get_chip
from scaling_lib.inference import prefill_time, step_time_bound
from scaling_lib.memory import kv_cache_bytes, max_batch_size
from scaling_lib.models import Transformer, get_model
from scaling_lib.roofline import critical_batch_size, matmul_flops, moe_critical_batch_size, roofline_time

from tests import for_each

TINY = dict(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)


def test_unknown_chip_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown chip 'tpu-v9'.*tpu-v5e"):
        get_chip("tpu-v9")
    assert get_chip("Ironwood") is get_chip("tpu-7x")


def test_unknown_model_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown model 'gpt-5'.*llama3-70b"):
        get_model("gpt-5")


def test_unknown_dtype_lists_known_dtypes():
    with pytest.raises(ValueError, match=r"unknown dtype 'fp7'.*'bf16'"):
        bytes_per_element("fp7")
    with pytest.raises(ValueError, match="unknown dtype"):
        kv_cache_bytes("llama3-8b", 100, dtype="float16ish")


def test_chip_without_native_rate_for_dtype_says_which_dtypes_it_has():
    with pytest.raises(ValueError, match=r"tpu-v5e has no native fp8 .*'bf16', 'int8'"):
        critical_batch_size("tpu-v5e", "fp8", "fp8")


def test_kv_heads_must_divide_query_heads():
    with pytest.raises(ValueError, match=r"n_kv_heads=3 does not divide n_heads=4"):
        Transformer(**{**TINY, "n_kv_heads": 3})
    with pytest.raises(ValueError, match=r"n_kv_heads=7 does not divide n_heads=40"):
        get_model("llama2-13b").with_(n_kv_heads=7)


@for_each([("n_layers", 0), ("d_model", -64), ("head_dim", 1.5),
                                          ("vocab_size", True), ("sliding_window", 0)], ids=str)
def test_model_fields_must_be_positive_integers(field, value):
    with pytest.raises(ValueError, match=field):
        Transformer(**{**TINY, field: value})


def test_more_active_experts_than_experts():
    with pytest.raises(ValueError, match="n_active_experts=4 exceeds n_experts=2"):
        Transformer(**TINY, n_experts=2, n_active_experts=4)
    with pytest.raises(ValueError, match="exceeds"):
        moe_critical_batch_size("tpu-v5e", n_experts=2, n_active_experts=4)


@for_each([
    (lambda: kv_cache_bytes("llama3-8b", -1), "tokens"),
    (lambda: kv_cache_bytes("llama3-8b", 10, batch=-2), "batch"),
    (lambda: matmul_flops(0, 10, 10), "batch"),
    (lambda: roofline_time(-1.0, 1.0, "tpu-v5e"), "flops"),
    (lambda: roofline_time(1.0, 1.0, "tpu-v5e", n_chips=0), "n_chips"),
    (lambda: step_time_bound(batch=-1, kv_bytes_per_sequence=1, param_bytes=1, param_count=1, chip="h100"), "batch"),
    (lambda: max_batch_size("llama3-8b", "h100", 1, context_len=0), "context_len"),
    (lambda: prefill_time("llama3-8b", "h100", 1, 1024, mfu=1.5), "mfu"),
    (lambda: prefill_time("llama3-8b", "h100", 1, 1024, mfu=0.0), "mfu"),
    (lambda: kv_cache_bytes("llama3-8b", float("nan")), "tokens"),
], ids=str)
def test_negative_or_zero_sizes_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
