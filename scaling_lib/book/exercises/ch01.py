"""Chapter 1 exercises: rooflines and the critical batch size. Every value, right or slipped, is a scaling_lib call."""

from ...hardware import get_chip
from ...roofline import attention_intensity, critical_batch_size, matmul_time, ridge_point
from .exercise import Choice, Exercise, Number, Slip


def _h100_bandwidth_for_v5e_bcrit(chip="h100") -> float:
    """W_hbm that gives `chip` (bf16 rate) the TPU v5e's bf16 B_crit: C / B_crit(v5e)."""
    return get_chip(chip).peak_flops("bf16") / critical_batch_size("tpu-v5e")


def _matmul():
    return matmul_time(64, 8192, 28672, "tpu-v5e")


EXERCISES = (
    Exercise(
        id="ch1.ridge-ironwood-fp8",
        question="What is the ridge point of an Ironwood (TPU7x) chip when the math runs in fp8, in FLOPs per byte?",
        answer=Number("FLOPs/B", lambda: ridge_point("ironwood", "fp8"), slips=(
            Slip("the bf16 rate, or B_crit with its b_w / 2", lambda: ridge_point("ironwood", "bf16"),
                 "the ridge point is C / W_hbm with C the fp8 rate, and no b_w / 2 factor."),
        )),
    ),
    Exercise(
        id="ch1.bcrit-v6e-int4",
        question="A TPU v6e serves a model whose weights are stored in int4 (two weights per byte) and converted to "
                 "bf16 just before each matmul. What is its critical batch size, in tokens?",
        answer=Number("tokens", lambda: critical_batch_size("tpu-v6e", "int4", "bf16"), slips=(
            Slip("int4 counted as one byte", lambda: critical_batch_size("tpu-v6e", "int8", "bf16"),
                 "int4 packs two weights into a byte, so b_w = 1/2."),
            Slip("the ridge point without b_w / 2", lambda: ridge_point("tpu-v6e", "bf16"),
                 "C / W_hbm is the ridge point; B_crit multiplies it by b_w / 2."),
            Slip("4 bytes (bits read as bytes)", lambda: critical_batch_size("tpu-v6e", "fp32", "bf16"),
                 "int4 is 4 bits, half a byte, not 4 bytes."),
        )),
    ),
    Exercise(
        id="ch1.hbm-for-v5e-bcrit-h100",
        question="How much HBM bandwidth would an H100 need for its bf16 critical batch size (bf16 weights and math) "
                 "to equal a TPU v5e's? Keep the H100's dense bf16 rate. Answer in TB/s.",
        answer=Number("TB/s", _h100_bandwidth_for_v5e_bcrit, slips=(
            Slip("the v5e's own rate", lambda: _h100_bandwidth_for_v5e_bcrit("tpu-v5e"),
                 "that is the v5e's bandwidth: divide the H100's peak FLOP/s by the v5e's B_crit."),
            Slip("an extra factor b_w / 2 = 1/2", lambda: _h100_bandwidth_for_v5e_bcrit() / 2,
                 "with bf16 weights b_w / 2 = 1, so B_crit is exactly C / W_hbm."),
        )),
    ),
    Exercise(
        id="ch1.bcrit-h200-vs-h100",
        question="An H200 has the same bf16 FLOP rate as an H100 but more HBM bandwidth. First predict: is its "
                 "critical batch size (bf16 weights and math) larger, the same or smaller? Then compute how many times "
                 "smaller or larger it is: the H100's B_crit divided by the H200's.",
        answer=(
            Choice({"a": "larger", "b": "the same", "c": "smaller"}, "c", why={
                "a": "B_crit = C / W_hbm: ask which way a larger denominator moves the ratio.",
                "b": "B_crit depends on the bandwidth as well as on C."}, name="direction"),
            Number("x", lambda: critical_batch_size("h100") / critical_batch_size("h200"), name="factor", slips=(
                Slip("the ratio upside down", lambda: critical_batch_size("h200") / critical_batch_size("h100"),
                     "the question asks for the H100's B_crit over the H200's."),
            )),
        ),
    ),
    Exercise(
        id="ch1.matmul-time-v5e",
        question="Give a lower bound on the time of a bf16 matmul $[64, 8192] \\times [8192, 28672]$ on one TPU v5e, "
                 "in ms, counting the bytes of both inputs and the output. Is it compute- or memory-bound?",
        answer=(
            Number("ms", lambda: _matmul().total_s, name="time", slips=(
                Slip("the math time", lambda: _matmul().compute_s,
                     "that is t_math; the bound is the larger of t_math and t_mem."),
                Slip("t_math + t_mem", lambda: _matmul().compute_s + _matmul().memory_s,
                     "a roofline assumes math and memory overlap: take the max, not the sum."),
                Slip("4 bytes per element", lambda: matmul_time(64, 8192, 28672, "tpu-v5e", activation_dtype="fp32",
                                                                weight_dtype="fp32").total_s,
                     "bf16 takes 2 bytes per element."),
                Slip("1 byte per element", lambda: matmul_time(64, 8192, 28672, "tpu-v5e", activation_dtype="int8",
                                                               weight_dtype="int8").total_s,
                     "bf16 takes 2 bytes per element."),
            )),
            Choice({"a": "compute-bound", "b": "memory-bound"}, "b", name="bound", why={
                "a": "compare the intensity (about B = 64 FLOPs per byte) with the v5e's ridge point."}),
        ),
    ),
    Exercise(
        id="ch1.prefill-attention-crossover-h100",
        question="Above what prompt length $T$ is multi-head prefill attention ($S = T$) compute-bound on an H100 in "
                 "bf16, in tokens?",
        answer=Number("tokens", lambda: 2.0 * ridge_point("h100", "bf16"), slips=(
            Slip("intensity T instead of T/2", lambda: ridge_point("h100", "bf16"),
                 "prefill attention's intensity is ST / (S + T) = T/2 at S = T, not T."),
            Slip("the fp8 rate, or intensity T/4", lambda: 2.0 * ridge_point("h100", "fp8"),
                 "both land here: the question is about bf16 math, so use the bf16 peak; and prefill attention's "
                 "intensity at S = T is ST / (S + T) = T/2, not T/4."),
        )),
    ),
    Exercise(
        id="ch1.verify-intensity-llama3-70b",
        question="LLaMA-3-70B ($N = 64$ query heads, $K = 8$ key/value heads) scores $T = 5$ query tokens per "
                 "sequence in one step (a speculative verification) against $S = 8192$ cached keys. What is the "
                 "arithmetic intensity of this attention in bf16, in FLOPs per byte?",
        answer=Number("FLOPs/B", lambda: attention_intensity(5, 8192, group_size=64 // 8), slips=(
            Slip("one query token (T = 1)", lambda: attention_intensity(1, 8192, group_size=64 // 8),
                 "all T query tokens of a sequence share each key and value loaded: the intensity is GST / (GT + S)."),
            Slip("no grouping (G = 1)", lambda: attention_intensity(5, 8192, group_size=1),
                 "G = N / K query heads share each KV head."),
            Slip("G = N", lambda: attention_intensity(5, 8192, group_size=64),
                 "G is query heads per KV head, N / K = 8, not N."),
        )),
    ),
    Exercise(
        id="ch1.explain-batch",
        preamble=("Batching sequences together makes the feed-forward matmuls of a decode step more "
                  "efficient, up to $B_\\text{crit}$. Why does the same batching do nothing for the efficiency "
                  "of decode attention? What would have to change about attention for batching to help?"),
        question="Check your reasoning: in a decode step of LLaMA-3-8B at 4,096 tokens of context, how does the "
                 "arithmetic intensity of attention change when the batch grows from 1 to 64 sequences?",
        answer=Choice({"a": "it grows about 64 times", "b": "it falls about 64 times",
                       "c": "it grows about 8 times, to G",
                       "d": "it does not change"}, "d", why={
            "a": "that is what the weight matmuls do: the batch shares the weights, but not the KV caches.",
            "b": "the FLOPs grow with the batch exactly as fast as the bytes.",
            "c": "G is the ceiling a single sequence's attention reaches; ask whether a second sequence adds keys or "
                 "shares them."}),
    ),
)
