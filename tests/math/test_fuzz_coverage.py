"""Every public parameter of the closed-form modules has a Hypothesis spec.

The closed-form modules are the top-level modules of `scaling_lib` (not `tiny`, not `book`). Public means: a
function or class defined in that module whose name has no leading underscore; a class counts when its
constructor checks what a caller passes (its own `__post_init__`, or `__init__` for a plain class): the result
types, built by the library, do not. A parameter is covered when `test_fuzz_inputs.SPECS` gives it a kind, which
says what good and bad values Hypothesis draws for it. This test lists the parameters without one, so a new
function or argument without a spec fails here until it has one.
"""

import importlib
import inspect
import pkgutil

import scaling_lib
import tests
from tests.math.fuzz_more_specs import is_input_class
from tests.math.test_fuzz_inputs import BAD, GOOD, SPECS

MODULES = sorted(m.name for m in pkgutil.iter_modules(scaling_lib.__path__) if not m.ispkg and not m.name.startswith("_"))


def public_parameters() -> dict:
    """'module.name' -> the names of its parameters (*args and **kwargs left out: they pass through to others)."""
    found = {}
    for name in MODULES:
        module = importlib.import_module(f"scaling_lib.{name}")
        for attr, value in vars(module).items():
            if attr.startswith("_") or "__mutmut_" in attr or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value) or is_input_class(value):
                params = inspect.signature(value).parameters.values()
                found[f"{name}.{attr}"] = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return found


def test_every_public_parameter_has_a_hypothesis_spec():
    found = public_parameters()
    missing = [f"{where}({param})" for where, params in sorted(found.items()) for param in params
               if param not in SPECS.get(where, ({}, {}))[1]]
    assert not missing, (f"{len(missing)} public parameters have no Hypothesis spec (give each a kind in "
                         f"tests/math/test_fuzz_inputs.py SPECS or tests/math/fuzz_more_specs.py): {missing}")


def test_the_registry_names_only_what_exists_and_only_kinds_it_can_draw():
    found = public_parameters()
    stale = sorted(set(SPECS) - set(found))
    assert not stale, f"specs for names that are not public functions or input classes: {stale}"
    for where, (_, kinds) in SPECS.items():
        unknown = set(kinds) - set(found[where])
        assert not unknown, f"{where}: the spec names parameters it does not take: {unknown}"
        for param, kind in kinds.items():
            assert kind.rstrip("?") in GOOD and kind.rstrip("?") in BAD, f"{where}({param}): no kind {kind!r}"


def test_the_count_is_what_the_modules_hold():
    # Not a fixed number (that would fail on every new function): the parameters counted are those of the
    # functions and input classes, at least the 704 a review counted and every one of them covered.
    found = public_parameters()
    total = sum(len(params) for params in found.values())
    covered = sum(len(kinds) for where, (_, kinds) in SPECS.items() if where in found)
    assert total >= 704 and covered == total


def test_the_inner_loop_draws_a_fifth_of_the_examples_and_a_thorough_run_all(monkeypatch):
    """The seconds-long inner loop trades examples for time; the runs that gate a change (`make test`, which CI runs,
    and `make mutation`) set the thorough budget (tests/book/test_mutation_tool.py checks that they do)."""
    monkeypatch.setattr(tests, "THOROUGH", False)
    assert [tests.examples(n) for n in (8, 12, 25, 40)] == [5, 5, 5, 8]
    assert tests.examples(25, inner=3) == 3  # a property that names its inner-loop count
    monkeypatch.setattr(tests, "THOROUGH", True)
    assert [tests.examples(n) for n in (8, 12, 25, 40)] == [8, 12, 25, 40]
    assert tests.examples(25, inner=3) == 25
