"""Chapter 11 (how close do real systems come?): exercises. Every expected value is a scaling_lib call."""

from ...estimate import offline_throughput
from ...models import get_model
from ...sharding import beta, max_decode_model_parallelism
from .exercise import Exercise

_FP8 = dict(weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")

EXERCISES = (
    Exercise(
        id="ch11.offline-bound-llama3-8b-h200-1000-1000",
        question="Offline-throughput bound of LLaMA-3-8B on one H200 (fp8 weights, KV cache and math), requests of "
                 "1,000 input and 1,000 output tokens, in tokens/s.",
        unit="tokens/s",
        expected=lambda: offline_throughput("llama3-8b", "h200", 1, 1000, 1000, **_FP8),
    ),
    Exercise(
        id="ch11.typical-llama3-70b-h200-2048-2048",
        question="Typical (calibrated) offline throughput of LLaMA-3-70B on one H200 (fp8 weights, KV cache and math), "
                 "requests of 2,048 input and 2,048 output tokens, in tokens/s.",
        unit="tokens/s",
        expected=lambda: offline_throughput("llama3-70b", "h200", 1, 2048, 2048, efficiency="typical", **_FP8),
    ),
    Exercise(
        id="ch11.max-mp-llama3-70b-b32-b200",
        question="Ways LLaMA-3-70B can be tensor-parallel for decode at batch 32 on B200s in an NVLink switch domain "
                 "before the collectives outlast the weight read, F / (B beta).",
        unit="ways",
        expected=lambda: max_decode_model_parallelism(get_model("llama3-70b").d_ff, 32, beta("b200")),
    ),
)
