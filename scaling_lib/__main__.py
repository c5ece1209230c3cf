"""The library from a terminal: what serving a model costs, and the cheapest way to serve it.

    python -m scaling_lib estimate --model llama3-70b --chip h100 --chips 64 --tensor-parallel 8 --weights fp8
    python -m scaling_lib estimate --config path/to/config.json --chip tpu-v5e --chips 16 --input-len 2000 \\
        --output-len 500 --price 1.2 --json
    python -m scaling_lib plan --model llama3-70b --chip h100,h200 --max-chips 16 --input-len 2000 --output-len 500 \\
        --ttft 2 --tpot 0.05 --price h100=2.5,h200=3.5

`estimate` prints `estimate.report(...)` for n / t replicas of t-way tensor parallelism (and, given a workload,
`plan.price_deployment`); `plan` prints `plan.plan(...)`. A table by default, strict JSON with a schema version with
--json. Bad input gets a one-line error on stderr (and, with --json, {"schema": ..., "error": ...} on stdout) and
exit status 2; a closed pipe (`... --json | head -1`) ends quietly.
"""

import argparse
import json
import math
import os
import sys

from ._validate import MAX_CHIPS, MAX_INT, MAX_PRICE_PER_CHIP_HOUR
from .dtypes import bytes_per_element
from .estimate import PROFILES
from .formats import ALL_WEIGHT_DTYPES, own_weight_dtype
from .hardware import chip_names
from .load import TOKEN_BUDGET
from .simulator import SCHEDULES
from .models import get_model, model_names, read_hf_config
from .plan import KV_DTYPES, MOE_LAYOUTS, TargetUnreachable, plan
from .your_model import CLI_NAMES, SCHEMA, estimate_deployment



class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a malformed command line gets the same one-line error and exit status 2 as a bad value."""

    json_errors = False  # set by main when --json is on the command line

    def error(self, message):
        if self.json_errors:
            print(json.dumps({"schema": SCHEMA, "error": message}))
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def _count(text: str) -> int:
    """An option that counts something (chips, sequences, tokens): a positive integer, written in digits."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if not 1 <= value <= MAX_INT:
        raise argparse.ArgumentTypeError(f"must be a positive integer up to 2**53, got {text!r}")
    return value


def _chips(text: str) -> int:
    """--chips, --tensor-parallel, --max-chips: a count of chips, at most MAX_CHIPS (more than any machine has)."""
    value = _count(text)
    if value > MAX_CHIPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_CHIPS:,} chips, more than any machine has, got "
                                         f"{text!r}")
    return value


def _positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number ({what}), got {text!r}")
    return value


def _price(text: str) -> float:
    """--price of estimate: dollars per chip-hour, a positive finite number up to MAX_PRICE_PER_CHIP_HOUR."""
    value = _positive(text, "a price in $ per chip-hour such as 2.5")
    if value > MAX_PRICE_PER_CHIP_HOUR:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_PRICE_PER_CHIP_HOUR:g} per chip-hour (the costs "
                                         f"derived from more would overflow), got {text!r}")
    return value


def _seconds(text: str) -> float:
    """--ttft, --tpot: seconds, a positive finite number."""
    return _positive(text, "seconds such as 0.05")


def _rate(text: str) -> float:
    """--request-rate: requests per second, a positive finite number."""
    return _positive(text, "requests per second such as 8")


def _load_options(command: argparse.ArgumentParser, what: str, burst: bool = False):
    """--concurrency and --request-rate (and, with `burst`, --burst: at most one; and --requests, a benchmark's
    count with --concurrency), and the engine's --token-budget."""
    load = command.add_mutually_exclusive_group()
    if burst:
        load.add_argument("--burst", type=_count, default=None,
                          help=f"{what} N requests sent at once (a benchmark with no cap on concurrency and request "
                               "rate inf, vLLM's bench serve default; an offline batch job), run step by step")
    load.add_argument("--concurrency", type=_count, default=None,
                      help=f"{what} N clients in a closed loop, each sending its next request when its last one "
                           "ends (genai-perf's and vLLM's --max-concurrency)")
    load.add_argument("--request-rate", type=_rate, default=None,
                      help=f"{what} requests arriving at R per second, Poisson (MLPerf's Server scenario)")
    if burst:
        command.add_argument("--requests", type=_count, default=None,
                             help="with --concurrency: a benchmark of N requests in all, its clients starting "
                                  "together (vLLM's --num-prompts, genai-perf's request count), run step by step; "
                                  "the first requests, sent at once, count as the benchmark counts them")
        command.add_argument("--schedule", choices=SCHEDULES, default="mixed",
                             help="with --burst or --requests: how a step is shared; mixed (the default: decodes "
                                  "first, prompts fill the budget; vLLM V1, TensorRT-LLM) or prefill-first (waiting "
                                  "prompts run alone while the decodes wait; SGLang's default, vLLM V0)")
    command.add_argument("--token-budget", type=_count, default=TOKEN_BUDGET,
                         help=f"tokens per engine step under load, decode tokens included (vLLM's "
                              f"max_num_batched_tokens; default {TOKEN_BUDGET:,})")


def _fraction(text: str) -> float:
    """--memory-utilization: a share of HBM in (0, 1]."""
    value = _positive(text, "a share of HBM such as 0.9")
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a share of HBM in (0, 1], got {text!r}")
    return value


def _dtype(text: str) -> str:
    """--weights, --kv, --compute of estimate: one number format (bf16, fp8, int4, ...)."""
    try:
        bytes_per_element(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _dtypes(text: str) -> tuple:
    """--weights, --kv of plan: number formats separated by commas."""
    return tuple(_dtype(name) for name in _names(text, "bf16,fp8"))


def _weight_formats(text: str) -> tuple:
    """--weights of plan: number formats separated by commas, or all (`formats.ALL_WEIGHT_DTYPES`)."""
    return ALL_WEIGHT_DTYPES if text.strip() == "all" else _dtypes(text)


def _moe_layouts(text: str) -> tuple:
    """--moe-layouts of plan: layouts of a mixture of experts separated by commas, or all (`plan.MOE_LAYOUTS`)."""
    if text.strip() == "all":
        return tuple(MOE_LAYOUTS)
    names = _names(text, "tp,ep+dp")
    unknown = [name for name in names if name not in MOE_LAYOUTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown layout {unknown[0]!r}; use {', '.join(MOE_LAYOUTS)} or all")
    return names


def _names(text: str, example: str = "h100,h200") -> tuple:
    """A comma-separated list of names: h100,h200,tpu-v5e."""
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be names separated by commas, such as {example}, got {text!r}")
    return names


def _prices(text: str):
    """--price of plan: one price for every chip (2.5) or one per chip (h100=2.5,tpu-v5e=1.2)."""
    if "=" not in text:
        return _price(text)
    table = {}
    for item in text.split(","):
        chip, _, value = item.partition("=")
        if not chip.strip() or not value.strip():
            raise argparse.ArgumentTypeError(f"must be chip=price pairs such as h100=2.5,tpu-v5e=1.2, got {text!r}")
        if chip.strip() in table:
            raise argparse.ArgumentTypeError(f"prices {chip.strip()} twice; give each chip one price, got {text!r}")
        table[chip.strip()] = _price(value.strip())
    return table


def _model_options(command: argparse.ArgumentParser):
    which = command.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help=f"a model name ({', '.join(model_names())}; spellings such as "
                                       "meta-llama/Llama-3.1-8B work)")
    which.add_argument("--config", help="a Hugging Face config.json of your own model")


def _engine_option(command: argparse.ArgumentParser):
    command.add_argument("--engine", choices=tuple(PROFILES), default="typical",
                         help="whose efficiencies the typical estimate uses: typical (the broadest fit, every engine; "
                              "default) or one engine's or hardware family's profile (chapter 11)")


def parser() -> argparse.ArgumentParser:
    """The command line's parser, both commands and every option; the appendix *Command-line reference*
    (book/command_line.md) is generated from it by scaling_lib.book.cli_reference."""
    parser = _OneLineParser(prog="python -m scaling_lib", description="The executable textbook's library.")
    commands = parser.add_subparsers(dest="command", required=True)
    estimate = commands.add_parser("estimate", help="weights, KV cache, TTFT, TPOT, tokens/s and $ per token",
                                   description="What serving a model on some chips costs (scaling_lib.estimate.report "
                                               "and, with a workload, scaling_lib.plan.price_deployment)")
    _model_options(estimate)
    estimate.add_argument("--chip", required=True, help=f"one of {', '.join(chip_names())} (or an alias)")
    estimate.add_argument("--chips", type=_chips, required=True, help="number of chips in all")
    estimate.add_argument("--tensor-parallel", type=_chips, default=None,
                          help="chips per copy of the model (default: all of --chips, or the largest group "
                               "dividing them that splits the model's query heads evenly); the chips form "
                               "chips / tensor-parallel replicas")
    estimate.add_argument("--expert-parallel", action="store_true",
                          help="a mixture of experts with whole routed experts on each chip of a replica (experts / "
                               "tensor-parallel each) instead of a slice of every expert")
    estimate.add_argument("--attention-data-parallel", action="store_true",
                          help="each chip of a replica runs attention for its own share of the sequences, whole "
                               "attention weights and caches (no KV head replicated); with --expert-parallel, two "
                               "all-to-alls per MoE layer replace the all-reduces")
    estimate.add_argument("--batch", type=_count, default=None,
                          help="sequences per decode step over all replicas (default: the most that fit)")
    estimate.add_argument("--context", type=_count, default=None,
                          help="tokens of context per sequence (default 8192, or the --config's "
                               "max_position_embeddings when smaller)")
    estimate.add_argument("--prompt", type=_count, default=None,
                          help="prompt tokens for the time to first token (default: context)")
    estimate.add_argument("--input-len", type=_count, default=None,
                          help="prompt tokens per request of a workload (with --output-len: TTFT, TPOT and $ per "
                               "million input and output tokens in continuous batching, prefill included)")
    estimate.add_argument("--output-len", type=_count, default=None, help="output tokens per request of a workload")
    _load_options(estimate, "with the workload, price it under a load:", burst=True)
    estimate.add_argument("--weights", type=_dtype, default=None,
                          help="weight dtype: bf16, fp8, int8, int4, nvfp4, mxfp4 (default: the model's own: the "
                               "--config's quantization_config, a published fp8 checkpoint, else bf16)")
    estimate.add_argument("--kv", type=_dtype, default=None,
                          help="KV-cache dtype (default: the --config's KV format if it names one, else bf16, "
                               "whatever the weights)")
    estimate.add_argument("--compute", type=_dtype, default=None,
                          help="matmul dtype (default: the weights' own where the chip computes it natively and it "
                               "is fp8, int8, nvfp4 or mxfp4, else bf16; plan follows the same rule)")
    estimate.add_argument("--memory-utilization", type=_fraction, default=None,
                          help="share of each chip's HBM the engine may use for weights and KV cache (default 0.9)")
    estimate.add_argument("--price", type=_price, default=None, help="your price in $ per chip-hour (none is built in)")
    _engine_option(estimate)
    estimate.add_argument("--json", action="store_true", help="print JSON (SI units) instead of a table")

    planner = commands.add_parser("plan", help="the cheapest deployment meeting TTFT and TPOT targets",
                                  description="Search chips, tensor parallelism, replicas, formats and batch for the "
                                              "cheapest deployment meeting the targets (scaling_lib.plan.plan)")
    _model_options(planner)
    planner.add_argument("--chip", type=_names, required=True, help="one chip or several, comma-separated "
                                                                     "(h100,h200,tpu-v5e)")
    planner.add_argument("--max-chips", type=_chips, required=True, help="the most chips the deployment may use")
    planner.add_argument("--input-len", type=_count, required=True, help="prompt tokens per request")
    planner.add_argument("--output-len", type=_count, required=True, help="output tokens per request (at least 2)")
    planner.add_argument("--ttft", type=_seconds, default=None, help="target time to first token, seconds")
    planner.add_argument("--tpot", type=_seconds, default=None, help="target time per output token, seconds")
    planner.add_argument("--ttft-p99", type=_seconds, default=None,
                         help="target 99th-percentile time to first token under load, seconds (MLPerf's Server "
                              "limits are p99 targets)")
    planner.add_argument("--tpot-p99", type=_seconds, default=None,
                         help="target 99th-percentile time per output token under load, seconds")
    _load_options(planner, "the load to serve with the fewest replicas meeting the targets:")
    planner.add_argument("--price", type=_prices, required=True,
                         help="$ per chip-hour: one number (2.5) or one per chip (h100=2.5,tpu-v5e=1.2)")
    planner.add_argument("--weights", type=_weight_formats, default=None,
                         help=f"weight formats to try, comma-separated, or all ({','.join(ALL_WEIGHT_DTYPES)}); nvfp4 "
                              "and mxfp4 only on chips that compute them (default: the model's own precision: the "
                              "--config's quantization_config, a published fp8 checkpoint, else bf16)")
    planner.add_argument("--kv", type=_dtypes, default=KV_DTYPES,
                         help=f"KV-cache formats to try, comma-separated (default {','.join(KV_DTYPES)})")
    planner.add_argument("--moe-layouts", type=_moe_layouts, default=("tp",),
                         help="for a mixture of experts, the layouts to try on each tensor-parallel group, "
                              "comma-separated, or all: tp (experts and attention split by heads; the default), ep "
                              "(whole experts on each chip), dp (attention data-parallel), ep+dp (both)")
    planner.add_argument("--efficiency", choices=("typical", "bound"), default="typical",
                         help="typical: the calibrated estimate (default); bound: every resource at peak")
    _engine_option(planner)
    planner.add_argument("--json", action="store_true", help="print JSON (SI units) instead of a table")
    return parser


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


# ------------------------------------------------------------------------------------------------------ estimate
def _estimate(args) -> tuple:
    """(JSON-ready dict, table) for `estimate`: `your_model.estimate_deployment`, the page's form's function too."""
    result = estimate_deployment(args.model, args.chip, args.chips, config=args.config,
                                 tensor_parallel=args.tensor_parallel, batch=args.batch, context_len=args.context,
                                 prompt_len=args.prompt, weight_dtype=args.weights, kv_dtype=args.kv,
                                 compute_dtype=args.compute, price_per_chip_hour=args.price,
                                 memory_utilization=args.memory_utilization, input_len=args.input_len,
                                 output_len=args.output_len, engine=args.engine, concurrency=args.concurrency,
                                 request_rate=args.request_rate, burst=args.burst, requests=args.requests,
                                 schedule=args.schedule, token_budget=args.token_budget,
                                 expert_parallel=args.expert_parallel,
                                 attention_data_parallel=args.attention_data_parallel, names=CLI_NAMES)
    return result.data, result.table


def _plan(args, model, config) -> tuple:
    """(JSON-ready dict, table) for `plan`."""
    if config is not None:
        config.check_positions(args.input_len + args.output_len, "--input-len + --output-len")
    weights = args.weights or (own_weight_dtype(model, config.weight_dtype if config is not None and
                                                config.weight_dtype else None),)
    profile = PROFILES[args.engine]
    for chip in args.chip:
        profile.for_chip(chip)  # a profile fitted on another platform says which ones cover the chip
    served = get_model(model)
    if served.n_experts == 1 and set(args.moe_layouts) != {"tp"}:
        raise ValueError(f"argument --moe-layouts: {served.name} is dense, with no experts to lay out; drop "
                         "--moe-layouts")
    result = plan(model, list(args.chip), args.max_chips, args.input_len, args.output_len, ttft=args.ttft,
                  tpot=args.tpot, prices=args.price, weight_dtypes=weights, kv_dtypes=args.kv,
                  efficiency=None if args.efficiency == "bound" else profile, ttft_p99=args.ttft_p99,
                  tpot_p99=args.tpot_p99, concurrency=args.concurrency, request_rate=args.request_rate,
                  token_budget=args.token_budget, moe_layouts=args.moe_layouts)
    caveats = sorted({profile.caveat(chip, served) for chip in args.chip} - {""})
    table = result.describe() + "".join(f"\nCAVEAT ({profile.name}): {words}" for words in caveats)
    return {"schema": SCHEMA, **result.as_dict(), "engine": {"profile": profile.name, "describes": profile.engine,
                                                             "caveats": caveats or None}}, table


# ------------------------------------------------------------------------------------------------------ main
def _emit(text: str) -> bool:
    """Print to stdout; True when written. A reader that closed the pipe (`| head -1`) ends it quietly; a stdout that
    cannot be written (closed with `>&-`, a full disk such as /dev/full) gets one line on stderr, never a traceback;
    characters the terminal's encoding lacks (a model named in another script on an ASCII-only locale, a lone
    surrogate from a config's _name_or_path) are written as backslash escapes."""
    if sys.stdout is None:
        print("error: cannot write the output: stdout is closed", file=sys.stderr)
        return False
    try:
        try:
            print(text)
        except UnicodeEncodeError:
            encoding = sys.stdout.encoding or "ascii"
            print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except (OSError, ValueError) as error:  # ValueError: a stdout closed inside Python (I/O on a closed file)
        _drop_stdout()
        print(f"error: cannot write the output: {_one_line(error)}", file=sys.stderr)
        return False
    return True


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit finds no second error to report."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        sys.stdout = None


def main(argv=None) -> int:
    """Run the command line `argv` (default sys.argv[1:]); returns the exit status: 0, or 2 for bad input after
    printing one line naming the argument (or the config file and its field) to stderr, and with --json the same
    message as {"schema": ..., "error": ...} on stdout."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command_line = parser()
    command_line.json_errors = _OneLineParser.json_errors = "--json" in argv
    try:
        args = command_line.parse_args(argv)  # a malformed command line or option: one line on stderr
    except SystemExit as done:  # argparse exits after --help (0) or its one-line error (2)
        return done.code
    finally:
        _OneLineParser.json_errors = False
    try:
        if args.command == "plan":
            config = read_hf_config(args.config) if args.config is not None else None
            data, table = _plan(args, config.model if config is not None else args.model, config)
        else:
            data, table = _estimate(args)
        text = json.dumps(data, indent=2, allow_nan=False) if args.json else table
    except TargetUnreachable as error:
        return _fail(args, error, {"target": error.target, "requested_s": error.requested,
                                   "closest_s": error.closest, "closest": error.deployment.as_dict()})
    except (ValueError, TypeError) as error:  # TypeError: a library check that should have been a ValueError
        return _fail(args, error)
    return 0 if _emit(text) else 2


def _fail(args, error: Exception, extra: dict | None = None) -> int:
    message = _one_line(error)
    if args.json:
        _emit(json.dumps({"schema": SCHEMA, "error": message, **(extra or {})}, allow_nan=False))
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
