"""The library from a terminal: what serving a model costs, in one command.

    python -m scaling_lib estimate --model llama3-70b --chip h100 --chips 8 --batch 64 --context 8192 --weights fp8
    python -m scaling_lib estimate --config path/to/config.json --chip tpu-v5e --chips 16 --json

prints `estimate.report(...)` as a table (or JSON with --json). Bad input gets a one-line error and exit status 2.
"""

import argparse
import json
import math
import sys

from ._validate import MAX_INT
from .estimate import report
from .hardware import chip_names
from .models import from_hf_config, model_names


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a malformed command line gets the same one-line error and exit status 2 as a bad value."""

    def error(self, message):
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


def _price(text: str) -> float:
    """--price: dollars per chip-hour, a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a price in $ per chip-hour such as 2.5, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite price in $ per chip-hour, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m scaling_lib", description="The executable textbook's library.")
    commands = parser.add_subparsers(dest="command", required=True)
    estimate = commands.add_parser("estimate", help="weights, KV cache, step time, tokens/s and $ per token",
                                   description="What serving a model on some chips costs (scaling_lib.estimate.report)")
    which = estimate.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help=f"a model name ({', '.join(model_names())}; spellings such as "
                                       "meta-llama/Llama-3.1-8B work)")
    which.add_argument("--config", help="a Hugging Face config.json of your own model")
    estimate.add_argument("--chip", required=True, help=f"one of {', '.join(chip_names())} (or an alias)")
    estimate.add_argument("--chips", type=_count, required=True, help="number of chips serving one copy of the model")
    estimate.add_argument("--batch", type=_count, default=None,
                          help="sequences per decode step (default: the most that fit)")
    estimate.add_argument("--context", type=_count, default=8192, help="tokens of context per sequence (default 8192)")
    estimate.add_argument("--prompt", type=_count, default=None,
                          help="prompt tokens for the prefill time (default: context)")
    estimate.add_argument("--weights", default="bf16", help="weight dtype: bf16, fp8, int8, int4 (default bf16)")
    estimate.add_argument("--kv", default=None, help="KV-cache dtype (default: the weight dtype)")
    estimate.add_argument("--compute", default="bf16", help="matmul dtype (default bf16)")
    estimate.add_argument("--price", type=_price, default=None, help="your price in $ per chip-hour (none is built in)")
    estimate.add_argument("--json", action="store_true", help="print JSON (SI units) instead of a table")
    return parser


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def main(argv=None) -> int:
    """Run the command line `argv` (default sys.argv[1:]); returns the exit status: 0, or 2 for bad input after
    printing one line naming the argument (or the config file and its field) to stderr."""
    try:
        args = _parser().parse_args(argv)  # a malformed command line or option: one line on stderr
    except SystemExit as done:  # argparse exits after --help (0) or its one-line error (2)
        return done.code
    if args.prompt is not None and args.prompt > args.context:  # report() accepts it; the context holds the prompt
        print(f"error: argument --prompt: {args.prompt} tokens do not fit in --context {args.context}, the tokens "
              "each sequence holds (its prompt included); raise --context or lower --prompt", file=sys.stderr)
        return 2
    try:
        model = from_hf_config(args.config) if args.config is not None else args.model
        result = report(model, args.chip, args.chips, batch=args.batch, context_len=args.context,
                        prompt_len=args.prompt, weight_dtype=args.weights, kv_dtype=args.kv,
                        compute_dtype=args.compute, price_per_chip_hour=args.price)
    except (ValueError, TypeError) as error:  # TypeError: a library check that should have been a ValueError
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_dict(), indent=2) if args.json else result.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
