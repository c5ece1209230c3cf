"""The values behind the notebook outputs that depend on the CPU's floating-point kernels.

A notebook prints such a value as what holds on any machine (scaling_lib.book.portable): agreement within float32
rounding, or the rungs of a ladder around it ("1% to 3%"). These tests recompute each value on the notebook's own
inputs and check it against its oracle with a margin, so that the printed statement cannot flip on another CPU:

- agreements within float32 rounding hold with 4x to spare (observed: up to 6e-7 relative, against 1.2e-5); those
  are checked beside the computations they qualify: tests/tiny/test_layouts.py (chapter 8), test_moe.py
  (chapter 10), test_qwix_quant.py (chapter 13), test_sequence_sharding.py (chapter 14), test_paged.py (chapter 6's
  paged float32 cache: atol 1e-5 on logits up to about 4);
- a value printed between two rungs stays 15% clear of both (chapter 13's int8 x int8 errors moved by up to 12%,
  2.05% to 2.29%, between the XLA CPU configurations tried: AVX-512 VNNI, AVX2, SSE4.2, one thread or two);
- an agreement printed as "at least" a rung reaches it even if every position where the top two logits nearly tie
  had flipped.

The ladders themselves are tested with the rest of scaling_lib.book.portable, in tests/book/test_stored_outputs.py.

Oracles: the unsharded or unquantized computation, the hand-written quantized path of chapter 10
(scaling_lib.tiny.quantize, an implementation independent of Qwix), and a NumPy emulation of the int8 and e4m3
formats for chapter 13's single matmul.
"""

import ml_dtypes
import numpy as np
import pytest

from scaling_lib.book.portable import AGREEMENT_RUNGS, ERROR_RUNGS, FLOAT32_ROUNDING, at_least, between
from scaling_lib.tiny import model, paged
from scaling_lib.tiny import qwix_quant as qq
from scaling_lib.tiny import quantize as qz

CLEAR = 1.15  # values between rungs: this factor clear of each rung


def assert_clear_of_rungs(value, expected, rungs=ERROR_RUNGS, fmt="{:.0%}"):
    """`value` prints as `expected` (between two rungs) and stays CLEAR of both."""
    assert between(value, rungs, fmt) == expected, value
    below = [r for r in rungs if r <= value]
    above = [r for r in rungs if r > value]
    assert not below or value >= CLEAR * below[-1], (value, below[-1])
    assert not above or value <= above[0] / CLEAR, (value, above[0])


def assert_agreement(out, reference, expected: str, rungs=AGREEMENT_RUNGS):
    """The fraction of positions (rows of logits) where `out` picks the token `reference` picks prints as
    `expected`, even if every fragile position flipped: one where out's two best logits are closer than a tenth of
    the largest |out - reference| (another CPU moves out's logits by far less than that)."""
    out, reference = np.asarray(out, np.float64), np.asarray(reference, np.float64)
    agree = out.argmax(-1) == reference.argmax(-1)
    top_two = np.sort(out, axis=-1)[:, -2:]
    fragile = top_two[:, 1] - top_two[:, 0] < 0.1 * np.abs(out - reference).max()
    assert at_least(agree.mean(), rungs) == expected, agree.mean()
    assert at_least((agree & ~fragile).mean(), rungs) == at_least((agree | fragile).mean(), rungs) == expected, (
        fragile.sum())


# --- greedy tokens the chapters print: no near-tie that another CPU's rounding could break ---------------------------

@pytest.mark.parametrize("config, batch, prompt_len, n_new, lengths", [
    (model.tiny_config().with_(d_model=256, d_ff=1024, head_dim=64, name="tiny-wide"), 4, 8, 12, None),  # chapter 2
    (model.tiny_config(n_kv_heads=2), 2, 8, 8, [8, 5]),  # chapter 6's contiguous tokens
])
def test_printed_greedy_tokens_have_no_near_tie(config, batch, prompt_len, n_new, lengths):
    params = model.init_params(config, seed=0)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, size=(batch, prompt_len), dtype=np.int32)
    if lengths:
        prompt[1, lengths[1]:] = 0
    _, logits = model.greedy_with_logits(params, prompt, n_new, lengths)
    best_two = np.sort(logits, axis=-1)[..., -2:]
    # Every chosen token leads the runner-up by 10x the float32 rounding of the logits (observed: 3x more still).
    assert (best_two[..., 1] - best_two[..., 0]).min() >= 10 * FLOAT32_ROUNDING * np.abs(logits).max()


# --- chapter 6: the KV cache and the weights in int8 / fp8 ------------------------------------------------------------

CH6_B, CH6_T, CH6_NEW, CH6_BLOCK, CH6_LENGTHS = 2, 8, 8, 4, [8, 5]
KV_ERROR_BOUNDS = (0.05, 0.3)  # chapter 6's bounds (and tests/tiny/test_paged.py's), logits of std about 1


@pytest.fixture(scope="module")
def chapter_6():
    params = model.init_params(model.tiny_config(n_kv_heads=2), seed=0)
    prompt = np.random.default_rng(0).integers(0, 256, size=(CH6_B, CH6_T), dtype=np.int32)
    prompt[1, CH6_LENGTHS[1]:] = 0
    real = np.arange(CH6_T)[None, :] < np.array(CH6_LENGTHS)[:, None]
    return params, prompt, real, np.asarray(model.forward(params, prompt))


def ch6_cache(params, kv_dtype):
    return paged.PagedKVCache(params.config, CH6_B, 16, CH6_BLOCK,
                              max_blocks_per_seq=(CH6_T + CH6_NEW) // CH6_BLOCK, kv_dtype=kv_dtype)


@pytest.mark.parametrize("quantized, error, agreement", [
    pytest.param("int8 KV", "below 0.05", "at least 95%", id="int8 KV cache"),
    pytest.param("fp8 KV", "0.05 to 0.3", "at least 75%", id="fp8 KV cache"),
    pytest.param("weight-only", "1% to 3%", "at least 75%", id="weight-only int8"),
    pytest.param("int8", "1% to 3%", "at least 75%", id="int8 x int8"),
])
def test_chapter_6_quantized_errors_and_agreement(chapter_6, quantized, error, agreement):
    """A quantized KV cache's largest logit error (absolute: the logits have standard deviation about 1) on the
    chapter's bounds, int8 weights' relative to the largest logit on the error ladder. int8 x int8 disagrees at one of
    the 13 positions where its two best logits nearly tie: the chapter prints the weights' agreement on a ladder
    without a rung between 12 / 13 and 13 / 13."""
    params, prompt, real, reference = chapter_6
    if quantized.endswith("KV"):
        kv_dtype = quantized.split()[0]
        logits = np.asarray(paged.paged_prefill(params, prompt, ch6_cache(params, kv_dtype), CH6_LENGTHS)[0])
        assert_clear_of_rungs(float(np.abs(logits - reference)[real].max()), error, KV_ERROR_BOUNDS, "{:g}")
        assert_agreement(logits[real], reference[real], agreement)
        return
    logits = np.asarray(model.forward(qz.quantize_params(params, quantized), prompt))
    assert_clear_of_rungs(float(np.abs(logits - reference)[real].max() / np.abs(reference).max()), error)
    assert_agreement(logits[real], reference[real], agreement, (0.5, 0.75))


# --- chapter 13: Qwix ----------------------------------------------------------------------------------------------

def numpy_int8(v, axis):
    """Qwix's symmetric absmax int8 in float64: step a / 127.5 per slice, values rounded and clipped to +-127."""
    v = np.asarray(v, np.float64)
    step = np.abs(v).max(axis=axis, keepdims=True) / 127.5
    return np.clip(np.rint(v / step), -127, 127) * step


def numpy_e4m3(v, axis):
    """Absmax float8_e4m3fn: scale a / 448 per slice, each value rounded to e4m3 by ml_dtypes' software cast."""
    v = np.asarray(v, np.float64)
    scale = np.abs(v).max(axis=axis, keepdims=True) / 448
    return (v / scale).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * scale


def test_chapter_13_one_matmul_errors_are_those_of_a_numpy_emulation_of_the_formats():
    rng = np.random.default_rng(1)  # chapter 13's inputs
    x = rng.standard_normal((64, 256)).astype(np.float32) * rng.uniform(0.1, 3.0, (64, 1)).astype(np.float32)
    w = (rng.standard_normal((256, 128)) / 16).astype(np.float32)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    emulated = {"weight-only int8": x.astype(np.float64) @ numpy_int8(w, 0),
                "int8 x int8": numpy_int8(x, 1) @ numpy_int8(w, 0),
                "fp8 x fp8": numpy_e4m3(x, 1) @ numpy_e4m3(w, 0)}
    for scheme in qq.SCHEMES:
        ours = np.abs(np.asarray(qq.matmul(x, w, scheme), np.float64) - exact)
        theirs = np.abs(emulated[scheme] - exact)
        bound = qq.matmul_error_bound(x, w, scheme)
        assert ours.max() == pytest.approx(theirs.max(), rel=1e-4), scheme
        assert (ours / bound).max() == pytest.approx((theirs / bound).max(), rel=1e-4), scheme
        assert ours.mean() == pytest.approx(theirs.mean(), rel=1e-3), scheme
        # The chapter prints the largest error to 2 digits and error / bound to 3 decimals: 3% of a step clear of the
        # rounding edge (another CPU moves them by about 1e-5 of themselves).
        for value, digits in ((ours.max(), f"{ours.max():.1e}"), ((ours / bound).max(), f"{(ours / bound).max():.3f}")):
            step = 10.0 ** (np.floor(np.log10(value)) - 1) if "e" in digits else 0.001
            assert abs(value - float(digits)) <= 0.47 * step, (scheme, value, digits)


@pytest.fixture(scope="module")
def chapter_13():
    params = model.init_params(model.tiny_config(), seed=0)
    tokens = np.random.default_rng(0).integers(0, params.config.vocab_size, (2, 32)).astype(np.int32)
    quantized = {scheme: np.asarray(qq.logits(qq.quantize(params, qq.rules(scheme), tokens).model, tokens))
                 for scheme in qq.SCHEMES}
    return params, tokens, np.asarray(model.forward(params, tokens)), quantized


# scheme: (Qwix vs float, hand-written vs float, Qwix vs hand-written, next-token agreement), as chapter 13 prints them
CH13_TABLE = {"weight-only int8": ("1% to 3%", "1% to 3%", "1% to 3%", "at least 95%"),
              "int8 x int8": ("1% to 3%", "1% to 3%", "1% to 3%", "at least 95%"),
              "fp8 x fp8": ("3% to 10%", None, None, "at least 75%")}


@pytest.mark.parametrize("scheme", [*CH13_TABLE, "int8 x int8 on the projections before attention and the MLP"])
def test_chapter_13_whole_model_errors_against_the_hand_written_path(chapter_13, scheme):
    params, tokens, reference, quantized = chapter_13
    scale = np.abs(reference).max()
    if scheme not in CH13_TABLE:  # only the q, k, v, gate and up projections in int8
        partial = qq.quantize(params, qq.rules("int8 x int8", r"layers/\d+/(wq|wk|wv|w_gate|w_up)"), tokens)
        out = np.asarray(qq.logits(partial.model, tokens))
        assert_clear_of_rungs(np.abs(out - reference).max() / scale, "1% to 3%")
        return
    out = quantized[scheme]
    qwix_error = np.abs(out - reference).max() / scale
    expected = CH13_TABLE[scheme]
    assert_clear_of_rungs(qwix_error, expected[0])
    assert_agreement(out.reshape(-1, out.shape[-1]), reference.reshape(-1, out.shape[-1]), expected[3])
    if expected[1] is None:  # fp8: no hand-written path; e4m3's 3 mantissa bits err several times more than int8's 7
        assert qwix_error > 2 * np.abs(quantized["int8 x int8"] - reference).max() / scale
        return
    hand = np.asarray(model.forward(qz.quantize_params(params, "weight-only" if scheme.startswith("weight") else
                                                       "int8"), tokens))
    hand_error = np.abs(hand - reference).max() / scale
    assert_clear_of_rungs(hand_error, expected[1])
    assert_clear_of_rungs(np.abs(out - hand).max() / scale, expected[2])
    # Qwix's grid (a / 127.5) and chapter 10's (a / 127) differ by a hair: the two errors are of one size.
    assert 1 / 1.5 < qwix_error / hand_error < 1.5
