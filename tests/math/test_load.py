"""load: TTFT and TPOT under a closed-loop concurrency or Poisson arrivals, held to three independent oracles.

- Closed forms derived by hand: with a step that is linear in the batch and the prompt tokens the saturation rate is
  B_max / ((T_gen - 1) T_step(B_max)) with T_step written out here, and past B_max every extra client adds
  1 / lambda_sat of queueing; where the step is linear in the prompt tokens near B_max the saturation rate is the
  offline estimate's throughput over T_gen (`estimate.offline_estimate`, which shares no code with `load`).
- The engine run step by step (`simulator.simulate_open_loop`, `simulate_closed_loop`): the same step-time model, the
  queue, the budget and every prompt's chunks played out request by request. The analytic queueing must agree with
  it within the tolerances stated per quantity, and the run itself obeys Little's law and saturates at lambda_sat.
- Inequalities any answer must satisfy: p99 at or above the mean, the bound below the estimate, Little's law.
- A published closed-loop sweep (dstack's DeepSeek-R1 runs, `measurements.sweep_rows`): no row beats the bound,
  TPOT within 2x, and its TTFT grows the way clients kept in step predict (`Engine.lockstep`), not the way a
  chunked engine's drifting clients do.
"""

import collections
import dataclasses
import functools
import json
import math
import statistics

import numpy as np
import pytest

from scaling_lib.calibration import fit_request_s
from scaling_lib.efficiency import PHYSICAL_RANGES, TYPICAL, Calibrated
from scaling_lib.estimate import CUDA_GRAPH_MAX_BATCH, Deployment, offline_estimate
from scaling_lib.load import Engine, deployment_engine, load_estimate
from scaling_lib.measurements import burst_rows, sweep_rows
from scaling_lib.models import get_model
from scaling_lib.simulator import (ServingConfig, benchmark_estimate, burst_estimate, simulate_benchmark,
                                   simulate_burst, simulate_closed_loop, simulate_open_loop)

from tests import for_each

LLAMA_8B = Deployment("llama3-8b", "h100", 1)
LLAMA_70B_FP8 = Deployment("llama3-70b", "h100", 4, weight_dtype="fp8", compute_dtype="fp8")


# The typical step efficiencies with a front end of 50 ms held: the simulator checks the closed forms on a fixed
# engine, which must not move with the fitted front end (near a closed loop's knee, 211 and 160 clients below, the
# first token turns on it).
def _with_front_end(front_end_s):
    """The typical step efficiencies with a front end of `front_end_s` on every platform."""
    return Calibrated(*(dataclasses.replace(getattr(TYPICAL, p), request_s=front_end_s) for p in ("gpu", "tpu")),
                      amd=dataclasses.replace(TYPICAL.amd, request_s=front_end_s))


CHECKED = _with_front_end(0.05)


@pytest.fixture(scope="module")
def engines():
    """The engines the simulator checks, each priced once (the step cache is shared by every test)."""
    return {"8b": deployment_engine(LLAMA_8B, 1000, 200, CHECKED),
            "70b": deployment_engine(LLAMA_70B_FP8, 2000, 500, CHECKED)}


def _linear(fixed_s, per_sequence_s, per_prompt_token_s):
    return lambda batch, prompt_tokens: fixed_s + per_sequence_s * batch + per_prompt_token_s * prompt_tokens


# ------------------------------------------------------------------------------------------------- closed forms
def test_a_linear_step_gives_the_hand_derived_saturation_rate_and_a_queue_that_grows_one_over_it_per_client():
    # step = 10 ms + 0.1 ms per sequence + 20 us per prompt token; 100 prompt and 21 output tokens, at most 50
    # sequences, no budget. Prompts add 50 x 100 / 20 = 250 tokens per step at B_max = 50, so
    # T_step(50) = 10 + 5 + 5 = 20 ms and lambda_sat = 50 / (20 x 20 ms) = 125 requests/s.
    engine = Engine(_linear(0.010, 1e-4, 2e-5), input_len=100, output_len=21, max_batch=50, token_budget=None)
    assert engine.iteration(50) == pytest.approx(0.020, rel=1e-12)
    assert engine.saturation_rate() == pytest.approx(125.0, rel=1e-12)
    # past B_max the batch stays full and Little's law gives TTFT = U / lambda_sat - (T_gen - 1) T_step(B_max)
    grows = engine.closed_loop(310).ttft_s - engine.closed_loop(300).ttft_s
    assert grows == pytest.approx(10 / 125.0, rel=1e-9)
    assert engine.closed_loop(300).request_rate == pytest.approx(125.0, rel=1e-9)


def test_the_front_end_adds_its_seconds_to_every_first_token_and_to_each_clients_cycle_but_not_to_the_steps():
    # the linear engine above with a front end of f = 40 ms per request. Open loop: TTFT (mean and p99) grows by f,
    # TPOT does not. One client: its cycle is f + TTFT' + (T_gen - 1) TPOT, so its rate is 1 / that (Little's law).
    # Past B_max: TTFT = U / lambda_sat - (T_gen - 1) T_step(B_max) whatever f is (the front end takes its seconds
    # from the queue's).
    step, front = _linear(0.010, 1e-4, 2e-5), 0.040
    plain = Engine(step, input_len=100, output_len=21, max_batch=50, token_budget=None)
    served = Engine(step, input_len=100, output_len=21, max_batch=50, token_budget=None, request_s=front)
    one, other = plain.open_loop(60.0), served.open_loop(60.0)
    assert other.ttft_s - one.ttft_s == pytest.approx(front, rel=1e-9)
    assert other.ttft_p99_s - one.ttft_p99_s == pytest.approx(front, rel=1e-9)
    assert (other.tpot_s, other.decode_batch) == (one.tpot_s, one.decode_batch)
    alone = served.closed_loop(1)
    # (the engine's share moves by a hair: with its client away longer, a request finds the batch emptier)
    assert alone.ttft_s == pytest.approx(front + plain.closed_loop(1).ttft_s, rel=1e-3)
    assert alone.request_rate == pytest.approx(1 / (alone.ttft_s + 20 * alone.tpot_s), rel=1e-9)
    assert served.closed_loop(300).ttft_s == pytest.approx(300 / 125.0 - 20 * 0.020, rel=1e-9)
    assert served.closed_loop(300).queue_s == pytest.approx(plain.closed_loop(300).queue_s - front, rel=1e-9)


def test_clients_kept_in_step_share_one_prefill_of_all_their_prompts_then_decode_together():
    # step = 10 ms + 0.1 ms per sequence + 50 us per prompt token; 4 clients, 100 prompt and 11 output tokens. The
    # 4 prompts go through one prefill of 400 tokens: TTFT = 10 + 20 = 30 ms for every client; then 10 decode steps
    # at batch 4 of 10.4 ms: a cycle of 30 + 104 = 134 ms, so 4 / 0.134 = 29.85 requests/s and 328.4 tokens/s.
    point = Engine(_linear(0.010, 1e-4, 5e-5), input_len=100, output_len=11, max_batch=8).lockstep(4)
    assert (point.ttft_s, point.tpot_s) == (pytest.approx(0.030, rel=1e-12), pytest.approx(0.0104, rel=1e-12))
    assert point.request_rate == pytest.approx(4 / 0.134, rel=1e-12)
    assert point.output_tokens_per_s == pytest.approx(11 * 4 / 0.134, rel=1e-12)
    assert (point.ttft_p99_s, point.tpot_p99_s, point.requests_in_flight) == (point.ttft_s, point.tpot_s, 4)


@for_each([
    (LLAMA_8B, 1000, 200), (LLAMA_8B, 200, 1000), (LLAMA_70B_FP8, 2000, 500)], ids=str)
def test_the_saturation_rate_is_the_offline_throughput_over_the_output_tokens(deployment, input_len, output_len):
    # at B_max a step carries prompts from several requests and is compute-bound in them: the lumps average out
    engine = deployment_engine(deployment, input_len, output_len)
    offline = offline_estimate(deployment, input_len, output_len, "typical")
    assert engine.batch_limit == offline.batch
    assert engine.saturation_rate() == pytest.approx(offline.output_tokens_per_s / output_len, rel=1e-9)


def test_ttft_explodes_as_arrivals_approach_saturation_while_tpot_levels_off_at_the_full_batch(engines):
    engine = engines["8b"]
    saturation, full = engine.saturation_rate(), engine.iteration(engine.batch_limit)
    points = [engine.open_loop(share * saturation) for share in (0.1, 0.5, 0.9, 0.99, 0.999)]
    ttft, tpot = [p.ttft_s for p in points], [p.tpot_s for p in points]
    assert ttft == sorted(ttft) and tpot == sorted(tpot)
    assert ttft[-1] > 20 * ttft[1]  # the queue's mean wait grows as 1 / (lambda_sat - lambda)
    assert full * 0.8 < tpot[-1] <= full * (1 + 1e-9)  # TPOT is bounded by the step at the largest batch


# ------------------------------------------------------------------------------------- the engine, step by step
def _steady(run, skip: int, tail: int):
    """Requests issued after the first `skip` and before the last `tail` (warm-up and drain left out)."""
    order = np.argsort(run.arrival_s, kind="stable")
    return order[skip:len(order) - tail]


def test_the_engine_run_saturates_at_the_closed_form_rate_and_obeys_littles_law(engines):
    engine = engines["8b"]
    clients = 3 * engine.batch_limit
    run = simulate_closed_loop(engine, clients, 8 * clients)
    window = _steady(run, 2 * clients, 2 * clients)
    span = run.arrival_s[window].max() - run.arrival_s[window].min()
    throughput = len(window) / span
    assert throughput == pytest.approx(engine.saturation_rate(), rel=0.02)
    latency = float(np.mean(run.finish_s[window] - run.arrival_s[window]))
    assert throughput * latency == pytest.approx(clients, rel=0.02)  # Little's law: U = lambda W
    # an open loop: the time-average number in the system is the arrival rate times the mean time in it
    rate = 0.8 * engine.saturation_rate()
    run = simulate_open_loop(engine, rate, 4000, seed=3)
    start, end = run.arrival_s[1000], run.arrival_s[3000]
    inside = np.clip(np.minimum(run.finish_s, end) - np.maximum(run.arrival_s, start), 0, None).sum() / (end - start)
    window = (run.arrival_s >= start) & (run.arrival_s < end)
    assert inside == pytest.approx(rate * np.mean(run.finish_s[window] - run.arrival_s[window]), rel=0.05)


# (engine, closed-loop clients or a share of the saturation rate): the model against the run, per quantity. The
# run's p99 of a closed loop is left out: identical requests sent by clients in step with each other finish in
# clumps, a lockstep real traffic does not keep.
AGREEMENT = [("8b", "open", 0.2), ("8b", "open", 0.5), ("8b", "open", 0.8), ("8b", "open", 0.95),
             ("70b", "open", 0.5), ("70b", "open", 0.8),
             ("8b", "closed", 8), ("8b", "closed", 64), ("8b", "closed", 211), ("8b", "closed", 844),
             ("70b", "closed", 32), ("70b", "closed", 160)]


@pytest.mark.parametrize("which, loop, load", AGREEMENT)
def test_the_load_model_agrees_with_the_engine_run_step_by_step(engines, which, loop, load):
    # tolerances: mean TPOT 12%, mean TTFT 25%, throughput 3%; in an open loop p99 TPOT 20%, p99 TTFT 35%
    engine = engines[which]
    if loop == "open":
        rate = load * engine.saturation_rate()
        model, run = engine.open_loop(rate), simulate_open_loop(engine, rate, 4000, seed=1)
        window = _steady(run, 500, 0)
    else:
        model, run = engine.closed_loop(load), simulate_closed_loop(engine, load, 6 * load + 600)
        window = _steady(run, 3 * load, 2 * load)
    ttft, tpot = run.ttft_s[window], run.tpot_s[window]
    # at 95% of saturation the closed form's mean TPOT runs 21% under the run (12% before a step carrying prompt
    # tokens also paid the eager launches of chapter 11, `Efficiency.launch_s`, which pure decode steps do not)
    assert model.tpot_s == pytest.approx(np.mean(tpot), rel=0.25 if load == 0.95 else 0.12)
    assert model.ttft_s == pytest.approx(np.mean(ttft), rel=0.25)
    if loop == "open":
        assert model.tpot_p99_s == pytest.approx(np.percentile(tpot, 99), rel=0.20)
        assert model.ttft_p99_s == pytest.approx(np.percentile(ttft, 99), rel=0.35)
    else:
        span = run.arrival_s[window].max() - run.arrival_s[window].min()
        assert model.request_rate == pytest.approx(len(window) / span, rel=0.03)


# ------------------------------------------------------------------------------------- what every answer holds
LOADS = [dict(concurrency=1), dict(concurrency=16), dict(concurrency=300), dict(concurrency=5000),
         dict(request_rate=0.1), dict(request_rate=5.0), dict(request_rate=12.0)]


@pytest.mark.parametrize("deployment", [LLAMA_8B, Deployment("llama3-70b", "h100", 8, tensor_parallel=4)],
                         ids=["8b-1xh100", "70b-2x4xh100"])
@pytest.mark.parametrize("load", LOADS, ids=lambda load: "-".join(f"{k}={v}" for k, v in load.items()))
def test_every_answer_carries_p99_at_or_above_its_mean_the_bound_below_it_and_littles_law(deployment, load):
    result = load_estimate(deployment, 1000, 200, **load)
    assert result.ttft_p99_s >= result.ttft_s > 0 and result.tpot_p99_s >= result.tpot_s > 0
    assert result.bound.ttft_s <= result.ttft_s and result.bound.tpot_s <= result.tpot_s
    assert result.bound.output_tokens_per_s >= result.output_tokens_per_s * (1 - 1e-12)
    assert 0 <= result.queue_s < result.ttft_s
    latency = result.ttft_s + 199 * result.tpot_s
    assert result.requests_in_flight == pytest.approx(result.request_rate * latency, rel=1e-6)
    assert result.output_tokens_per_s == pytest.approx(200 * result.request_rate, rel=1e-12)
    if "concurrency" in load:
        assert result.requests_in_flight == load["concurrency"]
    else:
        assert result.request_rate == load["request_rate"]
    assert result.saturation_rate == pytest.approx(
        deployment.replicas * deployment_engine(deployment, 1000, 200).saturation_rate(), rel=1e-12)
    if "request_rate" in load:
        # the bound's decode batch obeys Little's law on the decode phase: B = lambda (T_gen - 1) TPOT
        bound = deployment_engine(deployment, 1000, 200, None).open_loop(load["request_rate"] / deployment.replicas)
        assert bound.decode_batch == pytest.approx(bound.request_rate * 199 * bound.tpot_s, rel=1e-6)


def test_a_concurrency_spreads_over_the_replicas_as_evenly_as_it_divides():
    # 2 replicas, 5 clients: one replica runs 3, the other 2; rates add up, means weigh each by its requests
    two = Deployment("llama3-8b", "h100", 2, tensor_parallel=1)
    engine = deployment_engine(two, 1000, 200)
    three, two_clients = engine.closed_loop(3), engine.closed_loop(2)
    result = load_estimate(two, 1000, 200, concurrency=5)
    assert result.request_rate == pytest.approx(three.request_rate + two_clients.request_rate, rel=1e-12)
    weighted = (three.request_rate * three.tpot_s + two_clients.request_rate * two_clients.tpot_s) / \
        result.request_rate
    assert result.tpot_s == pytest.approx(weighted, rel=1e-12)
    assert result.tpot_p99_s == max(three.tpot_p99_s, two_clients.tpot_p99_s)


BAD_INPUTS = [
    (lambda: load_estimate(LLAMA_8B, 1000, 200), "give exactly one load"),
    (lambda: load_estimate(LLAMA_8B, 1000, 200, concurrency=8, request_rate=1.0), "give exactly one load"),
    (lambda: load_estimate(LLAMA_8B, 1000, 200, request_rate=1e4), "every resource at peak"),
    (lambda: load_estimate(LLAMA_8B, 1000, 200, concurrency=8, efficiency=None), "reports beside the estimate"),
    (lambda: load_estimate(LLAMA_8B, 1000, 1, concurrency=8), "output_len=1"),
    (lambda: load_estimate(LLAMA_8B, 200_000_000, 200, concurrency=8), "does not fit"),
    (lambda: deployment_engine("llama3-8b", 1000, 200), "estimate.Deployment"),
    (lambda: Engine(_linear(0.01, 0, 0), 100, 20, 8, token_budget=1), "token_budget=1"),
    (lambda: Engine(0.01, 100, 20, 8), "step_s must be a function"),
    (lambda: simulate_open_loop(ServingConfig("llama3-8b", "h100", 1, 4, 4096), 1.0, 10), "load.Engine"),
    (lambda: simulate_closed_loop(Engine(_linear(0.01, 0, 0), 100, 20, 8), 30, 10), "concurrency"),
    (lambda: Engine(_linear(0.01, 0, 0), 100, 20, 8).lockstep(9), "split into waves"),
    (lambda: Engine(_linear(0.01, 0, 0), 100, 20, 8, request_s=-0.01), "request_s=-0.01"),
    (lambda: burst_estimate(LLAMA_8B, 1000, 200, 0), "requests"),
    (lambda: burst_estimate(LLAMA_8B, 1000, 200, 8, efficiency=None), "reports beside the estimate"),
    (lambda: simulate_burst(LLAMA_8B, 8), "load.Engine"),
    (lambda: benchmark_estimate(LLAMA_8B, 1000, 200, 8, 4), "fewer than the 8 clients"),
    (lambda: benchmark_estimate(LLAMA_8B, 1000, 200, 0, 4), "concurrency"),
    (lambda: simulate_benchmark(Engine(_linear(0.01, 0, 0), 100, 20, 8), 30, 10), "concurrency"),
    (lambda: benchmark_estimate(LLAMA_8B, 1000, 200, 8, 16, schedule="fifo"), "unknown schedule 'fifo'"),
    (lambda: burst_estimate(LLAMA_8B, 1000, 200, 8, schedule="prefill first"), "use one of mixed, prefill-first"),
]


@for_each(BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_load_in_words_states_each_quantity_it_holds():
    result = load_estimate(LLAMA_8B, 1000, 200, concurrency=64)
    rows = dict(result.rows())
    assert rows["load"].startswith("64 clients (closed loop)")
    assert f"{result.ttft_s * 1e3:,.1f} ms mean, {result.ttft_p99_s * 1e3:,.1f} ms p99" in rows["TTFT under load"]
    assert f"bound {result.bound.tpot_s * 1e3:,.2f} ms" in rows["TPOT under load"]
    assert rows["output tokens/s under load"].startswith(f"{result.output_tokens_per_s:,.0f}")
    assert result.describe().count("\n") == len(rows) - 1
    data = result.as_dict()
    assert set(data) >= {"ttft_s", "tpot_s", "ttft_p99_s", "tpot_p99_s", "output_tokens_per_s", "requests_in_flight",
                         "queue_s", "bound"}
    assert set(data["bound"]) == {"ttft_s", "tpot_s", "output_tokens_per_s"}
    assert all(math.isfinite(value) for value in data["bound"].values())


def test_arrivals_past_the_saturation_rate_are_served_at_the_full_batch_behind_a_queue_without_end():
    # between the estimate's saturation rate and the bound's: the replica serves lambda_sat at B_max and the rest
    # queue, so TTFT, the queue and the requests in flight are infinite; just below lambda_sat the open loop tends to
    # the same TPOT, batch and tokens/s (the two answers meet at the edge)
    engine = deployment_engine(LLAMA_8B, 1000, 200)
    saturation = engine.saturation_rate()
    over = load_estimate(LLAMA_8B, 1000, 200, request_rate=1.2 * saturation)
    assert over.saturated and over.offered_rate == pytest.approx(1.2 * saturation, rel=1e-12)
    assert all(math.isinf(value) for value in (over.ttft_s, over.ttft_p99_s, over.queue_s, over.requests_in_flight))
    assert over.request_rate == pytest.approx(saturation, rel=1e-12)
    assert over.output_tokens_per_s == pytest.approx(saturation * 200, rel=1e-12)
    assert over.decode_batch == engine.batch_limit and over.tpot_p99_s >= over.tpot_s
    near = engine.open_loop(0.9999 * saturation)
    assert near.tpot_s == pytest.approx(over.tpot_s, rel=0.01)
    assert near.decode_batch == pytest.approx(over.decode_batch, rel=0.01)
    assert near.output_tokens_per_s == pytest.approx(over.output_tokens_per_s, rel=1e-3)
    data = over.as_dict()
    assert data["saturated"] and data["offered_rate"] == over.offered_rate
    assert data["ttft_s"] is None and data["ttft_p99_s"] is None and data["queue_s"] is None
    assert data["requests_in_flight"] is None and data["bound"]["ttft_s"] == over.bound.ttft_s
    json.dumps(data, allow_nan=False)
    rows = dict(over.rows())
    assert rows["TTFT under load"].startswith("unbounded") and "the queue grows by" in rows["load"]
    assert not load_estimate(LLAMA_8B, 1000, 200, request_rate=0.5 * saturation).saturated
    with pytest.raises(ValueError, match="use open_loop"):
        engine.overloaded(0.5 * saturation)


# ------------------------------------------------------------------------------------------- a published sweep
def test_no_published_sweep_point_beats_the_bound_at_its_load():
    for row in sweep_rows():
        bound = load_estimate(row.deployment(), row.input_len, row.output_len,
                              concurrency=row.concurrency).bound
        assert row.ttft_s >= bound.ttft_s and row.tpot_s >= bound.tpot_s, row.label
        assert row.output_tokens_per_s <= bound.output_tokens_per_s, row.label


def test_published_runs_of_fine_grained_experts_decode_slower_than_estimated_where_other_models_do_not():
    # Chapter 11's corroboration of the fine-grained caveat, on the published serving runs priced at their load
    # (their TPOT enters no fit): measured, 65 of 76 runs of DeepSeek-R1 and V3.1, GLM-4.5, Qwen3-235B-A22B, the
    # Qwen3-Next design and MiniMax-M2.5 (vLLM, SGLang, TensorRT-LLM; H100, H200, B200, MI300X) decode slower than
    # estimated, median TPOT 1.63x the estimate's, where the 22 runs of other models (Llama 4 and gpt-oss among them,
    # not fine-grained) sit at a median 1.00x. (Each MoE layer's measured chain of kernels, `kernels.moe_layer_floor`,
    # took these from 73 of 76 and 1.79x.)
    over, by_engine, by_model = {True: [], False: []}, {}, {}
    for row in sweep_rows():
        loaded = load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency)
        fine_grained = get_model(row.model).fine_grained_experts
        over[fine_grained].append(row.tpot_s / loaded.tpot_s)
        if fine_grained:
            by_engine.setdefault(row.engine.split()[0], []).append(row.tpot_s / loaded.tpot_s)
            name = get_model(row.model).name + (" (Coder-Next)" if "Qwen3-Coder-Next" in row.source else "")
            by_model.setdefault(name, []).append(row.tpot_s / loaded.tpot_s)
    fine, other = over[True], over[False]
    assert len(fine) >= 40 and sum(x > 1 for x in fine) >= 0.8 * len(fine) and statistics.median(fine) > 1.5
    assert len(other) >= 10 and 0.9 < statistics.median(other) < 1.1
    # chapter 9: "under vLLM, SGLang and TensorRT-LLM alike"
    assert set(by_engine) == {"vLLM", "SGLang", "TensorRT-LLM"}
    assert all(statistics.median(ratios) > 1.2 for ratios in by_engine.values())
    # chapter 11: most are DeepSeek's (R1 and V3.1, 47 runs, median 1.92x); Qwen3-235B-A22B's nine SGLang runs on eight
    # B200 sit at a median 0.81x, within 0.76-1.17x; Qwen3-Next-80B-A3B's two on eight B200 at 0.96x (one client) and
    # 3.71x (100), where gpt-oss-120b (experts as wide as the model) served the same way comes out at 0.47x and
    # 1.52x; Qwen3-Coder-Next (the same design) on two B200, random lengths, nine runs at a median 1.05x, at most 1.8x
    deepseek, qwen = by_model["deepseek-v3"], by_model["qwen3-235b-a22b"]
    assert len(deepseek) > len(fine) / 2 and statistics.median(deepseek) > 1.5
    assert len(qwen) == 9 and 0.7 < min(qwen) and statistics.median(qwen) < 1 and max(qwen) < 1.25
    one, hundred = by_model["qwen3-next-80b-a3b-thinking"]
    assert 0.9 < one < 1.1 and hundred > 3
    coder = by_model["qwen3-next-80b-a3b-thinking (Coder-Next)"]
    assert len(coder) == 9 and 0.9 < statistics.median(coder) < 1.2 and min(coder) > 0.9 and max(coder) < 2
    # MiniMax-M2.5 served the same way on both chips: a median 1.49x on eight B200 (6 runs), 1.10x on eight H100 (2):
    # the shortfall of small experts is larger on Blackwell
    minimax = {}
    for row in sweep_rows(source="sgl-project/sgl-cookbook"):
        if get_model(row.model).name == "minimax-m2.5":
            loaded = load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency)
            minimax.setdefault(row.chip, []).append(row.tpot_s / loaded.tpot_s)
    b200, h100 = (statistics.median(minimax[chip]) for chip in ("b200", "h100"))
    assert (len(minimax["b200"]), len(minimax["h100"])) == (6, 2) and b200 > 1.3 > 1.2 > h100 > 1
    control = [row.tpot_s / load_estimate(row.deployment(), row.input_len, row.output_len,
                                          concurrency=row.concurrency).tpot_s
               for row in sweep_rows() if getattr(row.model, "name", "") == "gpt-oss-120b"]
    assert len(control) == 2 and control[0] < 1 < control[1] < 2 < hundred / control[1]


@functools.cache
def _cookbook_ratios():
    """measured / estimated output tokens/s, TPOT and TTFT of SGLang's cookbook closed loops (sgl-cookbook @7b5bd9c:
    LLaMA-3.1-70B on 8 A100, Qwen3-235B and DeepSeek-R1 on 8 B200, 1 to 100 clients; Llama 4 Scout and Maverick on
    8 MI300X, 16 and 100 clients; Qwen3-Next-80B-A3B and gpt-oss-120b on 8 B200, ShareGPT conversations at 1 and 100
    clients; DeepSeek-V3.1 on 8 MI300X, Qwen3-Coder-Next on 2 B200 and MiniMax-M2.5 on 8 B200 and 8 H100, 1 to 100
    clients), each priced at its load by the typical fit through the load model, with the row.
    No step efficiency is fitted on them; the typical front end is fitted on their one-client runs among others
    (`calibration.fit_request_s`; the test of the front end below fits it without them)."""
    rows = [row for row in sweep_rows(engine="sglang") if "cookbook" in row.engine]
    assert len(rows) == 56
    ratios = []
    for row in rows:
        loaded = load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency)
        ratios.append((row.output_tokens_per_s / loaded.output_tokens_per_s, row.tpot_s / loaded.tpot_s,
                       row.ttft_s / loaded.ttft_s, row))
    return ratios


def _within(values, factor):
    return sum(1 / factor <= value <= factor for value in values) / len(values)


def test_sglangs_published_closed_loops_keep_their_tpot_and_tokens_per_second_within_two_times_but_nine():
    # Within 2x on all but nine: five of DeepSeek-V3.1's seven runs on eight MI300X (TPOT 1.9-3.8x, a fine-grained
    # mixture on AMD's software, which the caveat says runs slower); MiniMax-M2.5 at 100 clients on eight B200 (2.0x,
    # where its two on eight H100 come within 1.25x); Llama 4 Scout at 100 clients on eight MI300X, which decodes 2.7x
    # slower than estimated (output tokens/s 0.45x), where Maverick at 100 clients, whose steps the estimate prices at
    # nearly twice Scout's (it touches more of its 128 experts), comes within 1.25x; the Qwen3-Next design (512
    # experts 512 wide) at 100 clients on eight B200, ShareGPT, 3.7x slower (0.27x the tokens/s); and gpt-oss-120b at
    # one client on the same GPUs, decoding in 0.47x the estimate's time: its MoE layers' kernels run faster than the
    # chain NVIDIA timed for TensorRT-LLM's
    tokens, tpot, _, rows = zip(*_cookbook_ratios())
    outside = collections.Counter((row.model.name if hasattr(row.model, "name") else row.model, row.chip)
                                  for row, t, p in zip(rows, tokens, tpot) if not (_within([t], 2) and _within([p], 2)))
    assert outside == {("deepseek-v3", "mi300x"): 5, ("minimax-m2.5", "b200"): 1, ("gpt-oss-120b", "b200"): 1,
                       ("llama-4-scout-17b-16e-instruct", "mi300x"): 1, ("qwen3-next-80b-a3b-thinking", "b200"): 1}
    assert all(row.concurrency == 100 for row, t, p in zip(rows, tokens, tpot)
               if "qwen3-next" in str(getattr(row.model, "name", "")) and not _within([p], 2))
    scout, = (p for row, p in zip(rows, tpot) if row.concurrency == 100 and "scout" in str(row.model))
    assert scout > 2
    # chapter 11: the Llama 4 runs, TPOT within 1.5x on 3 of 4, Maverick at 100 clients among them
    llama4 = {(row.model.name.split("-")[2], row.concurrency): p for row, p in zip(rows, tpot)
              if "llama-4" in getattr(row.model, "name", "")}
    assert len(llama4) == 4 and _within(list(llama4.values()), 1.5) == 0.75 and _within([llama4["maverick", 100]], 1.5)


@pytest.mark.xfail(strict=True, reason="measured: TPOT within 1.5x on 41 of 56 SGLang cookbook runs (73%) and output "
                   "tokens/s on 39 (70%), against the 85% a serving engineer asks (the 52 runs of random lengths: 40 "
                   "and 37). The misses are mostly fine-grained experts, which the estimate's caveat says it misses "
                   "more widely: six of DeepSeek-V3.1's seven runs on MI300X (1.8-3.8x), MiniMax-M2.5 on B200 from 16 "
                   "clients (1.5-2.0x, its two on H100 within 1.15x), Qwen3-Coder-Next on two B200 from 64 clients "
                   "(1.5-1.8x); and the ShareGPT runs at 100 clients on eight B200 (gpt-oss-120b 1.52x, "
                   "Qwen3-Next-80B-A3B 3.7x), where SGLang runs prompts ahead of decodes and conversations of very "
                   "different lengths share the batch; gpt-oss-120b at one client, 0.47x (its MoE layers' kernels "
                   "faster than the chain NVIDIA timed for TensorRT-LLM's); Llama 4 Scout at 100 clients on MI300X")
def test_sglangs_published_closed_loops_keep_their_tpot_and_tokens_per_second_within_one_and_a_half_times():
    # the thresholds a serving engineer asks of the load model: TPOT and output tokens/s within 1.5x on 85% of rows
    tokens, tpot, _, _ = zip(*_cookbook_ratios())
    assert _within(tokens, 1.5) >= 0.85 and _within(tpot, 1.5) >= 0.85


def test_gpustacks_closed_loops_at_a_few_clients_keep_their_tpot_and_tokens_per_second_within_one_and_a_half_times():
    # GPUStack's ShareGPT runs at 1 to 8 clients (one H100: Qwen3-8B under vLLM, SGLang and TensorRT-LLM; 8 H200:
    # DeepSeek-R1 and GLM-4.6 under vLLM), priced at their load with the typical fit (no step efficiency is fitted on
    # them): measured, TPOT within 1.5x on 9 of 10 (the dense bf16 runs within 4%) and output tokens/s on 8; the
    # misses are DeepSeek-R1's 256 experts at four sequences (1.9x) and SGLang's FP8 checkpoint (1.4x)
    rows = sweep_rows(source="gpustack/gpustack")
    loaded = [load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency)
              for row in rows]
    tpot = [row.tpot_s / est.tpot_s for row, est in zip(rows, loaded)]
    tokens = [row.output_tokens_per_s / est.output_tokens_per_s for row, est in zip(rows, loaded)]
    assert len(rows) == 10 and _within(tpot, 1.5) >= 0.9 and _within(tokens, 1.5) >= 0.8
    dense_bf16 = [ratio for row, ratio in zip(rows, tpot) if row.chip == "h100" and row.weights == "bf16"]
    assert len(dense_bf16) == 7 and all(abs(ratio - 1) < 0.05 for ratio in dense_bf16)


@pytest.mark.xfail(strict=True, reason="measured: TTFT within 2x on 17 of 56 SGLang cookbook runs (5 of 56 without "
                   "the front end). The misses are at 16 to 100 clients: the first token comes later the more clients "
                   "(DeepSeek-R1 on 8 B200: 153 ms at one client, 274 at 16, 563 at 100, for the same 500-token "
                   "prompts), where the steady state's clients, drifting apart, wait for little but their own "
                   "prefill; and fine-grained experts' first tokens come 2-3x later than estimated even at one client, "
                   "their prefill priced too fast. Run as the benchmark started, its clients together, 40 of 56 (the "
                   "test below)")
def test_sglangs_published_closed_loops_keep_their_ttft_within_two_times():
    _, _, ttft, _ = zip(*_cookbook_ratios())
    assert _within(ttft, 2) >= 0.7


def _first_token_ratios(source, front_end_s):
    """measured / estimated TTFT of the published runs of `source` with varied lengths, each at its load, the
    typical step efficiencies and a front end of `front_end_s` on every platform."""
    efficiency = _with_front_end(front_end_s)
    return [row.ttft_s / load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency,
                                       efficiency=efficiency).ttft_s
            for row in sweep_rows(source=source) if row.lengths == "varied"]


@for_each([("gpustack/gpustack", "sgl-project/sgl-cookbook", 0.4),
           ("sgl-project/sgl-cookbook", "gpustack/gpustack", 0.6)], ids=["fitted-on-gpustack", "fitted-on-the-cookbook"])
def test_a_front_end_fitted_on_one_sources_runs_brings_the_others_first_tokens_within_two_times(fitted, judged, share):
    # fitted on one source's light-load runs alone and judged on the other's runs at every load: measured, the
    # cookbook's 56 runs go from 5 within 2x to 25 (GPUStack's fit, 38 ms), GPUStack's 10 from 1 to 10 (the
    # cookbook's, 21 ms, its fine-grained experts left out); both fits inside the front end's physical range
    front_end = fit_request_s(sources=(fitted,))
    assert PHYSICAL_RANGES["request_s"][0] < front_end < PHYSICAL_RANGES["request_s"][1]
    without, with_front_end = _first_token_ratios(judged, 0.0), _first_token_ratios(judged, front_end)
    assert _within(with_front_end, 2) >= share and _within(with_front_end, 2) >= 2 * _within(without, 2)


def test_a_fixed_length_sweep_keeps_its_clients_in_step_and_its_tpot_within_two_times():
    # vLLM on 8 H200: measured TTFT over the lockstep prediction stays within 20% of one constant from 4 to 64
    # clients (the engine's prefill speed against the typical efficiency), while over the chunked model's drifting
    # clients it grows more than tenfold; TPOT within 2x from 32 clients, within 3x below: at a few sequences this
    # engine's DeepSeek-R1 layers (256 experts each) cost more than the per-step terms fitted on dense and
    # eight-expert models price
    rows = sweep_rows("h200", "vllm", source="dstackai/benchmarks")
    engine = deployment_engine(rows[0].deployment(), rows[0].input_len, rows[0].output_len)
    upto_64 = [row for row in rows if row.concurrency <= 64]
    in_step = [row.ttft_s / engine.lockstep(row.concurrency).ttft_s for row in upto_64]
    drifting = [row.ttft_s / engine.closed_loop(row.concurrency).ttft_s for row in upto_64]
    assert max(in_step) / min(in_step) < 1.2 and max(drifting) / min(drifting) > 10
    for row in rows:
        assert 1 / 2 < row.tpot_s / engine.closed_loop(row.concurrency).tpot_s < (2 if row.concurrency >= 32 else 3), \
            row.label


# ------------------------------------------------------------------------------------------- a burst
def test_a_burst_goes_through_in_waves_of_the_batch_the_engine_holds():
    # step = 10 ms + 0.1 ms per sequence + 20 us per prompt token, whole prompts (no budget), at most 4 sequences, a
    # 5 ms front end; 8 requests of 100 prompt and 11 output tokens sent at once. Wave 1: its 4 prompts in one step of
    # 10 + 4 x 100 x 0.02 = 18 ms (first tokens at 5 + 18 = 23 ms), then 10 decode steps of 10 + 0.4 = 10.4 ms (done
    # at 127 ms); wave 2 the same from there: first tokens at 145 ms, done at 249 ms
    engine = Engine(_linear(0.010, 1e-4, 2e-5), input_len=100, output_len=11, max_batch=4, token_budget=None,
                    request_s=0.005)
    run = simulate_burst(engine, 8)
    assert run.ttft_s == pytest.approx([0.023] * 4 + [0.145] * 4, rel=1e-9)
    assert run.tpot_s == pytest.approx([0.0104] * 8, rel=1e-9)
    assert run.finish_s == pytest.approx([0.127] * 4 + [0.249] * 4, rel=1e-9)


def test_a_burst_spreads_over_the_replicas_and_states_its_run_and_its_bound():
    # 2 replicas, 5 requests: one replica serves 3, the other 2, both from t = 0; the estimate's means are over the
    # 5 requests, its rates over the run, its p99 at or above the means, its bound below them
    two = Deployment("llama3-8b", "h100", 2, tensor_parallel=1)
    engine = deployment_engine(two, 1000, 200)
    three, two_requests = simulate_burst(engine, 3), simulate_burst(engine, 2)
    result = burst_estimate(two, 1000, 200, 5)
    ttft = np.concatenate([three.ttft_s, two_requests.ttft_s])
    makespan = max(three.finish_s.max(), two_requests.finish_s.max())
    assert result.ttft_s == pytest.approx(ttft.mean(), rel=1e-12) and result.requests == 5
    assert result.output_tokens_per_s == pytest.approx(5 * 200 / makespan, rel=1e-12)
    assert result.ttft_p99_s >= result.ttft_s and result.tpot_p99_s >= result.tpot_s
    assert result.bound.ttft_s <= result.ttft_s and result.bound.tpot_s <= result.tpot_s
    assert result.bound.output_tokens_per_s >= result.output_tokens_per_s
    assert json.loads(json.dumps(result.as_dict(), allow_nan=False))["requests"] == 5
    assert dict(result.rows())["load"].startswith("5 requests sent at once")


@functools.cache
def _burst_ratios(lengths):
    """measured / estimated TTFT, TPOT and output tokens/s of GPUStack's published bursts (`measurements.burst_rows`:
    every request sent at once) whose layout the library prices as run (tensor parallelism alone), each priced by
    `simulator.burst_estimate` with the typical fit; nothing is fitted on them. Also whether any beats the bound."""
    rows = [row for row in burst_rows() if row.lengths == lengths and " + " not in row.engine]
    out = []
    for row in rows:
        priced = burst_estimate(row.deployment(), row.input_len, row.output_len, row.requests)
        beaten = (row.ttft_s < priced.bound.ttft_s or row.tpot_s < priced.bound.tpot_s
                  or row.output_tokens_per_s > priced.bound.output_tokens_per_s)
        out.append((row.ttft_s / priced.ttft_s, row.tpot_s / priced.tpot_s,
                    row.output_tokens_per_s / priced.output_tokens_per_s, beaten))
    return out


def test_published_bursts_of_prompts_of_one_length_come_out_within_the_serving_engineers_tolerances():
    # 33 runs of vLLM's random prompts (32,000 to 128 tokens, 100 to 1,000 at once; Qwen3-235B, DeepSeek-R1 and V3.2,
    # GLM-4.6 on A100, H100 and H200): measured TTFT within 2x on 21, TPOT within 1.5x on 22, output tokens/s within
    # 1.5x on 17; the misses are the 128-token prompts sent a thousand at once (the front end takes its requests one
    # at a time, a queue it does not price) and DeepSeek-V3.2's first release in vLLM, 3x slower than priced
    ttft, tpot, tokens, beaten = zip(*_burst_ratios("fixed"))
    assert len(ttft) == 33 and not any(beaten)
    assert _within(ttft, 2) >= 0.6 and _within(tpot, 1.5) >= 0.6 and _within(tokens, 1.5) >= 0.5


def test_no_published_burst_of_sharegpt_conversations_beats_the_bound():
    # ShareGPT's lengths vary tenfold, so a burst priced at their means runs far faster than measured (the longest
    # outputs decode alone at the end); the bound still holds on every run
    assert len(_burst_ratios("varied")) == 26 and not any(beaten for *_, beaten in _burst_ratios("varied"))


# ------------------------------------------------------------------------------------------- a benchmark's start
def test_a_benchmark_without_a_token_budget_keeps_its_clients_in_step_as_derived_by_hand():
    # the burst's engine (10 ms + 0.1 ms per sequence + 20 us per prompt token, whole prompts, a 5 ms front end), 4
    # clients starting together, 12 requests of 100 + 11 tokens. Each wave: its 4 prompts in one step of 18 ms, so
    # TTFT = 5 + 18 = 23 ms; 10 decode steps of 10.4 ms; all end together and send again, so the next wave is the
    # same, ending at 127, 254 and 381 ms. That is `Engine.lockstep`'s closed form, at 4 / 0.127 requests/s.
    engine = Engine(_linear(0.010, 1e-4, 2e-5), input_len=100, output_len=11, max_batch=4, token_budget=None,
                    request_s=0.005)
    run = simulate_benchmark(engine, 4, 12)
    assert run.ttft_s == pytest.approx([0.023] * 12, rel=1e-9) and run.tpot_s == pytest.approx([0.0104] * 12, rel=1e-9)
    assert run.finish_s == pytest.approx([0.127] * 4 + [0.254] * 4 + [0.381] * 4, rel=1e-9)
    in_step = engine.lockstep(4)
    assert in_step.ttft_s == pytest.approx(0.023, rel=1e-12) and in_step.request_rate == pytest.approx(4 / 0.127)


def test_a_benchmark_spreads_its_clients_and_requests_over_the_replicas_and_states_its_run_and_its_bound():
    # 2 replicas, 5 clients, 20 requests: one replica has 2 clients and 8 requests, the other 3 and 12
    two = Deployment("llama3-8b", "h100", 2, tensor_parallel=1)
    engine = deployment_engine(two, 1000, 200)
    runs = simulate_benchmark(engine, 2, 8), simulate_benchmark(engine, 3, 12)
    result = benchmark_estimate(two, 1000, 200, 5, 20)
    ttft = np.concatenate([run.ttft_s for run in runs])
    makespan = max(run.finish_s.max() for run in runs)
    assert result.ttft_s == pytest.approx(ttft.mean(), rel=1e-12)
    assert result.output_tokens_per_s == pytest.approx(20 * 200 / makespan, rel=1e-12)
    assert result.ttft_p99_s >= result.ttft_s and result.tpot_p99_s >= result.tpot_s
    assert result.bound.ttft_s <= ttft.min() and result.bound.tpot_s <= result.tpot_s
    assert result.bound.output_tokens_per_s >= result.output_tokens_per_s
    data = json.loads(json.dumps(result.as_dict(), allow_nan=False))
    assert (data["concurrency"], data["requests"]) == (5, 20)
    assert dict(result.rows())["load"].startswith("a benchmark of 20 requests from 5 clients")


def test_a_benchmarks_start_sets_the_p99_first_token_of_googles_published_tpu_runs():
    # vLLM on a TPU v6e-8, LLaMA-3.3-70B, 3,000 requests of 999 + 1,000 tokens from 64 and 128 clients that start
    # together, a 512-token budget (tpu-recipes @b709d73). The vLLM profile's TPU steps are fitted on these runs'
    # TPOT and tokens/s; their first tokens no fit sees. Priced as the benchmark ran, mean and p99 TTFT come out
    # within 1.5x (measured 0.70-0.77 of it); the steady closed loop, whose clients have drifted apart, puts the p99
    # 6-13 times too early: the p99 is the first burst's.
    rows = sweep_rows(source="AI-Hypercomputer/tpu-recipes")
    assert [row.concurrency for row in rows] == [64, 128]
    for row in rows:
        run = benchmark_estimate(row.deployment(), row.input_len, row.output_len, row.concurrency, row.requests,
                                 efficiency="vllm", token_budget=512)
        steady = load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency,
                               efficiency="vllm", token_budget=512)
        assert 1 / 1.5 < row.ttft_s / run.ttft_s < 1.5 and 1 / 1.5 < row.ttft_p99_s / run.ttft_p99_s < 1.5, row.label
        assert row.ttft_p99_s / steady.ttft_p99_s > 5, row.label
        assert row.ttft_s >= run.bound.ttft_s and row.tpot_s >= run.bound.tpot_s, row.label
        assert row.output_tokens_per_s <= run.bound.output_tokens_per_s, row.label


def test_a_prefill_first_burst_runs_its_prompts_alone_while_the_decodes_wait_as_derived_by_hand():
    # the same engine with a 200-token budget, no front end, 4 requests at once. Prefill-first: two steps of two
    # prompts each, 10 + 200 x 0.02 = 14 ms apiece, the first pair's decodes waiting (first tokens at 14 and 28 ms);
    # then 10 decode steps of 10.4 ms for all four, ending at 132 ms, so the first pair's TPOT is (132 - 14) / 10.
    # Mixed, the second step carries the first pair's decodes and only 198 prompt tokens, so a prompt spills over.
    engine = Engine(_linear(0.010, 1e-4, 2e-5), input_len=100, output_len=11, max_batch=4, token_budget=200)
    run = simulate_burst(engine, 4, "prefill-first")
    assert run.ttft_s == pytest.approx([0.014, 0.014, 0.028, 0.028], rel=1e-9)
    assert run.finish_s == pytest.approx([0.132] * 4, rel=1e-9)
    assert run.tpot_s == pytest.approx([0.0118, 0.0118, 0.0104, 0.0104], rel=1e-9)
    mixed = simulate_burst(engine, 4)
    assert mixed.ttft_s[:2] == pytest.approx([0.014] * 2) and mixed.ttft_s[3] > 0.028 + 0.010


def test_dstacks_fixed_length_sweep_run_prefill_first_misses_its_first_tokens_by_what_it_misses_its_steps():
    # dstack's DeepSeek-R1 sweeps (vLLM 0.7 and SGLang 0.4 on 8 H200 and 8 MI300X, TensorRT-LLM 0.17 on 8 H200; 500
    # requests of 3,200 + 800 tokens from 4 to 128 clients), run as benchmarks on prefill-first engines with whole
    # prompts per step (no budget): the clients stay in step, and TTFT misses by the same factor as TPOT within 2x on
    # 24 of the 30 runs (the early-2025 engines are 1.7-5.7x slower than priced on both) and comes within 3x on 21.
    # The steady state's drifting clients miss TTFT by 6-320x (within 3x on none).
    rows = sweep_rows(source="dstackai/benchmarks")
    assert len(rows) == 30
    same, within, steady = 0, 0, 0
    for row in rows:
        run = benchmark_estimate(row.deployment(), row.input_len, row.output_len, row.concurrency, row.requests,
                                 token_budget=None, schedule="prefill-first")
        ttft, tpot = row.ttft_s / run.ttft_s, row.tpot_s / run.tpot_s
        same += 1 / 2 <= ttft / tpot <= 2
        within += 1 / 3 <= ttft <= 3
        steady_ttft = row.ttft_s / load_estimate(row.deployment(), row.input_len, row.output_len,
                                                 concurrency=row.concurrency).ttft_s
        steady += 1 / 3 <= steady_ttft <= 3
        assert row.ttft_s >= run.bound.ttft_s and row.tpot_s >= run.bound.tpot_s, row.label
    assert same >= 22 and within >= 19 and steady == 0


@functools.cache
def _cookbook_started(schedule):
    """(measured / estimated TTFT, the row, its estimate) of the cookbook's runs priced as bench_serving ran them:
    its clients start together, 5 requests each (the random lengths at their means)."""
    rows = [row for row in sweep_rows(engine="sglang") if "cookbook" in row.engine]
    runs = [(row, benchmark_estimate(row.deployment(), row.input_len, row.output_len, row.concurrency, row.requests,
                                     schedule=schedule)) for row in rows]
    return tuple((row.ttft_s / run.ttft_s, row, run) for row, run in runs)


@for_each(["mixed", "prefill-first"])
def test_the_cookbooks_runs_beat_a_synchronized_starts_bound_only_where_the_a100_clients_did_not_start_together(
        schedule):
    # at 64 and 100 clients the A100 runs' mean first token beats the bound of a synchronized start, so those clients
    # did not start together (or their shortest prompts went first); every other run stays above it
    beaten = {(row.chip, row.concurrency) for _, row, run in _cookbook_started(schedule)
              if row.ttft_s < run.bound.ttft_s}
    assert beaten == {("a100", 64), ("a100", 100)}


@for_each(["mixed", "prefill-first"])
def test_sglangs_published_closed_loops_run_as_the_benchmark_started_keep_their_ttft_within_two_times(schedule):
    # TTFT within 2x on 40 of 56 run mixed and 36 prefill-first (SGLang's own schedule; lengths that vary twofold keep
    # its clients from staying in step, which the mixed schedule's drift stands for), against 17 for the steady state.
    # The misses: four A100 runs from 16 clients up, whose p99 is far below a synchronized start's; Qwen3-235B at 64
    # clients on B200 (and, prefill-first, at 16, with DeepSeek-R1 at 64); Llama 4 Scout and Maverick at 100 clients
    # on MI300X, whose first tokens come about 3x sooner than a synchronized start prices (their bound not beaten);
    # DeepSeek-V3.1 at 64 clients on MI300X; and one-client runs of fine-grained experts on B200 and MI300X (DeepSeek,
    # the Qwen3-Next design, MiniMax-M2.5), 2.1-2.9x slower than estimated: their prefill is priced too fast
    assert _within([ratio for ratio, _, _ in _cookbook_started(schedule)], 2) >= (0.7 if schedule == "mixed" else 0.6)


def test_identical_requests_on_a_mixed_engine_stay_in_waves_when_a_burst_takes_few_steps_and_drift_apart_when_many():
    # LLaMA-3-8B on one H100, 64 clients of 1,000 + 200 tokens, an 8,192-token budget: the first burst's prompts go
    # through in 8 steps of a 200-step round, the clients who started first decode through those slower steps and
    # come back with the others, so the waves re-form round after round (the median first token of the last 640
    # requests is over 5 times the steady state's, which assumes clients spread evenly). Google's TPU v6e runs: 128
    # prompts of 1,000 tokens at 512 a step take 250 steps of a 1,000-step round, and the clients spread out (the
    # last 600 requests' median within 1.25x of the steady state's first token)
    engine = deployment_engine(LLAMA_8B, 1000, 200)
    waves = np.asarray(simulate_benchmark(engine, 64, 3000).ttft_s)[-640:]
    assert np.median(waves) > 5 * load_estimate(LLAMA_8B, 1000, 200, concurrency=64).ttft_s
    row = next(r for r in sweep_rows(source="AI-Hypercomputer/tpu-recipes") if r.concurrency == 128)
    engine = deployment_engine(row.deployment(), row.input_len, row.output_len, "vllm", 512)
    spread = np.asarray(simulate_benchmark(engine, row.concurrency, row.requests).ttft_s)[-600:]
    steady = load_estimate(row.deployment(), row.input_len, row.output_len, concurrency=row.concurrency,
                           efficiency="vllm", token_budget=512).ttft_s
    assert 1 / 1.25 < np.median(spread) / steady < 1.25


def test_a_closed_loop_served_faster_than_the_saturation_rate_says_why():
    # LLaMA-3-70B in FP8 on two H100s, 1,000 + 1,000 tokens: the full batch (339 per replica) runs outside a CUDA graph
    # (more than 256 sequences), so it serves fewer requests per second than 250 clients' batch of 249, which runs in
    # one: the saturation rate (the full batch's, where an open loop's queue ends up) is below what 250 clients get,
    # and the words say why; at 100 clients, served below it, they say nothing more
    d = Deployment("llama3-70b", "h100", 2, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    loaded = load_estimate(d, 1000, 1000, concurrency=250)
    full = load_estimate(d, 1000, 1000, concurrency=loaded.max_batch)
    assert loaded.decode_batch <= CUDA_GRAPH_MAX_BATCH < loaded.max_batch
    assert full.request_rate <= loaded.saturation_rate * 1.001 < loaded.request_rate
    words = dict(loaded.rows())["load"]
    assert "past the 256 sequences a GPU engine runs in a CUDA graph" in words and "served faster" in words
    assert dict(load_estimate(d, 1000, 1000, concurrency=100).rows())["load"].endswith("requests/s")
