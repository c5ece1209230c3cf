"""kernels: NVIDIA's published timings of TensorRT-LLM's GEMM and MoE kernels (and SGLang's MoE layer), the ceiling
each format reaches, the cap it puts on the estimate's matmuls, and an engine's MoE layer as three measured numbers
(chapter 11)."""

import dataclasses

import pytest

from scaling_lib.dtypes import bytes_per_element
from scaling_lib.efficiency import BOUND, PROFILES
from scaling_lib.estimate import Deployment, decode_step, prefill
from scaling_lib.flops import forward_flops
from scaling_lib.hardware import get_chip
from scaling_lib.kernels import expert_matmul_fraction, fit_moe_layer, gemm_kernel_rows, kernel_ceiling, moe_kernel_rows
from scaling_lib.kernels import moe_layer_floor, moe_layer_model
from scaling_lib.load import load_estimate
from scaling_lib.measurements import sweep_rows
from scaling_lib.models import from_hf_config, get_model
from tests import REPO, for_each


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
        if r.engine.startswith("SGLang") and (r.chip, r.dtype, r.tokens, r.d_model, r.d_expert, r.experts) == (
                "b200", "fp8", 256, 7168, 2048, 256) and r.moe_tp * r.moe_ep == 8:
            assert r.held_bytes == pytest.approx(256 * 3 * 7168 * 2048 / 8)
            fraction["sliced" if r.moe_tp == 8 else "whole"] = r.held_bytes / r.latency_s / 8e12
    assert fraction == pytest.approx({"sliced": 0.396, "whole": 0.586}, abs=0.001)
    assert fraction["sliced"] < 0.5 < fraction["whole"] < PROFILES["typical"].efficiency.gpu.hbm


def _sglang_rows(chip, dtype):
    return [r for r in moe_kernel_rows() if r.engine.startswith("SGLang") and (r.chip, r.dtype) == (chip, dtype)
            and r.tokens <= 256]


def test_fitting_a_layer_made_from_known_numbers_gives_them_back():
    # the stored shapes, splits and token counts of SGLang's fp8 layer on a B200, their timings replaced by a layer
    # of 30 us + 0.25 us per expert run + the bytes of those experts at 0.7 of 8 TB/s, worked out here by hand:
    # min(E, T k) / moe_ep experts run, each 3 D F / moe_tp weights of one byte
    rows = []
    for r in _sglang_rows("b200", "fp8"):
        run = min(r.experts, r.tokens * r.k) / r.moe_ep
        weights = run * 3 * r.d_model * r.d_expert / r.moe_tp
        rows.append(dataclasses.replace(r, latency_s=30e-6 + run * 0.25e-6 + weights / (0.7 * 8e12)))
    model = fit_moe_layer(rows)
    assert (model.floor_s, model.expert_s, model.stream_fraction) == pytest.approx((30e-6, 0.25e-6, 0.7), rel=1e-9)
    assert model.within_25 == 1 and model.n_rows == len(rows) > 200
    # a layer with no cost per expert: that term is dropped rather than fitted negative
    flat = [dataclasses.replace(r, latency_s=20e-6 + min(r.experts, r.tokens * r.k) / r.moe_ep * 3 * r.d_model
                                * r.d_expert / r.moe_tp / (0.5 * 8e12)) for r in _sglang_rows("b200", "fp8")]
    assert (fit_moe_layer(flat).expert_s, fit_moe_layer(flat).stream_fraction) == (0.0, pytest.approx(0.5))
    with pytest.raises(ValueError, match="one engine"):
        fit_moe_layer(rows[:5] + _sglang_rows("h100", "fp8")[:5])


@for_each([(chip, dtype) for chip in ("b200", "h100", "h200") for dtype in ("bf16", "fp8")])
def test_sglangs_moe_layer_is_a_chain_a_cost_per_expert_and_a_streaming_fraction(chip, dtype):
    # NVIDIA's timings of SGLang 0.5.9's layer (ten expert shapes, whole or split 2 to 8 ways, 1 to 256 tokens),
    # measured: the three numbers give 81-96% of the 245-270 timings within 25%; the chain costs 23-31 us (less than
    # TensorRT-LLM's 36 us median floor), the experts stream at 0.70-0.83 of the data sheet, and only the FP8 kernel
    # costs something per expert run (0.13-0.28 us; in bf16 the fit would make it negative, so it is dropped)
    model = moe_layer_model("SGLang", chip, dtype)
    assert model.n_rows >= 245 and model.within_25 >= 0.8
    assert 20e-6 < model.floor_s < moe_layer_floor() and 0.65 < model.stream_fraction < 0.9
    assert (0.1e-6 < model.expert_s < 0.3e-6) if dtype == "fp8" else model.expert_s == 0.0


def test_sglangs_kernels_stream_experts_slower_on_blackwell_than_on_hopper():
    # measured: 0.70-0.71 of the data sheet on a B200 in both formats, 0.79-0.83 on an H100 or H200; and the FP8
    # kernel's cost per expert run on a B200 twice the H100's (0.28 against 0.14 us)
    for dtype in ("bf16", "fp8"):
        b200 = moe_layer_model("SGLang", "b200", dtype).stream_fraction
        assert b200 < 0.72 < 0.78 < min(moe_layer_model("SGLang", chip, dtype).stream_fraction
                                         for chip in ("h100", "h200"))
    assert moe_layer_model("SGLang", "b200", "fp8").expert_s > 1.9 * moe_layer_model("SGLang", "h100", "fp8").expert_s
    assert moe_layer_model("SGLang", "gb200", "bf16") is None  # not timed: the estimate keeps its own pricing
    with pytest.raises(ValueError, match="SGLang, TensorRT-LLM"):
        moe_layer_model("vLLM", "h100", "bf16")
    with pytest.raises(ValueError, match="no native fp8"):  # a format the chip does not compute, not None
        moe_layer_model("SGLang", "a100", "fp8")
    with pytest.raises(ValueError, match="unknown dtype 'fp7'"):
        moe_layer_model("SGLang", "b200", "fp7")


def test_the_sglang_profile_prices_deepseeks_layer_near_sglangs_timing_of_it():
    # DeepSeek-V3 in fp8 on eight B200, experts sliced eight ways, decoding 256 sequences (every expert touched):
    # SGLang timed one GPU's share of the layer at 445 us; the sglang profile prices its 58 MoE layers at 354 us each
    # (0.79 of it: the fit is low for slices this thin), the typical fit at 36 us + the bytes at hbm, 299 us (0.67)
    d = Deployment("deepseek-v3", "b200", 8, weight_dtype="fp8")
    timed = next(r.latency_s for r in moe_kernel_rows() if r.engine.startswith("SGLang") and (
        r.chip, r.dtype, r.tokens, r.d_model, r.d_expert, r.experts, r.moe_tp) == ("b200", "fp8", 256, 7168, 2048,
                                                                                  256, 8))
    own, typical = (decode_step(d, 256, 1000, profile) for profile in ("sglang", "typical"))
    layers = get_model("deepseek-v3").n_moe_layers
    assert own.moe_engine == "SGLang" and own.moe_layers_s / layers == pytest.approx(timed, rel=0.25)
    held = 256 * 3 * 7168 * 2048 / 8  # bytes of the experts on one GPU
    typical_layer = moe_layer_floor() + held / (8e12 * PROFILES["typical"].efficiency.gpu.hbm)
    assert typical_layer < own.moe_layers_s / layers < timed
    assert (typical.moe_engine, typical.moe_layers_s) == ("", 0.0)
    assert own.total_s > typical.total_s
    # nothing else changes: a dense model, an AMD GPU, a GPU or a format SGLang was not timed on, the bound (the
    # profile has no TPU half)
    for deployment in (Deployment("llama3-70b", "b200", 8),
                       Deployment("deepseek-v3", "mi300x", 8, weight_dtype="fp8"),
                       Deployment("mixtral-8x7b", "gb200", 2),
                       Deployment("deepseek-v3", "b200", 8, weight_dtype="int4")):
        assert decode_step(deployment, 64, 1000, "sglang").moe_engine == ""
    assert decode_step(d, 256, 1000, BOUND).moe_layers_s == 0.0


def test_sglangs_own_moe_layers_move_its_served_deepseek_runs_but_not_the_mixtures_misses_as_a_whole():
    # SGLang's cookbook and dstack's runs of mixtures on NVIDIA GPUs, priced at their load with the sglang profile,
    # with and without its measured MoE layers (nothing fitted on them): DeepSeek-R1 on eight B200, experts sliced
    # eight ways, its worst run from 1.44x to 1.30x the estimate's TPOT; MiniMax-M2.5, whole experts on each GPU,
    # where SGLang's kernel runs about as the typical fit prices it, no nearer on B200 and further on H100 (1.10 to
    # 1.22 median); over all 43 runs it changes, within 1.5x on 31 either way: the served mixtures' shortfall is mostly
    # outside the MoE kernel. MiniMax-M2.5 at 100 clients even decodes slower on eight B200 (33.0 ms) than on eight
    # H100 (28.9 ms), which no bandwidth or FLOP rate of the two chips explains
    own = PROFILES["sglang"].efficiency
    without = dataclasses.replace(own, gpu=dataclasses.replace(own.gpu, moe_kernels=""))
    ratios = {}
    for row in sweep_rows(engine="SGLang"):
        pair = tuple(row.tpot_s / load_estimate(row.deployment(), row.input_len, row.output_len,
                                                concurrency=row.concurrency, efficiency=e).tpot_s
                     for e in (without, own))
        if pair[0] != pair[1]:
            ratios.setdefault((get_model(row.model).name, row.chip), []).append(pair)
    assert sum(map(len, ratios.values())) == 43
    everything = [pair for pairs in ratios.values() for pair in pairs]
    assert [sum(1 / 1.5 <= pair[i] <= 1.5 for pair in everything) for i in (0, 1)] == [31, 31]
    deepseek = ratios["deepseek-v3", "b200"]
    assert max(p[0] for p in deepseek) > 1.4 > 1.35 > max(p[1] for p in deepseek)
    h100 = [p[1] / p[0] for p in ratios["minimax-m2.5", "h100"]]
    assert min(h100) > 1.05
    at_100 = {row.chip: row.tpot_s for row in sweep_rows(engine="SGLang")
              if get_model(row.model).name == "minimax-m2.5" and row.concurrency == 100}
    assert at_100["b200"] > 1.1 * at_100["h100"]
    assert get_chip("b200").hbm_bandwidth > 2 * get_chip("h100").hbm_bandwidth


def test_a_layer_of_small_experts_gives_its_flops_a_small_share_of_the_bf16_peak():
    # TensorRT-LLM's layer of Qwen3-30B-A3B's shape in NVFP4 on one B200 at 16,384 tokens, by hand: 6 x 16,384 x 8 x
    # 2,048 x 768 FLOPs in its time less the layer's chain and less its tokens' activations between the matmuls
    # (3 x 8 x 768 + 2 x 9 x 2,048 bf16 values a token) at the B200's 8 TB/s, over its 2.25 PFLOP/s of bf16: 0.35.
    # Experts 768 wide get 0.34-0.50 of the bf16 peak on Blackwell in every format (below the fitted mfu, 0.64), and
    # 0.60-0.75 on an H200; 1,536 wide in a 4,096-wide model, 0.73-0.78 in bf16
    row = next(r for r in moe_kernel_rows() if r.engine.startswith("TensorRT-LLM") and (
        r.chip, r.dtype, r.d_model, r.d_expert, r.tokens) == ("b200", "nvfp4", 2048, 768, 16384))
    activations = 16384 * (3 * 8 * 768 + 2 * 9 * 2048) * 2 / 8e12
    hand = 6 * 16384 * 8 * 2048 * 768 / ((row.latency_s - moe_layer_floor() - activations) * 2.25e15)
    assert expert_matmul_fraction("b200", "nvfp4", 2048, 768) == pytest.approx(hand, rel=1e-9) and 0.34 < hand < 0.36
    small = [expert_matmul_fraction(chip, f, 2048, 768) for chip in ("b200", "gb200") for f in ("bf16", "fp8", "nvfp4")]
    hopper = [expert_matmul_fraction("h200", f, 2048, 768) for f in ("bf16", "fp8")]
    wider = [expert_matmul_fraction(chip, "bf16", 4096, 1536) for chip in ("b200", "gb200", "h200")]
    assert 0.33 < min(small) < max(small) < 0.5 < 0.6 < min(hopper) < max(hopper) < 0.76
    assert max(small) < PROFILES["typical"].efficiency.gpu.mfu < 0.72 < min(wider) < max(wider) < 0.79
    # interpolated in ln(D F): halfway between the two smallest sizes, the mean of their shares; held outside them
    between = expert_matmul_fraction("b200", "bf16", 2048, 1536)  # 2,048 x 1,536 = sqrt(2,048 x 768 x 4,096 x 1,536)
    assert between == pytest.approx((expert_matmul_fraction("b200", "bf16", 2048, 768)
                                     + expert_matmul_fraction("b200", "bf16", 4096, 1536)) / 2)
    assert expert_matmul_fraction("b200", "bf16", 2048, 512) == expert_matmul_fraction("b200", "bf16", 2048, 768)
    assert expert_matmul_fraction("b200", "bf16", 8192, 28672) == expert_matmul_fraction("b200", "bf16", 4096, 14336)
    assert expert_matmul_fraction("h100", "fp8", 2048, 768) is None  # no layer timed on an H100
    with pytest.raises(ValueError, match="nvfp4"):
        expert_matmul_fraction("h200", "nvfp4", 2048, 768)


def test_the_estimate_prices_fine_grained_experts_at_what_nvidias_layer_of_their_size_computes():
    # Qwen3-30B-A3B in NVFP4 on one B200, a 16,384-token prompt: the routed experts' matmul seconds per MoE layer are
    # the timed layer's less its chain and its activations at line rate (the share above is defined so); bf16 is
    # capped too; where no layer was timed (an H100) they run at the bf16 kernel ceiling, and a dense model or a
    # model with wide experts has no such share
    qwen30 = from_hf_config(REPO / "book/data/hf_configs/qwen3-30b-a3b.json")
    timed = next(r.latency_s for r in moe_kernel_rows() if r.engine.startswith("TensorRT-LLM") and (
        r.chip, r.dtype, r.d_model, r.d_expert, r.tokens) == ("b200", "nvfp4", 2048, 768, 16384))
    for dtype in ("nvfp4", "bf16"):
        d = Deployment(qwen30, "b200", 1, weight_dtype=dtype, compute_dtype=dtype)
        step = prefill(d, 16384, 1, "typical")
        assert step.expert_kernel_ceiling == d.expert_kernel_fraction < 0.5
        if dtype == "nvfp4":
            activations = 16384 * (3 * 8 * 768 + 2 * 9 * 2048) * 2 / 8e12
            assert step.expert_matmul_s / qwen30.n_moe_layers == pytest.approx(timed - moe_layer_floor() - activations,
                                                                               rel=1e-6)
    h100 = Deployment(qwen30, "h100", 1, weight_dtype="fp8")
    assert h100.expert_kernel_fraction == kernel_ceiling("h100", "bf16")
    assert Deployment("llama3-70b", "b200", 1, weight_dtype="fp8").expert_kernel_fraction == 1.0
    assert Deployment("mixtral-8x7b", "b200", 1).narrow_expert_share == 0.0
