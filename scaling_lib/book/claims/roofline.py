"""Claims R1-R5 of the ledger: Rooflines and the critical batch size.

Each row below is a published number and the scaling_lib call that recomputes it; the helpers sit beside
the rows that use them.
"""


from ...roofline import (attention_bytes, attention_flops, attention_intensity, critical_batch_size,
                         moe_critical_batch_size, ridge_point)
from .framework import REL, SB1, SB7, Claim, Finding, between, holds_that


def _bcrit(chip, weight_dtype="bf16", compute_dtype="bf16"):
    return critical_batch_size(chip, weight_dtype, compute_dtype)


def _r4_prefill_intensity():
    return attention_intensity(8192, 8192)


def _r4_prefill_threshold():
    return 2 * ridge_point("tpu-v5e")


def _r4_decode_intensity(n_heads, n_kv_heads, batch):
    return (attention_flops(1, 8192, n_heads=n_heads, head_dim=128, batch=batch)
            / attention_bytes(1, 8192, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=128, batch=batch))


def _r4_mha_any_batch():
    values = [_r4_decode_intensity(40, 40, batch) for batch in (1, 16, 256)]
    spread = max(values) / min(values) - 1
    ok = all(abs(v - 1) <= REL for v in values) and spread < 1e-9
    return Finding(values[0], ok, "batch 1, 16, 256: " + ", ".join(f"{v:.3f}" for v in values) + " FLOPs/B")


def _r5():
    return moe_critical_batch_size("tpu-v5e", n_experts=16, n_active_experts=2)


CLAIMS = (
    Claim("R1", "", "B_crit on TPU v5e, bf16 weights and math", SB7, "240 tokens", 240, "tokens",
          lambda: _bcrit("tpu-v5e")),
    Claim("R2", "range", "B_crit on H100 (bf16)", SB7, "about 280-300 tokens", None, "tokens",
          lambda: _bcrit("h100"), between(280 * (1 - REL), 300, "tokens"),
          "Ch. 7 says about 280; ch. 1 computes 9.89e14 / 3.35e12 = 295. Both are shown."),
    Claim("R2", "ch. 1 value", "B_crit on H100 (bf16), ch. 1's arithmetic", SB1, "295 tokens", 295, "tokens",
          lambda: _bcrit("h100"), note="Ch. 7 rounds the same ratio to about 280."),
    Claim("R3", "int8 weights, bf16 math", "int8 weights with bf16 math halve B_crit on v5e", SB7, "120 tokens", 120,
          "tokens", lambda: _bcrit("tpu-v5e", "int8", "bf16")),
    Claim("R3", "int8 weights, int8 math", "int8 math restores B_crit on v5e", SB7, "240 tokens", 240, "tokens",
          lambda: _bcrit("tpu-v5e", "int8", "int8")),
    Claim("R4", "prefill T/2", "prefill attention intensity S T / (S + T) = T / 2 (T = S = 8,192)", SB7,
          "T/2 = 4,096 FLOPs/B at T = 8,192", 4096, "FLOPs/B", _r4_prefill_intensity),
    Claim("R4", "prefill compute-bound", "prefill attention is compute-bound on v5e above about 480 tokens", SB7,
          "about 480 tokens", 480, "tokens", _r4_prefill_threshold),
    Claim("R4", "MHA decode about 1", "decode attention intensity is about 1 for MHA, whatever the batch", SB7,
          "about 1 FLOP/B", 1.0, "FLOPs/B", _r4_mha_any_batch,
          holds_that("within 2% of 1 at batch 1, 16, 256")),
    Claim("R4", "GQA decode about G", "with GQA the decode intensity is about G = N / K (N = 64, K = 8)", SB7,
          "about G = 8 FLOPs/B", 8.0, "FLOPs/B", lambda: _r4_decode_intensity(64, 8, 8)),
    Claim("R5", "", "a 16-expert, top-2 MoE needs E / k x B_crit on v5e (bf16)", SB7, "1,920 tokens", 1920,
          "tokens", _r5),
)
