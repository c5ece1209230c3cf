"""Send a catalogue of bad inputs through every entrance of the library and classify what happens (issue 21).

    .venv/bin/python tools/probe_bad_inputs.py [--list] [--only SUBSTRING] [--verbose]

The catalogue (deterministic, built in this file):
- every public function and input class of the closed-form modules, with every bad value the Hypothesis registry
  (`tests/math/test_fuzz_inputs.py` SPECS and BAD) lists for each of its parameters, plus huge counts (2**40,
  10**15) for each count parameter: unknown names, zero, negative, fractional, bool, string, None, NaN, inf, huge
  sizes, wrong types, meshes that do not divide;
- the cases named in issue 21 (items 1-8), by hand: oversized batches, torus layouts on a switch, heads that do not
  split, divisor loops, NaN cache sizes, the tiny engine and caches, the exercise checker;
- extreme and pathological inputs (`_extreme_cases`): answers that recursed, config values nested past Python's
  recursion limit, overflowing prices and chip counts, a chip priced twice, meshes a 2D torus cannot hold, a
  sequence whose batch-split cache fits no chip, MI300X groups across nodes, markup in an explorer's data;
- the command line, as a user runs it (a subprocess): odd JSON configs, bad flags, extreme values, an output that
  cannot be written (/dev/full, a closed stdout), names an ASCII-only terminal cannot print.

Each call runs in a worker process under a 1-second alarm (a subprocess that does not answer in 10 s is killed);
each command-line case gets 1 s beyond the time a good command takes to start. Outcomes:
- clear: a ValueError or TypeError whose message names the argument (or, for a name lookup, says "unknown");
  for the command line, exit status 2 with a one-line message and no traceback;
- unclear: another exception type, or a message that does not name the argument; exit 2 without naming it;
- accepted: the call returned a value (or the command exited 0) for input that has no meaning;
- traceback: the command line printed a Python traceback;
- hang: no answer within the time limit.
A few cases accept a returned value when it is the right reading of the input (`"false"` read as False) or when
the entrance promises never to raise (`exercises.grade`).

Prints the percentages and every case that is not clear; exits 1 if any input is accepted or hangs, else 0. Not
part of `make test` (`make probe` runs it).
"""

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LIMIT_S = 1.0  # the alarm inside the worker
TINY_LIMIT_S = 10.0  # the tiny JAX cases: a new shape or dtype that gets through is compiled first
KILL_S = 10.0  # a worker that does not answer by then is stuck in C code: killed, the case is a hang
NAME_PHRASES = ("unknown", "is dense", "could not read", "a unit is", "expected a number", "config", "model_type")
HUGE = (2**40, 10**15)


class ProbeTimeout(BaseException):
    """Raised by the alarm; a BaseException so that library code catching Exception does not swallow it."""


# --- the catalogue -------------------------------------------------------------------------------------------------

class Case:
    """One probe: `call` (a function of the fixtures namespace) or `argv` (a command line), and how to judge it."""

    def __init__(self, label, *, call=None, argv=None, config=None, names=(), accept=None, must_contain=None,
                 raw_config=None, limit_s=LIMIT_S, huge=False, stdout=None, env=None):
        self.label, self.call, self.argv, self.limit_s, self.huge = label, call, argv, limit_s, huge
        self.stdout, self.env = stdout, env  # a command line's stdout (a path, or "closed"), extra environment
        self.config, self.raw_config = config, raw_config  # a JSON value, or raw bytes, written to the --config file
        self.names = tuple(names)  # words one of which the message must contain
        self.accept = accept  # result -> True when returning it is the right answer
        self.must_contain = must_contain  # a string the message must also contain (the value the user gave)


def _registry_cases():
    from tests.math import test_fuzz_inputs as fuzz
    cases = []
    for name, (base, kinds) in sorted(fuzz.SPECS.items()):
        for param, kind in kinds.items():
            optional, kind = kind.endswith("?"), kind.rstrip("?")
            values = [v for v in fuzz.BAD[kind] if not (v is None and optional)]
            if kind in ("count", "small", "count0", "small0"):
                values += list(HUGE)
            lookup = kind in fuzz.NAME_LOOKUPS
            for i, bad in enumerate(values):
                def call(ns, name=name, base=base, param=param, bad=bad):
                    return ns["FUNCTIONS"][name](**{**base, param: bad})
                # A huge count is a number the formula can take: a quick answer or a clear refusal are both right;
                # what it must not do is loop for minutes or fail with an OverflowError.
                huge = isinstance(bad, int) and not isinstance(bad, bool) and bad in HUGE
                cases.append(Case(f"{name}({param}={_short(bad)})#{i}", call=call,
                                  names=(param,) + (NAME_PHRASES if lookup else ()),
                                  accept=(lambda result: True) if huge else None, huge=huge))
    return cases


def _short(value) -> str:
    text = repr(value) if not callable(value) else f"<function {getattr(value, '__name__', '?')}>"
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    return text if len(text) <= 40 else text[:37] + "..."


def _issue_cases():
    """The cases issue 21 names, items 1-8 (item 1 is the command line, below)."""
    nan, cases = float("nan"), []

    def add(label, call, names, **options):
        cases.append(Case(f"issue: {label}", call=call, names=names, **options))

    # 2. from_hf_config reads strings as booleans, and head_dim 0 / false fall back
    llama = json.loads((REPO / "book/data/hf_configs/llama-3.1-8b.json").read_text())
    for field, value, accept in (("tie_word_embeddings", "false", lambda m: m.tied_embeddings is False),
                                 ("tie_word_embeddings", "true", lambda m: m.tied_embeddings is True),
                                 ("head_dim", 0, None), ("head_dim", False, None), ("head_dim", -128, None),
                                 ("use_sliding_window", "false", lambda m: m.sliding_window is None),
                                 ("hidden_size", "4096", None), ("num_attention_heads", 0, None),
                                 ("num_hidden_layers", 2.5, None), ("vocab_size", None, None)):
        add(f"from_hf_config({field}={value!r})",
            lambda ns, f=field, v=value: ns["models"].from_hf_config({**llama, f: v}), (field,), accept=accept)
    # 3. the tiny engine and caches (10 s: a call that gets through compiles a new shape, which takes seconds; the
    # paths with the fixtures' own shapes are compiled before the alarm, so an early refusal answers at once)
    def add(label, call, names, **options):  # noqa: F811 - the same, with the tiny limit
        cases.append(Case(f"issue: {label}", call=call, names=names, limit_s=TINY_LIMIT_S, **options))
    add("Engine.insert(prefix of a model with other KV heads)", lambda ns: ns["tiny"]()["insert_other_heads"](),
        ("n_kv_heads", "KV heads", "kv heads", "heads"))
    add("tiny decode_step(token id 2**40)", lambda ns: ns["tiny"]()["decode_token"](2**40), ("token",))
    add("tiny decode_step(token id -1)", lambda ns: ns["tiny"]()["decode_token"](-1), ("token",))
    add("tiny KVCache(k fp32, v bf16)", lambda ns: ns["tiny"]()["mixed_cache"](), ("dtype", "cache"))
    add("PagedKVCache.release(-1)", lambda ns: ns["tiny"]()["paged"]().release(-1), ("b", "sequence", "slot"))
    add("PagedKVCache.share_prefix(0, -1, 3)", lambda ns: ns["tiny"]()["paged"]().share_prefix(0, -1, 3),
        ("dst", "sequence"))
    add("Engine.release(state, 99)", lambda ns: ns["tiny"]()["release"](99), ("slot",))
    for slot in (1.5, True, None, "0", -1):
        add(f"Engine.insert(slot={slot!r})", lambda ns, s=slot: ns["tiny"]()["insert"](s), ("slot",))
    def add(label, call, names, **options):  # noqa: F811 - back to the 1-second limit
        cases.append(Case(f"issue: {label}", call=call, names=names, **options))

    # 4. calibration and estimate arguments
    cal, est = "calibration", "estimate"
    for fn in ("compare", "split_of", "predicted_latency"):
        add(f"calibration.{fn}(None)", lambda ns, f=fn: getattr(ns[cal], f)(None), ("row",))
    add("calibration.fit_efficiency(ratio_of -> NaN)",
        lambda ns: ns[cal].fit_efficiency(lambda e: [nan], fields=("mfu",)), ("ratio_of", "NaN", "nan"))
    add("calibration.fit_efficiency(ratio_of -> [])",
        lambda ns: ns[cal].fit_efficiency(lambda e: [], fields=("mfu",)), ("ratio_of",))
    add("estimate.decode_step('llama3-70b', 32, 8192)", lambda ns: ns[est].decode_step("llama3-70b", 32, 8192),
        ("deployment",))
    # 5. capacity in the closed-form bounds
    add("decode_throughput(llama3-70b, 1 x v5e, batch 10000, 32k)",
        lambda ns: ns["inference"].decode_throughput("llama3-70b", "tpu-v5e", 1, batch=10000, context_len=32768),
        ("does not fit",))
    # the issue's batch 256 fits the 85.5 GB an H100 exposes (84.7 GB needed); 300 sequences need 96.6 GB
    add("decode_step_time(llama3-8b, 1 x h100, batch 300, 2048)",
        lambda ns: ns["inference"].decode_step_time("llama3-8b", "h100", 1, 300, 2048), ("does not fit",))
    add("roofline_speedup(llama3-70b, 16 x v5e, batch 256, 2048)",
        lambda ns: ns["speculative"].roofline_speedup("llama3-70b", "tpu-v5e", 16, 256, 2048, 4, 0.6, 0.05),
        ("does not fit",))
    # 6. layouts the chip cannot run, heads that do not split
    add("choose_layout(llama3-70b, 8 x h100) recommends a torus layout",
        lambda ns: ns["frontier"].choose_layout("llama3-70b", "h100", 8, "decode", 64),
        ("ffn_layout",), accept=lambda d: {c.ffn_layout for c in d.costs} == {"1d-ws"})
    add("layout_cost(palm-540b, 256-way heads)",
        lambda ns: ns["frontier"].layout_cost("palm-540b", "tpu-v4", 256, "decode", 256, "2d-ws", "heads"),
        ("n_heads",))
    add("layout_cost(llama3-70b on h100, 2d-ws)",
        lambda ns: ns["frontier"].layout_cost("llama3-70b", "h100", 8, "decode", 64, "2d-ws", "heads"),
        ("ffn_layout",))
    # 7. minute-long loops and poisoned totals
    add("Deployment(palm-540b, v4, 2**40, 2d-ws)",
        lambda ns: ns[est].Deployment("palm-540b", "tpu-v4", 2**40, ffn_layout="2d-ws"), ("n_chips",))
    add("hops.cube_torus(2**53)", lambda ns: ns["hops"].cube_torus(2**53), ("n_chips",))
    add("hops.cube_torus(2**40 + 1)", lambda ns: ns["hops"].cube_torus(2**40 + 1), ("n_chips",))
    add("layouts.optimal_2d_mesh(2**40)", lambda ns: ns["layouts"].optimal_2d_mesh(2**40, "palm-540b"),
        ("n_chips",))
    for size in (nan, float("inf"), -5):
        add(f"TieredLru.store(k, 5, {size})", lambda ns, s=size: ns["TieredLru"](ns["TIERS"]).store("k", 5, s),
            ("size",))
    add("mesh_collective('bogus', -5, v5e, (4, 4))",
        lambda ns: ns["collectives"].mesh_collective("bogus", -5, "tpu-v5e", (4, 4)), ("op", "array_bytes"))
    add("estimate.decode_time(context_len=0.5)",
        lambda ns: ns[est].decode_time(ns["DEPLOYMENT"], 32, 0.5, 16), ("context_len",), must_contain="0.5")
    add("simulate(n_servers=2**40)", lambda ns: ns["simulator"].simulate(ns["CONFIG"], ns["WORKLOAD"],
                                                                        n_servers=2**40),
        ("n_servers",), accept=lambda r: r.n_chips == 2**40)
    add("best_lookahead(max_lookahead=2**40)", lambda ns: ns["speculative"].best_lookahead(0.6, 0.05, 2**40),
        ("max_lookahead",))
    add("generation_flops_curve(n_tokens=2**40)",
        lambda ns: ns["flops"].generation_flops_curve("llama3-8b", 16, 2**40), ("n_tokens",))
    # 8. the exercise checker promises never to raise for a reader's input: any verdict is the right answer
    for label, answer in (("10**400", 10**400), ("1e300", 1e300), ("-1e300", -1e300), ("nan", nan),
                          ("a dict", {"a": 1}), ("a string", "lots")):
        for exercise in ("ch1.bcrit-v6e-int4", "ch4.kv-32k-llama3-8b", "ch3.tpot-llama3-8b-h200-b32"):
            add(f"exercises.grade({exercise}, {label})",
                lambda ns, e=exercise, a=answer: ns["grade"](e, a), ("answer",), accept=lambda v: True)
    add("exercises.grade(unhashable id)", lambda ns: ns["grade"](["ch1"], 3), ("exercise",),
        accept=lambda v: True)
    return cases


def _cli_cases():
    good = json.loads((REPO / "book/data/hf_configs/llama-3.1-8b.json").read_text())
    trimmed = {k: v for k, v in good.items() if k != "head_dim"}
    base = ["estimate", "--chip", "h100", "--chips", "8"]
    cases = []

    def add(label, argv=None, names=(), **options):
        cases.append(Case(f"cli: {label}", argv=argv or base, names=names, **options))

    for label, value in (("a top-level list", [1, 2]), ("null", None), ("a number", 3), ("a string", "llama"),
                         ("an empty object", {}), ("hidden_size as a string, no head_dim",
                                                   {**trimmed, "hidden_size": "4096"}),
                         ("num_attention_heads 0", {**good, "num_attention_heads": 0}),
                         ("num_attention_heads null", {**good, "num_attention_heads": None}),
                         ("num_hidden_layers -1", {**good, "num_hidden_layers": -1}),
                         ("vocab_size 1e400", None), ("a nested list for hidden_size", {**good, "hidden_size": [1]}),
                         ("tie_word_embeddings 'yes'", {**good, "tie_word_embeddings": "yes"})):
        raw = b'{"hidden_size": 1e400}' if label == "vocab_size 1e400" else None
        add(f"--config with {label}", ["--config", "{config}"] + base, names=("config",), config=value,
            raw_config=raw)
    add("--config: invalid JSON", ["--config", "{config}"] + base, names=("{config}",), raw_config=b'{"a": ')
    add("--config: invalid UTF-8", ["--config", "{config}"] + base, names=("{config}",), raw_config=b"\xff\xfe{}")
    add("--config: a missing file", ["--config", "/no/such/config.json"] + base, names=("/no/such/config.json",))
    add("--config: a folder", ["--config", str(REPO / "scaling_lib")] + base, names=("scaling_lib", "config"))
    model = ["estimate", "--model", "llama3-70b", "--chip", "h100"]
    for label, extra, names in (("--chips 0", ["--chips", "0"], ("chips", "n_chips")),
                                ("--chips -8", ["--chips", "-8"], ("chips", "n_chips")),
                                ("--chips abc", ["--chips", "abc"], ("chips",)),
                                ("--chips 3 (no divisor of the heads)", ["--chips", "3"], ("tensor_parallel", "n_heads")),
                                ("--batch 0", ["--chips", "8", "--batch", "0"], ("batch",)),
                                ("--batch 10**9", ["--chips", "8", "--batch", str(10**9)], ("batch", "fit")),
                                ("--context -1", ["--chips", "8", "--context", "-1"], ("context",)),
                                ("--weights fp7", ["--chips", "8", "--weights", "fp7"], ("dtype",)),
                                ("--price nan", ["--chips", "8", "--price", "nan"], ("price",)),
                                ("--price -1", ["--chips", "8", "--price", "-1"], ("price",)),
                                ("--prompt 2**40", ["--chips", "8", "--prompt", str(2**40)], ("prompt",))):
        add(label, model + extra, names=names)
    add("--model gpt-9", ["estimate", "--model", "gpt-9", "--chip", "h100", "--chips", "8"], names=("model",))
    add("--chip tpu-v9", ["estimate", "--model", "llama3-8b", "--chip", "tpu-v9", "--chips", "8"], names=("chip",))
    add("--chips 2**40", ["estimate", "--model", "llama3-8b", "--chip", "tpu-v5e", "--chips", str(2**40)],
        names=("chips", "n_chips"))
    # extreme values, one chip priced twice, a group across MI300X nodes, outputs that cannot be written
    small = ["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1"]
    planned = ["plan", "--model", "llama3-8b", "--input-len", "100", "--output-len", "100"]
    add("--price 1e308", small + ["--price", "1e308"], names=("--price",))
    add("--price 1e308 --json", small + ["--price", "1e308", "--json"], names=("--price",))
    add("plan --price h100=2,h100=3", planned + ["--chip", "h100", "--max-chips", "8", "--price", "h100=2,h100=3"],
        names=("--price",))
    add("plan --max-chips 2**53", planned + ["--chip", "h100", "--max-chips", str(2**53), "--price", "2"],
        names=("--max-chips",))
    add("--weights ''", small + ["--weights", ""], names=("--weights",))
    add("--chip mi300x --chips 16", ["estimate", "--model", "llama3-8b", "--chip", "mi300x", "--chips", "16"],
        names=("tensor_parallel",))
    add("plan --chip h100,mi300x --max-chips 16 (answers)",
        planned + ["--chip", "h100,mi300x", "--max-chips", "16", "--price", "2"], accept=True)
    add("stdout to /dev/full", small, names=("cannot write the output",), stdout="/dev/full")
    add("stdout closed", small, names=("cannot write the output",), stdout="closed")
    for label, name in (("a lone surrogate", "\ud800"), ("a non-ASCII name", "org/Mod\u00e8le-\u0416")):
        add(f"--config with {label} in _name_or_path on an ASCII terminal",
            ["estimate", "--config", "{config}", "--chip", "h100", "--chips", "1"], config={**good, "_name_or_path": name},
            env={"PYTHONIOENCODING": "ascii"}, accept=True)
    return cases


def _nested(depth):
    outer = inner = []
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def _extreme_cases():
    """Extreme and pathological inputs to the library: strings that recursed, values nested past Python's recursion
    limit, prices and chip counts that overflow, one chip priced twice, meshes the torus cannot hold, a sequence
    whose cache fits no chip, a GPU group across nodes no source prices, markup in a figure's data."""
    cases, deep = [], _nested(5000)
    qwen3_moe = json.loads((REPO / "book/data/hf_configs/qwen3-30b-a3b.json").read_text())
    llama = json.loads((REPO / "book/data/hf_configs/llama-3.1-8b.json").read_text())

    def add(label, call, names, **options):
        cases.append(Case(f"extreme: {label}", call=call, names=names, **options))

    for exercise in ("ch1.bcrit-v6e-int4", "ch4.kv-32k-llama3-8b", "ch1.matmul-time-v5e"):
        for label, answer in (("'1 ' + 'k' * 1500", "1 " + "k" * 1500), ("a lone surrogate", "1 \ud800s"),
                              ("'1 ' + 'ab' * 50000", "1 " + "ab" * 50_000), ("'2 kk tokens'", "2 kk tokens")):
            add(f"exercises.grade({exercise}, {label})", lambda ns, e=exercise, a=answer: ns["grade"](e, a),
                ("answer",), accept=lambda v: len(v.message) < 2000)
        add(f"exercises.grade({exercise}, 1, reveal='no')", lambda ns, e=exercise: ns["grade"](e, 1, reveal="no"),
            ("reveal",), accept=lambda v: "is not True or False" in v.message and "as you asked" not in v.message)
    models = "models"
    add("from_hf_config(model_type nested 5,000 deep)",
        lambda ns: ns[models].from_hf_config({**llama, "model_type": deep}), ("model_type",))
    for label, quantization in (("quant_method nested 5,000 deep", {"quant_method": deep}),
                                ("quant_method ['fp8']", {"quant_method": ["fp8"]}),
                                ("awq, bits [4]", {"quant_method": "awq", "bits": [4]}),
                                ("modelopt, quant_algo nested 5,000 deep", {"quant_method": "modelopt", "quant_algo": deep})):
        add(f"read_hf_config(quantization_config: {label})",
            lambda ns, q=quantization: ns[models].read_hf_config({**llama, "quantization_config": q}),
            ("quantization_config",))
    add("from_hf_config(qwen3_moe, use_sliding_window=true)",
        lambda ns: ns[models].from_hf_config({**qwen3_moe, "use_sliding_window": True}), ("use_sliding_window",))
    est, pl = "estimate", "plan"
    add("report(price_per_chip_hour=1e308)",
        lambda ns: ns[est].report("llama3-8b", "h100", 1, price_per_chip_hour=1e308), ("price_per_chip_hour",))
    add("plan(max_chips=2**53)", lambda ns: ns[pl].plan("llama3-8b", "h100", 2**53, 100, 100, prices=2.0),
        ("max_chips",))
    add("plan(prices={'v5e': 1, 'tpu-v5e': 2})",
        lambda ns: ns[pl].plan("llama3-8b", "tpu-v5e", 8, 100, 100, prices={"v5e": 1.0, "tpu-v5e": 2.0}),
        ("prices",))
    add("Deployment(tpu-v5e, 16, 2d-ws, mesh_shape=(2, 2, 4))",
        lambda ns: ns[est].Deployment("llama3-70b", "tpu-v5e", 16, ffn_layout="2d-ws", mesh_shape=(2, 2, 4)),
        ("mesh_shape",))
    add("Deployment(tpu-v5e, 16, 2d-ws)'s default mesh",
        lambda ns: ns[est].Deployment("llama3-70b", "tpu-v5e", 16, ffn_layout="2d-ws"), ("mesh_shape",),
        accept=lambda d: sum(a > 1 for a in d.mesh_shape) <= 2)
    add("report(llama3-70b, 64 x tpu-v5e, batch 1, 1,000,000 tokens)",
        lambda ns: ns[est].report("llama3-70b", "tpu-v5e", 64, batch=1, context_len=1_000_000), ("does not fit",))
    add("Deployment(llama3-8b, 16 x mi300x)", lambda ns: ns[est].Deployment("llama3-8b", "mi300x", 16),
        ("tensor_parallel",))
    add("plan(llama3-8b, [h100, mi300x], max_chips 16)",
        lambda ns: ns[pl].plan("llama3-8b", ["h100", "mi300x"], 16, 100, 100, prices=2.0), ("chips",),
        accept=lambda result: result.best is not None)
    add("Explorer.html() of a model named '</script>...'",
        lambda ns: ns["explorers"].step_time_explorer(
            configs=((ns[models].get_model("llama3-8b").with_(name="</script><img src=x>"), "h100", 1),),
            contexts=(1024,), batches=(1,)).html(), ("name",), accept=lambda html: html.count("</script>") == 1)
    add("Explorer(name='\"><script>')", lambda ns: ns["explorers"].Explorer('"><script>', {}), ("name",))
    return cases


def catalogue():
    return _registry_cases() + _issue_cases() + _extreme_cases() + _cli_cases()


# --- running a call case: the worker -------------------------------------------------------------------------------

def _fixtures() -> dict:
    import importlib
    import pkgutil
    import scaling_lib
    from tests.math import test_fuzz_inputs as fuzz
    ns = {name: importlib.import_module(f"scaling_lib.{name}")
          for name in (m.name for m in pkgutil.iter_modules(scaling_lib.__path__) if not m.ispkg and m.name[0] != "_")}
    from scaling_lib.book import explorers
    from scaling_lib.book.exercises import grade
    from scaling_lib.prefix_cache import TieredLru
    ns.update(FUNCTIONS=fuzz.FUNCTIONS, DEPLOYMENT=fuzz.DEPLOYMENT, CONFIG=fuzz.CONFIG, WORKLOAD=fuzz.WORKLOAD,
              TIERS=fuzz.TIERS, TieredLru=TieredLru, grade=grade, explorers=explorers)
    cache = {}

    def tiny():
        if not cache:
            cache.update(_tiny_fixtures())
        return cache
    ns["tiny"] = tiny
    return ns


def _tiny_fixtures() -> dict:
    import jax.numpy as jnp
    import numpy as np
    from scaling_lib.tiny.engine import Engine
    from scaling_lib.tiny.model import KVCache, decode_step, init_params, prefill, tiny_config
    from scaling_lib.tiny.paged import PagedKVCache
    params = init_params(tiny_config(), seed=0)
    engine = Engine(params, max_batch=2, max_len=32)
    other = Engine(init_params(tiny_config(n_kv_heads=1), seed=0), max_batch=2, max_len=32)
    prompt = np.arange(1, 6)

    def fresh_cache():  # decode_step donates its cache: a new one each call
        return prefill(params, jnp.asarray(prompt)[None], cache_len=16)[1]

    def insert_other_heads():
        return engine.insert(other.prefill(prompt), engine.init_decode_state(), 0)

    def decode_token(token):
        return decode_step(params, np.array([token]), fresh_cache())

    def mixed_cache():
        cache = fresh_cache()
        return decode_step(params, np.array([1]), KVCache(cache.k.astype(jnp.float32), cache.v.astype(jnp.bfloat16),
                                                          cache.positions))

    def paged():
        return PagedKVCache(params.config, batch=2, n_blocks=8, block_size=4, max_blocks_per_seq=4)

    def release(slot):  # a state whose slot 0 is in use: only 0 may be released
        return engine.release(engine.insert(engine.prefill(prompt), engine.init_decode_state(), 0), slot)

    def insert(slot):
        return engine.insert(engine.prefill(prompt), engine.init_decode_state(), slot)
    # compile the paths once, so that the 1-second alarm times the check, not XLA
    insert(0), decode_token(1), release(0), other.prefill(prompt)
    return dict(insert_other_heads=insert_other_heads, decode_token=decode_token, mixed_cache=mixed_cache,
                paged=paged, release=release, insert=insert)


def _judge_call(case, ns) -> tuple:
    """(outcome, detail) of one call case, under the alarm."""
    def alarm(signum, frame):
        raise ProbeTimeout()
    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, case.limit_s)
    try:
        with open(os.devnull, "w") as sink:
            stdout, sys.stdout = sys.stdout, sink
            try:
                result = case.call(ns)
            finally:
                sys.stdout = stdout
    except ProbeTimeout:
        return "hang", f"no answer in {case.limit_s:g} s"
    except (ValueError, TypeError) as err:
        signal.setitimer(signal.ITIMER_REAL, 0)
        message = str(err)
        named = any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in case.names)
        if case.huge:  # refused for what the number means (it does not fit, does not divide): a clear answer
            return "clear", f"{type(err).__name__}: {message[:200]}"
        if case.accept is not None and not named:
            return "unclear", f"{type(err).__name__}: {message[:200]} (a value was expected)"
        if named and (case.must_contain is None or case.must_contain in message):
            return "clear", f"{type(err).__name__}: {message[:200]}"
        return "unclear", f"{type(err).__name__} without naming {case.names[0]!r}: {message[:200]}"
    except Exception as err:  # noqa: BLE001 - the point is to see every other kind
        signal.setitimer(signal.ITIMER_REAL, 0)
        return "unclear", f"{type(err).__name__}: {str(err)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if case.accept is not None:
        try:
            if case.accept(result):
                return "clear", f"returned the right reading: {_short(result)}"
        except Exception as err:  # noqa: BLE001
            return "accepted", f"returned {_short(result)} ({type(err).__name__} judging it)"
    return "accepted", f"returned {_short(result)}"


def worker() -> None:
    """Read case indices on stdin, answer one JSON line each on stdout."""
    cases = catalogue()
    ns = _fixtures()
    ns["tiny"]()  # import JAX and compile the tiny paths before any alarm runs
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing the library prints gets into the protocol
    print("ready", file=out, flush=True)
    for line in sys.stdin:
        i = int(line)
        outcome, detail = _judge_call(cases[i], ns)
        print(json.dumps([i, outcome, detail]), file=out, flush=True)


class _Worker:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
        if self._read(300) != "ready":
            raise RuntimeError("the probe worker did not start")

    def _read(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline().strip() if ready else None

    def run(self, i):
        self.proc.stdin.write(f"{i}\n")
        self.proc.stdin.flush()
        line = self._read(KILL_S + TINY_LIMIT_S)
        if line is None:
            self.proc.kill()
            return None
        return json.loads(line)[1:]

    def close(self):
        self.proc.kill()


# --- running a command-line case -----------------------------------------------------------------------------------

def _run_cli(case, limit_s) -> tuple:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        if case.raw_config is not None:
            path.write_bytes(case.raw_config)
        else:
            path.write_text(json.dumps(case.config))
        argv = [a.replace("{config}", str(path)) for a in case.argv]
        names = tuple(n.replace("{config}", str(path)) for n in case.names)
        output = dict(stdout=subprocess.PIPE) if case.stdout is None else \
            dict(stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1)) if case.stdout == "closed" else \
            dict(stdout=open(case.stdout, "w"))
        try:
            done = subprocess.run([sys.executable, "-m", "scaling_lib", *argv], stderr=subprocess.PIPE, text=True,
                                  timeout=limit_s, cwd=REPO, errors="replace", env={**os.environ, **(case.env or {})},
                                  **output)
        except subprocess.TimeoutExpired:
            return "hang", f"no answer in {limit_s:.1f} s"
        finally:
            if hasattr(output["stdout"], "close"):
                output["stdout"].close()
    err = done.stderr.strip()
    if "Traceback" in err:
        return "traceback", err.splitlines()[-1][:200]
    if done.returncode == 0:
        first = done.stdout.strip().splitlines()[0][:120] if done.stdout and done.stdout.strip() else ""
        return ("clear" if case.accept else "accepted"), f"exit 0: {first}"
    last = err.splitlines()[-1] if err else ""
    if done.returncode == 2 and any(n in last for n in names):
        return "clear", last[:200]
    return "unclear", f"exit {done.returncode}: {last[:200]}"


def _cli_startup_s() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "scaling_lib", "estimate", "--model", "llama3-8b", "--chip", "h100",
                    "--chips", "1"], capture_output=True, cwd=REPO, check=True)
    return time.perf_counter() - start


# --- the report ----------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--only", default="", help="run only the cases whose label contains this")
    parser.add_argument("--verbose", action="store_true", help="print every case, clear ones too")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    cases = catalogue()
    chosen = [i for i, c in enumerate(cases) if args.only in c.label]
    if args.list:
        print("\n".join(cases[i].label for i in chosen))
        return 0
    results = {}
    calls = [i for i in chosen if cases[i].call is not None]
    pool = _Worker() if calls else None
    for i in calls:
        answer = pool.run(i)
        if answer is None:
            results[i] = ("hang", f"killed after {KILL_S:g} s")
            pool = _Worker()
        else:
            results[i] = tuple(answer)
    if pool:
        pool.close()
    clis = [i for i in chosen if cases[i].argv is not None]
    if clis:
        limit = LIMIT_S + 2 * _cli_startup_s()  # 1 s beyond starting Python and importing the library (twice)
        for i in clis:
            results[i] = _run_cli(cases[i], limit)
    return _report(cases, results, args.verbose)


def _report(cases, results, verbose) -> int:
    order = ("clear", "unclear", "accepted", "traceback", "hang")
    counts = {k: sum(1 for o, _ in results.values() if o == k) for k in order}
    total = len(results)
    groups = {"closed-form (registry)": lambda c: c.call and not c.label.startswith(("issue:", "extreme:")),
              "issue 21 cases": lambda c: c.label.startswith("issue:"),
              "extreme inputs": lambda c: c.label.startswith("extreme:"), "command line": lambda c: c.argv}
    print(f"{total} bad inputs probed")
    for k in order:
        print(f"  {k:<10} {counts[k]:>5}  {100 * counts[k] / max(total, 1):5.1f}%")
    for group, test in groups.items():
        mine = [results[i][0] for i in results if test(cases[i])]
        if mine:
            print(f"  {group}: {len(mine)} cases, {100 * mine.count('clear') / len(mine):.1f}% clear")
    print()
    for i in sorted(results):
        outcome, detail = results[i]
        if outcome != "clear" or verbose:
            print(f"{outcome:<10} {cases[i].label}: {detail}")
    return 1 if counts["accepted"] or counts["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
