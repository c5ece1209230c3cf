"""The exercise checker (scaling_lib.book.exercises), tried on every exercise as a student would: answered right, in
another unit, wrong, with each slip it lists, and with garbage. Verdicts name the slip and the direction, never the
answer. What particular answers get, exercise by exercise, is in test_verdicts.py."""

import contextlib
import io
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling_lib.book import check as top_level_check, solution as top_level_solution
from scaling_lib.book.exercises import checker
from scaling_lib.book.exercises import (Choice, Convention, Exercise, Number, Slip, check, exercises, get_exercise,
                                        grade, register, solution)
from scaling_lib.book.exercises.exercise import standard_slips
from scaling_lib.units import parse_unit
from tests import examples, for_each

REGISTRY = exercises()
NUMBER_PARTS = [(eid, part) for eid, ex in sorted(REGISTRY.items()) for part in ex.parts if isinstance(part, Number)]
CHOICE_PARTS = [(eid, part) for eid, ex in sorted(REGISTRY.items()) for part in ex.parts if isinstance(part, Choice)]
SLIPS = [(eid, part, slip) for eid, part in NUMBER_PARTS for slip in part.slips]

# Another spelling of each unit the book asks in, with the factor from the asked unit: "one other unit".
_OTHER_UNIT = {"ms": ("s", 1e-3), "s": ("ms", 1e3), "B": ("kB", 1e-3), "kB": ("MB", 1e-3), "MB": ("GB", 1e-3), "GB": ("MB", 1e3),
               "TB/s": ("GB/s", 1e3), "TFLOP": ("GFLOP", 1e3), "FLOPs/B": ("FLOP/byte", 1.0),
               "tokens": ("k tokens", 1e-3), "tok/s": ("k tok/s", 1e-3), "tokens/s": ("k tokens/s", 1e-3), "requests/s": ("req/s", 1.0),
               "%": ("%", 1.0), "x": ("X", 1.0),
               "ways": ("Ways", 1.0), "sequences": ("Sequences", 1.0), "chips": ("Chips", 1.0), "": ("x", 1.0)}


def _part_id(item):
    eid, part = item[:2]
    return f"{eid}:{part.name}" if part.name else eid


def _answer(eid, part, value):
    """The answer to one part inside the whole answer of its exercise (a dict for a multi-part exercise)."""
    exercise = REGISTRY[eid]
    return {part.name: value} if len(exercise.parts) > 1 else value


def _verdict(eid, part, value, **kwargs):
    verdict = grade(eid, _answer(eid, part, value), **kwargs)
    return verdict, next(v for v in verdict.parts if v.name == part.name) if verdict.parts else None


def _in_unit(part, si_value):
    return si_value / parse_unit(part.unit)[0]


def _forms(value: float) -> set:
    """Ways an expected value could be printed to three or more figures."""
    forms = {f"{value:.3g}", f"{value:.4g}", f"{value:,.0f}", f"{value:.1f}", f"{value:.2f}", f"{value:,.1f}"}
    return {form for form in forms if len(re.sub(r"\D", "", form)) >= 3 and "e" not in form}


# --- a numeric answer: right in any unit, wrong with a direction, each slip named ------------------------------------

@for_each(NUMBER_PARTS, ids=_part_id)
def test_right_answer_and_another_unit_are_accepted(item):
    eid, part = item
    expected = _in_unit(part, part.expected())
    assert math.isfinite(expected) and expected > 0
    number = round(expected) if part.integer else float(f"{expected:.6g}")
    assert _verdict(eid, part, number)[1].correct
    assert _verdict(eid, part, f"{number} {part.unit}".strip())[1].correct
    other, factor = _OTHER_UNIT[part.unit]
    converted = number * factor
    assert _verdict(eid, part, f"{converted:.10g} {other}")[1].correct, other


@for_each(NUMBER_PARTS, ids=_part_id)
def test_wrong_answers_say_the_direction_and_never_the_answer(item):
    eid, part = item
    expected = _in_unit(part, part.expected())
    for factor, direction in ((1.37, "high"), (0.61, "low"), (25.0, "high")):
        value = round(expected * factor) if part.integer else expected * factor
        verdict, part_verdict = _verdict(eid, part, value)
        assert not verdict.correct and part_verdict.direction == direction
        assert f"too {direction}" in part_verdict.message
        leaked = [form for form in _forms(expected) if re.search(rf"(?<![\d.,]){re.escape(form)}(?!\d)",
                                                               verdict.message)]
        assert not leaked, (verdict.message, leaked)
        body = verdict.message.split("]", 1)[1]
        assert "expected" not in body and "x the" not in body


@for_each(SLIPS, ids=lambda item: f"{_part_id(item)}:{item[2].name}")
def test_each_listed_slip_is_recognised_by_its_value_and_named(item):
    eid, part, slip = item
    wrong = _in_unit(part, slip.value())
    value = round(wrong) if part.integer else float(f"{wrong:.6g}")
    verdict, part_verdict = _verdict(eid, part, value)
    assert not part_verdict.correct
    assert part_verdict.slip == slip.name, part_verdict.message
    assert slip.hint in part_verdict.message
    assert part_verdict.direction == ("high" if wrong > _in_unit(part, part.expected()) else "low")


@for_each(NUMBER_PARTS, ids=_part_id)
def test_slips_and_conventions_are_told_apart_from_the_answer_and_from_each_other(item):
    eid, part = item
    values = [("expected", part.expected())] + [(s.name, s.value()) for s in part.slips] + \
             [(c.name, c.value()) for c in part.also]
    scale = parse_unit(part.unit)[0]
    window = checker._slip_window(part)  # how near a slip's value an answer is named as that slip
    for i, (name_a, a) in enumerate(values):
        assert math.isfinite(a) and a > 0, name_a
        for name_b, b in values[i + 1:]:
            if part.integer:
                assert round(a / scale) != round(b / scale), (name_a, name_b)
            else:  # the accepted band and each slip's window never overlap, nor two slips' windows
                apart = part.rel_tol + window if name_a == "expected" else 2 * window
                assert abs(math.log(a / b)) > apart, (name_a, name_b, a / b)


@for_each(NUMBER_PARTS, ids=_part_id)
def test_an_answer_is_accepted_within_its_band_only(item):
    """A count is the exact whole number (one more or less is wrong, a fraction is no count); a modelling answer is
    accepted within its stated band and not at 1.5 times it; a band narrower than the default 1% to 2% is stated in
    the question."""
    eid, part = item
    exact = _in_unit(part, part.expected())
    if part.integer:
        assert exact == round(exact), "a count's answer is a whole number"
        for near in (exact - 1, exact + 1):
            if near > 0:
                assert not _verdict(eid, part, near)[1].correct
        half = _verdict(eid, part, exact + 0.5)[1]
        assert not half.correct and "whole number" in half.message
        return
    assert _verdict(eid, part, exact * (1 + 0.9 * part.rel_tol))[1].correct
    assert not _verdict(eid, part, exact * (1 + 1.5 * part.rel_tol + 0.003))[1].correct
    assert part.band in _verdict(eid, part, exact)[1].message
    if part.rel_tol < 0.01:
        assert f"±{100 * part.rel_tol:g}%" in REGISTRY[eid].question


# --- answers of every other shape: choices, several parts, garbage ------------------------------------------------

@for_each(CHOICE_PARTS, ids=_part_id)
def test_choices_accept_the_letter_in_any_form_and_explain_wrong_options(item):
    eid, part = item
    for form in (part.correct, part.correct.upper(), f"({part.correct})", f" {part.correct}) ",
                 part.options[part.correct].upper()):
        assert _verdict(eid, part, form)[1].correct, form
    for key in part.options:
        if key != part.correct:
            verdict = _verdict(eid, part, key)[1]
            assert not verdict.correct and part.why.get(key, "") in verdict.message
            assert f"({part.correct})" not in verdict.message
    assert "letters" in _verdict(eid, part, 2)[1].message


def test_multi_part_answers_take_a_dict_or_a_tuple_and_judge_each_part():
    paged, rectangular = (get_exercise("ch6.paged-slots").parts[i].expected() for i in (0, 1))
    assert grade("ch6.paged-slots", (paged, rectangular)).correct
    assert grade("ch6.paged-slots", {"rectangular": rectangular, "PAGED": f"{paged:,.0f} tokens"}).correct
    half = grade("ch6.paged-slots", (paged, None))
    assert not half.correct and [p.correct for p in half.parts] == [True, False]
    assert "1 of 2 parts right" in half.message and "rectangular: No answer yet" in half.message
    unknown = grade("ch6.paged-slots", {"padded": 1})
    assert "unknown part 'padded'" in unknown.message and "paged, rectangular" in unknown.message
    assert "No answer yet" in grade("ch6.paged-slots", None).message
    assert "dict" in grade("ch6.paged-slots", None).message


class _Exploding:
    """A reader's object whose conversion to a number raises something other than TypeError or ValueError."""

    def __float__(self):
        raise RuntimeError("no")

    def __repr__(self):
        raise RuntimeError("no repr either")


# Answers that are no answer: never accepted.
GARBAGE = [float("nan"), float("inf"), -float("inf"), True, False, [1, 2], {"x": 1}, {1, 2}, "about two hundred",
           "1,5", "1,2 ms", "12 parsecs", "MS", object(), 3 + 4j, "", "   ", "--3", "1.2.3", "e5", ".", ",", 0, -1]
# Answers at the edges of what Python and NumPy hold (10**400 and "1e300 GB" once raised OverflowError).
ODD_ANSWERS = [10**400, -10**400, 2**1024, 1e300, -1e300, 1e308, 5e-324, float("nan"), float("inf"), -float("inf"),
               "", None, [], [1], {}, {"x": 1}, b"12", b"\xff", True, False, "1e300 GB", "1e300 TB/s", "1e300 TFLOP",
               "-1e300 ms", "1e306 s", "1e400", "9" * 5000, "x" * 100_000, "12 parsecs", "3 GB", "40 %", "7k tokens",
               np.array([1e300]), np.array([]), np.float64("nan"), np.int64(2**62), 3 + 4j, object(), _Exploding(),
               {1, 2}, (1,) * 100, "1 " + "k" * 1500, "2 kk tokens", "1 " + "ab" * 50_000, "\ud800", "1 \ud800s"]


@for_each(sorted(REGISTRY), ids=str)
def test_odd_answers_get_a_verdict_never_an_exception_and_never_the_answer(eid):
    """`grade` promises never to raise for a reader's input: garbage is never accepted, and no verdict on an odd
    answer quotes the expected value; nor does one part too many pass."""
    expected = [_in_unit(part, part.expected()) for part in REGISTRY[eid].parts if isinstance(part, Number)]
    parts = REGISTRY[eid].parts
    for garbage, answer in [(True, answer) for answer in GARBAGE] + [(False, answer) for answer in ODD_ANSWERS]:
        for whole in [answer] if len(parts) == 1 else [{part.name: answer for part in parts}, (answer,) * len(parts)]:
            verdict = grade(eid, whole)
            assert isinstance(verdict.message, str) and verdict.message.startswith(f"[{eid}]")
            assert not (garbage and verdict.correct), answer
            leaked = [form for value in expected for form in _forms(value)
                      if re.search(rf"(?<![\d.,]){re.escape(form)}(?!\d)", verdict.message)]
            assert not leaked, (answer, verdict.message, leaked)
            # a long answer (100,000 characters, 5,000 digits, 1e308) is quoted cut short: a few lines per part
            assert len(verdict.message) < 300 * len(parts) + 100, (answer, verdict.message[:300])
    assert not grade(eid, tuple([1] * (len(parts) + 1))).correct


# --- ids, reveal and the solution -----------------------------------------------------------------------------------

def test_reveal_and_solution_give_the_answer_on_request(capsys):
    expected = get_exercise("ch4.max-batch-llama3-70b-v5e16").answer.expected()
    hidden = grade("ch4.max-batch-llama3-70b-v5e16", 1)
    assert f"{expected}" not in hidden.message
    for not_a_bool in ("no", "False", 1, None, [True]):  # only the bool True reveals; "no" is a true value
        refused = grade("ch4.max-batch-llama3-70b-v5e16", 1, reveal=not_a_bool)
        assert f"{expected}" not in refused.message and "is not True or False" in refused.message, not_a_bool
    revealed = check("ch4.max-batch-llama3-70b-v5e16", 1, reveal=True)
    assert f"{expected} sequences" in revealed.message and f"{expected} sequences" in capsys.readouterr().out
    shown = solution("ch6.paged-slots")
    assert shown.answers == {"paged": 7024, "rectangular": 16000}
    assert "7,024 tokens" in capsys.readouterr().out
    assert top_level_check is check and top_level_solution is solution
    assert "(c) smaller" in solution("ch1.bcrit-h200-vs-h100").message


NOT_A_STRING = "an exercise id is a string"


@pytest.mark.parametrize("exercise_id, says", [
    ("ch6.paged-slot", "did you mean 'ch6.paged-slots'"), ("ch99.nope", "unknown exercise 'ch99.nope'"),
    ("x" * 10_000, "unknown exercise"), ([], NOT_A_STRING), ({}, NOT_A_STRING), ({"ch1": 1}, NOT_A_STRING),
    (None, NOT_A_STRING), (3, NOT_A_STRING), (2.5, NOT_A_STRING), (b"ch1", NOT_A_STRING), (("ch1",), NOT_A_STRING),
    (object(), NOT_A_STRING),
])
def test_an_id_that_is_not_a_registered_string_gets_a_message_and_get_exercise_raises(exercise_id, says, capsys):
    verdict = check(exercise_id, 10**400)
    assert not verdict.correct and says in verdict.message
    assert len(verdict.message) < 400  # a long id is shown cut short
    assert says in solution(exercise_id).message and capsys.readouterr().out
    with pytest.raises(ValueError, match=re.escape(says)):
        get_exercise(exercise_id)


# --- defining an exercise -------------------------------------------------------------------------------------------

def test_exercise_definitions_validate_themselves(monkeypatch):
    monkeypatch.setattr(checker, "_EXERCISES", dict(checker._EXERCISES))  # the reader's exercise is removed after
    with pytest.raises(ValueError, match="unknown unit"):
        Number("parsecs", lambda: 1.0)
    with pytest.raises(ValueError, match="rel_tol"):
        Number("ms", lambda: 1.0, rel_tol=1.5)
    with pytest.raises(ValueError, match="not one of the options"):
        Choice({"a": "x", "b": "y"}, "c")
    with pytest.raises(ValueError, match="own name"):
        Exercise("demo.two", "Two?", (Number("ms", lambda: 1.0), Number("ms", lambda: 2.0)))
    with pytest.raises(ValueError, match="Slip"):
        Number("ms", lambda: 1.0, slips=((2.0, "a factor of 2"),))
    with pytest.raises(ValueError, match="Convention"):
        Number("ms", lambda: 1.0, also=(Slip("x", lambda: 1.0, "y"),))
    with pytest.raises(ValueError, match="Exercise"):
        register("not an exercise")
    with pytest.raises(ValueError, match="model"):
        Number("s", lambda: 1.0, quantity="prefill")
    with pytest.raises(ValueError, match="quantity"):
        Number("s", lambda: 1.0, quantity="bytes")
    for bad in (dict(rounding="down"), dict(integer=True, rounding="sideways")):  # rounding: only a count's, down/up
        with pytest.raises(ValueError, match="rounding"):
            Number("tokens", lambda: 3.0, **bad)
    demo = register(Exercise("demo.reader-own", "A reader's own?", Number("ms", lambda: 2e-3, also=(
        Convention("other", lambda: 3e-3),))))
    assert grade("demo.reader-own", "2 ms").correct and grade("demo.reader-own", 3).correct
    with pytest.raises(ValueError, match="already registered"):
        register(Exercise("demo.reader-own", "Again?", Number("ms", lambda: 1.0)))
    assert demo.unit == "ms"


def _mentions_kv(question: str) -> bool:
    return bool(re.search(r"KV cache|key/value|KV per token|cache per token", question))


# Answers that scale with KV bytes without being bytes (a batch, a time), and a byte answer that counts no cache.
KV_DERIVED = ("ch4.kv-32k-llama3-8b", "ch4.max-batch-llama3-70b-v5e16", "ch8.context-batch-sharded-b256",
              "ch9.kv-transfer-llama3-70b-32k-v5e16-dcn", "wp.q2-max-batch")
NOT_KV_BYTES = {"wp.q6-free-hbm": "HBM left for caches: no cache is counted"}


def test_each_kind_of_quantity_names_its_standard_slip():
    """A KV-cache size names "keys only", a FLOP count or an MFU "the factor 2 left out", a prefill time (2PT, the
    book's convention) "P_mm instead of P"; a slip the exercise writes itself under the same name replaces the
    standard one."""
    kv = [(eid, part) for eid, part in NUMBER_PARTS
          if eid in KV_DERIVED or parse_unit(part.unit)[1] == "bytes" and _mentions_kv(REGISTRY[eid].question)
          and eid not in NOT_KV_BYTES]
    assert len(kv) >= 10
    for eid, part in kv:
        assert any("keys only" in slip.name for slip in part.slips), (eid, part.name)
    flops = [(eid, part) for eid, part in NUMBER_PARTS if parse_unit(part.unit)[1] == "flops"
             or "MFU" in REGISTRY[eid].question and part.unit == "%"]
    assert len(flops) >= 3
    for eid, part in flops:
        assert part.quantity in ("flops", "prefill") and "the factor 2 left out" in [s.name for s in part.slips], eid
    prefills = [(eid, part) for eid, part in NUMBER_PARTS
                if re.search(r"prefill of|to prefill|prefill take|first token", REGISTRY[eid].question)
                and parse_unit(part.unit)[1] == "time" and "Measured" not in REGISTRY[eid].question]
    assert len(prefills) >= 3
    for eid, part in prefills:
        assert part.quantity == "prefill", eid
        slip = next(s for s in part.slips if s.name == "P_mm instead of P")
        assert grade(eid, _answer(eid, part, f"{_in_unit(part, slip.value()):.6g} {part.unit}")).slip == slip.name
    value = lambda: 3.0e9  # noqa: E731
    assert [(s.name, s.value()) for s in Number("GB", value, quantity="kv").slips] == [("keys only", 1.5e9)]
    own = Slip("keys only", lambda: 1.0, "x")
    assert Number("GB", value, quantity="kv", slips=(own,)).slips == (own,)
    assert standard_slips("", value) == ()
    prefill = Number("s", lambda: 1.0, quantity="prefill", model="llama3-70b")
    ratio = dict((s.name, s.value()) for s in prefill.slips)["P_mm instead of P"]
    assert ratio == pytest.approx(1 / 1.0151, rel=1e-3)  # LLaMA-3-70B's 128,256 x 8,192 table is 1.5% of P_mm


# --- the answer box's words: the rule shown before a try, the same judgement without notebook wording -----------------

@for_each(NUMBER_PARTS, ids=_part_id)
def test_the_rule_a_box_shows_before_a_try_is_enough_to_be_accepted(item):
    """A modelling answer's rule names a band and a number of significant figures: the answer rounded to that many
    figures is accepted. A count's rule repeats the rounding its question asks for."""
    eid, part = item
    question = REGISTRY[eid].question.lower()
    if part.integer:
        assert part.rule == "a whole number" + (f", rounded {part.rounding}" if part.rounding else "")
        for word in ("down", "up"):
            if f"round {word}" in question:
                assert part.rounding == word, question
        return
    figures = int(re.fullmatch(rf"{re.escape(part.band)}: (\d) significant figures are enough", part.rule).group(1))
    rounded = float(f"{_in_unit(part, part.expected()):.{figures}g}")
    assert _verdict(eid, part, rounded)[1].correct, (part.rule, rounded)


def test_significant_figures_follow_the_band():
    """Hand-derived: rounding to n figures errs by at most half a unit of the n-th, 5 x 10^-n of a leading 1;
    that must stay within half the band."""
    for rel_tol, figures in ((0.02, 3), (0.01, 3), (0.005, 4), (0.002, 4), (0.0015, 4), (0.05, 3), (0.1, 2), (0.0005, 5)):
        assert Number("ms", lambda: 1.0, rel_tol=rel_tol).rule.endswith(f"{figures} significant figures are enough")


def _page_words(eid, answer):
    """The page's verdict beside the notebook's, for the same answer."""
    return grade(eid, answer, page=True), grade(eid, answer)


@for_each(sorted(REGISTRY), ids=str)
def test_page_verdicts_judge_as_the_notebook_does_in_the_page_s_words(eid):
    exercise = REGISTRY[eid]
    parts = exercise.parts
    nothing = grade(eid, None if len(parts) == 1 else {}, page=True).message
    assert nothing.startswith("No answer yet: ") and "None" not in nothing and "[" not in nothing
    for part in parts:
        shown = ["pick one"] if isinstance(part, Choice) else [part.unit, "whole" if part.integer else part.rule]
        assert all(words in nothing for words in shown), (shown, nothing)
        if len(parts) > 1:
            assert f"{part.heading}: " in nothing and "_" not in part.heading
    answers = [[_in_unit(part, part.expected()) if isinstance(part, Number) else part.correct,
                _in_unit(part, part.expected()) * 3 if isinstance(part, Number) else "z", "12 parsecs"]
               for part in parts]
    for tried in zip(*answers):
        page, notebook = _page_words(eid, tried[0] if len(parts) == 1 else dict(zip((p.name for p in parts), tried)))
        assert page.correct == notebook.correct and [p.message for p in page.parts] == \
            [p.message for p in notebook.parts]
        expected = notebook.message.removeprefix(f"[{eid}] ")
        for part in parts:
            expected = expected.replace(f"\n  {part.name}: ", f"\n  {part.heading}: ")
        assert page.message == expected


# One numeric part per unit the book asks in, and one multiple-choice part: the readers of every kind of answer.
_ONE_PER_KIND = sorted({part.unit: (eid, part) for eid, part in NUMBER_PARTS}.values(), key=_part_id) + CHOICE_PARTS[:1]
# What a reader's keyboard or a pasted page puts in an answer, in pieces: digits, signs, separators, prefixes and
# units, scale words, typographic characters, a lone surrogate, control characters.
_PIECES = st.sampled_from(["1", "0", "9", ".", ",", "_", "e", "E", "-", "+", " ", "k", "K", "M", "G", "Ki", "Mi", "B",
                           "b", "/s", "s", "ms", "tokens", "tok", "%", "x", "million", "B", "FLOPs", "\u2212",
                           "\u00a0", "\u202f", "\ud800", "\u00e9", "\u00b5", "\x00", "\n", "(", "a"])
READER_TEXT = st.one_of(st.text(), st.lists(_PIECES, max_size=40).map("".join),
                        st.builds(lambda n, piece: "1 " + piece * n, st.integers(1, 3000), _PIECES))


@settings(max_examples=examples(300, inner=20), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(item=st.sampled_from(_ONE_PER_KIND), text=READER_TEXT)
def test_any_text_gets_a_short_verdict_never_an_exception_even_on_an_ascii_terminal(item, text):
    """`grade` and `check` never raise on any string ('1 ' + 'k' * 1500 once recursed past Python's limit), quote
    it cut short, and `check` prints on a terminal that can only write ASCII."""
    eid, part = item
    verdict = grade(eid, _answer(eid, part, text))
    assert verdict.message.startswith(f"[{eid}]") and len(verdict.message) < 1500
    terminal = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    with contextlib.redirect_stdout(terminal):
        assert check(eid, _answer(eid, part, text)).message == verdict.message
        terminal.flush()
    assert terminal.buffer.getvalue()
