"""The library from a terminal: what serving a model costs, in one command.

    python -m scaling_lib estimate --model llama3-70b --chip h100 --chips 8 --batch 64 --context 8192 --weights fp8
    python -m scaling_lib estimate --config path/to/config.json --chip tpu-v5e --chips 16 --json

prints `estimate.report(...)` as a table (or JSON with --json). Bad input gets a one-line error and exit status 2.
"""

import argparse
import json
import sys

from .estimate import report
from .hardware import chip_names
from .models import from_hf_config, model_names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scaling_lib", description="The executable textbook's library.")
    commands = parser.add_subparsers(dest="command", required=True)
    estimate = commands.add_parser("estimate", help="weights, KV cache, step time, tokens/s and $ per token",
                                   description="What serving a model on some chips costs (scaling_lib.estimate.report)")
    which = estimate.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help=f"a model name ({', '.join(model_names())}; spellings such as "
                                       "meta-llama/Llama-3.1-8B work)")
    which.add_argument("--config", help="a Hugging Face config.json of your own model")
    estimate.add_argument("--chip", required=True, help=f"one of {', '.join(chip_names())} (or an alias)")
    estimate.add_argument("--chips", type=int, required=True, help="number of chips serving one copy of the model")
    estimate.add_argument("--batch", type=int, default=None, help="sequences per decode step (default: the most that fit)")
    estimate.add_argument("--context", type=int, default=8192, help="tokens of context per sequence (default 8192)")
    estimate.add_argument("--prompt", type=int, default=None, help="prompt tokens for the prefill time (default: context)")
    estimate.add_argument("--weights", default="bf16", help="weight dtype: bf16, fp8, int8, int4 (default bf16)")
    estimate.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    estimate.add_argument("--compute", default="bf16", help="matmul dtype (default bf16)")
    estimate.add_argument("--price", type=float, default=None, help="your price in $ per chip-hour (none is built in)")
    estimate.add_argument("--json", action="store_true", help="print JSON (SI units) instead of a table")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)  # argparse prints usage and exits with status 2 on malformed arguments
    try:
        model = from_hf_config(args.config) if args.config else args.model
        result = report(model, args.chip, args.chips, batch=args.batch, context_len=args.context,
                        prompt_len=args.prompt, weight_dtype=args.weights, kv_dtype=args.kv,
                        compute_dtype=args.compute, price_per_chip_hour=args.price)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_dict(), indent=2) if args.json else result.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
