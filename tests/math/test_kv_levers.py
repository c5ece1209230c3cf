"""scaling_lib.kv_levers: what each KV-cache lever of chapter 6 saves in bytes stored and bytes read, worked by hand
on small models, and claims T4 and M6."""

import re

import pytest

from scaling_lib._validate import MAX_REQUESTS
from scaling_lib.book.claims import REL, claim, evaluate, published
from scaling_lib.book.claims.step_time import T4_DEPLOYMENT
from scaling_lib.inference import decode_step_time
from scaling_lib.kv_levers import (cross_layer_kv_bytes, decode_attention_cost, evenly_ragged_lengths, kv_footprint,
                                   kv_lever_table, local_global_kv_bytes, ragged_kv_reads, state_lever)
from scaling_lib.memory import kv_cache_bytes
from scaling_lib.models import Transformer, get_model

from tests import for_each

# 4 layers, 2 KV heads of 16: a token's K and V on one layer are 2 x 2 x 16 x 2 B = 128 B in bf16.
FOUR = Transformer(n_layers=4, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)
LAYER_TOKEN = 128


# --- Claims T4 and M6 -------------------------------------------------------------------------------------------------
def test_t4_llama3_70b_8_ironwood_32k_batch64_fp8_weights_and_kv_halve_the_step_14_to_7_ms():
    # The deployment is the ledger's (the source gives none): 8 Ironwood chips, batch 64, 32,768 tokens of context.
    bf16 = decode_step_time(**T4_DEPLOYMENT)
    fp8 = decode_step_time(**T4_DEPLOYMENT, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    assert bf16.total_s == pytest.approx(published("T4 bf16"), rel=REL)
    assert fp8.total_s == pytest.approx(published("T4 fp8"), rel=REL)
    assert bf16.kv_s > 0.8 * bf16.total_s  # long context: the KV read is most of the step, so fp8 KV matters most
    # Weights alone barely help.
    assert decode_step_time(**T4_DEPLOYMENT, weight_dtype="fp8").total_s > 0.9 * bf16.total_s


def test_m6_kv_levers_each_shrink_the_cache_and_together_by_an_order_of_magnitude():
    rows = {row.lever: row for row in kv_lever_table("llama2-13b", 8192, batch=64)}
    heads = get_model("llama2-13b").n_kv_heads
    assert rows["GQA"].stored_saving == pytest.approx(heads / 8)  # the table's default K = 8: 40 / 8 = 5x
    assert rows["MQA"].stored_saving == pytest.approx(heads)
    assert rows["KV quantization"].stored_saving == pytest.approx(2.0)
    assert rows["cross-layer sharing"].stored_saving == pytest.approx(2.0)
    assert rows["cross-layer sharing"].read_saving == pytest.approx(1.0)  # memory, not bandwidth
    # 64 lengths 128, 256, ..., 8,192 (all whole 16-token blocks): 64 x 8,192 slots padded against
    # 128 x (1 + ... + 64) = 266,240 paged, a saving of 128 / 65.
    assert rows["paged attention"].read_saving == pytest.approx(128 / 65, rel=1e-12)
    assert rows["local attention"].stored_saving > 3  # 5 of 6 layers keep 1,024 of 8,192 tokens
    for row in rows.values():
        assert row.stored_bytes < row.baseline_stored and row.read_bytes <= row.baseline_read
    assert rows["all of the above"].stored_saving > 10 and rows["all of the above"].read_saving > 10


def test_m6_claims_no_ranking_because_a_wider_window_reorders_the_levers():
    # The source introduces the levers GQA, local attention, cross-layer sharing, quantization, paged attention, "from
    # small to large impact" by the summary the book started from. At the table's settings the savings run the other
    # way, GQA the largest; local attention saves more than cross-layer sharing, but with a 4,096-token window it saves
    # less (5 of 6 layers keep up to 4,096 of at most 8,192 tokens), so the ledger must not claim an order.
    narrow, wide = ({row.lever: row for row in kv_lever_table("llama2-13b", 8192, batch=64, window=w)}
                    for w in (1024, 4096))
    saving = {lever: narrow[lever].stored_saving for lever in narrow}
    assert saving["GQA"] > saving["local attention"] > saving["cross-layer sharing"] > saving["paged attention"]
    assert saving["cross-layer sharing"] == saving["KV quantization"] == 2.0  # a tie: half the layers, half the bytes
    assert narrow["local attention"].stored_saving > narrow["cross-layer sharing"].stored_saving
    assert wide["local attention"].stored_saving < wide["cross-layer sharing"].stored_saving
    m6 = claim("M6")
    assert "rank" not in m6.published and "source's order" not in m6.statement
    result = evaluate(m6)
    assert result.holds and "4,096" in result.detail


# --- Local and global layers: a window on most layers -------------------------------------------------------------
def test_local_layers_keep_the_window_and_global_ones_every_token_by_hand():
    # 3 sequences of 1,000 tokens; layer 3 global, layers 0-2 keep 100; fp8 is half of bf16's 128 B.
    assert local_global_kv_bytes(FOUR, 1000, 100, 4, batch=3, dtype="fp8") == 3 * (1000 + 3 * 100) * 64
    assert local_global_kv_bytes(FOUR, 0, 100, 4) == 0
    assert local_global_kv_bytes(FOUR, 1000, 100, 4) == (1000 + 3 * 100) * 128  # one sequence unless told
    # LLaMA 3 8B: 32 layers, 4,096 B per token and layer in bf16 (8 KV heads x 128 x 2 x 2 B). With a 100-token
    # window and global_every=3, layers 2, 5, ..., 29 (10 of them) keep all 1,000 tokens and the other 22 keep 100:
    # (10 x 1,000 + 22 x 100) x 4,096 B = 49,971,200 B.
    footprint = kv_footprint("llama3-8b", [1000], window=100, global_every=3)
    assert footprint.stored_bytes == footprint.read_bytes == (10 * 1000 + 22 * 100) * 4096
    # Limits: every layer global, or a window that covers the context, is the full cache; every layer local is what
    # memory.kv_cache_bytes gives a windowed model.
    S, W = 8192, 1024
    full = kv_cache_bytes("llama3-8b", S, batch=4)
    assert local_global_kv_bytes("llama3-8b", S, W, global_every=1, batch=4) == pytest.approx(full)
    assert local_global_kv_bytes("llama3-8b", S, S, global_every=6, batch=4) == pytest.approx(full)
    all_local = kv_footprint("llama3-8b", [S] * 4, window=W).stored_bytes
    assert all_local == pytest.approx(kv_cache_bytes(get_model("llama3-8b").with_(sliding_window=W), S, batch=4))
    assert all_local < local_global_kv_bytes("llama3-8b", S, W, global_every=6, batch=4) < full


def test_kv_footprint_follows_the_models_own_local_global_pattern_unless_a_window_is_given():
    gemma_like = FOUR.with_(sliding_window=100, global_every=2)  # layers 1 and 3 global, 0 and 2 keep 100 tokens
    assert kv_footprint(gemma_like, [1000]).stored_bytes == (2 * 1000 + 2 * 100) * LAYER_TOKEN
    # a window passed without global_every makes every layer local, whatever the model's own pattern
    assert kv_footprint(gemma_like, [1000], window=200).stored_bytes == 4 * 200 * LAYER_TOKEN
    # global_every passed alone keeps the model's window
    assert kv_footprint(gemma_like, [1000], global_every=4).stored_bytes == (1000 + 3 * 100) * LAYER_TOKEN
    # a model without a window keeps every token on every layer
    assert kv_footprint(FOUR, [1000], global_every=2).stored_bytes == 4 * 1000 * LAYER_TOKEN


# --- Cross-layer sharing: memory, not bandwidth ---------------------------------------------------------------------
def test_cross_layer_sharing_saves_memory_not_bandwidth_by_hand():
    shared = cross_layer_kv_bytes("llama3-70b", 32768, share_every=4, batch=8)
    assert shared.stored_bytes == pytest.approx(kv_cache_bytes("llama3-70b", 32768, 8) / 4)
    assert shared.read_bytes == pytest.approx(kv_cache_bytes("llama3-70b", 32768, 8))
    # LLaMA-2-13B in bf16: 40 KV heads x 128 x 2 (K and V) x 2 B = 20,480 B per token and layer; 1,000 tokens on 40
    # layers read 819.2 MB per step; pairs of layers sharing one cache store half that (one sequence by default).
    shared = cross_layer_kv_bytes("llama2-13b", 1000, share_every=2)
    assert shared.read_bytes == 1000 * 40 * 20480
    assert shared.stored_bytes == 1000 * 20 * 20480
    # 2 sequences of 50 tokens, pairs of layers sharing: 2 caches stored, 4 read, 64 B a token and layer in fp8.
    shared = cross_layer_kv_bytes(FOUR, 50, 2, batch=2, dtype="fp8")
    assert (shared.stored_bytes, shared.read_bytes) == (2 * 50 * 2 * 64, 2 * 50 * 4 * 64)


def test_a_sharing_group_stores_what_its_longest_reaching_layer_keeps_and_the_last_group_may_be_short():
    # global layers 1 and 3, local ones keep 100 of 1,000 tokens; pairs share: each pair holds a global layer.
    pairs = kv_footprint(FOUR, [1000], window=100, global_every=2, share_every=2)
    assert pairs.stored_bytes == 2 * 1000 * LAYER_TOKEN
    assert pairs.read_bytes == (2 * 1000 + 2 * 100) * LAYER_TOKEN
    # groups of 3: layers 0-2 (one global) and layer 3 alone (global)
    assert kv_footprint(FOUR, [1000], window=100, global_every=2, share_every=3).stored_bytes == \
        2 * 1000 * LAYER_TOKEN
    # groups of 3 with only layer 3 global: layers 0-2 keep 100, layer 3 keeps 1,000
    assert kv_footprint(FOUR, [1000], window=100, global_every=4, share_every=3).stored_bytes == \
        (100 + 1000) * LAYER_TOKEN


# --- A ragged batch: padded to the longest, or paged to a block -----------------------------------------------------
def test_contiguous_reads_pad_to_the_longest_and_paged_ones_to_a_block_by_hand():
    reads = ragged_kv_reads([8, 5, 3, 1], block_size=4)
    assert (reads.useful_slots, reads.contiguous_slots, reads.paged_slots) == (17, 32, 24)
    assert reads.contiguous_padding == pytest.approx(15 / 32) and reads.paged_padding == pytest.approx(7 / 24)
    assert ragged_kv_reads([8, 5, 3, 1], block_size=1).paged_slots == 17  # block of 1: no padding at all
    assert ragged_kv_reads([16, 16], block_size=4).contiguous_padding == 0.0  # equal lengths: nothing to save
    single = ragged_kv_reads(5, block_size=4)  # a single length is a batch of one
    assert (single.useful_slots, single.contiguous_slots, single.paged_slots) == (5, 5, 8)
    assert single.paged_padding == pytest.approx(3 / 8) and single.contiguous_padding == 0.0
    empty = ragged_kv_reads([0, 0], 4)
    assert (empty.contiguous_slots, empty.paged_slots, empty.contiguous_padding, empty.paged_padding) == (0, 0, 0, 0)
    # lengths 10 and 30, window 20, layers 1 and 3 global: local layers keep 10 and 20, global ones 10 and 30.
    rect = kv_footprint(FOUR, [10, 30], window=20, global_every=2)
    assert rect.stored_bytes == rect.read_bytes == (2 * (2 * 20) + 2 * (2 * 30)) * LAYER_TOKEN
    # blocks of 8 tokens: local 16 + 24, global 16 + 32
    paged = kv_footprint(FOUR, [10, 30], window=20, global_every=2, block_size=8)
    assert paged.stored_bytes == (2 * (16 + 24) + 2 * (16 + 32)) * LAYER_TOKEN
    assert kv_footprint(FOUR, [10, 30], dtype="fp8").stored_bytes == 4 * 60 * LAYER_TOKEN / 2
    assert kv_footprint(FOUR, 7).stored_bytes == 4 * 7 * LAYER_TOKEN


def test_evenly_ragged_lengths_round_up_and_end_at_the_context():
    assert evenly_ragged_lengths(8192, 4) == [2048, 4096, 6144, 8192]
    assert evenly_ragged_lengths(10, 3) == [4, 7, 10]  # 10/3 = 3.33 and 20/3 = 6.67, rounded up
    assert evenly_ragged_lengths(5, 1) == [5]
    assert evenly_ragged_lengths(3, 4) == [1, 2, 3, 3]  # 0.75, 1.5, 2.25, 3 rounded up


# --- The lever table ------------------------------------------------------------------------------------------------
def test_the_lever_table_offers_the_levers_a_model_can_take_and_its_last_row_combines_them():
    rows = kv_lever_table("llama3-8b", 8192, 4, n_kv_heads=8)  # K is already 8: no GQA row
    assert [r.lever for r in rows][0] == "MQA"
    combined = kv_footprint("llama3-8b", evenly_ragged_lengths(8192, 4), "int8", 1024, 6, 2, 16)
    assert rows[-1].stored_bytes == combined.stored_bytes and rows[-1].read_bytes == combined.read_bytes
    two_heads = get_model("llama3-8b").with_(n_kv_heads=2)
    rows = {row.lever: row for row in kv_lever_table(two_heads, 4096, 4)}
    assert "GQA" not in rows and rows["MQA"].stored_saving == pytest.approx(2.0)  # 2 KV heads -> 1
    levers = [row.lever for row in kv_lever_table("palm-8b", 4096, 4)]  # PaLM is multiquery already
    assert "GQA" not in levers and "MQA" not in levers


def test_kv_lever_table_rows_state_their_settings():
    rows = {row.lever: row.setting for row in kv_lever_table("llama2-13b", 8192, 4, n_kv_heads=8, window=2048,
                                                              global_every=4, share_every=3, kv_dtype="fp8",
                                                              block_size=32)}
    for lever, numbers in (("GQA", ("40", "8")), ("MQA", ("40", "1")), ("local attention", ("2,048", "4")),
                           ("cross-layer sharing", ("3",)), ("KV quantization", ("fp8",)),
                           ("paged attention", ("32",))):
        for number in numbers:
            assert re.search(rf"\b{number}\b", rows[lever]), (lever, rows[lever])
    assert "MQA" in rows["all of the above"]  # the combined row says which lever it leaves out


# --- Decode attention: FLOPs per byte of cache read -----------------------------------------------------------------
def test_decode_attention_cost_by_hand_standard_and_latent_absorbed_or_not():
    # FOUR with 8-wide value heads: per cached token and layer 2 x 4 heads x (16 + 8) = 192 FLOPs; a token's cache
    # 4 layers x 2 heads x (16 + 8) x 2 B = 384 B in bf16, 192 B in fp8.
    narrow = FOUR.with_(v_head_dim=8)
    cost = decode_attention_cost(narrow, 100)
    assert (cost.flops, cost.kv_bytes) == (4 * 100 * 192, 100 * 384)
    assert cost.intensity == pytest.approx(2.0)
    assert decode_attention_cost(narrow, 100, kv_dtype="fp8").kv_bytes == 100 * 192
    assert decode_attention_cost(narrow, 100, absorbed=False) == cost  # only MLA absorbs anything
    # DeepSeek-V3 absorbed: 2 x 128 x (512 + 64) scores + 2 x 128 x 512 sums = 278,528 FLOPs per cached token and
    # layer, against 576 values x 2 B = 1,152 B: about 242 FLOPs a byte.
    mla = decode_attention_cost("deepseek-v3", 1000)
    assert mla.flops == 61 * 1000 * 278_528
    assert mla.kv_bytes == 61 * 1000 * 1152
    assert mla.intensity == pytest.approx(278_528 / 1152, rel=1e-12)
    # Not absorbed: 61 layers, 128 heads, H = 128 + 64 (RoPE) = 192, H_v = 128, latent r = 512: each cached token
    # costs 2 x 128 x (192 + 128) + 2 x 512 x 128 x (192 - 64 + 128) = 33,636,352 FLOPs per layer.
    assert decode_attention_cost("deepseek-v3", 1000, absorbed=False).flops == 61 * 1000 * 33_636_352


# --- A hybrid's fixed-size state ------------------------------------------------------------------------------------
def test_a_hybrids_state_costs_less_than_its_twins_cache_past_the_crossover_counted_by_hand():
    # Jamba-v0.1: 28 Mamba layers of 8,192 x 16 state values and a 3 x 8,192 convolution window, bf16; as attention
    # layers they would cache 2 x 8 KV heads x 128 values a token each, bf16.
    lever = state_lever("jamba-v0.1")
    state = 28 * (8192 * 16 + 3 * 8192) * 2
    assert lever.state_bytes == state
    assert lever.crossover_tokens == pytest.approx(state / (28 * 2 * 8 * 128 * 2), rel=1e-12)
    s = lever.crossover_tokens
    assert lever.hybrid_bytes(s) == pytest.approx(lever.twin_bytes(s), rel=1e-12)
    assert lever.hybrid_bytes(2 * s) < lever.twin_bytes(2 * s) and lever.hybrid_bytes(s / 2) > lever.twin_bytes(s / 2)


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: kv_footprint("llama3-8b", []), "lengths must list at least one sequence length"),
    (lambda: kv_footprint("llama3-8b", [1024], share_every=1.5), "share_every must be a positive integer, got 1.5"),
    *[(lambda kwargs=kwargs: kv_footprint(FOUR, [10], **kwargs), rf"\b{name} must be a positive integer\b")
      for kwargs, name in [(dict(window=0), "window"), (dict(global_every=0), "global_every"),
                           (dict(share_every=0), "share_every"), (dict(block_size=0), "block_size")]],
    (lambda: kv_footprint(FOUR, [3, -1]), r"\blengths\[1\] must be a non-negative integer\b"),
    (lambda: ragged_kv_reads("12", 4), r"\blengths\[0\] must be a number\b"),  # a string is one (bad) length
    (lambda: ragged_kv_reads(b"12", 4), r"\blengths\[0\] must be a non-negative integer\b"),
    (lambda: ragged_kv_reads((), 4), r"\blengths must list at least one sequence length\b"),
    (lambda: ragged_kv_reads([8], 0), r"\bblock_size must be a positive integer\b"),
    # a fractional batch is refused, not floored
    (lambda: local_global_kv_bytes("llama3-8b", 4096, 1024, 6, batch=2.9), "batch must be a positive integer, got 2.9"),
    (lambda: cross_layer_kv_bytes("llama3-8b", 4096, 2, batch=2.9), "batch must be a positive integer, got 2.9"),
    (lambda: evenly_ragged_lengths(4096, 2.9), "batch must be a positive integer, got 2.9"),
    *[(lambda kwargs=kwargs: local_global_kv_bytes(**dict(model=FOUR, tokens=10, window=4, global_every=2) | kwargs),
       words) for kwargs, words in [
        (dict(tokens=-1), r"\btokens must be a non-negative integer\b"),
        (dict(window=0), r"\bwindow must be a positive integer\b"),
        (dict(global_every=0), r"\bglobal_every must be a positive integer\b"),
        (dict(batch=0), r"\bbatch must be a positive integer\b"),
        (dict(batch=MAX_REQUESTS + 1), r"\bbatch=1,000,001 is more than 1,000,000\b.*\bone length per sequence\b")]],
    (lambda: cross_layer_kv_bytes("llama3-8b", 1024, share_every=1.5), "share_every"),
    *[(lambda kwargs=kwargs: cross_layer_kv_bytes(**dict(model=FOUR, tokens=10, share_every=2) | kwargs), words)
      for kwargs, words in [
        (dict(tokens=-1), r"\btokens must be a non-negative integer\b"),
        (dict(share_every=0), r"\bshare_every must be a positive integer\b"),
        (dict(batch=MAX_REQUESTS + 1), r"\bbatch=1,000,001 is more than\b.*\bone length per sequence\b")]],
    (lambda: evenly_ragged_lengths(0, 3), r"\bcontext_len must be a positive integer\b"),
    (lambda: evenly_ragged_lengths(10, MAX_REQUESTS + 1),
     r"\bbatch=1,000,001 is more than\b.*\bit lists one length per sequence\b"),
    (lambda: decode_attention_cost(FOUR, 0), r"\bcontext_len must be positive\b"),
    (lambda: decode_attention_cost(FOUR, 10, absorbed=1), r"\babsorbed must be True or False\b"),
    (lambda: state_lever("llama3-8b"), r"has no state layers .* compares a hybrid with its all-attention twin"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
