"""The closed-form step bounds refuse a batch whose weights and KV caches do not fit in the chips' HBM, with a message
giving what is needed, what there is and the fix; `check_capacity=False` prices it anyway."""

import re

import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, decode_step_time_kv_heads, decode_throughput, step_time_bound
from scaling_lib.utilization import decode_latency_gap
from scaling_lib.memory import kv_cache_bytes, max_batch_size, param_bytes, require_fit
from scaling_lib.serving import server_ratio
from scaling_lib.sharding import decode_step_components
from scaling_lib.speculative import best_roofline_lookahead, roofline_speedup, roofline_step

from tests import for_each


def test_a_107_tb_cache_on_one_16_gb_chip_is_refused_with_what_is_needed_and_the_fix():
    with pytest.raises(ValueError) as err:
        decode_throughput("llama3-70b", "tpu-v5e", 1, batch=10000, context_len=32768)
    message = str(err.value)
    # Hand derivation: 10,000 x 32,768 tokens x 327,680 B (2 x 80 layers x 8 KV heads x 128 x 2 B) = 107,374.2 GB.
    needed_kv = 10000 * 32768 * 2 * 80 * 8 * 128 * 2
    assert f"{needed_kv / 1e9:,.1f} GB of KV cache" in message  # 107,374.2 GB
    assert "but 1 x tpu-v5e has 16.0 GB" in message
    assert "the weights alone (141.1 GB) exceed it" in message and "check_capacity=False" in message


def test_at_the_largest_batch_that_fits_the_step_is_priced_and_one_more_is_refused():
    for model, chip, n, context in (("llama3-70b", "tpu-v5e", 16, 8192), ("llama3-8b", "h100", 1, 2048),
                                    ("llama2-13b", "tpu-v5e", 8, 8192)):
        largest = max_batch_size(model, chip, n, context)
        assert largest > 0
        decode_step_time(model, chip, n, largest, context)
        with pytest.raises(ValueError, match=rf"the largest batch that fits is {largest:,}; use fewer sequences "
                                             r"\(batch\), a shorter context_len, a smaller kv_dtype"):
            decode_step_time(model, chip, n, largest + 1, context)


def test_opting_out_prices_the_step_exactly_as_the_formula_and_a_smaller_cache_or_more_chips_fit():
    step = decode_step_time("llama3-8b", "h100", 1, 256, 2048, check_capacity=False)  # chapter 3's row: 238 fit
    chip = get_chip("h100")
    kv = 256 * kv_cache_bytes("llama3-8b", 2048)
    assert step.kv_s == pytest.approx(kv / chip.hbm_bandwidth, rel=1e-12)
    assert step.weight_s == pytest.approx(param_bytes("llama3-8b") / chip.hbm_bandwidth, rel=1e-12)
    with pytest.raises(ValueError, match="does not fit"):
        decode_step_time("llama3-70b", "tpu-v5e", 16, 64, 8192)
    decode_step_time("llama3-70b", "tpu-v5e", 16, 64, 8192, kv_dtype="int8", weight_dtype="int8")
    decode_step_time("llama3-70b", "tpu-v5e", 32, 64, 8192)


@for_each([
    lambda **k: step_time_bound(batch=240, kv_bytes_per_sequence=1e9, param_bytes=26e9, param_count=13e9,
                                chip="tpu-v5e", n_chips=8, **k),
    lambda **k: decode_step_time_kv_heads("llama2-13b", 8, "tpu-v5e", 8, 240, 8192, **k),
    lambda **k: roofline_step("llama3-70b", "tpu-v5e", 16, 256, 2048, 4, 0.6, 0.05, **k),
    lambda **k: roofline_speedup("llama3-70b", "tpu-v5e", 16, 256, 2048, 4, 0.6, 0.05, **k),
    lambda **k: best_roofline_lookahead("llama3-70b", "tpu-v5e", 16, 256, 2048, 0.6, 0.05, **k),
    lambda **k: decode_step_components("llama3-70b", "tpu-v5e", 8, 64, 8192, **k),
    lambda **k: server_ratio("llama3-70b", "tpu-v5e", 8192, 512, 1024, 16, 16, **k),
    lambda **k: decode_latency_gap("palm-540b", "tpu-v4", 8, 64, 2048, 0.03, **k),
], ids=["step_time_bound", "kv_heads", "roofline_step", "roofline_speedup", "best_roofline_lookahead",
        "decode_step_components", "server_ratio", "decode_latency_gap"])
def test_every_step_bound_refuses_what_does_not_fit_unless_told_to_price_it(call):
    with pytest.raises(ValueError, match=r"does not fit: it needs [\d,.]+ GB \([\d,.]+ GB of weights \+ [\d,.]+ GB "
                                         r"of KV cache\) but \d+ x \S+ ha(s|ve) [\d,.]+ GB; .*check_capacity=False"):
        call()
    call(check_capacity=False)
    with pytest.raises(ValueError, match="check_capacity must be True or False"):
        call(check_capacity="no")


def test_require_fit_returns_the_footprint_when_it_fits_and_names_the_configuration_when_not():
    footprint = require_fit("llama3-70b", "tpu-v5e", 16, 8, 8192)
    assert footprint.fits and footprint.capacity_bytes == 16 * get_chip("tpu-v5e").hbm_capacity
    with pytest.raises(ValueError, match=re.escape("my server does not fit")):
        require_fit("llama3-70b", "tpu-v5e", 16, 800, 8192, what="my server")
