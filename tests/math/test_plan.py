"""plan.plan: the cheapest deployment meeting latency targets, checked against a brute-force search written here.

The oracle enumerates every chip, tensor-parallel size, format and batch of a small space, prices each through the
estimate's own entry points on the whole deployment (`estimate.offline_estimate` with `slots`, on all its replicas,
for TPOT and throughput; `estimate.step_estimate` for the iteration that prefills a whole prompt, as plan's module
docstring defines TTFT), filters by the targets and takes the cheapest. It shares no search code with `plan`: no
bisection, no bound, no replica shortcut.
"""

import dataclasses
import math
import re

import pytest

from scaling_lib.estimate import PROFILES, Deployment, max_batch, offline_estimate, resolve_efficiency, step_estimate
from scaling_lib.hardware import get_chip
from scaling_lib.load import load_estimate
from scaling_lib.models import get_model
import scaling_lib.plan as plan_module
from scaling_lib.plan import (KV_DTYPES, PlannedDeployment, TargetUnreachable, _Design, pareto_frontier, plan,
                              price_deployment, tensor_parallel_sizes)

from tests import for_each

# A space small enough to enumerate every batch: LLaMA-3-8B at long context (a few to a few dozen sequences fit).
SMALL = dict(model="llama3-8b", chips=["h100", "tpu-v5e"], max_chips=2, input_len=30_000, output_len=2_000,
             prices={"h100": 2.5, "tpu-v5e": 1.2}, weight_dtypes=("bf16", "int4"), kv_dtypes=("bf16", "fp8"))


def _brute_force(model, chips, max_chips, input_len, output_len, prices, weight_dtypes, kv_dtypes):
    """Every (chip, t, weights, KV, b) of the space as a dict of its TTFT, TPOT and all-in cost, priced on the
    whole deployment: floor(max_chips / t) replicas of t chips (bf16 and int4 weights both compute in bf16)."""
    m, i, o = get_model(model), input_len, output_len
    rows = []
    for chip in chips:
        for t in range(1, max_chips + 1):
            if m.n_heads % t:
                continue
            replicas = max_chips // t
            for weights in weight_dtypes:
                for kv in kv_dtypes:
                    d = Deployment(m, chip, replicas * t, weight_dtype=weights, kv_dtype=kv, tensor_parallel=t)
                    for b in range(1, max_batch(d, i + o / 2, "typical") // replicas + 1):
                        run = offline_estimate(d, i, o, "typical", slots=b)
                        first = step_estimate(d, decode_batch=b, decode_context=i + o / 2,
                                              prefill_tokens=max(i, b * i / (o - 1)), prefill_len=i,
                                              held_sequences=b, held_tokens_each=i + o / 2, efficiency="typical")
                        chip_hours_per_s = replicas * t / 3600
                        rows.append(dict(chip=d.chip.name, tensor_parallel=t, weight_dtype=weights, kv_dtype=kv,
                                         batch_per_replica=b, ttft=first.total_s, tpot=run.step.total_s,
                                         latency=run.step.comm_latency_s,
                                         throughput=run.output_tokens_per_s,
                                         cost=prices[chip] * chip_hours_per_s / run.output_tokens_per_s * 1e6))
    return rows


@pytest.fixture(scope="module")
def space():
    return _brute_force(**SMALL)


def _quantile(values, q):
    values = sorted(values)
    return values[int(q * (len(values) - 1))]


# --- the cheapest deployment meeting the targets: plan against the brute force ----------------------------------------
@pytest.mark.parametrize("q_ttft, q_tpot", [(None, None), (0.5, None), (None, 0.3), (0.7, 0.5), (0.2, 0.9),
                                            (0.95, 0.05)])
def test_plan_picks_what_a_brute_force_search_of_every_batch_picks(space, q_ttft, q_tpot):
    ttft = None if q_ttft is None else _quantile([r["ttft"] for r in space], q_ttft)
    tpot = None if q_tpot is None else _quantile([r["tpot"] for r in space], q_tpot)
    meeting = [r for r in space if (ttft is None or r["ttft"] <= ttft) and (tpot is None or r["tpot"] <= tpot)]
    assert meeting, "the targets drawn from the space must leave something to choose"
    cheapest = min(meeting, key=lambda r: r["cost"])
    best = plan(**SMALL, ttft=ttft, tpot=tpot).best
    chosen = {key: getattr(best, key) for key in ("chip", "tensor_parallel", "weight_dtype", "kv_dtype",
                                                  "batch_per_replica")}
    assert chosen == {key: cheapest[key] for key in chosen}
    assert best.dollars_per_million_output_tokens_all_in == pytest.approx(cheapest["cost"], rel=1e-9)
    assert best.ttft_s == pytest.approx(cheapest["ttft"], rel=1e-12)
    assert best.tpot_s == pytest.approx(cheapest["tpot"], rel=1e-12)
    assert best.output_tokens_per_s == pytest.approx(cheapest["throughput"], rel=1e-9)


def _designs(space):
    designs = {}
    for r in space:
        designs.setdefault((r["chip"], r["tensor_parallel"], r["weight_dtype"], r["kv_dtype"]), []).append(r)
    return {key: sorted(rows, key=lambda r: r["batch_per_replica"]) for key, rows in designs.items()}


def test_ttft_and_tpot_never_fall_with_the_batch_and_the_cost_rises_only_where_the_collectives_switch(space):
    """What makes plan's search exact: TTFT and TPOT never fall as the batch grows (so a bisection finds the largest
    batch meeting a target); between two changes of the collectives' latency the cost per token never rises, and it
    does rise at some changes (so plan must look just before them)."""
    rises = 0
    for rows in _designs(space).values():
        for earlier, later in zip(rows, rows[1:]):
            assert later["ttft"] >= earlier["ttft"] and later["tpot"] >= earlier["tpot"]
            if later["latency"] == earlier["latency"]:
                assert later["cost"] <= earlier["cost"] * (1 + 1e-12)
            rises += later["cost"] > earlier["cost"]
    assert rises >= 1


def test_plan_finds_the_batch_just_before_a_switch_when_the_largest_one_meeting_the_target_is_dearer(space):
    design, jump = next((key, later) for key, rows in _designs(space).items()
                        for earlier, later in zip(rows, rows[1:]) if later["cost"] > earlier["cost"] * (1 + 1e-9))
    chip, tp, weights, kv = design
    target = jump["tpot"]  # the first batch after the switch is the largest meeting it, and dearer than the one before
    one = _Design(get_model(SMALL["model"]), get_chip(chip), tp, weights, kv, SMALL["input_len"],
                  SMALL["output_len"], resolve_efficiency("typical"), SMALL["prices"][chip], tp)
    assert one.largest_batch_meeting(None, target) == jump["batch_per_replica"]
    assert one.cheapest_batch_meeting(None, target) == jump["batch_per_replica"] - 1
    args = {**SMALL, "chips": [chip], "max_chips": tp, "weight_dtypes": (weights,), "kv_dtypes": (kv,)}
    meeting = [r for r in _brute_force(**args) if r["tpot"] <= target]
    cheapest = min(meeting, key=lambda r: r["cost"])
    best = plan(**args, tpot=target).best
    assert (best.tensor_parallel, best.batch_per_replica) == (cheapest["tensor_parallel"],
                                                              cheapest["batch_per_replica"])


def test_the_best_deployment_is_on_the_frontier_at_its_own_batch_even_off_the_sampled_batches():
    # A TPOT target that binds at 11 sequences: not 1, not a power of two, not the largest that fits. The best is the
    # cheapest deployment meeting the targets, so nothing on the frontier (which meets the TTFT target) can beat it on
    # both axes: it must be there.
    result = plan(**SMALL, tpot=0.02)
    best = result.best
    assert best.batch_per_replica & (best.batch_per_replica - 1) != 0 and best.batch_per_replica > 1
    assert best in result.frontier
    assert not any(p.tpot_s <= best.tpot_s and p.dollars_per_million_output_tokens_all_in <
                   best.dollars_per_million_output_tokens_all_in for p in result.frontier)


def _batch_one_points():
    """Every design of SMALL that fits, priced on one replica at batch 1 through price_deployment (no search)."""
    points = []
    for chip in SMALL["chips"]:
        for t in (1, 2):
            for weights in SMALL["weight_dtypes"]:
                for kv in SMALL["kv_dtypes"]:
                    try:
                        points.append(price_deployment("llama3-8b", chip, t, SMALL["input_len"], SMALL["output_len"],
                                                       tensor_parallel=t, batch=1, weight_dtype=weights, kv_dtype=kv))
                    except ValueError as error:  # one sequence does not fit: plan skips the design too
                        assert "does not fit" in str(error)
    assert len(points) >= 8
    return points


def test_a_target_only_batch_one_meets_is_reachable_at_batch_one():
    # a TPOT target equal to the fastest any design reaches with one sequence: met at batch 1, and by nothing larger
    fastest = min(p.tpot_s for p in _batch_one_points())
    best = plan(**SMALL, tpot=fastest).best
    assert best.batch_per_replica == 1 and best.tpot_s == pytest.approx(fastest, rel=1e-12)


def test_the_search_reaches_its_edges_two_output_tokens_and_a_design_that_holds_one_sequence():
    # the least continuous batching prices: the prefill makes the first token, one decode step the second
    best = plan("llama3-8b", "h100", 1, 1000, 2, prices=2.0, weight_dtypes="bf16", kv_dtypes="bf16").best
    assert best.tpot_s > 0 and best.output_tokens_per_s > 0
    # LLaMA-3-8B on one H100: 0.9 x 80 GB - 16 GB of weights leaves ~56 GB, one 301,000-token cache (39 GB) fits,
    # two do not
    best = plan("llama3-8b", "h100", 1, 300_000, 2_000, prices=2.0, weight_dtypes="bf16", kv_dtypes="bf16").best
    assert best.batch_per_replica == 1 and best.n_chips == 1


def test_designs_that_cost_the_same_are_told_apart_by_name_not_by_the_order_searched():
    # An H100 multiplies fp8 and int8 at the same rate (1,979 TFLOP/s dense) and both formats take one byte, so the
    # four designs price the same to the last bit: searched int8 first, the plan and its frontier still take the
    # first by name, fp8 and fp8.
    assert get_chip("h100").peak_flops("fp8") == get_chip("h100").peak_flops("int8")
    result = plan("llama3-8b", "h100", 1, 1000, 200, prices=2.5, weight_dtypes=("int8", "fp8"),
                  kv_dtypes=("int8", "fp8"))
    assert {(p.weight_dtype, p.kv_dtype) for p in (result.best,) + result.frontier} == {("fp8", "fp8")}


def test_a_plan_with_mi300x_beyond_one_node_searches_it_in_its_node_beside_other_chips():
    # No source gives MI300X's network between nodes: its tensor-parallel groups stay within its 8 GPUs (16 chips
    # run as replicas) instead of failing the whole plan; H100 groups of 16 span two nodes over InfiniBand.
    result = plan("llama3-70b", ["h100", "mi300x"], 16, 1000, 200, prices={"h100": 2.5, "mi300x": 2.5})
    points = result.frontier + (result.best,)
    assert {p.tensor_parallel for p in points if p.chip == "mi300x"} <= {1, 2, 4, 8}
    # A design's cost does not depend on its replicas: on two nodes the plan picks the one node's design, twice.
    one_node, two_nodes = (plan("llama3-70b", "mi300x", n, 1000, 200, prices=2.5).best for n in (8, 16))
    assert two_nodes.replicas == 2 * one_node.replicas and two_nodes.n_chips == 2 * one_node.n_chips
    assert [getattr(two_nodes, f) for f in ("tensor_parallel", "batch_per_replica", "tpot_s",
                                            "dollars_per_million_output_tokens_all_in")] == \
        [getattr(one_node, f) for f in ("tensor_parallel", "batch_per_replica", "tpot_s",
                                        "dollars_per_million_output_tokens_all_in")]


def test_each_design_runs_on_as_many_whole_replicas_as_max_chips_holds():
    # 3 H100s: 1-way designs run 3 replicas on all 3 chips, 2-way designs 1 replica on 2 (the third chip idles); the
    # typical estimate's frontier holds 1-way designs, the bound's 2-way ones
    points = []
    for efficiency in ("typical", None):
        result = plan("llama3-8b", "h100", 3, 30_000, 2_000, prices=2.5, weight_dtypes="bf16", kv_dtypes="bf16",
                      efficiency=efficiency)
        points += [result.best, *result.frontier]
    seen = set()
    for p in points:
        assert (p.replicas, p.n_chips) == {1: (3, 3), 2: (1, 2)}[p.tensor_parallel]
        assert p.batch == p.replicas * p.batch_per_replica
        seen.add(p.tensor_parallel)
    assert seen == {1, 2}


# --- a worked example: what the best deployment and the frontier hold -------------------------------------------------
@pytest.fixture(scope="module")
def example():
    """A worked example: LLaMA-3-70B on up to 16 H100s, 2,000 prompt and 500 output tokens, TTFT 2 s, TPOT
    50 ms, $2.50 per chip-hour."""
    return plan("llama3-70b", "h100", 16, 2000, 500, ttft=2.0, tpot=0.05, prices=2.5)


def test_the_example_meets_both_targets_on_whole_replicas_at_the_offline_estimates_throughput(example):
    best = example.best
    assert best.ttft_s <= 2.0 and best.tpot_s <= 0.05
    assert best.replicas * best.tensor_parallel == best.n_chips <= 16
    assert best.chip == "h100" and best.batch == best.replicas * best.batch_per_replica
    d = Deployment("llama3-70b", "h100", best.n_chips, weight_dtype=best.weight_dtype, kv_dtype=best.kv_dtype,
                   compute_dtype=best.compute_dtype, tensor_parallel=best.tensor_parallel)
    run = offline_estimate(d, 2000, 500, "typical", slots=best.batch_per_replica)
    assert best.output_tokens_per_s == pytest.approx(run.output_tokens_per_s, rel=1e-12)
    assert best.tpot_s == pytest.approx(run.step.total_s, rel=1e-12)
    assert best.dollars_per_million_output_tokens_all_in == pytest.approx(
        2.5 * best.n_chips / 3600 / run.output_tokens_per_s * 1e6, rel=1e-9)


def test_a_request_costs_its_input_tokens_at_the_input_price_plus_its_output_tokens_at_the_output_price(example):
    """The two prices split the whole chip time: I x input price + O x output price = O x the all-in price."""
    for point in (example.best,) + example.frontier:
        whole = 500 * point.dollars_per_million_output_tokens_all_in
        split = 2000 * point.dollars_per_million_input_tokens + 500 * point.dollars_per_million_output_tokens
        assert split == pytest.approx(whole, rel=1e-9)
        assert 0 < point.dollars_per_million_output_tokens < point.dollars_per_million_output_tokens_all_in


def test_the_frontier_is_pareto_sorted_by_tpot_and_holds_the_best(example):
    points = example.frontier
    assert len(points) >= 3
    for p in points:
        for q in points:
            dominated = (q.tpot_s <= p.tpot_s and q.dollars_per_million_output_tokens_all_in <=
                         p.dollars_per_million_output_tokens_all_in and q != p)
            assert not dominated, f"{p.describe()} is beaten by {q.describe()}"
    assert [p.tpot_s for p in points] == sorted(p.tpot_s for p in points)
    assert all(p.ttft_s <= 2.0 for p in points)
    assert example.best in points


def test_the_frontier_meets_the_ttft_target():
    free = plan(**SMALL)
    ttft = sorted(p.ttft_s for p in free.frontier)[len(free.frontier) // 2]  # a target half the free frontier misses
    bound = plan(**SMALL, ttft=ttft)
    assert bound.frontier and all(p.ttft_s <= ttft for p in bound.frontier)
    assert any(p.ttft_s > ttft for p in free.frontier)


def test_one_design_alone_puts_every_power_of_two_batch_and_its_largest_on_the_frontier():
    # One chip, one format: a larger batch is always cheaper per token and slower per step, so no point beats
    # another on both axes and the frontier holds every batch searched: 1, 2, 4, ... and the largest that fits.
    result = plan("llama3-8b", ["h100"], max_chips=1, input_len=1000, output_len=200, prices={"h100": 2.5},
                  weight_dtypes=("bf16",), kv_dtypes=("bf16",))
    batches = [point.batch for point in result.frontier]
    largest = batches[-1]
    assert batches == [2**k for k in range(largest.bit_length()) if 2**k < largest] + [largest]


@for_each([(1000, 200, None), (30_000, 2_000, 1.2)], ids=str)
def test_the_frontier_is_every_unbeaten_point_of_the_batches_it_samples_over_all_designs(i, o, ttft):
    # The frontier's promise, checked against the deployments priced one by one: over every design (here 1- and
    # 2-way H100 replicas, bf16 and int4 weights), batches 1, 2, 4, ... and the largest that fits, and the best
    # deployment, those meeting the TTFT target that no other beats on both TPOT and cost.
    result = plan("llama3-8b", "h100", 2, i, o, ttft=ttft, prices=2.5, weight_dtypes=("bf16", "int4"),
                  kv_dtypes="bf16")
    candidates = [result.best]
    for t in (1, 2):
        for weights in ("bf16", "int4"):
            d = Deployment("llama3-8b", "h100", 2, weight_dtype=weights, tensor_parallel=t)
            largest = max_batch(d, i + o / 2, "typical") // d.replicas
            for b in sorted({1, largest} | {2**k for k in range(1, 12) if 2**k < largest}):
                candidates.append(price_deployment("llama3-8b", "h100", 2, i, o, tensor_parallel=t, batch=b * d.replicas,
                                                   weight_dtype=weights, price_per_chip_hour=2.5))
    meeting = [p for p in candidates if ttft is None or p.ttft_s <= ttft]
    # two points of equal TPOT and cost (bf16 and int4 weights price the same at 32 sequences on two chips) count
    # once, the first by split, chip and formats, as pareto_frontier orders them
    first = {}
    for p in sorted(meeting, key=lambda p: (p.tensor_parallel, p.chip, p.weight_dtype, p.kv_dtype)):
        first.setdefault((p.tpot_s, p.dollars_per_million_output_tokens_all_in), p)
    unbeaten = {p for p in first.values() if not any(
        q.tpot_s <= p.tpot_s and q.dollars_per_million_output_tokens_all_in < p.dollars_per_million_output_tokens_all_in
        or q.tpot_s < p.tpot_s and q.dollars_per_million_output_tokens_all_in <= p.dollars_per_million_output_tokens_all_in
        for q in meeting)}
    # the rate each point sustains under load is plan's alone (it holds the plan's targets): compare the rest
    assert {_offline(p) for p in result.frontier} == {_offline(p) for p in unbeaten} and len(unbeaten) >= 5


# --- formats: what the weights, the cache and the matmuls are searched in ---------------------------------------------
@for_each([("h100", "fp8", "fp8"), ("h100", "int8", "int8"),
                                                    ("h100", "int4", "bf16"), ("tpu-v5e", "fp8", "bf16"),
                                                    ("tpu-v5e", "int8", "int8"), ("b200", "nvfp4", "nvfp4"),
                                                    ("h100", "fp16", "bf16")], ids=str)
def test_matmuls_run_in_the_weight_format_where_the_chip_has_a_rate_for_it(chip, weights, compute):
    # The module docstring's rule: an 8- or 4-bit float or int8 weight format computes natively where the chip has a
    # matrix rate for it (the chip's spec sheet: H100 fp8 and int8, v5e int8 only, B200 fp4), else in bf16; 16-bit
    # weights run bf16 matmuls even where the chip has an fp16 rate.
    assert (weights in get_chip(chip).compute_dtypes and weights != "fp16") == (compute == weights)
    assert "fp16" in get_chip("h100").compute_dtypes
    best = plan("llama3-8b", chip, 8, 1000, 200, prices=1.0, weight_dtypes=(weights,), kv_dtypes="bf16").best
    assert (best.weight_dtype, best.compute_dtype) == (weights, compute)
    priced = price_deployment("llama3-8b", chip, 1, 1000, 200, weight_dtype=weights)
    assert priced.compute_dtype == compute and priced.weight_dtype == weights
    assert price_deployment("llama3-8b", chip, 1, 1000, 200, weight_dtype=weights,
                            compute_dtype="bf16").compute_dtype == "bf16"


def test_int4_weights_keep_a_bf16_or_fp8_cache_by_default():
    result = plan("llama3-70b", "h100", 8, 2000, 500, prices=2.5, weight_dtypes=("int4",))
    assert KV_DTYPES == ("bf16", "fp8")
    assert {p.kv_dtype for p in (result.best,) + result.frontier} <= {"bf16", "fp8"}
    assert result.best.weight_dtype == "int4" and result.best.compute_dtype == "bf16"


def test_without_weights_plan_searches_the_models_own_precision_and_never_goes_below_8_bits():
    for model, chips, own in (("llama3-70b", ["h100", "b200"], "bf16"), ("deepseek-v3", ["h200"], "fp8")):
        result = plan(model, chips, 16, 2000, 500, prices=2.5)
        assert {p.weight_dtype for p in (result.best, *result.frontier)} == {own}


def test_chips_and_formats_given_twice_or_as_a_chip_or_tuple_are_searched_once():
    args = dict(model="llama3-8b", max_chips=2, input_len=1000, output_len=200, prices=2.5)
    once = plan(chips="h100", weight_dtypes="bf16", kv_dtypes="fp8", **args)
    for chips, weights, caches in (([get_chip("h100"), "H100"], ("bf16", "bf16"), ["fp8", "fp8"]),
                                   (("h100",), ["bf16"], ("fp8",)), (get_chip("h100"), "bf16", "fp8")):
        again = plan(chips=chips, weight_dtypes=weights, kv_dtypes=caches, **args)
        assert (again.best, again.frontier, again.evaluated) == (once.best, once.frontier, once.evaluated)
    # a tuple of two chips searches both: at a tenth of the H100's price per chip-hour, the TPU v5e is the cheapest
    both = plan(chips=("h100", "tpu-v5e"), weight_dtypes="bf16", kv_dtypes="fp8",
                **{**args, "prices": {"h100": 2.5, "tpu-v5e": 0.25}})
    assert both.best.chip == "tpu-v5e" and "h100" in {p.chip for p in both.frontier}


def test_prices_name_each_chip_by_any_spelling_and_are_kept_in_dollars():
    args = dict(model="llama3-8b", max_chips=1, input_len=1000, output_len=200, weight_dtypes="bf16",
                kv_dtypes="bf16")
    # a chip named in another case, an unsearched chip's price ignored, an integer price kept as a float
    best = plan(chips=["H100"], prices={"h100": 3, "tpu-v5e": 1.2}, **args).best
    assert best.chip == "h100" and best.price_per_chip_hour == 3.0
    assert best == price_deployment("llama3-8b", "h100", 1, 1000, 200, batch=best.batch, price_per_chip_hour=3.0)


# --- unreachable targets: how close the best came ---------------------------------------------------------------------
@for_each(["ttft", "tpot"], ids=str)
def test_an_unreachable_target_is_named_with_how_close_the_best_came(target):
    with pytest.raises(TargetUnreachable) as caught:
        plan("llama3-70b", "h100", 16, 2000, 500, prices=2.5, **{target: 1e-4})
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.target == target and error.requested == 1e-4 and error.closest > 1e-4
    assert f"{target}=0.0001 s is out of reach" in str(error)
    reached = getattr(error.deployment, f"{target}_s")
    assert reached == error.closest and f"{error.closest:.4g} s" in str(error)


def test_an_unreachable_first_token_under_a_load_says_how_much_of_it_is_the_front_end():
    # a p99 TTFT of 80% of the typical front end (28 ms): no deployment meets it, and the words say why more chips
    # would not help
    front_end = PROFILES["typical"].efficiency.gpu.request_s
    with pytest.raises(TargetUnreachable) as caught:
        plan("llama3-8b", "h100", 8, 200, 200, prices=2.5, ttft_p99=0.8 * front_end)
    assert caught.value.closest > front_end > 0.8 * front_end
    assert f"{front_end * 1e3:.0f} ms of each first token in the server's front end" in str(caught.value)


def test_an_unreachable_tpot_names_a_deployment_that_meets_the_ttft_target_even_at_the_fastest_ttft():
    # TTFT set to exactly the lowest any deployment reaches: the TPOT report must come from the deployments that
    # meet it (at batch 1), and say how many times the target the best one is.
    with pytest.raises(TargetUnreachable) as ttft_out:
        plan("llama3-8b", "h100", 8, 1000, 200, ttft=1e-6, prices=2.0)
    fastest = ttft_out.value.closest
    ratio = float(re.search(r"\(([\d.]+)x the target\)", str(ttft_out.value)).group(1))
    assert ratio == pytest.approx(fastest / 1e-6, rel=1e-4) and ratio > 1000
    with pytest.raises(TargetUnreachable) as tpot_out:
        plan("llama3-8b", "h100", 8, 1000, 200, ttft=fastest, tpot=1e-9, prices=2.0)
    assert tpot_out.value.target == "tpot" and tpot_out.value.deployment.ttft_s <= fastest


def test_an_unreachable_target_reports_the_lowest_any_design_reaches_at_batch_one():
    points = _batch_one_points()
    with pytest.raises(TargetUnreachable) as ttft_out:
        plan(**SMALL, ttft=1e-6)
    assert ttft_out.value.closest == pytest.approx(min(p.ttft_s for p in points), rel=1e-12)
    # a TTFT target just below what the fastest design per output token reaches: the TPOT report comes from the
    # designs that meet it, the fastest of them
    ttft = min(points, key=lambda p: p.tpot_s).ttft_s * 0.999
    within = [p for p in points if p.ttft_s <= ttft]
    assert within
    with pytest.raises(TargetUnreachable) as tpot_out:
        plan(**SMALL, ttft=ttft, tpot=1e-6)
    assert tpot_out.value.closest == pytest.approx(min(p.tpot_s for p in within), rel=1e-12)
    assert tpot_out.value.target == "tpot" and re.search(r"\bwith a time to first token within\b", str(tpot_out.value))
    assert tpot_out.value.deployment.ttft_s <= ttft
    assert min(p.tpot_s for p in points) < tpot_out.value.closest  # the fastest overall misses the TTFT target
    with pytest.raises(TargetUnreachable) as free_out:
        plan(**SMALL, tpot=1e-6)
    assert free_out.value.closest == pytest.approx(min(p.tpot_s for p in points), rel=1e-12)
    assert "time to first token" not in str(free_out.value)  # no TTFT target, no condition on it


# --- price_deployment: one deployment, priced as plan prices its choice -----------------------------------------------
def test_price_deployment_prices_one_deployment_as_plan_prices_its_choice(example):
    b = example.best
    again = price_deployment("llama3-70b", "h100", b.n_chips, 2000, 500, tensor_parallel=b.tensor_parallel,
                             batch=b.batch, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype,
                             price_per_chip_hour=2.5)
    assert _offline(again) == _offline(b)
    # by default the largest batch that fits, split over the replicas
    unpriced = price_deployment("llama3-70b", "h100", 16, 2000, 500, tensor_parallel=8)
    assert unpriced.replicas == 2
    d = Deployment("llama3-70b", "h100", 16, tensor_parallel=8)
    assert unpriced.batch_per_replica == max_batch(d, 2000 + 500 / 2, "typical") // 2
    # without a price, every dollar field is empty
    p = price_deployment("llama3-8b", "h100", 2, 1000, 200, tensor_parallel=1, batch=4)
    assert (p.price_per_chip_hour, p.dollars_per_million_input_tokens, p.dollars_per_million_output_tokens,
            p.dollars_per_million_output_tokens_all_in) == (None, None, None, None)
    assert p.replicas == 2 and p.batch_per_replica == 2 and p.tpot_s > 0


# (chip, n_chips, tensor_parallel, output_len, batch per replica, weights, KV, the matmuls' format, the KV placement
# Deployment defaults to): an H100 switch (replicated KV) with fp8 matmuls, and a TPU v5e torus (batch-split KV) with
# int4 weights upcast to bf16 at a batch whose steady-state prefill (b I / (O - 1) = 2,222 tokens) exceeds one prompt.
PRICED = [("h100", 8, 2, 200, 3, "fp8", "fp8", "fp8", "replicated"),
          ("tpu-v5e", 8, 4, 10, 20, "int4", "bf16", "bf16", "batch-split")]


@for_each(PRICED, ids=["h100", "tpu-v5e"])
def test_price_deployment_prices_every_field_through_the_estimates_own_entry_points(chip, n, t, o, b, weights, kv,
                                                                                     compute, placement):
    i, price = 1000, 3.0
    p = price_deployment("llama3-8b", chip, n, i, o, tensor_parallel=t, batch=n // t * b, weight_dtype=weights,
                         kv_dtype=kv, price_per_chip_hour=price)
    d = Deployment("llama3-8b", chip, n, weight_dtype=weights, kv_dtype=kv, compute_dtype=compute, tensor_parallel=t)
    run = offline_estimate(d, i, o, "typical", slots=b)
    context = i + o / 2
    held = dict(decode_batch=b, decode_context=context, held_sequences=b, held_tokens_each=context,
                efficiency="typical")
    # the iteration that prefills one whole prompt: I tokens, or the steady state's b I / (O - 1) if that is more
    first = step_estimate(d, prefill_tokens=max(i, b * i / (o - 1)), prefill_len=i, **held)
    decode = step_estimate(d, **held)  # the same iteration with nothing to prefill
    assert (p.model, p.chip, p.n_chips, p.tensor_parallel, p.replicas) == ("llama3-8b", chip, n, t, n // t)
    assert (p.batch, p.batch_per_replica) == (n // t * b, b)
    assert (p.weight_dtype, p.kv_dtype, p.compute_dtype, p.kv_placement) == (weights, kv, compute, placement)
    assert p.tpot_s == pytest.approx(run.step.total_s, rel=1e-12)
    assert p.ttft_s == pytest.approx(first.total_s, rel=1e-12)
    assert p.output_tokens_per_s == pytest.approx(run.output_tokens_per_s, rel=1e-12)
    # each request reads I prompt tokens for the O tokens it writes
    assert p.input_tokens_per_s == pytest.approx(run.output_tokens_per_s * i / o, rel=1e-12)
    dollars_per_s = price * n / 3600
    decode_share = decode.total_s / run.step.total_s
    assert 0 < decode_share < 1
    assert p.price_per_chip_hour == price
    assert p.dollars_per_million_output_tokens_all_in == pytest.approx(
        dollars_per_s / run.output_tokens_per_s * 1e6, rel=1e-12)
    assert p.dollars_per_million_output_tokens == pytest.approx(
        dollars_per_s * decode_share / run.output_tokens_per_s * 1e6, rel=1e-12)
    assert p.dollars_per_million_input_tokens == pytest.approx(
        dollars_per_s * (1 - decode_share) / (run.output_tokens_per_s * i / o) * 1e6, rel=1e-9)


def test_price_deployment_fills_the_share_of_hbm_it_is_given():
    # LLaMA-3-8B on one H100 at 30,000 + 2,000 tokens: each sequence's cache holds 31,000 tokens x 128 KiB = 4.06 GB
    # next to 16.06 GB of weights; the default 0.9 of the H100's 85.5 GB holds 14 sequences, half of it 6
    batches = []
    for share in (0.9, 0.5):
        d = Deployment("llama3-8b", "h100", 1, memory_utilization=share)
        p = price_deployment("llama3-8b", "h100", 1, 30_000, 2_000, memory_utilization=share)
        batches.append(p.batch_per_replica)
        assert p.batch_per_replica == max_batch(d, 31_000, "typical")
    assert batches == [14, 6]
    with pytest.raises(ValueError, match=r"\bmemory_utilization\b"):
        price_deployment("llama3-8b", "h100", 1, 1000, 200, memory_utilization=1.5)


def test_plan_and_price_deployment_price_at_the_efficiency_they_are_given():
    # the bound (no overheads, all of HBM) is strictly cheaper and faster than the calibrated estimate, and the
    # default prices what price_deployment prices at its default ("typical")
    args = dict(model="llama3-8b", chips="h100", max_chips=1, input_len=1000, output_len=200, prices=2.5,
                weight_dtypes="bf16", kv_dtypes="bf16")
    bound, typical = plan(**args, efficiency=None).best, plan(**args).best
    assert bound.dollars_per_million_output_tokens_all_in < typical.dollars_per_million_output_tokens_all_in
    one = price_deployment("llama3-8b", "h100", 1, 1000, 200, batch=typical.batch, price_per_chip_hour=2.5)
    assert typical == one
    at_bound = price_deployment("llama3-8b", "h100", 1, 1000, 200, batch=8, efficiency=None)
    at_typical = price_deployment("llama3-8b", "h100", 1, 1000, 200, batch=8)
    assert at_bound.tpot_s < at_typical.tpot_s and at_bound.ttft_s < at_typical.ttft_s


# --- its record: the dictionary and the printed plan ------------------------------------------------------------------
def test_a_plan_keeps_its_targets_and_workload_in_its_dict():
    result = plan("llama3-8b", "h100", 1, 1000, 200, ttft=2, tpot=0.05, prices=2.5, weight_dtypes="bf16",
                  kv_dtypes="bf16")  # targets given as integers are seconds
    assert (result.input_len, result.output_len, result.ttft, result.tpot) == (1000, 200, 2.0, 0.05)
    data = result.as_dict()
    assert {key: data[key] for key in ("input_len", "output_len", "ttft", "tpot")} == \
        {"input_len": 1000, "output_len": 200, "ttft": 2.0, "tpot": 0.05}
    assert data["best"] == result.best.as_dict() and data["best"]["batch_per_replica"] == result.best.batch_per_replica
    assert data["frontier"] == [p.as_dict() for p in result.frontier] and len(data["frontier"]) > 1
    assert plan("llama3-8b", "h100", 1, 1000, 200, prices=2.5, weight_dtypes="bf16",
                kv_dtypes="bf16").as_dict()["ttft"] is None


def _offline(point):
    """A record without the rate it sustains under load, which holds the targets of the plan that made it."""
    return dataclasses.replace(point, max_request_rate=None)


def _rows(text):
    """describe()'s table above the frontier as {label: value} (label and value are set apart by two spaces or more)."""
    table = text.split("\n\n")[0]
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in table.splitlines())


def _number(pattern, text):
    return float(re.search(pattern, text).group(1).replace(",", ""))


def test_the_printed_plan_states_the_workload_targets_best_deployment_and_prices_in_their_units():
    result = plan("llama3-8b", "h100", 2, 1000, 200, ttft=2.0, tpot=0.03, prices=2.5, weight_dtypes="bf16",
                  kv_dtypes="bf16")
    b, text = result.best, result.describe()
    rows = _rows(text)
    assert rows["model"] == "llama3-8b"
    assert re.search(r"\b1,000 prompt \+ 200 output tokens per request\b", rows["workload"])
    assert re.search(r"\bTTFT <= 2 s\b", rows["targets"]) and re.search(r"\bTPOT <= 0\.03 s\b", rows["targets"])
    assert rows["best deployment"] == b.describe()
    assert _number(r"^([\d,.]+) ms$", rows["time to first token (TTFT)"]) == pytest.approx(b.ttft_s * 1e3, abs=0.05)
    assert _number(r"^([\d,.]+) ms$", rows["time per output token (TPOT)"]) == pytest.approx(b.tpot_s * 1e3,
                                                                                              abs=0.005)
    assert b.output_tokens_per_s > 1000  # printed with a thousands separator
    assert _number(r"^([\d,]+) \(all replicas\)", rows["output tokens/s"]) == pytest.approx(b.output_tokens_per_s,
                                                                                           abs=0.5)
    assert _number(r"^([\d.]+)$", rows["$ per million input tokens"]) == pytest.approx(
        b.dollars_per_million_input_tokens, abs=5e-4)
    out = rows["$ per million output tokens"]
    assert _number(r"^([\d.]+) \(decode\)", out) == pytest.approx(b.dollars_per_million_output_tokens, abs=5e-4)
    assert _number(r"\b([\d.]+) with the prefill's share\b", out) == pytest.approx(
        b.dollars_per_million_output_tokens_all_in, abs=5e-4)
    assert re.search(r"\(at \$2\.5 per chip-hour\)", out)
    # the frontier: how many iterations the search priced, then a row per point: TPOT ms, TTFT ms, $/M out, layout
    assert _number(r"\b([\d,]+) iterations priced\b", text) == result.evaluated
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("frontier"))
    assert lines[start + 1].split() == ["TPOT", "ms", "TTFT", "ms", "$/M", "out", "max", "req/s", "deployment"]
    points = lines[start + 2:]
    assert len(points) == len(result.frontier) > 1
    for line, point in zip(points, result.frontier):
        tpot_ms, ttft_ms, dollars, rate, layout = line.split(maxsplit=4)
        assert float(dollars) == pytest.approx(point.dollars_per_million_output_tokens_all_in, abs=5e-4)
        assert float(rate.replace(",", "")) == pytest.approx(point.max_request_rate, rel=5e-3)  # three significant digits
        assert layout == point.describe()


def test_the_printed_plan_gives_the_best_and_each_frontier_point_in_milliseconds():
    # a 30,000-token prompt: the TTFT runs past a second, printed with a thousands separator
    result = plan(**SMALL)
    text = result.describe()
    ttft = float(re.search(r"TTFT\)\s+([\d,.]+) ms", text).group(1).replace(",", ""))
    tpot = float(re.search(r"TPOT\)\s+([\d,.]+) ms", text).group(1).replace(",", ""))
    assert ttft == pytest.approx(result.best.ttft_s * 1000, abs=0.05) and ttft > 1000
    assert tpot == pytest.approx(result.best.tpot_s * 1000, abs=0.005)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "TPOT ms" in line) + 1
    printed = [line.split()[:2] for line in lines[start:start + len(result.frontier)]]
    assert len(printed) == len(result.frontier) > 1
    for (tpot_ms, ttft_ms), point in zip(printed, result.frontier):
        assert float(tpot_ms) == pytest.approx(point.tpot_s * 1e3, abs=0.006)
        assert float(ttft_ms) == pytest.approx(point.ttft_s * 1e3, abs=0.06)


@for_each([({}, "none"), ({"tpot": 0.03}, "TPOT <= 0.03 s"),
                                              ({"ttft": 2.0}, "TTFT <= 2 s")], ids=str)
def test_the_printed_plan_lists_only_the_targets_it_was_given(targets, printed):
    text = plan("llama3-8b", "h100", 1, 1000, 200, prices=2.5, weight_dtypes="bf16", kv_dtypes="bf16",
                **targets).describe()
    assert _rows(text)["targets"] == printed


def test_a_planned_deployment_describes_its_replicas_split_batch_and_formats():
    p = price_deployment("llama3-8b", "h100", 8, 1000, 200, tensor_parallel=2, batch=12, weight_dtype="int4",
                         kv_dtype="fp8")
    text = p.describe()
    for words in (r"^4 replica\(s\)", r"\b2-way tensor parallelism\b", r"\bon 8 x h100\b", r"\bbatch 3 per replica\b",
                  r"\bweights int4\*", r"\bKV fp8$"):
        assert re.search(words, text), (words, text)


# --- one design's batches: the bisection and the switches of the collectives ------------------------------------------
# One design alone, every batch priced by the oracle: LLaMA-3-8B on 2 H100s as one 2-way replica at 30,000 + 2,000
# tokens (33 sequences fit, and the collectives change algorithm once on the way).
@pytest.fixture(scope="module")
def two_way():
    rows = _brute_force("llama3-8b", ["h100"], 2, 30_000, 2_000, {"h100": 2.5}, ("bf16",), ("bf16",))
    return {r["batch_per_replica"]: r for r in rows if r["tensor_parallel"] == 2}


def _two_way_design():
    return _Design(get_model("llama3-8b"), get_chip("h100"), 2, "bf16", "bf16", 30_000, 2_000,
                   resolve_efficiency("typical"), 2.5, 2)


def test_a_designs_switches_are_the_batches_after_which_the_collectives_latency_changes(two_way):
    design, largest = _two_way_design(), max(two_way)
    assert design.max_batch == largest
    assert [design.latency_s(b) for b in two_way] == pytest.approx([r["latency"] for r in two_way.values()],
                                                                   rel=1e-12)
    expected = [b for b in range(1, largest) if two_way[b]["latency"] != two_way[b + 1]["latency"]]
    assert len(expected) == 1
    switch = expected[0]
    assert design.switches(1, largest) == expected
    assert design.switches(switch, switch + 1) == [switch]
    assert design.switches(1, switch) == [] and design.switches(switch + 1, largest) == []
    assert design.switches(switch + 1, switch) == []  # an empty range


@pytest.mark.parametrize("k", [1, 2, 7, 20, 21, 32, 33])
def test_the_largest_and_the_cheapest_batch_meeting_a_target_are_those_the_oracle_finds(two_way, k):
    design = _two_way_design()
    for target in ("tpot", "ttft"):
        limit = two_way[k][target]
        meeting = [b for b, r in two_way.items() if r[target] <= limit]
        args = {"ttft": None, "tpot": None, target: limit}
        assert design.largest_batch_meeting(**args) == max(meeting)
        assert design.cheapest_batch_meeting(**args) == min(meeting, key=lambda b: two_way[b]["cost"])
        assert design.meets(k, **args) and design.meets(max(meeting), **args)
        if max(meeting) < max(two_way):
            assert not design.meets(max(meeting) + 1, **args)
        below = {**args, target: two_way[1][target] * (1 - 1e-9)}
        assert design.largest_batch_meeting(**below) == design.cheapest_batch_meeting(**below) == 0


def test_a_designs_collectives_latency_is_that_of_its_steady_state_iteration_at_three_output_tokens():
    # At O = 3 the steady state prefills b I / (O - 1) = 500 prompt tokens per sequence per iteration, enough to move
    # the collectives to another algorithm than 250 tokens (I / (O + 1)) would: latency_s prices the same iteration as
    # estimate.offline_estimate.
    design = _Design(get_model("llama3-8b"), get_chip("h100"), 2, "bf16", "bf16", 1000, 3,
                     resolve_efficiency("typical"), 2.5, 2)
    d = Deployment("llama3-8b", "h100", 2, tensor_parallel=2)
    assert design.latency_s(1) == pytest.approx(offline_estimate(d, 1000, 3, "typical", slots=1).step.comm_latency_s,
                                                rel=1e-12)


@for_each([("llama3-8b", 7, (1, 2, 4)), ("llama3-8b", 8, (1, 2, 4, 8)),
                                                     ("llama3-8b", 1000, (1, 2, 4, 8, 16, 32)),
                                                     ("palm-540b", 48, (1, 2, 3, 4, 6, 8, 12, 16, 24, 48)),
                                                     ("llama2-13b", 9, (1, 2, 4, 5, 8))], ids=str)
def test_tensor_parallel_sizes_are_the_divisors_of_the_query_heads_up_to_max_chips(model, max_chips, sizes):
    # 32 heads: the powers of two; PaLM-540B's 48 = 2^4 x 3 and LLaMA-2-13B's 40 = 2^3 x 5 have odd divisors too
    assert tensor_parallel_sizes(model, max_chips) == sizes
    assert tensor_parallel_sizes(get_model(model), max_chips) == sizes


# --- the search's branch and bound, on designs whose numbers are chosen to corner it ----------------------------------
def _point(tpot, cost, **fields):
    base = price_deployment("llama3-8b", "h100", 1, 1000, 200, batch=1, price_per_chip_hour=1.0)
    return PlannedDeployment(**{**base.as_dict(), "tpot_s": tpot, "dollars_per_million_output_tokens_all_in": cost,
                                **fields})


class _Stepped(_Design):
    """A design whose step times, collectives' latency and cost per token are given outright, batch by batch, so
    that the search's own logic (bisection, switches, branch and bound) is checked on numbers chosen to corner it."""

    def __init__(self, name, cost, latency, tpot=None):
        self.costs, self.latencies, self.max_batch, self.order, self._steps = cost, latency, len(cost), (name,), {}
        self.tpots = tpot or [float(b) for b in range(1, len(cost) + 1)]

    def tpot(self, b):
        return self.tpots[b - 1]

    ttft = tpot

    def latency_s(self, b):
        return self.latencies[b - 1]

    def cost(self, b):
        return self.costs[b - 1]

    def record(self, b):
        return _point(self.tpot(b), self.cost(b), batch_per_replica=b, weight_dtype=self.order[0])


def test_the_search_bounds_a_design_by_its_first_batch_when_the_collectives_switch_right_after_it():
    # A design whose collectives switch algorithm after batch 1 and whose second batch costs ten times more: its
    # cheapest batch is 1 (cost 1), which the branch and bound must count, or it would visit the other design first
    # (least cost 5) and stop there.
    switching, steady = _Stepped("a", [1.0, 10.0], [1e-6, 2e-6]), _Stepped("b", [8.0, 5.0], [1e-6, 1e-6])
    assert switching.switches(1, 2) == [1]
    assert plan_module._cheapest([steady, switching], None, None) == (switching, 1)
    assert plan_module._cheapest([switching, steady], None, 1.5) == (switching, 1)


@for_each([
    # Design "b" runs batch 1 in 1 s, batch 2 in 2 s (its cheapest, cost 2: its collectives switch right after it)
    # and batch 3 in 3 s (cost 6); design "a" runs one sequence at cost 4. At 1.5 s nothing beats b's batch 2 on
    # both axes: a's point is faster but dearer, so the frontier holds b at 1, a, and b at 2.
    (1.5, [("b", 1), ("a", 1), ("b", 2)]),
    # At 0.5 s a beats b's batch 1 on TPOT and b's largest batch on cost, but not b's batch 2 (cost 2): the frontier
    # holds a and b at 2. Bounding b by its largest batch's cost would skip b and lose that point.
    (0.5, [("a", 1), ("b", 2)]),
], ids=["a-between-bs-batches", "a-faster-than-all-of-b"])
def test_the_frontier_skips_a_design_only_when_its_least_cost_is_beaten(a_tpot, expected):
    b = _Stepped("b", [10.0, 2.0, 6.0], [1e-6, 1e-6, 2e-6])
    a = _Stepped("a", [4.0], [1e-6], tpot=[a_tpot])
    assert b.least_cost() == 2.0 and a.least_cost() == 4.0
    frontier = plan_module._frontier([b, a], None, {})
    assert [(p.weight_dtype, p.batch_per_replica) for p in frontier] == expected


# --- pareto_frontier --------------------------------------------------------------------------------------------------
def test_pareto_frontier_drops_exactly_the_dominated_points(example):
    points = list(example.frontier)
    worse = [PlannedDeployment(**{**p.as_dict(), "tpot_s": p.tpot_s * 1.01,
                                  "dollars_per_million_output_tokens_all_in":
                                      p.dollars_per_million_output_tokens_all_in * 1.01}) for p in points]
    assert pareto_frontier(worse + points[::-1]) == tuple(points)


def test_pareto_frontier_keeps_the_cheaper_at_one_tpot_the_faster_at_one_cost_and_one_of_two_equal_points():
    fast_dear, fast_cheap, slow_same_cost, slow_cheaper = (_point(1.0, 5.0), _point(1.0, 4.0), _point(2.0, 4.0),
                                                           _point(3.0, 1.0))
    assert pareto_frontier([fast_dear, slow_same_cost, fast_cheap, slow_cheaper]) == (fast_cheap, slow_cheaper)
    assert pareto_frontier([slow_cheaper]) == (slow_cheaper,) and pareto_frontier([]) == ()
    # of two equal points, the one with fewer chips per replica
    one, two = _point(1.0, 4.0), _point(1.0, 4.0, tensor_parallel=2)
    assert pareto_frontier([two, one]) == (one,) and pareto_frontier([one, two]) == (one,)


# --- under a load: the Poisson rate each deployment sustains, and the fewest replicas ---------------------------------
# Each deployment `plan` returns is priced again through the public load model on the whole deployment
# (`load.load_estimate`), which shares no search code with plan: the targets must hold at the rate or load it reports.
MLPERF_LIKE = dict(model="llama3-70b", chips=["h100", "h200"], max_chips=4, input_len=2000, output_len=500,
                   prices={"h100": 2.5, "h200": 3.5})


def _deployment(p):
    return Deployment(p.model, p.chip, p.n_chips, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype,
                      compute_dtype=p.compute_dtype, tensor_parallel=p.tensor_parallel)


def _meets(result, targets):
    return all(getattr(result, f"{name}_s") <= value for name, value in targets.items())


def test_every_deployment_carries_the_highest_poisson_rate_at_which_it_meets_the_p99_targets():
    targets = dict(ttft_p99=2.0, tpot_p99=0.2)
    result = plan(**MLPERF_LIKE, **targets)
    assert result.frontier and result.best in result.frontier
    for p in (result.best, *result.frontier):
        at_rate = load_estimate(_deployment(p), 2000, 500, request_rate=p.max_request_rate)
        assert _meets(at_rate, targets)
        assert (p.ttft_p99_s, p.tpot_p99_s) == pytest.approx((at_rate.ttft_p99_s, at_rate.tpot_p99_s), rel=1e-9)
        if p.max_request_rate < at_rate.saturation_rate:  # a little faster misses a target (or saturates)
            faster = p.max_request_rate * 1.01
            assert faster >= at_rate.saturation_rate or not _meets(
                load_estimate(_deployment(p), 2000, 500, request_rate=faster), targets)
    # run at that rate, a deployment's chips cost what that rate's tokens pay: the best is the cheapest of them
    assert result.best.dollars_per_million_output_tokens_all_in == min(
        p.dollars_per_million_output_tokens_all_in for p in result.frontier)


@for_each([dict(request_rate=6.0), dict(concurrency=200)], ids=["rate", "concurrency"])
def test_under_a_load_plan_runs_the_fewest_replicas_that_meet_the_targets_there(load):
    targets = dict(ttft_p99=2.0, tpot_p99=0.1)
    best = plan(**{**MLPERF_LIKE, "chips": "h100", "max_chips": 8}, **targets, **load).best
    there = load_estimate(_deployment(best), 2000, 500, **load)
    assert _meets(there, targets)
    assert (best.ttft_s, best.tpot_s, best.output_tokens_per_s) == pytest.approx(
        (there.ttft_s, there.tpot_s, there.output_tokens_per_s), rel=1e-9)
    assert best.replicas > 1  # each load is chosen to need more than one replica of the best design
    fewer = dataclasses.replace(best, n_chips=best.n_chips - best.tensor_parallel)
    try:  # one replica fewer misses a target or cannot serve the rate at all
        assert not _meets(load_estimate(_deployment(fewer), 2000, 500, **load), targets)
    except ValueError as error:
        assert "saturation rate" in str(error)


# --- bad input: a ValueError naming the argument and the fix ----------------------------------------------------------
def _plan(**kwargs):
    return plan(**dict(model="llama3-8b", chips="h100", max_chips=2, input_len=1000, output_len=200, prices=2.5) |
                kwargs)


def _one_chip_plan(**kwargs):
    return _plan(**dict(max_chips=1, weight_dtypes="bf16", kv_dtypes="bf16") | kwargs)


# (argument, value) -> the argument as a whole word in the message ("XXchips" or "CHIPS" would not do)
BAD_ARGUMENTS = [
    ("chips", "tpu-v9"), ("chips", []), ("chips", None), ("max_chips", 0), ("max_chips", 2.5), ("input_len", 0),
    ("output_len", 1), ("output_len", "500"), ("ttft", -1.0), ("ttft", "2"), ("tpot", math.nan), ("tpot", 0),
    ("prices", 0), ("prices", math.inf), ("prices", {"tpu-v5e": 1.0}), ("prices", {"h100": -2.5}),
    ("prices", {"tpu-v9": 1.0}), ("weight_dtypes", []), ("weight_dtypes", ("int3",)), ("kv_dtypes", "fp7"),
    ("efficiency", "fast"), ("model", "gpt-9"), ("max_chips", 2**53), ("prices", 1e308),
    ("prices", {"h100": 2.5, "H100": 3.0}),  # one chip, two prices: which was meant?
]
BAD_INPUT = {
    **{f"{name}={value!r}": (lambda name=name, value=value: _plan(**{name: value}),
                             "unknown model" if name == "model" else rf"\b{name}\b")
       for name, value in BAD_ARGUMENTS},
    "chips-empty": (lambda: _plan(max_chips=1, chips=[]), r"^chips must be a name or a non-empty list of names\b"),
    "chips-a-number": (lambda: _plan(max_chips=1, chips=3), r"^chips\b"),
    "weight-dtypes-empty": (lambda: _plan(max_chips=1, weight_dtypes=()),
                            r"^weight_dtypes must be a name or a non-empty list of names\b"),
    "kv-dtypes-a-set": (lambda: _plan(max_chips=1, kv_dtypes={"bf16"}),
                        r"^kv_dtypes must be a name or a non-empty list of names\b"),
    "prices-missing-a-chip": (lambda: _one_chip_plan(chips=["h100", "tpu-v5e", "b200"], prices={"H100": 2.5}),
                              r"\bprices has no price for tpu-v5e, b200\b.*\bevery chip searched\b.*\$ per "
                              r"chip-hour\b.*prices=\{'h100': 2\.5\}"),
    "prices-a-zero": (lambda: _one_chip_plan(prices={"h100": 0}), r"prices\['h100'\]"),
    "prices-an-unknown-chip": (lambda: _one_chip_plan(prices={"h100": 2.0, "tpu-v9": 1.0}),
                               r"^prices: unknown chip 'tpu-v9'"),
    "prices-negative": (lambda: _one_chip_plan(prices=-1), r"^prices must be\b"),
    "one-output-token": (lambda: plan("llama3-8b", "h100", 1, 1000, 1, prices=2.5),
                         r"\boutput_len=1\b.*\bat least 2 output tokens\b"),
    "fits-nowhere": (lambda: plan("llama3-70b", "tpu-v5e", 1, 2000, 500, prices=1.2),
                     r"max_chips=1.*\b2,500-token request"),
    "fits-nowhere-in-any-format": (lambda: plan("llama3-70b", ["tpu-v5e", "h100"], 1, 2000, 500, prices=1.0,
                                                weight_dtypes=("bf16", "fp16")),
                                   r"\bmax_chips=1\b.*\bllama3-70b does not fit on 1 x tpu-v5e or h100\b.*\bweights in "
                                   r"any of bf16, fp16\b.*\b2,500-token request\b.*\braise max_chips\b.*\bsmaller "
                                   r"format\b"),
    "fp4-where-not-computed": (lambda: plan("llama3-8b", "h100", 1, 1000, 200, prices=2.5, weight_dtypes="nvfp4"),
                               "nvfp4 and mxfp4 only on chips that compute them"),
    "batch-over-replicas": (lambda: price_deployment("llama3-70b", "h100", 16, 2000, 500, tensor_parallel=8, batch=3),
                            "batch=3 does not split over 2 replicas"),
    "batch-over-the-engine-cap": (lambda: price_deployment("llama3-8b", "h100", 1, 100, 100, batch=4096),
                                  "max_sequences"),
    "moe-layouts-of-a-dense-model": (lambda: plan("llama3-8b", "h100", 2, 1000, 200, prices=2.5, moe_layouts="ep"),
                                     r"\bmoe_layouts=\('ep',\): llama3-8b is dense\b.*moe_layouts=\('tp',\)"),
    "moe-layouts-unknown": (lambda: plan("mixtral-8x7b", "h100", 2, 1000, 200, prices=2.5, moe_layouts=("tp", "pp")),
                            r"\bmoe_layouts: unknown moe_layouts 'pp'; use one of tp, ep, dp, ep\+dp"),
    "memory-utilization-above-one": (lambda: price_deployment("llama3-8b", "h100", 1, 1000, 200,
                                                              memory_utilization=1.5), r"\bmemory_utilization\b"),
    **{f"tensor-parallel-sizes-max-chips={value!r}": (lambda value=value: tensor_parallel_sizes("llama3-8b", value),
                                                      r"\bmax_chips\b") for value in (0, 2.5, "8")},
    # names the argument and where such records come from
    **{f"pareto-frontier-of-{value!r}": (lambda value=value: pareto_frontier(value),
                                         r"\bpoints\b.*\bplan\.PlannedDeployment records \(what plan\(\) prices\), "
                                         r"got\b") for value in ("h100", None, [1.0])},
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_a_mixture_of_experts_laid_out_expert_or_data_parallel_is_searched_beside_tensor_parallelism():
    # The wider search holds the narrower one, so it never costs more; Qwen3-235B's 4 KV heads are replicated over an
    # 8-way group under tensor parallelism, which attention data-parallel avoids, and the plan takes it. Each returned
    # deployment is the one price_deployment prices with the same layout, and whole experts only where the group
    # divides the routed experts.
    args = ("qwen3-235b-a22b", ["h200"], 16, 2000, 500)
    options = dict(tpot=0.1, prices=3.0, weight_dtypes=("fp8",), kv_dtypes=("fp8",))
    narrow = plan(*args, **options)
    wide = plan(*args, **options, moe_layouts=tuple(plan_module.MOE_LAYOUTS))
    cost = "dollars_per_million_output_tokens_all_in"
    assert getattr(wide.best, cost) <= getattr(narrow.best, cost)
    assert not (narrow.best.expert_parallel or narrow.best.attention_data_parallel)
    assert wide.best.attention_data_parallel and getattr(wide.best, cost) < 0.9 * getattr(narrow.best, cost)
    model = get_model("qwen3-235b-a22b")
    for point in (wide.best, *wide.frontier):
        assert not point.expert_parallel or model.n_experts % point.tensor_parallel == 0
        again = price_deployment(model, "h200", point.n_chips, 2000, 500, tensor_parallel=point.tensor_parallel,
                                 batch=point.batch, weight_dtype="fp8", kv_dtype="fp8",
                                 expert_parallel=point.expert_parallel,
                                 attention_data_parallel=point.attention_data_parallel, price_per_chip_hour=3.0)
        assert (again.tpot_s, getattr(again, cost)) == pytest.approx((point.tpot_s, getattr(point, cost)), rel=1e-9)
