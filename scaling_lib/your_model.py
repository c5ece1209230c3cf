"""What serving your model costs, in one call: the function behind `python -m scaling_lib estimate` and behind the
estimate form of the appendix *Apply the book to your model*, so the page and the command line print the same.

`estimate_deployment(model or config, chip, n_chips, ...)` reads a Hugging Face config (a path, a folder or the
parsed dict: `models.read_hf_config`) when given one, takes its formats (the weights' `quantization_config`, a KV
format it names) unless told otherwise, refuses a context past its `max_position_embeddings`, prices one replica of
`tensor_parallel` chips with `estimate.report` (default: all the chips, or the largest group that divides them and
splits the query heads evenly) and scales it to the n_chips / tensor_parallel replicas. It returns
the numbers (`data`, strict-JSON-ready, SI units) and the table a terminal or a page prints (`table`): weights by
group (a mixed-precision checkpoint's split), the KV cache per token beside a hybrid's fixed-size state per sequence
(`state_bytes_per_sequence`), the parameters with their convention and the multi-token-prediction layers apart.

Errors name the argument in the caller's words (`names`: the command line passes its options, the page its fields).
"""

import dataclasses
from dataclasses import dataclass

from ._validate import choice, positive, positive_int
from .estimate import BOUND, PROFILES, decode_step, report
from .formats import matmul_dtype, own_weight_dtype, quality_caveat
from .flops import matmul_params
from .memory import (kv_cache_bytes, kv_head_groups, state_bytes_per_sequence, weight_bytes_by_group,
                     weight_groups)
from .models import active_param_count, get_model, mtp_param_count, param_count, read_hf_config
from .load import TOKEN_BUDGET, load_estimate
from .plan import price_deployment
from .simulator import SCHEDULES, benchmark_estimate, burst_estimate

SCHEMA = 1  # the version of the JSON both commands print; raised when a key changes meaning or goes away

# How each argument is called where it came from: in Python (the page's form fields) and on the command line.
PYTHON_NAMES = {name: name for name in ("context_len", "prompt_len", "tensor_parallel", "n_chips", "batch",
                                        "input_len", "output_len", "concurrency", "request_rate", "burst",
                                        "requests", "schedule", "token_budget", "expert_parallel")}
CLI_NAMES = dict(context_len="--context", prompt_len="--prompt", tensor_parallel="--tensor-parallel",
                 n_chips="--chips", batch="--batch", input_len="--input-len", output_len="--output-len",
                 concurrency="--concurrency", request_rate="--request-rate", burst="--burst",
                 requests="--requests", schedule="--schedule", token_budget="--token-budget",
                 expert_parallel="--expert-parallel")

ACTIVE_CONVENTION = ("active parameters count what one token uses: k of the E routed experts and the shared ones, "
                     "attention, the state layers and both embedding tables, the input table included (a lookup, no "
                     "FLOPs); matmul_parameters leave the input table out: the weights a token is multiplied by")

_LIMITS = {"weights_s": "reading the weights from HBM", "matmul_s": "the matmuls' FLOPs",
           "kv_s": "reading the KV cache from HBM", "attention_s": "attention's FLOPs",
           "comm_s": "collectives between chips",
           "elementwise_s": "the activations the kernels between the matmuls stream through HBM",
           "overhead_s": "the engine's per-step overhead (host, tensor-parallel layers, eager launches, each MoE "
                         "layer's chain of kernels)"}


def _limit(step) -> tuple:
    """(what limits the step, in words; its share of the step) for the serial estimate: the larger of each
    overlapping pair (KV or attention, weights or matmuls), the collectives and the overhead."""
    parts = {"overhead_s": step.overhead_s, "comm_s": step.comm_s, "elementwise_s": step.elementwise_s,
             "kv_s" if step.kv_s >= step.attention_s else "attention_s": max(step.kv_s, step.attention_s),
             "weights_s" if step.weights_s >= step.matmul_s else "matmul_s": max(step.weights_s, step.matmul_s)}
    name = max(parts, key=parts.get)
    return _LIMITS[name], parts[name] / step.total_s


def _split(deployment) -> str:
    """How the model is split, in words: '8 replicas of 8-way tensor parallelism; KV heads split 8 ways'."""
    tp, replicas, groups = deployment.tensor_parallel, deployment.replicas, kv_head_groups(deployment.model)
    copies = f"{replicas} replica{'s' if replicas > 1 else ''}"
    if tp == 1:
        return f"{copies} on one chip each; nothing split"
    if deployment.attention_data_parallel:
        kv = "attention data-parallel: each chip attends for its own sequences, whole caches"
    elif tp <= groups:
        kv = f"KV heads split {tp} ways"
    elif deployment.kv_placement == "replicated":
        kv = f"KV heads split {groups} ways, each replicated on {tp // groups} chips" if groups > 1 else \
            f"the KV cache replicated on all {tp} chips"
    else:
        kv = f"KV heads split {groups} ways, then the batch split {tp // groups} ways"
    experts = "; whole experts on each chip (expert parallel)" if deployment.expert_parallel else ""
    return f"{copies} of {tp}-way tensor parallelism; {kv}{experts}"


def _terms(step) -> dict:
    return {"weights_s": step.weights_s, "kv_s": step.kv_s, "matmul_s": step.matmul_s,
            "attention_s": step.attention_s, "elementwise_s": step.elementwise_s, "comm_s": step.comm_s,
            "comm_latency_s": step.comm_latency_s,
            "overhead_s": step.overhead_s, "total_s": step.total_s}


@dataclass(frozen=True)
class DeploymentEstimate:
    """`estimate_deployment`'s answer: the numbers (`data`, a JSON-ready dict in SI units) and the table."""

    data: dict
    table: str


def _engine_words(profile, chip, model) -> dict:
    """What the chosen profile is, for the JSON and the table: its name, the engine it describes, what it was fitted
    on, its held-out spread on `chip`'s platform (measured / estimate, 10th-90th percentile; for a model with
    fine-grained experts, that of such models where the profile has one) and its caveat."""
    spread = profile.spread_on(chip, model)
    return {"profile": profile.name, "describes": profile.engine, "fitted_on": profile.fitted_on,
            "spread": list(spread) if spread else None, "caveat": profile.caveat(chip, model) or None,
            "fine_grained_experts": get_model(model).fine_grained_experts}


def _between(seconds: float, spread, scale: float, digits: int, unit: str, runs: str = "held-out runs") -> str:
    """' (x-y unit for 4 in 5 held-out runs)': the time the held-out measurements bracket (a run that is faster than
    the estimate takes less time: the range is seconds / (measured / estimate)); `runs` names the runs."""
    if not spread:
        return ""
    low, high = seconds / spread[1] * scale, seconds / spread[0] * scale
    return f" ({low:,.{digits}f}-{high:,.{digits}f} {unit} for 4 in 5 {runs})"


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def _weights_row(d, tp: int) -> str:
    """'65.2 GB (8.1 GB per chip): experts 60.9 GB in mxfp4, attention 1.9 GB in bf16, ...' (groups with weights)."""
    total = sum(weight_bytes_by_group(d.model, d.weight_dtype).values())
    text = f"{_gb(total)} ({_gb(total / tp)} per chip of the {tp}-way group)"
    counts, by_group = weight_groups(d.model), weight_bytes_by_group(d.model, d.weight_dtype)
    groups = [g for g, n in counts.items() if n]
    formats = {g: round(by_group[g] / counts[g], 4) for g in groups}
    if len(set(formats.values())) > 1:
        text += ": " + ", ".join(f"{g.replace('_', '-')} {by_group[g] / 1e9:,.3g} GB at {formats[g]:g} B/weight"
                                 for g in groups)
    return text


DEFAULT_CONTEXT = 8192  # tokens per sequence when the caller names none (a config's shorter limit wins)


def _default_tensor_parallel(model, n_chips: int) -> int:
    """The largest number of chips dividing n_chips that also divides the model's query heads (Megatron tensor
    parallelism gives each chip whole heads): all of them when it can."""
    return max(t for t in range(1, min(n_chips, model.n_heads) + 1) if n_chips % t == 0 and model.n_heads % t == 0)


def estimate_deployment(model=None, chip=None, n_chips: int = 1, *, config=None, tensor_parallel: int | None = None,
                        batch: int | None = None, context_len: int | None = None, prompt_len: int | None = None,
                        weight_dtype: str | None = None, kv_dtype: str | None = None,
                        compute_dtype: str | None = None, price_per_chip_hour: float | None = None,
                        memory_utilization: float | None = None, input_len: int | None = None,
                        output_len: int | None = None, engine: str = "typical", concurrency: int | None = None,
                        request_rate: float | None = None, token_budget: int | None = TOKEN_BUDGET,
                        expert_parallel: bool = False, attention_data_parallel: bool = False,
                        names: dict = PYTHON_NAMES, burst: int | None = None,
                        requests: int | None = None, schedule: str = "mixed") -> DeploymentEstimate:
    """What serving `model` (a name or a Transformer) or `config` (a Hugging Face config: path, folder or dict) on
    `n_chips` x `chip` costs: n_chips / tensor_parallel replicas of `tensor_parallel` chips (default one group of all,
    or the largest that splits the heads), `batch` sequences in all (default the largest that fits) of `context_len`
    tokens (default 8,192, or the config's max_position_embeddings when smaller); with input_len and output_len,
    a workload's TTFT, TPOT and throughput (`plan.price_deployment`), and with `concurrency` clients or a
    `request_rate` besides, TTFT and TPOT under that load, means and p99 (`load.load_estimate`, `token_budget`
    tokens per engine step), or with `burst` requests sent at once, the same over that run
    (`simulator.burst_estimate`), or with `concurrency` and `requests`, a benchmark of that many requests whose
    clients start together (`simulator.benchmark_estimate`); those two run step by step with a `schedule`
    (`simulator.SCHEDULES`: "mixed" or "prefill-first"). weight_dtype None: the config's quantization_config, else
    the model's own precision (`formats.own_weight_dtype`); kv_dtype None: a KV format the config names, else bf16;
    compute_dtype None: the weights' own where the chip computes it natively, else bf16 (`formats.matmul_dtype`, the
    rule `plan` follows). A batch past the largest that fits is refused naming it. `engine`: whose efficiencies the
    typical estimate uses (`estimate.PROFILES`, chapter 11). A mixture of experts may be served with
    `expert_parallel` (whole experts on each chip) and `attention_data_parallel` (each chip its own sequences'
    attention), as `estimate.Deployment` says.
    Module docstring for the rest.

    Defined in the appendix *Apply the book to your model*.
    """
    if not isinstance(names, dict) or set(PYTHON_NAMES) - set(names):
        raise ValueError(f"names must map each of {', '.join(PYTHON_NAMES)} to the caller's word for it "
                         f"(your_model.PYTHON_NAMES, CLI_NAMES), got {names!r}")
    if (model is None) == (config is None):
        raise ValueError("give model (a name or a Transformer) or config (a Hugging Face config.json), one of them")
    read = read_hf_config(config) if config is not None else None
    model = read.model if read is not None else get_model(model)
    n_chips = positive_int(names["n_chips"], n_chips)
    notes = list(read.notes) if read is not None else []
    if context_len is None:
        limit = read.max_position_embeddings if read is not None else None
        context_len = DEFAULT_CONTEXT if limit is None else min(DEFAULT_CONTEXT, limit)
    context_len = positive_int(names["context_len"], context_len)
    if prompt_len is not None and positive_int(names["prompt_len"], prompt_len) > context_len:
        raise ValueError(f"argument {names['prompt_len']}: {prompt_len} tokens do not fit in {names['context_len']} "
                         f"{context_len}, the tokens each sequence holds (its prompt included); raise "
                         f"{names['context_len']} or lower {names['prompt_len']}")
    if read is not None:
        read.check_positions(context_len, names["context_len"])
    if (input_len is None) != (output_len is None):
        raise ValueError(f"arguments {names['input_len']} and {names['output_len']}: give both (a workload) or "
                         "neither")
    if input_len is not None:
        total = positive_int(names["input_len"], input_len) + positive_int(names["output_len"], output_len)
        if read is not None:
            read.check_positions(total, f"{names['input_len']} + {names['output_len']}")
    # None takes the config's format; '' is refused by the format check, never read as the default
    weights = weight_dtype if weight_dtype is not None else own_weight_dtype(
        model, read.weight_dtype if read is not None and read.weight_dtype else None)
    kv = kv_dtype if kv_dtype is not None else (read.kv_dtype if read is not None else None) or "bf16"
    profile = PROFILES[choice("engine", engine, tuple(PROFILES))]
    profile.for_chip(chip)  # a profile fitted on another platform says which ones cover this chip
    if tensor_parallel is None:
        tp = _default_tensor_parallel(model, n_chips)
        if tp < n_chips:
            notes.append(f"{names['tensor_parallel']} {tp}: the largest group of the {n_chips} chips that splits "
                         f"the {model.n_heads} query heads evenly, {n_chips // tp} replicas of it")
    else:
        tp = positive_int(names["tensor_parallel"], tensor_parallel)
    if n_chips % tp:
        raise ValueError(f"argument {names['tensor_parallel']}: {tp} does not divide {names['n_chips']} {n_chips}; the "
                         "chips form chips / tensor-parallel identical replicas")
    replicas = n_chips // tp
    if expert_parallel and model.n_experts == 1:
        raise ValueError(f"argument {names['expert_parallel']}: {model.name} is dense, with no routed experts to place "
                         f"whole on each chip; drop {names['expert_parallel']}")
    if expert_parallel and model.n_experts % tp:
        raise ValueError(f"argument {names['expert_parallel']}: {model.name}'s {model.n_experts} routed experts do not "
                         f"split evenly over {names['tensor_parallel']} {tp} chips; use a {names['tensor_parallel']} "
                         f"dividing {model.n_experts}, or drop {names['expert_parallel']}")
    if batch is not None and positive_int(names["batch"], batch) % replicas:
        raise ValueError(f"argument {names['batch']}: {batch} sequences do not split over {replicas} replicas "
                         f"({names['n_chips']} {n_chips} / {names['tensor_parallel']} {tp}); use a multiple of "
                         f"{replicas}")
    if concurrency is not None:
        positive_int(names["concurrency"], concurrency)
    if request_rate is not None:
        positive(names["request_rate"], request_rate)
    if token_budget is not None:
        positive_int(names["token_budget"], token_budget)
    if burst is not None:
        positive_int(names["burst"], burst)
    if requests is not None:
        positive_int(names["requests"], requests)
        if concurrency is None:
            raise ValueError(f"argument {names['requests']}: a benchmark's requests come from clients; give "
                             f"{names['concurrency']} too (or {names['burst']} for requests sent at once)")
        if requests < concurrency:
            raise ValueError(f"argument {names['requests']}: {requests:,} requests are fewer than the "
                             f"{concurrency:,} clients, and each client sends at least one; give at least "
                             f"{concurrency:,}")
    choice(names["schedule"], schedule, SCHEDULES)
    if schedule != "mixed" and burst is None and requests is None:
        raise ValueError(f"argument {names['schedule']}: {schedule} is priced step by step; give {names['requests']} "
                         f"with {names['concurrency']} (a benchmark) or {names['burst']}, or leave the schedule "
                         "mixed for the steady state")
    loads = [names[key] for key, value in (("concurrency", concurrency), ("request_rate", request_rate),
                                           ("burst", burst)) if value is not None]
    if len(loads) > 1:
        raise ValueError(f"arguments {' and '.join(loads)}: give one load at a time")
    if loads and input_len is None:
        raise ValueError(f"argument {loads[0]}: a load needs its requests; give {names['input_len']} and "
                         f"{names['output_len']} too")
    settings = {} if memory_utilization is None else {"memory_utilization": memory_utilization}
    replica = dict(context_len=context_len, prompt_len=prompt_len, weight_dtype=weights, kv_dtype=kv,
                   compute_dtype=compute_dtype if compute_dtype is not None else matmul_dtype(chip, weights),
                   price_per_chip_hour=price_per_chip_hour, efficiency=profile, expert_parallel=expert_parallel,
                   attention_data_parallel=attention_data_parallel, **settings)
    one = report(model, chip, tp, **replica)  # one replica, at the largest batch that fits
    if batch is not None:
        fits = one.max_batch * replicas  # the report's largest batch: a larger one is refused naming it
        if batch > fits:
            raise ValueError(f"argument {names['batch']}: {batch:,} sequences are more than the {fits:,} that fit at "
                             f"{names['context_len']} {context_len:,} (the engine's "
                             f"{one.deployment.memory_utilization:.0%} of HBM, at most "
                             f"{one.deployment.max_sequences:,} per replica); use at most {fits:,}, or a shorter "
                             f"{names['context_len']}")
        one = report(model, chip, tp, batch=batch // replicas, **replica)
    d = one.deployment
    data, rows = _describe(one, profile, notes, n_chips, replicas, tp, context_len)
    if price_per_chip_hour is not None:
        rows.append(("$ per million output tokens", f"{one.dollars_per_million_tokens_typical:,.3f} typical, "
                                                    f"{one.dollars_per_million_tokens_bound:,.3f} at the bound (decode "
                                                    f"only, at ${price_per_chip_hour:g} per chip-hour)"))
    if input_len is not None:
        workload = price_deployment(d.model, d.chip, n_chips, input_len, output_len, tensor_parallel=tp, batch=batch,
                                    weight_dtype=d.weight_dtype, kv_dtype=d.kv_dtype, compute_dtype=d.compute_dtype,
                                    price_per_chip_hour=price_per_chip_hour,
                                    memory_utilization=d.memory_utilization, efficiency=profile,
                                    expert_parallel=d.expert_parallel,
                                    attention_data_parallel=d.attention_data_parallel)
        data["workload"] = {"input_len": input_len, "output_len": output_len, **workload.as_dict()}
        rows.append((f"workload of {input_len:,} + {output_len:,} tokens",
                     f"TTFT {workload.ttft_s * 1e3:,.1f} ms, TPOT {workload.tpot_s * 1e3:,.2f} ms, "
                     f"{workload.output_tokens_per_s:,.0f} output tokens/s at {workload.batch:,} sequences "
                     "(continuous batching, prefill included, typical)"))
        if price_per_chip_hour is not None:
            rows.append(("$ per million input / output tokens",
                         f"{workload.dollars_per_million_input_tokens:,.3f} / "
                         f"{workload.dollars_per_million_output_tokens:,.3f} (output with the prefill's share: "
                         f"{workload.dollars_per_million_output_tokens_all_in:,.3f})"))
        if loads:
            served = dataclasses.replace(d, n_chips=n_chips)
            if burst is not None:
                loaded = burst_estimate(served, input_len, output_len, burst, efficiency=profile,
                                        token_budget=token_budget, schedule=schedule)
            elif requests is not None:
                loaded = benchmark_estimate(served, input_len, output_len, concurrency, requests, efficiency=profile,
                                            token_budget=token_budget, schedule=schedule)
            else:
                loaded = load_estimate(served, input_len, output_len, concurrency=concurrency,
                                       request_rate=request_rate, efficiency=profile, token_budget=token_budget)
            data["load"] = loaded.as_dict()
            rows += loaded.rows()
    rows += [("note", note) for note in data["notes"]]
    width = max(len(name) for name, _ in rows)
    return DeploymentEstimate(data, "\n".join(f"{name:<{width}}  {value}" for name, value in rows))


def _describe(one, profile, notes: list, n_chips: int, replicas: int, tp: int, context_len: int) -> tuple:
    """(data, table rows) of one replica's `estimate.Report` under the engine `profile`, scaled to the replicas."""
    d, m = one.deployment, one.deployment.model
    typical, bound = decode_step(d, one.batch, context_len, profile), decode_step(d, one.batch, context_len, BOUND)
    limit, share = _limit(typical)
    split = _split(dataclasses.replace(d, n_chips=n_chips))
    state = state_bytes_per_sequence(m)
    data = {"schema": SCHEMA, **one.as_dict(), "n_chips": n_chips, "replicas": replicas,
            "batch": one.batch * replicas, "max_batch": one.max_batch * replicas,
            "tokens_per_s_bound": one.tokens_per_s_bound * replicas,
            "tokens_per_s_typical": one.tokens_per_s_typical * replicas,
            "parameters": param_count(m), "active_parameters": active_param_count(m),
            "matmul_parameters": matmul_params(m), "active_parameters_convention": ACTIVE_CONVENTION,
            "mtp_parameters": mtp_param_count(m),
            "weight_bytes_per_chip": one.weight_bytes / tp,
            "weight_bytes_by_group": weight_bytes_by_group(m, d.weight_dtype),
            "kv_bytes_per_token_effective": kv_cache_bytes(m, context_len, 1, d.kv_dtype) / context_len,
            "state_bytes_per_sequence": state, "attention_layers": m.attention_layers,
            "state_layers": m.n_state_layers,
            "kv_placement": d.kv_placement, "memory_utilization": d.memory_utilization,
            "max_sequences_per_replica": d.max_sequences, "split": split, "limited_by": limit,
            "tpot_typical_s": one.decode_step_typical_s, "ttft_typical_s": one.prefill_typical_s,
            "weight_quality_caveat": quality_caveat(d.weight_dtype),
            "decode_step_typical": _terms(typical), "decode_step_bound": _terms(bound),
            "efficiency": {"typical": dataclasses.asdict(profile.for_chip(d.chip)),
                           "bound": dataclasses.asdict(BOUND)},
            "engine": _engine_words(profile, d.chip, m), "notes": notes}
    spread = profile.spread_on(d.chip, m)
    own_spread = m.fine_grained_experts and profile.fine_grained_spread_on(d.chip)
    runs = "held-out runs of fine-grained experts" if own_spread else "held-out runs"
    active = (f"{data['active_parameters'] / 1e9:,.2f}B active per token, {data['matmul_parameters'] / 1e9:,.2f}B "
              "multiplied (the input table is a lookup)")
    rows = [("model", f"{m.name}: {data['parameters'] / 1e9:,.2f}B parameters ({active})")]
    if data["mtp_parameters"]:
        rows.append(("multi-token prediction", f"{data['mtp_parameters'] / 1e9:,.2f}B parameters in "
                                               f"{m.n_mtp_layers} module(s), not in the count above nor in the step "
                                               "(this estimate decodes without them)"))
    rows += [("deployment", f"{n_chips} x {d.chip.name}: {split}"),
             ("formats", f"weights {d.weight_dtype}, KV cache {d.kv_dtype}, matmuls {d.compute_dtype}"),
             *([("quality", data["weight_quality_caveat"])] if data["weight_quality_caveat"] else []),
             ("weights", _weights_row(d, tp))]
    kv_row = f"{one.kv_bytes_per_token / 1e3:,.1f} kB"
    if data["kv_bytes_per_token_effective"] != one.kv_bytes_per_token:
        kept = "chunks" if m.chunked_attention else "sliding windows"
        kv_row += (f" ({data['kv_bytes_per_token_effective'] / 1e3:,.1f} kB on average over {context_len:,} tokens: "
                   f"{kept} keep fewer)")
    if m.n_state_layers:
        kv_row += f", in the {m.attention_layers} attention layers of {m.n_layers}"
    rows.append(("KV cache per token", kv_row))
    if m.n_state_layers:
        rows.append(("state per sequence", f"{state / 1e6:,.1f} MB in the {m.n_state_layers} {m.state.kind} layers "
                                           f"(bf16), whatever the context: read and written once per step"))
    rows += [("largest batch that fits", f"{data['max_batch']:,} sequences of {context_len:,} tokens (the engine's "
                                         f"{d.memory_utilization:.0%} of HBM, at most {d.max_sequences:,} per "
                                         "replica)"),
             ("batch", f"{data['batch']:,} ({one.batch:,} per replica)"),
             ("engine profile", f"{profile.name}: {profile.engine}"
                                + (f"; CAVEAT: {data['engine']['caveat']}" if data["engine"]["caveat"] else "")),
             ("decode step = time per output token (TPOT)",
              f"{one.decode_step_typical_s * 1e3:,.2f} ms typical"
              f"{_between(one.decode_step_typical_s, spread, 1e3, 2, 'ms', runs)}, "
              f"{one.decode_step_bound_s * 1e3:,.2f} ms "
              "bound"),
             ("what limits the step", f"{limit} ({share:.0%} of the typical step)"),
             ("time to first token (TTFT)", f"{one.prefill_typical_s * 1e3:,.1f} ms typical"
                                            f"{_between(one.prefill_typical_s, spread, 1e3, 1, 'ms', runs)}, "
                                            f"{one.prefill_bound_s * 1e3:,.1f} ms bound (one {one.prompt_len:,}-token "
                                            "prompt, nothing else running)"),
             ("output tokens/s", f"{data['tokens_per_s_typical']:,.0f} typical, {data['tokens_per_s_bound']:,.0f} "
                                 "bound (all replicas, decode only)")]
    return data, rows
