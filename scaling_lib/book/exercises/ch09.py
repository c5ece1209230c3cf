"""Chapter 9 (serving engines): exercises. Every value, right or slipped, is a scaling_lib call."""

import csv

from ...hardware import get_chip
from ...inference import decode_step_time
from ...load import Engine
from ...measurements import DATA
from ...serving import kv_transfer_bytes, kv_transfer_time, prefill_latency, prefill_to_decode_ratio, server_ratio
from .exercise import Choice, Exercise, Number, Slip

_PROMPT, _OUTPUT, _BATCH = 4096, 2048, 48
_DCN_GBIT = get_chip("tpu-v5e").dcn_bandwidth * 8 / 1e9  # the v5e's DCN per chip, in gigabits per second


def _ratio_with_step_at(context_len: float) -> float:
    """R_p / R_d with the decode step taken at `context_len` (a slip unless it is the mean context)."""
    prefill = prefill_latency("llama3-70b", "tpu-v5e", 16, _PROMPT, mfu=0.4)
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, _BATCH, context_len).total_s
    return prefill_to_decode_ratio(prefill, step, _BATCH, _OUTPUT)


_B_MAX, _STEP_S, _PROMPT_TOKENS, _OUTPUT_TOKENS = 320, 0.140, 2000, 500  # the saturation exercise's replica


def _saturation(batch_share: float = 1.0, decode_steps: int = -1) -> float:
    """`load.Engine.saturation_rate` of a replica holding at most _B_MAX sequences whose step takes _STEP_S at
    that batch, with B_max scaled by `batch_share` and T_gen + `decode_steps` steps per request (the slips)."""
    engine = Engine(lambda batch, prompt_tokens: _STEP_S, _PROMPT_TOKENS, _OUTPUT_TOKENS, _B_MAX, token_budget=None)
    steps = (_OUTPUT_TOKENS + decode_steps) / (_OUTPUT_TOKENS - 1)
    return engine.saturation_rate() * batch_share / steps


def _recipe_run(clients: int = 128) -> dict:
    """Google's TPU recipe run at `clients` clients, the benchmark-start exercise's, as concurrency_sweeps.csv holds
    it (`measurements.sweep_rows` reads the same row, but also the model configs, which the page's answer boxes
    run without)."""
    with open(DATA / "concurrency_sweeps.csv", newline="") as handle:
        return next(r for r in csv.DictReader(handle)
                    if r["source"].startswith("AI-Hypercomputer/tpu-recipes") and int(r["concurrency"]) == clients)


_RECIPE = _recipe_run()


def _ratio(mfu: float = 0.4) -> float:
    return server_ratio("llama3-70b", "tpu-v5e", _PROMPT, _OUTPUT, _BATCH, 16, 16, mfu=mfu).prefill_per_decode


EXERCISES = (
    Exercise(
        id="ch9.prefill-llama3-70b-8k-v6e8",
        question="How long does an 8,192-token prefill of LLaMA-3-70B take on 8 TPU v6e chips at 40% MFU, with the "
                 "book's prefill convention ($2P$ FLOPs per token, $P$ every parameter)? Answer in seconds, within "
                 "±0.5%.",
        answer=Number("s", lambda: prefill_latency("llama3-70b", "tpu-v6e", 8, 8192, mfu=0.4), rel_tol=0.005,
                      quantity="prefill", model="llama3-70b", slips=(
            Slip("the peak rate (no MFU)", lambda: prefill_latency("llama3-70b", "tpu-v6e", 8, 8192, mfu=1.0),
                 "at 40% MFU the chips achieve 0.4 of their peak: divide by the achieved rate."),
            Slip("one chip", lambda: prefill_latency("llama3-70b", "tpu-v6e", 1, 8192, mfu=0.4),
                 "the 8 chips share the prefill's FLOPs."),
            Slip("6 FLOPs per parameter", lambda: 3 * prefill_latency("llama3-70b", "tpu-v6e", 8, 8192, mfu=0.4),
                 "6P per token counts training's backward pass; a prefill is a forward pass, 2P per token."),
        )),
    ),
    Exercise(
        id="ch9.prefill-per-decode-llama3-70b-b48",
        question="LLaMA-3-70B is served disaggregated on 16-chip TPU v5e servers (bf16, prefill at 40% MFU): prompts "
                 "of 4,096 tokens, 2,048 tokens generated per request, decode batch 48. How many prefill servers "
                 "does each decode server need? Take the decode step at the mean context of a generation, the prompt "
                 "plus half the generated tokens: the step time grows linearly with the context, so that step times "
                 "the generated tokens is the whole decode. Price the prefill with the book's $2PT$, $P$ every "
                 "parameter; answer within ±0.5%.",
        answer=Number("x", _ratio, rel_tol=0.005, quantity="prefill", model="llama3-70b", slips=(
            Slip("the step at the prompt length", lambda: _ratio_with_step_at(_PROMPT),
                 "the context grows during the generation: take the step at the prompt plus half the output."),
            Slip("the step at the final context", lambda: _ratio_with_step_at(_PROMPT + _OUTPUT),
                 "the last step is the longest; the average step sits at the prompt plus half the output."),
            Slip("decode servers per prefill server", lambda: 1.0 / _ratio(),
                 "the question asks for prefill servers per decode server: R_p / R_d."),
            Slip("the peak rate (no MFU)", lambda: _ratio(mfu=1.0),
                 "at 40% MFU the prefill chips achieve 0.4 of their peak: the prefill takes 2.5 times the peak time."),
            Slip("a decode batch of 1", lambda: _ratio() / _BATCH,
                 "a decode server finishes B requests every T_gen steps: R_p / R_d = T_pre B / (T_step T_gen)."),
        )),
    ),
    Exercise(
        id="ch9.kv-transfer-llama3-70b-32k-v5e16-dcn",
        question="A prefill slice of 16 TPU v5e hands a 32,768-token LLaMA-3-70B KV cache (bf16) to a separate decode "
                 "slice over the data-centre network, every chip sending its share at "
                 f"{_DCN_GBIT:.0f} Gb/s (gigabits per second, the hardware table's DCN bandwidth per chip). How long "
                 "does the transfer take, in ms?",
        answer=Number("ms", lambda: kv_transfer_time("llama3-70b", 32768, "tpu-v5e", 16, network="dcn"), quantity="kv",
                      slips=(
            Slip("gigabits read as gigabytes", lambda: kv_transfer_bytes("llama3-70b", 32768)
                 / (16 * 8 * get_chip("tpu-v5e").dcn_bandwidth),
                 "network speeds are quoted in bits per second: 8 bits to a byte."),
            Slip("one chip's link", lambda: kv_transfer_time("llama3-70b", 32768, "tpu-v5e", 1, network="dcn"),
                 "each of the 16 chips sends its share at the same time."),
            Slip("ICI instead of the DCN", lambda: kv_transfer_time("llama3-70b", 32768, "tpu-v5e", 16,
                                                                    network="ici"),
                 "separate slices are joined by the data-centre network; ICI links stay inside a slice."),
        )),
    ),
    Exercise(
        id="ch9.saturation-rate-b320",
        question="A replica serves requests of 2,000 prompt tokens and 500 output tokens with continuous batching. It "
                 f"decodes at most $B_\\text{{max}}$ = {_B_MAX} sequences, and at that batch one step takes "
                 f"{_STEP_S * 1e3:.0f} ms on average, its share of prompt chunks included. Above what rate of arriving "
                 "requests does the queue grow without bound (the saturation rate)? Answer in requests/s, within "
                 "±1%.",
        answer=Number("requests/s", _saturation, rel_tol=0.01, slips=(
            Slip("one request per step", lambda: _saturation(1 / _B_MAX, 1 - _OUTPUT_TOKENS),
                 "every step advances all B_max sequences by one token: a step finishes B_max / (T_gen - 1) "
                 "requests."),
            Slip("the batch left out", lambda: _saturation(1 / _B_MAX),
                 "B_max requests decode side by side, each for T_gen - 1 steps: Little's law on the decode phase."),
            Slip("tokens per second", lambda: _saturation(1.0, 1 - _OUTPUT_TOKENS),
                 "B_max / T_step counts tokens per second; a request needs T_gen - 1 of them after its first."),
            Slip("the prompt counted in steps", lambda: _saturation(1.0, _PROMPT_TOKENS - 1),
                 "a prompt goes through in a few chunks that share steps with the decodes; only the T_gen - 1 decode "
                 "steps hold a slot."),
        )),
    ),
    Exercise(
        id="ch9.explain-benchmark-start",
        preamble=(f"Google's TPU recipe runs a benchmark of {int(_RECIPE['requests']):,} requests of "
                  f"{int(_RECIPE['input_len']):,} + {int(_RECIPE['output_len']):,} tokens from "
                  f"{_RECIPE['concurrency']} clients (`vllm bench serve --max-concurrency`) and reports a mean TTFT of "
                  f"{float(_RECIPE['mean_ttft_ms']) / 1e3:.2f} s and a p99 of "
                  f"{float(_RECIPE['p99_ttft_ms']) / 1e3:.2f} s. The steady-state load model comes within 2x of "
                  "the mean but puts the p99 many times lower. Why?"),
        question="Check your reasoning: where does the measured p99 come from?",
        answer=Choice({"a": "the deployment is past its saturation rate, so the queue grows without end",
                       "b": "the prompts' lengths vary, and the longest prompts wait the longest",
                       "c": "the clients' first requests, sent together: over 1% of all, they wait for each other",
                       "d": "the server's front end, which takes tens of milliseconds per request"}, "c", why={
            "a": "past saturation the mean would grow without end too; it stays within 2x of the steady state's, "
                 f"and {_RECIPE['concurrency']} clients are fewer than the sequences the replica holds.",
            "b": "every request has the same lengths (the recipe's random dataset at its default range ratio).",
            "d": "the front end adds about the same to every request: it would move the mean as much as the p99."}),
    ),
    Exercise(
        id="ch9.explain-chunked",
        preamble=("In the simulations, chunked prefill gives a lower time per output token than interleaved "
                  "prefill at the same load, but hardly any better time to first token. Why?"),
        question="Check your reasoning: at the same load, what does chunked prefill improve most over interleaved "
                 "prefill?",
        answer=Choice({"a": "the time per output token, especially its tail (p99)", "b": "the time to first token",
                       "c": "the total prefill work",
                       "d": "the memory the KV caches take"}, "a", why={
            "b": "both engines do the same prefill work on the same chips, so first tokens arrive at about the same "
                  "times.",
            "c": "chunking cuts the same work into pieces; it does not remove any.",
            "d": "the caches hold the same tokens either way."}),
    ),
)
