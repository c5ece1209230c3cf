"""Property-based tests (Hypothesis) of every public function of the closed-form modules: bad input gets a
ValueError naming the argument; edge input gets a ValueError or a finite, non-negative result. Never a TypeError from
deep inside, never NaN, inf or a negative byte count.

Each function has a spec: a known-good call (its base arguments, which must succeed with a sane result) and the kind
of each argument. The kind gives the values Hypothesis draws: good edge values (0 where allowed, 1, large, NumPy
scalars, whole floats) and bad ones (negative, fractional where an integer is needed, NaN, inf, bools, strings that
look like numbers, None, unknown names). `test_every_public_function_has_a_spec` enumerates the modules, so a new
public function without a spec fails.

Examples are derandomized (the same on every run) and few per function, so the whole file runs in a few seconds.
"""

import dataclasses
import importlib
import inspect
import math
import pkgutil
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scaling_lib
import scaling_lib.holdout
import scaling_lib.quantization
from tests import REPO, examples, for_each
from scaling_lib.estimate import Deployment
from scaling_lib.frontier import sweep
from scaling_lib.load import Engine
from scaling_lib.measurements import pope_rows
from scaling_lib.models import get_model
from scaling_lib.plan import plan
from scaling_lib.prefix_cache import CacheTiers, chat_workload
from scaling_lib.simulator import ServingConfig, trace_workload
from tests.math.fuzz_more_specs import ITEMS, XFAIL, extend, is_input_class

MODULES = sorted(m.name for m in pkgutil.iter_modules(scaling_lib.__path__) if not m.ispkg and not m.name.startswith("_"))
SETTINGS = settings(max_examples=examples(25), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

NAN, INF = float("nan"), float("inf")
TINY = get_model("llama3-8b").with_(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16,
                                     vocab_size=256, name="tiny")
MODELS = ("llama3-8b", "llama2-13b", "llama3-70b", "palm-8b", "sb7-worked", TINY, TINY.with_(sliding_window=8))
MOE = get_model("sb7-worked").with_(n_experts=16, n_active_experts=2)
CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=4, max_context_len=4096)
WORKLOAD = trace_workload([(0.0, 100, 5), (0.01, 300, 3), (0.02, 50, 1)])
DEPLOYMENT = Deployment("llama3-70b", "tpu-v5e", 16)
POPE = pope_rows()[0]
POINTS = sweep("palm-62b", "tpu-v4", "decode", chip_counts=(8, 16), batches=(8, 64))
CHAT = chat_workload(n_sessions=4, turns=3, system_len=100, user_len=20, output_len=20, rate_per_s=1.0, think_s=5.0)
TIERS = CacheTiers(hbm_bytes=1e6, host_bytes=1e8, host_bandwidth=16e9)


def _ints(low, high):
    return st.one_of(st.sampled_from(sorted({low, low + 1, high})), st.integers(low, high),
                     st.integers(low, high).map(np.int64), st.integers(low, high).map(float))


def _reals(low, high):
    return st.one_of(st.sampled_from([low, high]), st.floats(low, high), st.floats(low, high).map(np.float64),
                     st.integers(int(math.ceil(low)), int(high)))


# SGLang's fp8 layer on one B200: every row of one engine, chip and format (`kernels.fit_moe_layer`)
_MOE_ROWS = [r for r in scaling_lib.kernels.moe_kernel_rows() if r.engine.startswith("SGLang") and r.chip == "b200"
             and r.dtype == "fp8"]
# kind -> (good values, bad values). Kinds ending in "?" also accept None.
GOOD = {
    "count": _ints(1, 1 << 20), "small": _ints(1, 48), "count0": _ints(0, 1 << 20), "small0": _ints(0, 16),
    "real": _reals(1e-3, 1e15), "signed": _reals(-1e15, 1e15), "real0": _reals(0.0, 1e15), "prob": _reals(0.0, 1.0), "frac": _reals(1e-3, 1.0),
    "model": st.sampled_from(MODELS), "moe": st.sampled_from([MOE, MOE.with_(n_experts=8, n_active_experts=1)]),
    "chip": st.sampled_from(scaling_lib.hardware.chip_names() + ("ironwood", "V5E")),
    "dtype": st.sampled_from(["bf16", "fp8", "int8", "int4", "fp32", "fp16"]),
    "flag": st.booleans(), "mesh": st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3).map(tuple),
    "lengths": st.lists(st.integers(0, 4096), min_size=1, max_size=8),
    "layout": st.sampled_from(scaling_lib.layouts.LAYOUTS), "convention": st.sampled_from(scaling_lib.collectives.CONVENTIONS),
    "phase": st.sampled_from(scaling_lib.layouts.PHASES),
    "sharding": st.sampled_from(scaling_lib.attention_sharding.ATTENTION_SHARDINGS),
    "op": st.sampled_from(scaling_lib.collectives.COLLECTIVES), "engine": st.sampled_from(scaling_lib.simulator.ENGINES),
    "schedule": st.sampled_from(scaling_lib.simulator.SCHEDULES),
    "network": st.sampled_from(["dcn", "ici"]), "placement": st.sampled_from(["batch-split", "replicated"]),
    "unit": st.sampled_from(["s", "ms", "GB", "GiB", "tokens", "TFLOP/s", "%", ""]),
    "text": st.sampled_from(["4.98 ms", "1,920 tokens", "6.25 GiB", "240", ".5 s", "-3 us", "1e3 B"]),
    "hf": st.sampled_from(sorted(str(p) for p in (REPO / "book" / "data" / "hf_configs").glob("*.json"))),
    "qdtype": st.sampled_from(scaling_lib.quantization.ROUNDED_DTYPES),
    "metric": st.sampled_from(scaling_lib.frontier.METRICS), "routing": st.sampled_from(scaling_lib.prefix_cache.ROUTINGS),
    "counts": st.lists(st.integers(1, 64), min_size=1, max_size=3).map(tuple),
    "row": st.sampled_from(pope_rows()), "points": st.sampled_from([POINTS, POINTS[:1], (), list(POINTS)]),
    "chat": st.sampled_from([CHAT]), "tiers": st.sampled_from([TIERS, CacheTiers(0, 0, 1e9)]),
    "algorithm": st.sampled_from(scaling_lib.collectives.SWITCH_ALGORITHMS),
    "weights": st.sampled_from([(), ("embed",), "embed", ["wq", "w_up"], frozenset({"final_norm"})]),
    "sweep_engine": st.sampled_from(["vllm", "SGLang", "tensorrt-llm"]),
    "sweep_source": st.sampled_from(["dstackai/benchmarks", "sgl-project/sgl-cookbook", "gpustack/gpustack"]),
    "sources": st.sampled_from([("gpustack/gpustack",), ["sgl-project"], ("dstackai", "gpustack")]),
    "moe_engine": st.sampled_from(["", "SGLang", "TensorRT-LLM"]),
    "moe_engine_name": st.sampled_from(["SGLang", "TensorRT-LLM"]),
    "moe_rows": st.sampled_from([_MOE_ROWS, _MOE_ROWS[:120], tuple(_MOE_ROWS[60:])]),
}
_NUMBERISH = ["8", "0.4", True, None, [1], NAN]
BAD = {
    "count": [0, -1, 2.5, 1e-9, INF, 2**63, *_NUMBERISH], "count0": [-1, 0.5, -INF, 2**63, *_NUMBERISH],
    "real": [0, -1.0, -1e-300, INF, -INF, *_NUMBERISH], "real0": [-1.0, -1e-300, INF, *_NUMBERISH],
    "signed": [INF, -INF, *_NUMBERISH], "prob": [1.5, -0.1, INF, *_NUMBERISH], "frac": [0, 1.5, -0.2, INF, *_NUMBERISH],
    "model": ["gpt-9", 3, None, ["llama3-8b"]], "chip": ["tpu-v9", 3, None, ["h100"]],
    "dtype": ["fp7", 8, None, ["bf16"]], "flag": [1, 0, "yes", None, NAN],
    "mesh": [(0,), (-2, -4), (2.5, 1), (2, 2, 2, 2), (), 8, "2x2", [None]],
    "lengths": [[-1], [1.5], [], "abc", [True], [NAN], None],
    "choice": ["nope", 3, None, ["x"]], "unit": ["furlongs", 3, None], "text": ["abc", "1,5 ms", "nan s", None, []],
    "hf": [None, 3, "no/such/config.json", {}, {"model_type": "gpt2"}, {"model_type": "llama"}],
    "qdtype": ["fp7", "bf16", "fp32", 8, None, ["int8"]],
    "counts": [(), [0], [-1], [2.5], "8", 8, None, [True], [NAN], ["8"]],
    "row": [None, 3, "palm-540b", ("palm-540b", "low latency", "decode")],
    "points": [None, 3, "abc", [1], [None], [NAN], [POPE]],
    "chat": [None, 3, "abc", WORKLOAD], "tiers": [None, 3, (1e9, 1e9, 1e9)],
    "weights": [None, 3, "nope", ("embed", 3), [None], {"embed": 1}],
    "sources": ["gpustack", (), [""], (3,), {"gpustack": 1}, 3],
    "moe_engine": ["vllm", "sglang", 3, None, ["SGLang"]],
    "moe_engine_name": ["", "vllm", "sglang", 3, None, ["SGLang"]],
    "moe_rows": [None, 3, [], "abc", [None], _MOE_ROWS[:1] + [next(r for r in scaling_lib.kernels.moe_kernel_rows()
                                                                  if r.engine.startswith("TensorRT"))]],
}
BAD.update(small=BAD["count"], small0=BAD["count0"], moe=BAD["model"] + ["llama3-8b"],
           axes=[m for m in BAD["mesh"] if m != (2, 2, 2, 2)])  # any number of axes (a layout takes 1 to 3)
GOOD["axes"] = GOOD["mesh"]
for _choice in ("sweep_engine", "sweep_source", "layout", "convention", "phase", "sharding", "op", "engine", "network", "placement", "metric",
                "routing", "algorithm", "schedule"):
    BAD[_choice] = BAD["choice"]


NAME_LOOKUPS = ("model", "moe", "chip", "dtype", "unit", "text", "op", "hf")


def spec(base, **kinds):
    return base, kinds


M = "llama3-70b"
SPECS = {
    "calibration.all_rows": spec({}),
    "calibration.compare": spec(dict(row=POPE), kv_dtype="dtype"),
    "calibration.comparisons": spec({}, kv_dtype="dtype"),
    "calibration.fit_efficiency": spec(dict(ratio_of=lambda efficiency: [efficiency.mfu / 0.4, efficiency.hbm / 0.8],
                                            fields=("mfu", "hbm"), rounds=2), rounds="small", low="frac"),
    "calibration.fit_typical": spec({}),
    "calibration.predicted_latency": spec(dict(row=POPE)),
    "calibration.split_of": spec(dict(row=POPE)),
    "calibration.summarize": spec(dict(items=ITEMS)),
    "calibration.validation_summary": spec({}),
    "collectives.bus_bandwidth": spec(dict(op="all-reduce", array_bytes=1e6, seconds=1e-3, n_shards=8), op="op",
                                      array_bytes="real0", seconds="real", n_shards="count"),
    "collectives.collective_bandwidth": spec(dict(chip="tpu-v5e"), chip="chip"),
    "hops.collective_hops": spec(dict(op="all-reduce", n_shards=8), op="op", n_shards="count",
                                        wraparound="flag"),
    "collectives.collective_time": spec(dict(op="all-reduce", array_bytes=1e6, chip="tpu-v5e", n_shards=8), op="op",
                                        array_bytes="real0", chip="chip", n_shards="count", wraparound="flag?",
                                        algorithm="algorithm?"),
    "collectives.torus_collective_time": spec(dict(op="all-reduce", array_bytes=1e6, chip="tpu-v5e", n_shards=8),
                                              op="op", array_bytes="real0", chip="chip", n_shards="count",
                                              wraparound="flag?"),
    "collectives.latency_bound_bytes": spec(dict(chip="tpu-v5e", n_shards=8), chip="chip", n_shards="count"),
    "collectives.mesh_collective": spec(dict(op="all-reduce", array_bytes=1e6, chip="tpu-v5e", mesh_shape=(4, 4)),
                                        op="op", array_bytes="real0", chip="chip", mesh_shape="axes",
                                        wraparound="flag?"),
    "collectives.slice_hops": spec(dict(op="all-reduce", chip="tpu-v5e", mesh_shape=(4, 2)), op="op", chip="chip",
                                   mesh_shape="axes", wraparound="flag?", whole_slice="flag?"),
    "collectives.slice_wraps": spec(dict(chip="tpu-v4", mesh_shape=(4, 4, 4)), chip="chip", mesh_shape="axes",
                                    wraparound="flag?", whole_slice="flag?"),
    "collectives.transfer_bandwidth": spec(dict(chip="tpu-v5e", n_chips=16), chip="chip", n_chips="count",
                                           network="network"),
    "estimate.decode_step": spec(dict(deployment=DEPLOYMENT, batch=32, context_len=8192), batch="count",
                                 context_len="real0"),
    "estimate.decode_time": spec(dict(deployment=DEPLOYMENT, batch=32, context_len=8192, steps=16), batch="count",
                                 context_len="real0", steps="small"),
    "estimate.largest_tensor_parallel": spec(dict(chip="mi300x"), chip="chip"),
    "estimate.max_batch": spec(dict(deployment=DEPLOYMENT, context_len=8192), context_len="real"),
    "estimate.offline_estimate": spec(dict(deployment=DEPLOYMENT, input_len=2048, output_len=256),
                                      input_len="count", output_len="count"),
    "estimate.offline_throughput": spec(dict(model=M, chip="tpu-v5e", n_chips=16, input_len=2048, output_len=256),
                                        model="model", chip="chip", n_chips="count", input_len="count",
                                        output_len="count"),
    "estimate.prefill": spec(dict(deployment=DEPLOYMENT, prompt_len=2048), prompt_len="count", batch="count"),
    "estimate.report": spec(dict(model=M, chip="tpu-v5e", n_chips=16), model="model", chip="chip", n_chips="count",
                            context_len="count"),
    "efficiency.resolve_efficiency": spec(dict(efficiency=None)),
    "estimate.step_estimate": spec(dict(deployment=DEPLOYMENT, decode_batch=32, decode_context=8192),
                                   decode_batch="real0", decode_context="real0"),
    "inference.full_hbm_step_time": spec(dict(chip="tpu-v5e"), chip="chip"),
    "kernels.kernel_ceiling": spec(dict(chip="h100", dtype="fp8"), chip="chip", dtype="dtype"),
    "kernels.fit_moe_layer": spec(dict(rows=_MOE_ROWS), rows="moe_rows"),
    "kernels.moe_layer_model": spec(dict(engine="SGLang", chip="b200", dtype="fp8"), engine="moe_engine_name",
                                    chip="chip", dtype="dtype"),
    "memory.moe_elementwise_elements": spec(dict(d_model=2048, d_expert=768, k=8), d_model="count", d_expert="count",
                                            k="count", matrices="count"),
    "kernels.expert_matmul_fraction": spec(dict(chip="b200", dtype="nvfp4", d_model=2048, d_expert=768), chip="chip",
                                           dtype="dtype", d_model="count", d_expert="count"),
    "measurements.collective_rows": spec({}),
    "measurements.nccl_rows": spec({}),
    "measurements.pope_row": spec(dict(model="palm-540b", scenario="low latency", phase="decode")),
    "measurements.pope_rows": spec({}),
    "measurements.trtllm_rows": spec({}),
    "measurements.sweep_rows": spec({}, chip="chip?", engine="sweep_engine?", source="sweep_source?"),
    "measurements.burst_rows": spec({}),
    "memory.kv_head_groups": spec(dict(model=M), model="model"),
    "memory.kv_replication": spec(dict(model=M, n_chips=16), model="model", n_chips="count",
                                  kv_placement="placement"),
    "quantization.step_ratio_grid": spec(dict(model=M, chip="ironwood", n_chips=8, batches=(1, 64),
                                              context_lens=(1024, 32768)), model="model", chip="chip",
                                         n_chips="count"),
    "sharding.decode_hops_per_layer": spec(dict(model=M, n_chips=16, batch=32), model="model", n_chips="small",
                                           batch="small"),
    "dtypes.bytes_per_element": spec(dict(dtype="bf16"), dtype="dtype"),
    "flops.attention_pairs": spec(dict(query_len=4, kv_len=8, window=None, skip_masked=True),
                                  query_len="small", kv_len="count", window="count?", skip_masked="flag"),
    "flops.cached_generation_flops": spec(dict(model=M, prompt_len=16, n_tokens=8, batch=2, skip_masked=False,
                                               cache_len=None), model="model", prompt_len="count", n_tokens="small",
                                          batch="count", skip_masked="flag", cache_len="count?"),
    "flops.decode_step_flops": spec(dict(model=M, context_len=100, batch=2, skip_masked=False), model="model",
                                    context_len="count", batch="count", skip_masked="flag"),
    "flops.forward_flops": spec(dict(model=M, tokens=100, batch=2, skip_masked=False), model="model",
                                tokens="count", batch="count", skip_masked="flag"),
    "flops.generation_flops_curve": spec(dict(model=M, prompt_len=16, n_tokens=8, batch=1, cached=True,
                                              skip_masked=False, cache_len=None), model="model", prompt_len="count",
                                         n_tokens="small", batch="count", cached="flag", skip_masked="flag",
                                         cache_len="count?"),
    "flops.matmul_params": spec(dict(model=M), model="model"),
    "flops.naive_generation_flops": spec(dict(model=M, prompt_len=16, n_tokens=8, batch=1, skip_masked=False),
                                         model="model", prompt_len="count", n_tokens="small", batch="count",
                                         skip_masked="flag"),
    "frontier.choose": spec(dict(model="palm-62b", chip="tpu-v4", phase="decode", chip_counts=(8, 16),
                                 batches=(8, 64)), model="model", chip="chip", phase="phase", metric="metric",
                            latency_target_s="real?", chip_counts="counts", batches="counts"),
    "frontier.choose_for": spec(dict(row=POPE), row="row"),
    "frontier.choose_layout": spec(dict(model="palm-540b", chip="tpu-v4", n_chips=64, phase="decode", batch=64),
                                   model="model", chip="chip", n_chips="small", phase="phase", batch="count",
                                   tie="prob"),
    "frontier.layer_collectives": spec(dict(model="palm-540b", n_chips=64, phase="decode", batch=64,
                                            ffn_layout="2d-ws", attention_sharding="batch"), model="model",
                                       n_chips="small", phase="phase", batch="count", ffn_layout="layout",
                                       attention_sharding="sharding", context_len="count", weight_dtype="dtype",
                                       activation_dtype="dtype", mesh_shape="mesh?", parallel_block="flag",
                                       chip="chip"),
    "frontier.layout_cost": spec(dict(model="palm-540b", chip="tpu-v4", n_chips=64, phase="decode", batch=64,
                                      ffn_layout="2d-ws", attention_sharding="batch"), model="model", chip="chip",
                                 n_chips="small", phase="phase", batch="count", ffn_layout="layout",
                                 attention_sharding="sharding", context_len="count", weight_dtype="dtype",
                                 kv_dtype="dtype", activation_dtype="dtype", mesh_shape="mesh?",
                                 parallel_block="flag", overlap="flag"),
    "frontier.longest_context": spec(dict(model="palm-540b", chip="tpu-v4", n_chips=64, batch=128), model="model",
                                     chip="chip", n_chips="count", batch="count", attention_sharding="sharding",
                                     weight_dtype="dtype", kv_dtype="dtype"),
    "frontier.measured_mfu": spec(dict(row=POPE), row="row"),
    "frontier.measured_step_s": spec(dict(row=POPE), row="row"),
    "frontier.pareto_frontier": spec(dict(points=POINTS), points="points"),
    "frontier.padded_heads": spec(dict(n_heads=48, n_chips=64), n_heads="count", n_chips="count"),
    "frontier.sweep": spec(dict(model="palm-62b", chip="tpu-v4", phase="decode", chip_counts=(8, 16), batches=(8, 64)),
                           model="model", chip="chip", phase="phase", chip_counts="counts", batches="counts"),
    "hardware.chip_names": spec({}),
    "hops.cube_torus": spec(dict(n_chips=1024), n_chips="count"),
    "hops.decode_collective_latency": spec(dict(n_layers=80, collectives_per_layer=2, hops=16, hop_latency_s=1e-6),
                                           n_layers="count", collectives_per_layer="small", hops="count0",
                                           hop_latency_s="real", fixed_s="real0"),
    "hops.latency_bound_time": spec(dict(hops=16, hop_latency_s=1e-6), hops="count0", hop_latency_s="real",
                                    fixed_s="real0", rounds="small"),
    "hops.mesh_hops": spec(dict(op="all-reduce", mesh_shape=(4, 2)), op="op", mesh_shape="axes", wraparound="flag"),
    "hops.ring_hops": spec(dict(mesh_shape=(4, 4, 4)), mesh_shape="axes", op="op"),
    "hops.torus_diameter": spec(dict(mesh_shape=(8, 8, 16)), mesh_shape="axes", wraparound="flag"),
    "hardware.get_chip": spec(dict(name="tpu-v5e"), name="chip"),
    "inference.decode_step_time": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=32, context_len=8192),
                                       model="model", chip="chip", n_chips="count", batch="count0",
                                       context_len="real0", weight_dtype="dtype", kv_dtype="dtype",
                                       compute_dtype="dtype"),
    "inference.decode_step_time_kv_heads": spec(dict(model="llama2-13b", n_kv_heads=8, chip="tpu-v5e", n_chips=8,
                                                     batch=16, context_len=8192), model="model", n_kv_heads="small",
                                                chip="chip", n_chips="count", batch="count0", context_len="real0",
                                                weight_dtype="dtype", kv_dtype="dtype"),
    "inference.decode_throughput": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=32, context_len=8192),
                                        model="model", chip="chip", n_chips="count", batch="count",
                                        context_len="real0", kv_dtype="dtype"),
    "inference.explain_decode": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=32, context_len=8192),
                                     model="model", chip="chip", n_chips="count", batch="count", context_len="count",
                                     weight_dtype="dtype", kv_dtype="dtype", compute_dtype="dtype"),
    "inference.kv_compute_crossover_context": spec(dict(model=M, chip="tpu-v5e"), model="model", chip="chip",
                                                   kv_dtype="dtype", compute_dtype="dtype"),
    "inference.prefill_time": spec(dict(model=M, chip="tpu-v5e", n_chips=16, prompt_len=8192, mfu=0.4),
                                   model="model", chip="chip", n_chips="count", prompt_len="real", mfu="frac",
                                   batch="count", compute_dtype="dtype"),
    "inference.step_time_bound": spec(dict(batch=8, kv_bytes_per_sequence=1e9, param_bytes=26e9, param_count=13e9,
                                           chip="tpu-v5e", n_chips=8), batch="real0", kv_bytes_per_sequence="real0",
                                      param_bytes="real", param_count="real", chip="chip", n_chips="count",
                                      compute_dtype="dtype"),
    "kv_levers.cross_layer_kv_bytes": spec(dict(model=M, tokens=4096, share_every=2, batch=4), model="model",
                                           tokens="count0", share_every="small", batch="small", dtype="dtype"),
    "kv_levers.decode_attention_cost": spec(dict(model=M, context_len=8192), model="model", context_len="real",
                                            kv_dtype="dtype", absorbed="flag"),
    "kv_levers.evenly_ragged_lengths": spec(dict(context_len=8192, batch=4), context_len="count", batch="small"),
    "kv_levers.kv_footprint": spec(dict(model=M, lengths=[100, 2000]), model="model", lengths="lengths",
                                   dtype="dtype", window="count?", global_every="small?", share_every="small",
                                   block_size="count?"),
    "kv_levers.kv_lever_table": spec(dict(model="llama2-13b", context_len=8192, batch=8), model="model",
                                     context_len="count", batch="small", window="count", global_every="small",
                                     share_every="small", kv_dtype="dtype", block_size="count"),
    "kv_levers.local_global_kv_bytes": spec(dict(model=M, tokens=8192, window=1024, global_every=6, batch=2),
                                            model="model", tokens="count0", window="count", global_every="small",
                                            batch="small", dtype="dtype"),
    "kv_levers.ragged_kv_reads": spec(dict(lengths=[8, 5, 3], block_size=4), lengths="lengths", block_size="count"),
    "attention_sharding.attention_collectives": spec(
        dict(attention_sharding="batch", batch=512, n_heads=48, head_dim=256, mesh_shape=(4, 4, 4)),
        attention_sharding="sharding", batch="count", n_heads="count", head_dim="count", mesh_shape="mesh",
        activation_dtype="dtype"),
    "layouts.block_model": spec(dict(d_model=32, d_ff=64), d_model="count", d_ff="count"),
    "layouts.best_layout": spec(dict(model="palm-540b", chip="tpu-v4", mesh_shape=(4, 4, 4), tokens_per_batch=4096),
                                model="model", chip="chip", mesh_shape="mesh", tokens_per_batch="real",
                                phase="phase"),
    "layouts.comm_volume_curves": spec(dict(model="palm-540b", mesh_shape=(4, 4, 4), tokens=[64, 4096, 2**20]),
                                       model="model", mesh_shape="mesh", weight_dtype="dtype",
                                       activation_dtype="dtype"),
    "context_limits.context_length_table": spec(dict(chip="tpu-v4", n_chips=64, batches=(128, 512),
                                                     kv_fraction=0.3), chip="chip", n_chips="count",
                                                kv_fraction="frac"),
    "utilization.decode_latency_gap": spec(dict(model="palm-540b", chip="tpu-v4", n_chips=64, batch=64,
                                                context_len=2048, measured_step_s=0.029), model="model", chip="chip",
                                           n_chips="count", batch="count0", context_len="real0",
                                           measured_step_s="real", weight_dtype="dtype", kv_dtype="dtype"),
    "layouts.ffn_collectives": spec(dict(layout="2d-ws", model="palm-540b", tokens=4096, mesh_shape=(4, 4, 4)),
                                    layout="layout", model="model", tokens="real", mesh_shape="mesh",
                                    weight_dtype="dtype", activation_dtype="dtype"),
    "layouts.ffn_comm_time": spec(dict(layout="2d-ws", model="palm-540b", chip="tpu-v4", tokens=4096,
                                       mesh_shape=(4, 4, 4)), layout="layout", model="model", chip="chip",
                                  tokens="real", mesh_shape="mesh", convention="convention", weight_dtype="dtype"),
    "layouts.ffn_comm_volume": spec(dict(layout="wg-x", model="palm-540b", tokens=4096, mesh_shape=(4, 4, 4)),
                                    layout="layout", model="model", tokens="real", mesh_shape="mesh",
                                    weight_dtype="dtype", activation_dtype="dtype"),
    "layouts.ffn_layer_time": spec(dict(layout="2d-ws", model="palm-540b", chip="tpu-v4", mesh_shape=(4, 4, 4),
                                        tokens_per_batch=64, phase="decode", context_len=2048),
                                   layout="layout", model="model", chip="chip", mesh_shape="mesh",
                                   tokens_per_batch="real", phase="phase", context_len="real0", n_chips="count?",
                                   convention="convention", weight_dtype="dtype", kv_dtype="dtype",
                                   compute_dtype="dtype"),
    "context_limits.kv_versus_weights": spec(dict(model="palm-540b-multihead", batch=512, context_len=2048),
                                      model="model", batch="count0", context_len="real0", kv_dtype="dtype",
                                      weight_dtype="dtype"),
    "layouts.layout_switch_points": spec(dict(model="palm-540b", chip="tpu-v4", mesh_shape=(4, 4, 4)),
                                         model="model", chip="chip", mesh_shape="mesh", convention="convention",
                                         weight_dtype="dtype"),
    "context_limits.max_context_length": spec(dict(model="palm-540b", chip="tpu-v4", n_chips=64, batch=128,
                                            attention_sharding="batch"), model="model", chip="chip", n_chips="count",
                                       batch="count", attention_sharding="sharding", kv_fraction="frac",
                                       kv_dtype="dtype"),
    "utilization.mbu": spec(dict(bytes_per_step=1e9, seconds=1e-3, chip="h100", n_chips=1), bytes_per_step="real",
                            seconds="real", chip="chip", n_chips="count"),
    "utilization.mfu": spec(dict(param_count=5.4e11, tokens=2**20, seconds=85.2, chip="tpu-v4", n_chips=64),
                        param_count="real", tokens="real", seconds="real", chip="chip", n_chips="count",
                        compute_dtype="dtype"),
    "layouts.optimal_2d_mesh": spec(dict(n_chips=64, model="palm-540b"), n_chips="small", model="model", chip="chip",
                                    convention="convention"),
    "collectives.ring_bytes_sent": spec(dict(collective=scaling_lib.collectives.Collective("all-gather", "weights", 1e6,
                                                                                   (4, 4)))),
    "layouts.wg_optimal_gather_size": spec(dict(tokens=4096, n_chips=64, d_ff=73728), tokens="real",
                                           n_chips="real", d_ff="real"),
    "layouts.wg_switch_tokens": spec(dict(model="palm-540b", gather_from=4, gather_to=16, n_chips=64), model="model",
                                     gather_from="count", gather_to="count", n_chips="count", weight_dtype="dtype",
                                     activation_dtype="dtype"),
    "layouts.ws_2d_crossover_chips": spec(dict(d_model=18432, d_ff=73728), d_model="real", d_ff="real",
                                          convention="convention"),
    "layouts.ws_2d_optimal_x": spec(dict(n_chips=64, d_model=18432, d_ff=73728), n_chips="real", d_model="real",
                                    d_ff="real", convention="convention"),
    "memory.kv_bytes_per_token": spec(dict(model=M), model="model", dtype="dtype"),
    "memory.elementwise_bytes_per_token": spec(dict(model=M), model="model", tensor_parallel="count",
                                               activation_dtype="dtype"),
    "memory.kv_cache_bytes": spec(dict(model=M, tokens=8192, batch=4), model="model", tokens="real0",
                                  batch="count0", dtype="dtype"),
    "memory.max_batch_size": spec(dict(model=M, chip="tpu-v5e", n_chips=16, context_len=8192), model="model",
                                  chip="chip", n_chips="count", context_len="real", weight_dtype="dtype",
                                  kv_dtype="dtype"),
    "memory.memory_footprint": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=8, context_len=8192),
                                    model="model", chip="chip", n_chips="count", batch="count0",
                                    context_len="real0", weight_dtype="dtype", kv_dtype="dtype"),
    "memory.memory_footprint_kv_heads": spec(dict(model="llama2-13b", n_kv_heads=8, chip="tpu-v5e", n_chips=8,
                                                  batch=16, context_len=8192), model="model", n_kv_heads="small",
                                             chip="chip", n_chips="count", batch="count0", context_len="real0",
                                             weight_dtype="dtype", kv_dtype="dtype"),
    "memory.param_bytes": spec(dict(model=M), model="model", dtype="dtype"),
    "memory.require_fit": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=8, context_len=8192), model="model",
                               chip="chip", n_chips="count", batch="count0", context_len="real0",
                               weight_dtype="dtype", kv_dtype="dtype", kv_placement="placement", n_kv_heads="small?"),
    "models.active_param_count": spec(dict(model=MOE), model="model"),
    "models.from_hf_config": spec(dict(path_or_dict=str(REPO / "book/data/hf_configs/llama-3.1-8b.json")),
                                  path_or_dict="hf"),
    "models.get_model": spec(dict(name=M), name="model"),
    "models.model_names": spec({}),
    "models.param_breakdown": spec(dict(model=MOE, active_only=True), model="model", active_only="flag"),
    "models.param_count": spec(dict(model=M), model="model"),
    "moe.capacity_buffer_bytes": spec(dict(n_experts=8, capacity=3, d_model=32), n_experts="count", capacity="count",
                                      d_model="count", dtype="dtype"),
    "moe.as_moe": spec(dict(model=M, n_experts=16, n_active_experts=2), model="model", n_experts="small",
                       n_active_experts="small"),
    "moe.expected_experts_touched": spec(dict(n_experts=16, n_active_experts=2, tokens=32), n_experts="count",
                                         n_active_experts="small", tokens="real0"),
    "moe.expert_sharded_memory": spec(dict(model=MOE, chip="tpu-v5e", expert_shards=16, model_shards=8),
                                      model="moe", chip="chip", expert_shards="small", model_shards="count",
                                      dtype="dtype"),
    "moe.moe_weights": spec(dict(model="sb7-worked", n_experts=16, n_active_experts=2), model="model",
                            n_experts="small", n_active_experts="small", dtype="dtype"),
    "moe.smallest_expert_sharded_slice": spec(dict(model=MOE, chip="tpu-v5e"), model="moe", chip="chip",
                                              slice_chips="counts", dtype="dtype"),
    "prefix_cache.chat_workload": spec(dict(n_sessions=4, turns=3, system_len=100, user_len=20, output_len=20,
                                            rate_per_s=1.0, think_s=5.0), n_sessions="small", turns="small",
                                       system_len="count", user_len="count", output_len="count", rate_per_s="real",
                                       think_s="real", seed="count0"),
    "prefix_cache.cached_prefill_cost": spec(dict(model="palm-540b", chip="tpu-v4", n_chips=64, new_tokens=64,
                                                  cached_tokens=1920, ffn_layout="2d-ws", attention_sharding="heads",
                                                  pad_heads=True),
                                             model="model", chip="chip", n_chips="small", new_tokens="count",
                                             cached_tokens="count0", ffn_layout="layout",
                                             attention_sharding="sharding", batch="count", weight_dtype="dtype",
                                             kv_dtype="dtype", mesh_shape="mesh?", pad_heads="flag"),
    "prefix_cache.route": spec(dict(workload=CHAT, model="llama3-8b", n_replicas=2, tiers=TIERS), workload="chat",
                               model="model", n_replicas="small", tiers="tiers", routing="routing",
                               kv_dtype="dtype"),
    "prefix_cache.simulate_chat": spec(dict(config=CONFIG, workload=CHAT, n_replicas=2, tiers=TIERS),
                                       workload="chat", n_replicas="small", tiers="tiers", routing="routing",
                                       engine="engine"),
    "moe.routing_all_to_all": spec(dict(model=MOE, chip="tpu-v5e", batch=16, expert_shards=8), model="moe",
                                   chip="chip", batch="count", expert_shards="small", activation_dtype="dtype"),
    "quantization.absmax_scale": spec(dict(amax=2.54), amax="real", dtype="qdtype"),
    "quantization.dot_error_bound": spec(dict(k=8192, x_absmax=1.0, w_absmax=0.05), k="count", x_absmax="real",
                                         w_absmax="real", weight_dtype="qdtype", act_dtype="qdtype?"),
    "quantization.rounding_bound": spec(dict(amax=2.54), amax="real", dtype="qdtype"),
    "quantization.quantization_table": spec(dict(model=M, chip="ironwood", n_chips=8, context_len=32768, batch=64),
                                            model="model", chip="chip", n_chips="count", context_len="real",
                                            batch="count"),
    "roofline.arithmetic_intensity": spec(dict(flops=1e12, bytes_moved=1e9), flops="real0", bytes_moved="real"),
    "roofline.attainable_flops": spec(dict(intensity=100, chip="tpu-v5e"), intensity="real0", chip="chip",
                                      compute_dtype="dtype"),
    "roofline.attention_bytes": spec(dict(query_len=1, kv_len=8192, n_heads=64, n_kv_heads=8, head_dim=128, batch=8),
                                     query_len="real", kv_len="real", n_heads="small", n_kv_heads="small",
                                     head_dim="real", batch="real", dtype="dtype"),
    "roofline.attention_flops": spec(dict(query_len=1, kv_len=8192, n_heads=64, head_dim=128, batch=8),
                                     query_len="real", kv_len="real", n_heads="real", head_dim="real", batch="real"),
    "roofline.attention_intensity": spec(dict(query_len=1, kv_len=8192, group_size=8), query_len="real",
                                         kv_len="real", group_size="real"),
    "roofline.critical_batch_from_rates": spec(dict(flops_per_s=2e11, bytes_per_s=2e10), flops_per_s="real",
                                               bytes_per_s="real", weight_dtype="dtype"),
    "roofline.critical_batch_size": spec(dict(chip="tpu-v5e"), chip="chip", weight_dtype="dtype",
                                         compute_dtype="dtype"),
    "roofline.explain_matmul": spec(dict(chip="tpu-v5e", batch=64), chip="chip", batch="real", d_in="real",
                                    d_out="real", weight_dtype="dtype", compute_dtype="dtype"),
    "roofline.fit_batch_roofline": spec(dict(batches=[1, 2, 4, 8, 64], seconds=[2e-3, 2e-3, 2e-3, 2e-3, 6.4e-3],
                                             n_floor=3), n_floor="small"),
    "roofline.matmul_bytes": spec(dict(batch=64, d_in=8192, d_out=8192), batch="real", d_in="real", d_out="real",
                                  activation_dtype="dtype", weight_dtype="dtype"),
    "roofline.matmul_flops": spec(dict(batch=64, d_in=8192, d_out=8192), batch="real", d_in="real", d_out="real"),
    "roofline.matmul_intensity": spec(dict(batch=64, d_in=8192, d_out=8192), batch="real", d_in="real",
                                      d_out="real", activation_dtype="dtype", weight_dtype="dtype"),
    "roofline.matmul_time": spec(dict(batch=64, d_in=8192, d_out=8192, chip="tpu-v5e"), batch="real", d_in="real",
                                 d_out="real", chip="chip", n_chips="count", activation_dtype="dtype",
                                 weight_dtype="dtype", compute_dtype="dtype"),
    "roofline.moe_critical_batch_size": spec(dict(chip="tpu-v5e", n_experts=16, n_active_experts=2), chip="chip",
                                             n_experts="count", n_active_experts="small", weight_dtype="dtype"),
    "roofline.ridge_point": spec(dict(chip="tpu-v5e"), chip="chip", compute_dtype="dtype"),
    "roofline.roofline_time": spec(dict(flops=1e12, bytes_moved=1e9, chip="tpu-v5e", n_chips=1), flops="real0",
                                   bytes_moved="real0", chip="chip", n_chips="count", compute_dtype="dtype"),
    "serving.default_transfer_bandwidth": spec(dict(chip="tpu-v5e", n_chips=16), chip="chip", n_chips="count"),
    "serving.kv_transfer_bytes": spec(dict(model=M, prompt_len=8192), model="model", prompt_len="real",
                                      kv_dtype="dtype"),
    "serving.kv_transfer_time": spec(dict(model=M, prompt_len=8192, chip="tpu-v5e", n_chips=16), model="model",
                                     prompt_len="real", chip="chip", n_chips="count", bandwidth="real?",
                                     kv_dtype="dtype"),
    "serving.prefill_latency": spec(dict(model=M, chip="tpu-v5e", n_chips=16, prompt_len=8192), model="model",
                                    chip="chip", n_chips="count", prompt_len="real", mfu="frac", batch="count",
                                    weight_dtype="dtype", compute_dtype="dtype"),
    "sequence_sharding.sequence_sharded_attention": spec(dict(model="palm-540b", chip="tpu-v5e", n_chips=16, batch=1,
                                                              context_len=131072), model="model", chip="chip",
                                                         n_chips="small", batch="count", context_len="count",
                                                         kv_dtype="dtype", activation_dtype="dtype",
                                                         mesh_shape="axes?"),
    "serving.prefill_saturating_batch": spec(dict(model=M, chip="tpu-v5e", prompt_len=128), model="model",
                                             chip="chip", prompt_len="count", mfu="frac", weight_dtype="dtype",
                                             compute_dtype="dtype"),
    "serving.prefill_free_batch": spec(dict(model=M, chip="tpu-v5e", prompt_len=128), model="model",
                                             chip="chip", prompt_len="count", mfu="frac", weight_dtype="dtype",
                                             compute_dtype="dtype"),
    "serving.prefill_saturating_tokens": spec(dict(model=M, chip="tpu-v5e"), model="model", chip="chip", mfu="frac",
                                              weight_dtype="dtype", compute_dtype="dtype"),
    "serving.prefill_to_decode_ratio": spec(dict(prefill_s=0.91, decode_step_s=0.019, decode_batch=32,
                                                 decode_steps=512), prefill_s="real", decode_step_s="real",
                                            decode_batch="count", decode_steps="count"),
    "serving.server_ratio": spec(dict(model=M, chip="tpu-v5e", prompt_len=8192, output_len=512, decode_batch=32,
                                      n_prefill_chips=16, n_decode_chips=16), model="model", chip="chip",
                                 prompt_len="real", output_len="count", decode_batch="count",
                                 n_prefill_chips="count", n_decode_chips="count", mfu="frac", kv_dtype="dtype"),
    "sharding.beta": spec(dict(chip="tpu-v5e"), chip="chip"),
    "sharding.decode_step_components": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=32, context_len=8192),
                                            model="model", chip="chip", n_chips="small", batch="small",
                                            context_len="real0", activation_dtype="dtype", kv_dtype="dtype"),
    "sharding.fsdp_decode_cost": spec(dict(model=M, chip="tpu-v5e", n_chips=8), model="model", chip="chip",
                                      n_chips="count", weight_dtype="dtype"),
    "sharding.weight_shapes": spec(dict(model=M), model="model"),
    "sharding.fsdp_gather_bytes": spec(dict(model=M), model="model", dtype="dtype", replicated="weights"),
    "models.tiny_transformer": spec({}, n_kv_heads="small", sliding_window="count?", n_heads="small",
                                    n_layers="small", vocab_size="count"),
    "sharding.kv_cache_sharding": spec(dict(n_kv_heads=8, batch=32, n_shards=16), n_kv_heads="count",
                                       batch="count", n_shards="count"),
    "sharding.max_decode_model_parallelism": spec(dict(d_ff=16384, batch=32, beta_value=8), d_ff="real",
                                                  batch="real", beta_value="real"),
    "sharding.max_prefill_model_parallelism": spec(dict(chip="tpu-v5e", d_ff=28672), chip="chip", d_ff="real",
                                                   compute_dtype="dtype"),
    "simulator.poisson_workload": spec(dict(rate_per_s=2.0, n_requests=5, prompt_len=100, output_len=8),
                                       rate_per_s="real", n_requests="small", prompt_len="count",
                                       output_len="count", seed="count0", shared_prefix_len="count0",
                                       shared_prefix_fraction="prob"),
    "simulator.simulate": spec(dict(config=CONFIG, workload=WORKLOAD, engine="chunked"), engine="engine",
                               n_servers="small?"),
    "simulator.trace_workload": spec(dict(trace=[(0.0, 100, 5), (0.5, 20, 1)])),
    "speculative.best_lookahead": spec(dict(acceptance=0.6, draft_cost_ratio=0.05), acceptance="prob",
                                       draft_cost_ratio="real0", max_lookahead="small0"),
    "speculative.best_roofline_lookahead": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=1, context_len=2048,
                                                     acceptance=0.6, draft_cost_ratio=0.05, max_lookahead=6),
                                                model="model", chip="chip", n_chips="count", batch="count",
                                                context_len="real0", acceptance="prob", draft_cost_ratio="real0",
                                                max_lookahead="small0"),
    "speculative.draft_cost_ratio": spec(dict(draft_params=4e9, target_params=70e9), draft_params="real",
                                         target_params="real"),
    "speculative.expected_tokens_per_step": spec(dict(lookahead=4, acceptance=0.6), lookahead="count0",
                                                 acceptance="prob"),
    "speculative.roofline_speedup": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=1, context_len=2048,
                                              lookahead=4, acceptance=0.6, draft_cost_ratio=0.05), model="model",
                                         chip="chip", n_chips="count", batch="count", context_len="real0",
                                         lookahead="small0", acceptance="prob", draft_cost_ratio="real0"),
    "speculative.roofline_step": spec(dict(model=M, chip="tpu-v5e", n_chips=16, batch=1, context_len=2048,
                                           lookahead=4, acceptance=0.6, draft_cost_ratio=0.05), model="model",
                                      chip="chip", n_chips="count", batch="count", context_len="real0",
                                      lookahead="small0", acceptance="prob", draft_cost_ratio="real0",
                                      weight_dtype="dtype", kv_dtype="dtype", compute_dtype="dtype"),
    "speculative.speedup": spec(dict(lookahead=4, acceptance=0.6, draft_cost_ratio=0.05), lookahead="count0",
                                acceptance="prob", draft_cost_ratio="real0"),
    "units.format_quantity": spec(dict(value=4.98e-3, unit="ms"), value="signed", unit="unit", digits="small"),
    "units.parse_quantity": spec(dict(text="4.98 ms"), text="text", default_unit="unit"),
    "units.parse_unit": spec(dict(unit="ms"), unit="unit"),
}


# The estimate's engine settings and the calibration's split, fit and validation.
GOOD["platform"] = st.sampled_from(scaling_lib.calibration.PLATFORMS)
BAD["platform"] = BAD["choice"]
GOOD["efficiency"] = st.sampled_from([None, "bound", "typical", scaling_lib.estimate.Efficiency(mfu=0.5, latency=2.0),
                                      scaling_lib.estimate.BOUND])
BAD["efficiency"] = ["fast", 3, ["typical"], NAN]
_RUN = scaling_lib.measurements.published_runs()[0]
SPECS.update({
    "calibration.fit_rows": spec(dict(models=[scaling_lib.calibration.row_model(r) for r in pope_rows()[:2]]),
                                 rounds="small"),
    "calibration.gpu_network_efficiency": spec({}),
    "calibration.group_of": spec(dict(row=_RUN)),
    "calibration.loss": spec(dict(models=[scaling_lib.calibration.row_model(r) for r in pope_rows()[:2]],
                                  efficiency=scaling_lib.estimate.Efficiency())),
    "calibration.metrics": spec(dict(items=ITEMS)),
    "calibration.platform_of": spec(dict(row=POPE)),
    "calibration.row_model": spec(dict(row=POPE)),
    "calibration.trtllm_memory_utilization": spec(dict(model=M, chip="h100", weight_dtype="fp8", tensor_parallel=8),
                                                  model="model", chip="chip", weight_dtype="dtype",
                                                  tensor_parallel="count"),
    "calibration.uncertainty": spec(dict(platform="tpu", replicates=2), platform="platform", profile="profile",
                                    replicates="small", level="frac"),
    "calibration.validation_metrics": spec({}, efficiency="efficiency"),
    "measurements.published_runs": spec({}),
})
# The out-of-sample check: priced once per efficiency and cached, so only the default is fuzzed here.
# Efficiencies measured apart from the throughput rows, the engine profiles, the bounded fit.
GOOD["profile"] = st.sampled_from(tuple(scaling_lib.calibration.PROFILE_ENGINES))
BAD["profile"] = BAD["choice"]
SPECS.update({
    "calibration.collective_latency_scale": spec(dict(platform="gpu"), platform="platform"),
    "calibration.measured_efficiencies": spec(dict(platform="gpu"), platform="platform"),
    "calibration.measured_weight_streaming": spec({}),
    "calibration.engine_of": spec(dict(row=_RUN), row="row"),
    "calibration.in_profile": spec(dict(row=_RUN, profile="typical"), row="row", profile="profile"),
    "calibration.fit_profile": spec({}, profile="profile"),
    "calibration.fit_request_s": spec({}, profile="profile", sources="sources?"),
    "calibration.front_end_residuals": spec({}, profile="profile", sources="sources?"),
    "calibration.offline_slots": spec(dict(row=_RUN, deployment=scaling_lib.calibration.run_deployment(_RUN)),
                                      row="row", deployment="deployment", efficiency="efficiency"),
    "efficiency.platform_of_chip": spec(dict(chip="h100"), chip="chip"),
    "measurements.decode_step_rows": spec({}),
    "measurements.gathered_runs": spec({}),
    "holdout.group_key": spec(dict(row=_RUN, by="release"), row="row", by="grouping"),
    "holdout.fitted_rows": spec({}, profile="profile", platform="platform"),
    "holdout.held_out_ratios": spec({}, profile="profile", platform="platform", experts="expert_class"),
    "holdout.profile_spread": spec({}, profile="profile", platform="platform", quantiles="quantiles",
                                   experts="expert_class"),
    "holdout.leave_one_group_out": spec(dict(by="kind"), by="grouping", profile="profile"),
})
SPECS["estimate.report"][1].update(efficiency="named_engine")
GOOD["grouping"] = st.sampled_from(scaling_lib.holdout.GROUPINGS)
GOOD["expert_class"] = st.sampled_from(scaling_lib.holdout.EXPERTS)
BAD["expert_class"] = BAD["choice"]
BAD["grouping"] = BAD["choice"]
GOOD["quantiles"] = st.sampled_from([(0.1, 0.9), (0.25, 0.75)])
BAD["quantiles"] = [None, 3, (0.1,), (0.0, 0.9), (0.1, 1.5)]
GOOD["named_engine"] = st.sampled_from(list(scaling_lib.estimate.PROFILES))
BAD["named_engine"] = ["fast", 3, None, "bound"]
SPECS.update({"calibration.out_of_sample_summary": spec({}), "calibration.release_of": spec(dict(row=_RUN)),
              "calibration.out_of_sample": spec({}), "measurements.validation_runs": spec({})})
SPECS["estimate.max_batch"][1].update(efficiency="efficiency")
SPECS["calibration.loss"][1].update(efficiency="efficiency")
SPECS["estimate.offline_estimate"][1].update(slots="count?")
SPECS["estimate.offline_throughput"][1].update(memory_utilization="frac", max_sequences="count",
                                               kv_placement="placement?")
SPECS["estimate.report"][1].update(memory_utilization="frac", max_sequences="count", kv_placement="placement?",
                                   tensor_parallel="small?", expert_parallel="flag", attention_data_parallel="flag")

# plan: the deployment search (tests/math/test_plan.py checks what it chooses)
PLANNED = plan("llama3-8b", "h100", 2, 1000, 200, prices=2.5).frontier
GOOD.update(chips=st.sampled_from(["h100", "V5E", ["h100", "tpu-v5e"], ("h200",), ["b200", "h100", "h100"]]),
            dtypes=st.sampled_from(["bf16", ("fp8",), ["bf16", "int4"], ("nvfp4", "fp8"), ["int8"]]),
            prices=st.one_of(_reals(1e-3, 1e3), st.sampled_from([{"h100": 2.0}, {"H100": 3, "tpu-v5e": 1.2}])),
            planned=st.sampled_from([PLANNED, PLANNED[:1], (), list(PLANNED)]))
BAD.update(chips=["tpu-v9", [], ["tpu-v9"], 3, None, [None], ("h100", 3)],
           dtypes=["fp7", [], ("int3",), 8, None, [None]],
           prices=[0, -1.0, INF, *_NUMBERISH, {}, {"h100": -1}, {"tpu-v9": 1}, {"h100": "2"}],
           planned=BAD["points"])
GOOD["moe_layouts"] = st.sampled_from(["tp", ("tp",), ["tp", "ep"], ("ep+dp", "dp"), tuple(scaling_lib.plan.MOE_LAYOUTS)])
BAD["moe_layouts"] = ["pp", [], ("tp", "xx"), 3, None, [None]]
SPECS.update({
    "plan.plan": spec(dict(model="llama3-8b", chips="h100", max_chips=2, input_len=1000, output_len=200, prices=2.5),
                      model="model", chips="chips", max_chips="small", input_len="count", output_len="count",
                      ttft="real?", tpot="real?", prices="prices", weight_dtypes="dtypes", kv_dtypes="dtypes",
                      efficiency="efficiency", moe_layouts="moe_layouts"),
    "plan.pareto_frontier": spec(dict(points=PLANNED), points="planned"),
    "models.read_hf_config": spec(dict(path_or_dict=str(REPO / "book" / "data" / "hf_configs" / "qwen3-8b.json")),
                                  path_or_dict="hf"),
    "plan.tensor_parallel_sizes": spec(dict(model=M, max_chips=16), model="model", max_chips="count"),
    "plan.price_deployment": spec(dict(model=M, chip="h100", n_chips=8, input_len=2000, output_len=500),
                                  model="model", chip="chip", n_chips="small", input_len="count", output_len="count",
                                  tensor_parallel="count?", batch="count?", weight_dtype="dtype", kv_dtype="dtype",
                                  compute_dtype="dtype?", price_per_chip_hour="real?", efficiency="efficiency",
                                  memory_utilization="frac", expert_parallel="flag", attention_data_parallel="flag"),
})

# load: TTFT and TPOT under a load, and the simulator's run of the same engine (tests/math/test_load.py checks them)
LINEAR_STEP = Engine(lambda batch, prompt_tokens: 0.01 + 1e-4 * batch + 2e-5 * prompt_tokens, 100, 20, 8)
H100_8B = Deployment("llama3-8b", "h100", 1)
GOOD.update(step_model=st.sampled_from([LINEAR_STEP.step_s, lambda batch, prompt_tokens: 0.02]),
            load_engine=st.sampled_from([LINEAR_STEP, Engine(LINEAR_STEP.step_s, 50, 2, 1, None)]))
BAD.update(step_model=[None, 3, "fast", [0.01]], load_engine=[None, 3, CONFIG, "chunked"])
SPECS.update({
    "load.Engine": spec(dict(step_s=LINEAR_STEP.step_s, input_len=100, output_len=20, max_batch=8),
                        step_s="step_model", input_len="count", output_len="count", max_batch="count",
                        token_budget="count?", bound="flag", request_s="real0"),
    "load.engine_and_bound": spec(dict(deployment=H100_8B, input_len=1000, output_len=200), deployment="deployment",
                                  input_len="count", output_len="count", efficiency="efficiency",
                                  token_budget="count?"),
    "load.deployment_engine": spec(dict(deployment=H100_8B, input_len=1000, output_len=200), deployment="deployment",
                                   input_len="count", output_len="count", efficiency="efficiency",
                                   token_budget="count?"),
    "load.load_estimate": spec(dict(deployment=H100_8B, input_len=1000, output_len=200, concurrency=8),
                               deployment="deployment", input_len="small", output_len="small", concurrency="count?",
                               request_rate="real?", efficiency="efficiency", token_budget="count?"),
    "simulator.simulate_open_loop": spec(dict(engine=LINEAR_STEP, request_rate=5.0, n_requests=20),
                                         engine="load_engine", request_rate="real", n_requests="small",
                                         seed="count0"),
    "simulator.simulate_closed_loop": spec(dict(engine=LINEAR_STEP, concurrency=4, n_requests=20),
                                           engine="load_engine", concurrency="small", n_requests="small"),
    "simulator.simulate_burst": spec(dict(engine=LINEAR_STEP, n_requests=20), engine="load_engine",
                                     n_requests="small", schedule="schedule"),
    "simulator.burst_estimate": spec(dict(deployment=H100_8B, input_len=1000, output_len=200, requests=16),
                                     deployment="deployment", input_len="small", output_len="small",
                                     requests="small", efficiency="efficiency", token_budget="count?",
                                     schedule="schedule"),
    "load.spread": spec(dict(n=10, replicas=4), n="small", replicas="small"),
    "simulator.simulate_benchmark": spec(dict(engine=LINEAR_STEP, concurrency=4, n_requests=20),
                                         engine="load_engine", concurrency="small", n_requests="small",
                                         schedule="schedule"),
    "simulator.benchmark_estimate": spec(dict(deployment=H100_8B, input_len=1000, output_len=200, concurrency=4,
                                              requests=16),
                                         deployment="deployment", input_len="small", output_len="small",
                                         concurrency="small", requests="small", efficiency="efficiency",
                                         token_budget="count?", schedule="schedule"),
    "formats.matmul_dtype": spec(dict(chip="h100", weight_dtype="fp8"), chip="chip", weight_dtype="dtype"),
    "formats.own_weight_dtype": spec(dict(model="deepseek-v3"), model="model", config_dtype="dtype?"),
    "formats.searchable": spec(dict(chip="b200", weight_dtype="nvfp4"), chip="chip", weight_dtype="dtype"),
    "formats.quality_caveat": spec(dict(weight_dtype="int4"), weight_dtype="dtype"),
})
SPECS["plan.plan"][1].update(ttft_p99="real?", tpot_p99="real?", concurrency="count?", request_rate="real?",
                             token_budget="count?", weight_dtypes="dtypes?")  # None: the model's own precision

extend(GOOD, BAD, SPECS)  # a kind for every public parameter, and the input classes (tests/math/fuzz_more_specs.py)
# The one reader of "number plus unit" (units.read_number, which parse_quantity and the checker share).
SPECS["units.read_number"] = spec(dict(text="4.98 ms"), text="text")
SPECS["measurements.pope_headline_runs"] = spec({})  # Pope et al.'s two headline runs
SPECS["simulator.simulate_disaggregated"] = spec(dict(config=CONFIG, workload=WORKLOAD), config="config",
                                                 workload="workload", n_prefill_servers="small",
                                                 n_decode_servers="small", transfer_bandwidth="real?",
                                                 prefill_config="config?")

# Results that may legitimately be signed or infinite (field or function name -> why).
SIGNED = {"free_bytes_per_chip": "negative when the weights do not fit", "gap_s": "negative if measured < bound",
          "format_quantity": "a string", "parse_quantity": "a signed value (the reader typed '-3 us')",
          "read_number": "a signed value (the reader typed '-3 us')",
          "front_end_residuals": "measured less priced: negative where the prefill is priced too slow"}
INFINITE = {"kv_compute_crossover_context": "inf when a sliding window stops the cache from ever crossing",
            "tpot_s": "NaN for one-token outputs (no time per output token)"}


def _public_functions():
    found = {}
    for name in MODULES:
        module = importlib.import_module(f"scaling_lib.{name}")
        for attr, value in inspect.getmembers(module, inspect.isfunction):
            # (names with "__mutmut_" are the copies `make mutation` adds next to each function; not public API)
            if value.__module__ == module.__name__ and not attr.startswith("_") and "__mutmut_" not in attr:
                found[f"{name}.{attr}"] = value
        for attr, value in inspect.getmembers(module, is_input_class):  # constructors that check their arguments
            if value.__module__ == module.__name__ and not attr.startswith("_"):
                found[f"{name}.{attr}"] = value
    return found


FUNCTIONS = _public_functions()


def _path(where) -> str:
    """The printable path of a value inside a result: `where` is the root's name or (parent's path, suffix), a suffix
    being an attribute (".name"), a dict key ("['key']") or a list index (an int)."""
    parts = []
    while isinstance(where, tuple):
        where, suffix = where
        parts.append(f"[{suffix}]" if isinstance(suffix, int) else suffix)
    return where + "".join(reversed(parts))


def _check_sane(value, where, signed=False, infinite=False, seen=None):
    """Every number in `value` (recursively through dataclasses, tuples, lists, dicts, arrays) is finite and >= 0.
    The path to each value is kept as (parent, suffix) pairs and printed only in a failure's message: results hold
    hundreds of thousands of numbers. A dataclass met again under the same rules (hundreds of published rows share
    a few deployments) is checked once (`seen`: their ids and rules)."""
    if isinstance(value, (str, bool)) or value is None or callable(value):  # a step-time model is a function
        return
    seen = set() if seen is None else seen
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if (id(value), signed, infinite) in seen:
            return
        seen.add((id(value), signed, infinite))
        for f in dataclasses.fields(value):
            _check_sane(getattr(value, f.name), (where, "." + f.name), signed or f.name in SIGNED,
                        infinite or f.name in INFINITE, seen)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_sane(item, (where, f"[{key!r}]"), signed, infinite, seen)
        return
    if isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _check_sane(item, (where, i), signed, infinite, seen)
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fiu":
            finite = np.isfinite(value) | (infinite & np.isnan(value))
            assert finite.all(), f"{_path(where)} has non-finite entries"
            assert signed or (value[np.isfinite(value)] >= 0).all(), f"{_path(where)} has negative entries"
        return
    if isinstance(value, (int, float, np.number)):
        assert math.isfinite(value) or (infinite and not math.isnan(value)) or (infinite and "tpot" in _path(where)), \
            f"{_path(where)} = {value!r} is not finite"
        assert signed or not value < 0, f"{_path(where)} = {value!r} is negative"
        return
    if hasattr(value, "shape"):  # any other array-like result
        return
    raise AssertionError(f"{_path(where)}: unexpected result type {type(value).__name__}")


def _call(name, kwargs):
    short = name.split(".")[1]
    result = FUNCTIONS[name](**kwargs)
    if inspect.isclass(FUNCTIONS[name]):
        return result  # constructing it is the check; its fields are what it was given
    _check_sane(result, short, signed=short in SIGNED, infinite=short in INFINITE)
    return result


def test_every_public_function_has_a_spec():
    missing = sorted(set(FUNCTIONS) - set(SPECS))
    stale = sorted(set(SPECS) - set(FUNCTIONS))
    assert not missing, f"public functions without a property-test spec in {__file__}: {missing}"
    assert not stale, f"specs for functions that no longer exist: {stale}"
    for name, (_, kinds) in SPECS.items():
        unknown = set(kinds) - set(inspect.signature(FUNCTIONS[name]).parameters)
        assert not unknown, f"{name}: spec names parameters the function lacks: {unknown}"


def _bad_value_let_through(name, base, param, kind):
    """None when every bad value of `param` (its kind's BAD list) gets a ValueError or TypeError naming it, else what
    went wrong with the first that does not."""
    for bad in BAD[kind.rstrip("?")]:
        if bad is None and kind.endswith("?"):
            continue
        try:
            _call(name, {**base, param: bad})
        except (ValueError, TypeError) as err:  # TypeError for a wrong type, naming the argument
            message = str(err)
        else:
            return f"{name}({param}={bad!r}) was accepted"
        # The message names the argument; a failed name lookup (model, chip, dtype, unit) says "unknown <what>".
        named = re.search(rf"(?<![A-Za-z0-9_]){param}(?![A-Za-z0-9_])", message) or (
            kind.rstrip("?") in NAME_LOOKUPS and any(
            phrase in message for phrase in ("unknown", "is dense", "could not read", "a unit is", "expected a number",
                                             "config", "model_type")))
        if not named:
            return f"{name}({param}={bad!r}): the message does not name {param!r}: {message!r}"
    return None


@for_each(sorted(name for name, (_, kinds) in SPECS.items() if kinds), ids=str)
def test_every_bad_value_of_every_argument_raises_value_error_naming_it(name):
    """Every argument of `name` in turn (one test per function: some 900 arguments); XFAIL lists the ones still let
    through, and fails once one is refused, so that its entry goes."""
    base, kinds = SPECS[name]
    problems = {param: _bad_value_let_through(name, base, param, kind) for param, kind in kinds.items()}
    fixed = [param for param in kinds if (name, param) in XFAIL and problems[param] is None]
    assert not fixed, f"{name}: {fixed} are refused now; drop their XFAIL entries in fuzz_more_specs.py"
    let_through = [problem for param, problem in problems.items() if problem and (name, param) not in XFAIL]
    assert not let_through, "\n".join(let_through)


# Each call of these prices hundreds of published rows, fits or searches: 8 drawn examples (derandomized, and
# Hypothesis draws each kind's listed edge values first), 1 in the inner loop, keep it under its time; the bad values
# of every argument are still all tried by the test above. The property runs once per public function (some 200), so
# the inner loop draws 1 example of each beside the base call (Hypothesis's simplest: each kind's first edge values),
# `make test` all 25.
EXPENSIVE = {"calibration.comparisons", "calibration.uncertainty", "calibration.out_of_sample", "calibration.fit_rows",
             "roofline.fit_batch_roofline", "plan.plan", "load.load_estimate", "load.deployment_engine",
             "calibration.fit_profile", "holdout.fitted_rows"}
# Each call refits every platform once per group (about 0.4 s): the inner loop makes the base call alone.
REFITS = {"holdout.leave_one_group_out"}


@for_each(sorted(SPECS), ids=str)
def test_the_base_call_is_sane_and_edge_values_give_a_value_error_or_a_sane_result(name):
    base, kinds = SPECS[name]
    _call(name, base)  # the known-good call: a sane result, no exception
    if not kinds:
        return
    strategies = {param: GOOD[kind.rstrip("?")] if not kind.endswith("?") else
                  st.one_of(st.none(), GOOD[kind.rstrip("?")]) for param, kind in kinds.items()}

    count = examples(8, inner=0) if name in REFITS else examples(8, inner=1) if name in EXPENSIVE else \
        examples(25, inner=1)
    if not count:
        return

    @settings(SETTINGS, max_examples=count)
    @given(st.fixed_dictionaries({}, optional=strategies).filter(bool))  # at least one argument changed
    def check(changes):
        try:
            _call(name, {**base, **changes})
        except ValueError as err:
            assert str(err), f"{name}: a ValueError without a message"

    check()
