"""What a verdict says, exercise by exercise: particular answers as a reader types them and what each gets, the answers
that a hand derivation fixes, every family of slips typed into every sibling exercise (tools/slip_audit.py), two
slips that land on one number both named, and a wrong option's hint that points at the reasoning without stating the
right option. The checker's promises on every exercise are in test_exercises.py."""

import importlib.util
import re

import pytest

from scaling_lib.book.claims import published
from scaling_lib.book.exercises import exercises, get_exercise, grade
from scaling_lib.book.exercises.exercise import Choice, Number
from scaling_lib.flops import decode_step_flops, matmul_params
from scaling_lib.models import active_param_count
from scaling_lib.units import parse_unit
from tests import REPO, for_each

_SPEC = importlib.util.spec_from_file_location("slip_audit", REPO / "tools" / "slip_audit.py")
slip_audit = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(slip_audit)


def _expected(eid: str, part: int = 0) -> float:
    """An exercise's expected answer in SI units (its part `part`)."""
    return get_exercise(eid).parts[part].expected()


def _slip(eid: str, name: str) -> float:
    """The value (SI units) of the slip of that name that an exercise lists."""
    return next(slip.value() for part in get_exercise(eid).parts if isinstance(part, Number)
                for slip in part.slips if slip.name == name)


# --- hand derivations: the answers the book's numbers fix -----------------------------------------------------------

EMBEDDING_70B = 128256 * 8192  # LLaMA-3-70B's input embedding table, V x D (the model card's sizes)
WORKED_EMBEDDING = 32128 * 4096  # the worked problems' model, V x D: its one embedding table, shared with the output
MQA_70B = 80 * 32768 * 2 * 1 * 128 * 2  # 2 L K H S x 2 bytes, K = 1
LOCAL_GLOBAL_70B = 20 * 32768 * 2 * 8 * 128 * 2 + 60 * 4096 * 2 * 8 * 128 * 2  # 20 global layers, 60 local of 4,096
CACHE_32K_8B = 2 * 32 * 8 * 128 * 32768 * 2  # 2 L K H S x 2 bytes = 2^32 B = 4,096 MiB exactly

HAND_DERIVED = [
    pytest.param(lambda: _expected("ch4.kv-per-token-llama3-70b"), 2 * 80 * 8 * 128 * 2, 1e-12,
                 id="ch4 KV per token of LLaMA-3-70B: 2 L K H x 2 B = 327,680 B = 320 KiB"),
    pytest.param(lambda: _expected("ch4.kv-32k-llama3-8b"), CACHE_32K_8B, 1e-12,
                 id="ch4 one 32,768-token cache of LLaMA-3-8B"),
    pytest.param(lambda: _expected("ch4.kv-32k-llama3-8b", 1), 4, 0,
                 id="ch4 caches that outweigh LLaMA-3-8B's bf16 weights: floor(2 x 8.03e9 / cache) + 1 = 4"),
    pytest.param(lambda: _expected("ch6.mqa-or-local-global-llama3-70b"), MQA_70B, 1e-12,
                 id="ch6 LLaMA-3-70B's cache under multiquery attention"),
    pytest.param(lambda: _expected("ch6.mqa-or-local-global-llama3-70b", 1), LOCAL_GLOBAL_70B, 1e-12,
                 id="ch6 LLaMA-3-70B's cache with 3 layers in 4 local"),
    pytest.param(lambda: _expected("wp.q3-weight-load"), 18_385_207_296 / (16 * 8.2e11), 1e-12,
                 id="worked problem 3: int8 weights over 16 v5e at 820 GB/s"),
    pytest.param(lambda: published("T5"), 18e9 / (16 * 8.2e11), 1e-3, id="the source's rounded 18e9 B (claim T5)"),
    pytest.param(lambda: active_param_count("llama3-70b") - matmul_params("llama3-70b"), EMBEDDING_70B, 0,
                 id="P - P_mm of LLaMA-3-70B is its input embedding table"),
    pytest.param(lambda: 2 * 32 * EMBEDDING_70B / decode_step_flops("llama3-70b", 8192, batch=32).total, 0.0131, 0.04,
                 id="2P over 2P_mm adds 1.3% to the batch-32 decode step: outside its 0.5% band"),
]


@for_each(HAND_DERIVED, ids=str)
def test_answers_equal_their_hand_derivation(value, by_hand, rel):
    assert value() == pytest.approx(by_hand, rel=rel, abs=0)


# --- what typed answers get ------------------------------------------------------------------------------------------

RIGHT, WRONG, HIGH, LOW = "right", "wrong", "too high", "too low"


def slip(name):
    """The verdict names exactly this slip."""
    return f"slip: {name}"


def slip_naming(*words):
    """The verdict's slip names each of these words."""
    return "slip naming: " + "|".join(words)


def says(text):
    return f"says: {text}"


def never_says(text):
    return f"never says: {text}"


# (exercise, answer, what the verdict does). An answer is what a reader types, or a function of the exercise's
# expected answer in SI units (first part): the row states how a form is read without restating the number. A dict
# that names some parts of a multi-part exercise is judged on those parts.
VERDICTS = [
    # Numbers in every form a page or a keyboard gives them
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: kv / 1e9, RIGHT, id="a bare number in the unit asked"),
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: f"{kv / 1e9:.4f} GB", RIGHT, id="GB"),
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: f"{kv / 1e9:.4f} gb", RIGHT, id="gb in lower case"),
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: f"{kv / 1e9:.4f}GB", RIGHT, id="GB without a space"),
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: f"{kv / 1e6:,.1f} MB", RIGHT, id="MB with a comma"),
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: f"{kv:,.0f} B", RIGHT, id="bytes"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", lambda t: f"{t / 1e3}k tokens", RIGHT, id="k tokens"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", lambda t: f"{t / 1e3} k", RIGHT, id="a bare k"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", lambda t: f"{t:,.0f} Tokens", RIGHT, id="Tokens capitalised"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", lambda t: f"{t:,.0f} TOKENS", RIGHT, id="TOKENS in capitals"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", lambda t: f"{t:_.0f}", RIGHT, id="underscores between digits"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", "4,6", says("ambiguous"), id="a comma that may be a decimal point"),
    pytest.param("ch1.matmul-time-v5e", {"time": "0.58 MS"}, says("ambiguous"), id="MS: ms or megaseconds"),
    pytest.param("ch1.matmul-time-v5e", {"time": "3 GB"}, says("asks for ms"), id="a size for a time"),
    pytest.param("ch1.bcrit-v6e-int4", float("nan"), says("not a finite number"), id="nan"),
    pytest.param("ch1.bcrit-v6e-int4", 0, says("too low"), id="zero"),
    pytest.param("wp.q1-params", lambda p: f"{p / 1e6:.0f} million", RIGHT, id="million is 10^6"),
    pytest.param("wp.q1-params", lambda p: f"{p / 1e3:.0f} thousand", RIGHT, id="thousand is 10^3"),
    pytest.param("wp.q1-params", lambda p: f"{p / 1e9:.0f} million", LOW, id="billions written as millions"),
    pytest.param("wp.q1-params", lambda p: f"{p / 1e9:.1f}B", RIGHT, id="B for billions, the book's own notation"),
    pytest.param("wp.q1-params", lambda p: f"{p / 1e9:.1f} billion", RIGHT, id="billion"),
    pytest.param("wp.q1-params", "18.4B", RIGHT, id="three figures of a count in billions"),
    pytest.param("wp.q1-params", "18.4 GB", says("asks for a plain number"), id="bytes for a count"),
    pytest.param("ch1.matmul-time-v5e", {"time": "0.5786 milliseconds"}, RIGHT, id="milliseconds"),
    pytest.param("ch1.matmul-time-v5e", {"time": "578.6 microseconds"}, RIGHT, id="microseconds"),
    pytest.param("ch1.matmul-time-v5e", {"time": "0.0005786 seconds"}, RIGHT, id="seconds"),
    pytest.param("ch1.matmul-time-v5e", {"time": "0.5786 millisecond"}, RIGHT, id="millisecond"),
    pytest.param("ch1.matmul-time-v5e", {"time": "578.6 micro seconds"}, RIGHT, id="micro seconds"),
    pytest.param("ch1.matmul-time-v5e", {"time": "0.5786 msec"}, RIGHT, id="msec"),
    pytest.param("ch1.matmul-time-v5e", {"time": "\u0660.\u0665\u0667\u0668\u0666 ms"}, RIGHT,
                 id="Arabic-Indic digits"),
    pytest.param("ch1.matmul-time-v5e", {"time": "\uff10.\uff15\uff17\uff18\uff16 ms"}, RIGHT, id="fullwidth digits"),
    # Binary prefixes and bits are what they are: LLaMA-3-70B's KV per token is 327,680 B = exactly 320 KiB
    # (327.68 kB) = 2,621,440 bits; read with Ki = 1,000, "320 KiB" and "328 KiB" would swap.
    pytest.param("ch4.kv-per-token-llama3-70b", "320 KiB", RIGHT, id="KiB is 1,024 B"),
    pytest.param("ch4.kv-per-token-llama3-70b", "328 KiB", HIGH, id="328 KiB is 2.5% high"),
    pytest.param("ch4.kv-32k-llama3-8b", {"cache": "4096 MiB"}, RIGHT, id="MiB"),
    pytest.param("ch4.kv-32k-llama3-8b", {"cache": "4 GiB"}, RIGHT, id="GiB"),
    pytest.param("ch4.kv-32k-llama3-8b", {"cache": "4295 MB"}, RIGHT, id="the same cache in MB"),
    pytest.param("ch4.kv-per-token-llama3-70b", "2621.44 kbit", RIGHT, id="kbit"),
    pytest.param("ch4.kv-per-token-llama3-70b", "2.62144 Mb", RIGHT, id="Mb is megabits"),
    pytest.param("ch4.kv-per-token-llama3-70b", "2.6 Mbit", RIGHT, id="Mbit"),
    pytest.param("ch4.kv-per-token-llama3-70b", "2621440 bits", RIGHT, id="bits"),
    pytest.param("ch4.kv-per-token-llama3-70b", "327.68 kilobytes", RIGHT, id="kilobytes"),
    pytest.param("ch4.kv-per-token-llama3-70b", "327680 bytes", RIGHT, id="bytes spelled out"),
    pytest.param("ch4.kv-per-token-llama3-70b", "328 kbit", slip_naming("bits vs bytes"), id="bytes labelled kbit"),
    pytest.param("ch4.kv-per-token-llama3-70b", "0.328 Mb", slip_naming("bits vs bytes"), id="bytes labelled Mb"),
    pytest.param("ch4.kv-per-token-llama3-70b", "328 Kb", slip_naming("bits vs bytes"), id="bytes labelled Kb"),
    pytest.param("ch4.kv-per-token-llama3-70b", "328 kb", RIGHT, id="kb in lower case is kilobytes"),
    pytest.param("ch4.kv-per-token-llama3-70b", "2621 kB", slip_naming("bits"),
                 id="bits labelled bytes: named with the query-heads slip that lands there too"),
    pytest.param("ch1.hbm-for-v5e-bcrit-h100", lambda w: f"{w * 8 / 1e12:.2f} Tb/s", RIGHT, id="terabits per second"),
    pytest.param("ch1.hbm-for-v5e-bcrit-h100", lambda w: f"{w * 8 / 1e9:.0f} Gbps", RIGHT, id="Gbps"),
    pytest.param("ch1.hbm-for-v5e-bcrit-h100", lambda w: f"{w / 1e12:.2f} Tb/s", says("bits vs bytes"),
                 id="bytes per second labelled bits"),
    # A unit slip is named only where the quantity has that unit
    pytest.param("ch14.sequence-sharded-kv-palm-62b", lambda kv: kv / 2**30, says("GiB vs GB"), id="GiB for GB"),
    pytest.param("ch2.kv-bytes-per-token-palm-62b", 64, says("KiB vs kB"), id="KiB for kB"),
    pytest.param("ch10.moe-bcrit-8e-top1-v6e", lambda t: t * 1e9 / 2**30, never_says("GiB"),
                 id="no GiB hint for tokens"),
    pytest.param("ch10.int4-fp8-step-llama3-70b-ironwood-16k", lambda s: s * 1e3 * 1e9 / 2**30, never_says("GiB"),
                 id="no GiB hint for a time"),
    pytest.param("ch10.int4-fp8-step-llama3-70b-ironwood-16k", lambda s: s, says("power of 1,000"),
                 id="seconds typed where ms are asked"),
    pytest.param("ch8.mfu-at-bound-low-latency-decode", lambda mfu: mfu, says("fraction vs percent"),
                 id="a fraction where a percentage is asked"),
    # Conventions: the book's own, and another it names
    pytest.param("ch3.ttft-llama3-8b-h100-4k", lambda t: t * 1e3, RIGHT, id="prefill at 2PT, P every parameter"),
    pytest.param("ch3.ttft-llama3-8b-h100-4k", "155.6 ms", slip("P_mm instead of P"),
                 id="prefill at 2 P_mm T: 166.3 ms x 7.50 / 8.03"),
    pytest.param("ch8.wg-xyz-switch-palm-62b", 16 * 32768, RIGHT, id="the chapter's formula, 16 F"),
    pytest.param("ch8.wg-xyz-switch-palm-62b", 12 * 32768, RIGHT, id="the collectives that run, 12 F"),
    pytest.param("ch8.wg-xyz-switch-palm-62b", 12 * 32768, says("under the collectives"),
                 id="12 F names its convention"),
    pytest.param("ch2.decode-step-flops-llama3-70b", lambda f: f"{f / 1e12:.4f} TFLOP", RIGHT, id="2 P_mm per token"),
    pytest.param("ch2.decode-step-flops-llama3-70b", lambda f: f"{(f + 2 * 32 * EMBEDDING_70B) / 1e12:.4f} TFLOP",
                 slip("2P instead of 2P_mm"), id="2P where 2 P_mm is asked"),
    pytest.param("ch2.decode-step-flops-llama3-70b", lambda f: f"{(f + 2 * 32 * EMBEDDING_70B) / 1e12:.4f} TFLOP",
                 HIGH, id="2P is too high"),
    # Worked problem 3: 1.4013 ms within ±0.2%, the source's 1.372 ms under its 18e9 B, nothing between
    pytest.param("wp.q3-weight-load", lambda s: f"{s * 1e3:.5f} ms", RIGHT, id="our weight load"),
    pytest.param("wp.q3-weight-load", lambda s: f"{s * 1e3 * 1.0019:.5f} ms", RIGHT, id="0.19% high is in the band"),
    pytest.param("wp.q3-weight-load", lambda s: f"{s * 1e3 * 1.0021:.5f} ms", WRONG, id="0.21% high is out"),
    pytest.param("wp.q3-weight-load", "1.37200 ms", RIGHT, id="the source's 18e9 B"),
    pytest.param("wp.q3-weight-load", f"{1.372 * 1.0019:.5f} ms", RIGHT, id="the source's, 0.19% high"),
    pytest.param("wp.q3-weight-load", "1.38600 ms", WRONG, id="between the two conventions"),
    pytest.param("wp.q3-weight-load", "1.36400 ms", WRONG, id="below the source's"),
    pytest.param("wp.q3-weight-load", "1.372 ms", says("18e9"), id="the source's names its convention"),
    pytest.param("wp.q3-weight-load", "1.40 ms", RIGHT, id="three figures"),
    # The worked model shares one embedding table (0.7% of it): left out, or counted twice, is named
    pytest.param("wp.q1-params", lambda p: p - WORKED_EMBEDDING, slip("the embedding left out"),
                 id="parameters without the embedding"),
    pytest.param("wp.q1-params", lambda p: p + WORKED_EMBEDDING, slip("the embedding counted twice"),
                 id="parameters with the embedding twice"),
    pytest.param("wp.q3-weight-load", lambda s: f"{s * (1 - WORKED_EMBEDDING / _expected('wp.q1-params'))} s",
                 slip("the embedding left out"), id="a weight read without the embedding"),
    # Bands set by what the question needs, and the slips just outside them
    pytest.param("ch2.naive-over-cached-llama3-8b", lambda _: _slip("ch2.naive-over-cached-llama3-8b",
                                                                     "the matmuls only"),
                 slip("the matmuls only"), id="the matmuls only, 1.4% off"),
    pytest.param("ch13.int8-step-qwix", "0.0199", RIGHT, id="Qwix's step to three figures"),
    pytest.param("ch13.int8-step-qwix", "0.01992", RIGHT, id="Qwix's step to four figures"),
    pytest.param("ch13.int8-step-qwix", 2.54 / 127, slip("chapter 10's step, amax / 127"),
                 id="chapter 10's step, 0.4% off"),
    pytest.param("ch7.hop-crossing-llama3-8b-v5e-b32", lambda _: _slip("ch7.hop-crossing-llama3-8b-v5e-b32",
                                                                        "the bytes-only bound F/(B beta)"),
                 slip("the bytes-only bound F/(B beta)"), id="the crossing priced by bytes alone"),
    # Counts: exact, rounded as asked, and the slips that land on a neighbouring count
    pytest.param("ch4.max-batch-llama3-70b-v5e16", 42, RIGHT, id="the largest batch that fits"),
    pytest.param("ch4.max-batch-llama3-70b-v5e16", 42.8, WRONG, id="a batch is a whole number"),
    pytest.param("ch4.max-batch-llama3-70b-v5e16", 43, slip_naming("rounding up", "P_mm"),
                 id="rounding up and the weights without the embedding both land on 43"),
    pytest.param("ch6.paged-slots", {"paged": 7000}, slip("the tokens themselves"), id="the useful tokens"),
    pytest.param("ch4.kv-32k-llama3-8b", {"cache": f"{CACHE_32K_8B / 1e9} GB", "outweigh": 4}, RIGHT,
                 id="the cache and the count that outweighs the weights"),
    pytest.param("ch4.kv-32k-llama3-8b", {"cache": f"{CACHE_32K_8B / 1e9} GB", "outweigh": 3}, slip("rounding down"),
                 id="one cache too few"),
    pytest.param("ch4.kv-32k-llama3-8b", {"cache": f"{CACHE_32K_8B / 2e9} GB", "outweigh": 8}, slip("keys only"),
                 id="keys only, carried into the count"),
    # Several levers on one model
    pytest.param("ch6.mqa-or-local-global-llama3-70b", {"mqa": f"{MQA_70B / 1e9} GB",
                                                         "local_global": f"{LOCAL_GLOBAL_70B / 1e9} GB"}, RIGHT,
                 id="both levers priced by hand"),
    pytest.param("ch6.mqa-or-local-global-llama3-70b", {"mqa": f"{MQA_70B / 1e9} GB",
                                                         "local_global": f"{8 * MQA_70B / 1e9} GB"},
                 slip("every layer global"), id="local attention left out"),
    pytest.param("ch6.mqa-or-local-global-llama3-70b", {"mqa": f"{8 * MQA_70B / 1e9} GB",
                                                         "local_global": f"{LOCAL_GLOBAL_70B / 1e9} GB"},
                 slip_naming("the GQA cache (K = 8)"), id="the GQA cache for multiquery"),
]


@for_each(VERDICTS, ids=str)
def test_what_a_typed_answer_gets(eid, answer, verdict):
    typed = answer(_expected(eid)) if callable(answer) else answer
    result = grade(eid, typed)
    parts = [part for part in result.parts if not isinstance(typed, dict) or part.name in typed]
    correct = all(part.correct for part in parts)
    kind, _, text = verdict.partition(": ")
    if verdict == RIGHT:
        assert correct, result.message
    elif verdict == WRONG:
        assert not correct, result.message
    elif verdict in (HIGH, LOW):
        assert not correct and result.direction == verdict.split()[1], result.message
    elif kind == "slip":
        assert not correct and result.slip == text, result.message
    elif kind == "slip naming":
        assert not correct and all(word in (result.slip or "") for word in text.split("|")), result.message
    elif kind == "says":
        assert text in result.message, result.message
    else:
        assert kind == "never says" and text not in result.message, result.message


# --- slips across sibling exercises, and what a wrong option's hint may say ------------------------------------------

def test_typed_slips_are_named_at_least_nine_times_in_ten_never_misnamed_never_accepted():
    results = slip_audit.audit()
    counts = slip_audit.summary(results)
    assert counts["typed"] >= 100 and len(slip_audit.FAMILIES) >= 12
    wrong = [(r.typed, r.verdict, r.slip) for r in results if r.verdict in ("misnamed", "accepted")]
    assert not wrong
    assert counts["named"] >= 0.9 * counts["typed"], [(r.typed, r.message) for r in results if r.verdict != "named"]


_BYTE_PARTS = [(eid, part) for eid, exercise in sorted(exercises().items()) for part in exercise.parts
               if isinstance(part, Number) and parse_unit(part.unit)[1] in ("bytes", "bandwidth")]


@for_each(_BYTE_PARTS, ids=lambda item: f"{item[0]}:{item[1].name}")
def test_a_listed_slip_that_lands_where_bits_for_bytes_does_names_both(item):
    # Eight times the answer (its bits labelled bytes) or an eighth (its bytes labelled bits) is also a unit slip.
    eid, part = item
    for listed in part.slips:
        ratio = listed.value() / part.expected()
        if any(abs(ratio / factor - 1) <= max(part.rel_tol, 0.001) for factor in (8, 1 / 8)):
            assert "bits" in listed.name, (eid, listed.name)


def _words(text: str) -> list:
    return re.findall(r"[a-z0-9_/]+", text.lower())


def _choices():
    return [(eid, part) for eid, exercise in sorted(exercises().items()) for part in exercise.parts
            if isinstance(part, Choice)]


@for_each(_choices(), ids=lambda item: f"{item[0]}:{item[1].name}")
def test_no_wrong_option_hint_contains_the_right_option_s_text(item):
    # Neither the right option's text nor any 4 consecutive words of it (its one word, for a one-word option).
    eid, part = item
    right = _words(part.options[part.correct])
    n = min(4, len(right))
    shingles = {tuple(right[i:i + n]) for i in range(len(right) - n + 1)}
    for letter, hint in part.why.items():
        assert " ".join(right) not in " ".join(_words(hint)), (letter, hint)
        words = _words(hint)
        assert not shingles & {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}, (letter, hint)
