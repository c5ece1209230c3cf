"""The chunked serving engine against a hand derivation: a prompt split into chunks reads, for every later chunk, the
cache its earlier chunks wrote (scaling_lib.simulator, priced with inference.prefill_time; TPU v5e: 8.2e11 B/s of HBM;
LLaMA-3-70B: L = 80, K = 8, H = 128)."""

import pytest

from scaling_lib.inference import prefill_time
from scaling_lib.simulator import ServingConfig, simulate, trace_workload


def test_chunked_engine_second_chunk_reads_the_first_chunks_kv_by_hand():
    # One 1,024-token prompt, one output token, chunks of 512 on 16 v5e (LLaMA-3-70B, bf16, MFU 0.4). Each chunk
    # costs max(weight read, its FLOPs) -- the FLOPs win at 512 tokens -- and the second chunk also attends to the
    # first chunk's 512 cached tokens: 512 x 327,680 B (2 L K H x 2 B = 2 x 80 x 8 x 128 x 2) / (16 x 8.2e11 B/s)
    # = 12.7875 us.
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=8, max_context_len=4096,
                           prefill_chunk_tokens=512)
    result = simulate(config, trace_workload([(0.0, 1024, 1)]), "chunked")
    chunk = prefill_time("llama3-70b", "tpu-v5e", 16, 512, 0.4)
    prefix_read = 512 * 327_680 / (16 * 8.2e11)
    assert prefix_read == pytest.approx(12.7875e-6, rel=1e-5)
    assert result.ttft_s[0] - 2 * chunk == pytest.approx(prefix_read, rel=1e-6)
    # Three chunks: the third reads 1,024 cached tokens, so the reads add up to (512 + 1,024) tokens' worth.
    longer = simulate(config, trace_workload([(0.0, 1536, 1)]), "chunked")
    assert longer.ttft_s[0] - 3 * chunk == pytest.approx(3 * prefix_read, rel=1e-6)
