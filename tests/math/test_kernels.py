"""kernels: NVIDIA's published timings of TensorRT-LLM's GEMM and MoE kernels, the ceiling each format reaches, and
the cap it puts on the estimate's matmuls (chapter 11)."""

import pytest

from scaling_lib.dtypes import bytes_per_element
from scaling_lib.efficiency import BOUND, PROFILES
from scaling_lib.estimate import Deployment, decode_step, prefill
from scaling_lib.flops import forward_flops
from scaling_lib.hardware import get_chip
from scaling_lib.kernels import gemm_kernel_rows, kernel_ceiling, moe_kernel_rows, moe_layer_floor
from scaling_lib.models import get_model
from tests import for_each


def test_no_published_kernel_beats_its_chips_data_sheet():
    # a GEMM's FLOPs at the dense peak, a MoE layer's FLOPs at the peak and the experts it touches read at the HBM
    # rate (a GPU's share of a split layer: 1 / (tp x ep) of the FLOPs; of the experts, the touched ones it holds,
    # each a 1 / tp slice): each timing takes at least that long
    for row in gemm_kernel_rows():
        assert 0 < row.achieved_fraction <= 1, row
    for row in moe_kernel_rows():
        chip, gpus = get_chip(row.chip), row.moe_tp * row.moe_ep
        touched = min(row.experts, row.tokens * row.k) / row.moe_ep * 3 * row.d_model * row.d_expert / row.moe_tp
        floor = max(row.flops / gpus / chip.peak_flops(row.dtype),
                    touched * bytes_per_element(row.dtype) / chip.hbm_bandwidth)
        assert row.latency_s >= floor, row
    assert len(gemm_kernel_rows()) >= 250 and len(moe_kernel_rows()) >= 100
    assert all(row.source.startswith("ai-dynamo/aiconfigurator") for row in gemm_kernel_rows() + moe_kernel_rows())


def test_the_nvfp4_ceiling_on_a_b200_by_hand():
    # the fastest NVFP4 GEMM on one B200: 4,352 x 16,384 by 16,384 x 51,200 in 1.60595 ms:
    # 2 x 4352 x 51200 x 16384 = 7.3014e12 FLOPs / 1.60595e-3 s = 4.5465e15 FLOP/s, 0.5052 of the 9e15 dense FP4 peak
    assert kernel_ceiling("b200", "nvfp4") == pytest.approx(2 * 4352 * 51200 * 16384 / 1.60595e-3 / 9e15, rel=1e-6)
    assert kernel_ceiling("b200", "nvfp4") == pytest.approx(0.5052, abs=1e-4)


def test_the_ceilings_sit_above_the_fitted_mfu_except_for_four_bit_floats_on_blackwell():
    # so the cap changes nothing the fit saw (H100 and H200, bf16 and fp8) and binds for NVFP4 on B200 and GB200
    mfu = PROFILES["typical"].efficiency.gpu.mfu
    for chip, formats in {"h100": ("bf16", "fp8"), "h200": ("bf16", "fp8"), "a100": ("bf16",),
                          "b200": ("bf16", "fp8"), "gb200": ("bf16", "fp8")}.items():
        assert all(mfu < kernel_ceiling(chip, dtype) < 0.9 for dtype in formats), chip
    assert kernel_ceiling("b200", "nvfp4") < kernel_ceiling("gb200", "nvfp4") < mfu
    # no stored measurement, no cap: another format, another vendor, a TPU
    unmeasured = (("b200", "mxfp4"), ("mi300x", "fp8"), ("tpu-v5e", "bf16"))
    assert [kernel_ceiling(chip, dtype) for chip, dtype in unmeasured] == [1.0, 1.0, 1.0]


@for_each([("b200", "nvfp4"), ("h100", "fp8"), ("tpu-v6e", "bf16")])
def test_the_estimates_matmuls_run_no_faster_than_the_ceiling_and_the_bounds_at_the_data_sheets_peak(chip, dtype):
    d = Deployment("llama3-8b", chip, 1, weight_dtype=dtype, compute_dtype=dtype)
    flops = forward_flops(get_model("llama3-8b"), 4096, batch=1, skip_masked=True).matmul
    peak = get_chip(chip).peak_flops(dtype)
    typical, bound = prefill(d, 4096, 1, "typical"), prefill(d, 4096, 1, BOUND)
    mfu = PROFILES["typical"].efficiency.for_chip(chip).mfu
    assert typical.matmul_s == pytest.approx(flops / (peak * min(mfu, kernel_ceiling(chip, dtype))), rel=1e-12)
    assert bound.matmul_s == pytest.approx(flops / peak, rel=1e-12)


def _layer_s(chip, dtype, d_expert, tokens=16384):
    return next(r.latency_s for r in moe_kernel_rows() if (r.chip, r.dtype, r.d_expert, r.tokens) == (chip, dtype,
                                                                                                     d_expert, tokens))


def test_a_format_below_16_bits_speeds_wide_experts_not_narrow_ones():
    # Measured, the whole MoE layer at 16,384 tokens (a prefill's worth): Mixtral 8x7B's experts (14,336 wide, 2 of
    # 8) run 2.24x (B200) and 2.01x (GB200) faster in NVFP4 than in BF16, and 1.81x faster in FP8 on an H200;
    # Qwen3-30B-A3B's (768 wide in a 2,048-wide model, 8 of 128) run 0.75x and 0.76x as fast in NVFP4 (slower) and
    # 1.19x in FP8. Chapter 11's reading of the fine-grained shortfall: the routing, copying and quantizing around
    # a narrow expert's small matmuls do not shrink with the format.
    for chip, low in (("b200", "nvfp4"), ("gb200", "nvfp4"), ("h200", "fp8")):
        wide = _layer_s(chip, "bf16", 14336) / _layer_s(chip, low, 14336)
        narrow = _layer_s(chip, "bf16", 768) / _layer_s(chip, low, 768)
        assert wide > 1.8 and narrow < 1.2 and wide / narrow > 1.5, chip
    assert _layer_s("b200", "bf16", 768) < _layer_s("b200", "nvfp4", 768)


@for_each([
    (lambda: kernel_ceiling("b900", "bf16"), "unknown chip"),
    (lambda: kernel_ceiling("h100", "nvfp4"), "nvfp4"),
    (lambda: kernel_ceiling("h100", "fp7"), "fp7"),
])
def test_bad_input_gets_a_value_error_naming_it(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_moe_layers_floor_by_hand_and_the_median_the_estimate_adds_to_every_moe_layer_on_an_nvidia_gpu():
    # one row by hand: Qwen3-30B-A3B's layer in bf16 on one B200 at one token took 35.4827 us; its 8 experts of
    # 3 x 2,048 x 768 weights, 2 B each, are 75.5 MB, 9.44 us at 8 TB/s: 26.0 us beyond its bytes
    row = next(r for r in moe_kernel_rows() if (r.chip, r.dtype, r.d_expert, r.tokens) == ("b200", "bf16", 768, 1))
    assert row.latency_s == pytest.approx(35.4827e-6)
    assert row.latency_s - 8 * 3 * 2048 * 768 * 2 / 8e12 == pytest.approx(26.0e-6, abs=0.05e-6)
    # the median over TensorRT-LLM's 24 one-token timings (3 chips, bf16 / fp8 / nvfp4, three expert shapes): 36 us,
    # inside their 26-72 us
    assert sum(r.tokens == 1 and r.engine.startswith("TensorRT-LLM") for r in moe_kernel_rows()) == 24
    assert moe_layer_floor() == pytest.approx(36.07e-6, abs=0.01e-6)
    # added to each MoE layer of a serial step on an NVIDIA GPU; never to the bound, a TPU, an AMD GPU or a dense model
    mixtral = get_model("mixtral-8x7b")
    for chip, floor in (("h100", mixtral.n_moe_layers * moe_layer_floor()), ("mi300x", 0.0), ("tpu-v5p", 0.0)):
        d = Deployment("mixtral-8x7b", chip, 8 if chip == "tpu-v5p" else 2)
        assert decode_step(d, 8, 1000, "typical").moe_floor_s == pytest.approx(floor, rel=1e-12), chip
        assert decode_step(d, 8, 1000, BOUND).moe_floor_s == 0.0
    assert decode_step(Deployment("llama3-8b", "h100", 1), 8, 1000, "typical").moe_floor_s == 0.0


def test_sglangs_deepseek_layer_reads_its_experts_slower_sliced_than_whole():
    # SGLang 0.5.9 on one B200 holding an eighth of DeepSeek-V3's MoE layer, at 256 tokens (every expert touched:
    # 256 x (1 - (1 - 8/256)^256) > 255.9): 256 x 3 x 7,168 x 2,048 x 1 B / 8 = 1.41 GB held; each expert sliced eight
    # ways it took 445.3 us, 0.40 of the data sheet's 8 TB/s; as 32 whole experts 300.4 us, 0.59. Chapter 11's
    # "thin slices" suspect, measured on one engine's kernel; TensorRT-LLM's whole layers, by contrast, the estimate
    # prices within its floor and weight-streaming rate
    assert 256 * (1 - (1 - 8 / 256) ** 256) > 255.9
    fraction = {}
    for r in moe_kernel_rows():
        if r.engine.startswith("SGLang") and r.tokens == 256:
            assert r.held_bytes == pytest.approx(256 * 3 * 7168 * 2048 / 8)
            fraction["sliced" if r.moe_tp == 8 else "whole"] = r.held_bytes / r.latency_s / 8e12
    assert fraction == pytest.approx({"sliced": 0.396, "whole": 0.586}, abs=0.001)
    assert fraction["sliced"] < 0.5 < fraction["whole"] < PROFILES["typical"].efficiency.gpu.hbm
