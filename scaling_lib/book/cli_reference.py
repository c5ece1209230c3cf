"""The command-line reference, the appendix page that lists every option of `python -m scaling_lib`, generated from
the command line's own parser so that the page and `--help` never disagree.

For each command the page gives its one-line summary and its description, then a table: the option, the value it
takes (named by the parser's type for it), its default (or that it is required), and what it sets (the option's
help). `python -m scaling_lib.book.cli_reference` writes the page (PAGE); with `--check` it exits 1, writing
nothing, when the page is out of date. tests/book/test_cli_reference.py fails when the page is stale.
"""

import argparse
import sys
from pathlib import Path

from .._validate import MAX_CHIPS
from ..__main__ import parser

PAGE = "book/command_line.md"
# What each of the parser's value types accepts, in words; None is argparse's default (the text as given).
VALUE_KINDS = {
    None: "text",
    "_count": "positive integer",
    "_price": "$ per chip-hour",
    "_prices": "$ per chip-hour, or chip=price pairs",
    "_seconds": "seconds",
    "_rate": "requests per second",
    "_fraction": "share in (0, 1]",
    "_names": "comma-separated names",
    "_chips": f"positive integer up to {MAX_CHIPS:,}",
    "_dtype": "number format",
    "_dtypes": "comma-separated number formats",
    "_weight_formats": "comma-separated number formats, or all",
    "_moe_layouts": "comma-separated layouts (tp, ep, dp, ep+dp), or all",
}
_HEADER = """\
# Command-line reference

The library answers the book's two practical questions from a terminal: what serving a model on some chips costs
(`estimate`), and the cheapest deployment that meets latency targets (`plan`). Run them as
`.venv/bin/python -m scaling_lib COMMAND OPTIONS` from the repository root; the README and the appendix
*Your model* show examples. Bad input gets a one-line error naming the option and exit status 2; with `--json`
the error is also printed as JSON.

This page is generated from the command line's parser by `scaling_lib.book.cli_reference`, and a test fails when the
two differ, so it is what `python -m scaling_lib COMMAND --help` prints, as a table.
"""


def _value_kind(action: argparse.Action) -> str:
    """What an option takes, in words: a flag, one of its choices, or its type's kind from VALUE_KINDS."""
    if action.nargs == 0:
        return "flag"
    if action.choices is not None:
        return "one of " + ", ".join(f"`{choice}`" for choice in action.choices)
    name = getattr(action.type, "__name__", None)
    if name not in VALUE_KINDS:
        raise ValueError(f"option {action.option_strings[0]} has type {name}, which VALUE_KINDS does not describe; "
                         "add it there")
    return _escape(VALUE_KINDS[name])


def _default(action: argparse.Action, exclusive: dict) -> str:
    """'required', 'one of --a, --b required', a flag's 'off', the default value, or '-' when there is none."""
    if action in exclusive:
        return "one of " + ", ".join(f"`{name}`" for name in exclusive[action]) + " required"
    if action.required:
        return "required"
    if action.nargs == 0:
        return "off"
    if action.default is None:
        return "-"
    if isinstance(action.default, (tuple, list)):
        return "`" + ",".join(map(str, action.default)) + "`"
    return f"`{action.default}`"


def _escape(text: str) -> str:
    """Text for a Markdown table cell: a pipe would end the cell and a dollar sign would open math (dollarmath)."""
    return text.replace("|", "\\|").replace("$", "\\$")


def _table(command: argparse.ArgumentParser) -> list[str]:
    exclusive = {action: [a.option_strings[0] for a in group._group_actions]
                 for group in command._mutually_exclusive_groups if group.required
                 for action in group._group_actions}
    rows = ["| option | takes | default | what it sets |", "| --- | --- | --- | --- |"]
    for action in command._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        cells = (f"`{action.option_strings[0]}`", _value_kind(action), _default(action, exclusive),
                 _escape(action.help or ""))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def page() -> str:
    """The reference page's Markdown, from `scaling_lib.__main__`'s parser."""
    command_line = parser()
    commands = next(action for action in command_line._actions if isinstance(action, argparse._SubParsersAction))
    summaries = {choice.dest: choice.help for choice in commands._choices_actions}
    lines = [_HEADER]
    for name, command in commands.choices.items():
        lines += [f"## `{name}`", "", _escape(f"{command.description}. It prints {summaries[name]}."), "",
                  *_table(command), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None, repo: Path = Path(__file__).resolve().parents[2]) -> int:
    """Write the page; with --check, exit 1 (writing nothing) when the page on disk is out of date."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    path, text = repo / PAGE, page()
    if path.is_file() and path.read_text() == text:
        return 0
    if check:
        print(f"{PAGE} is out of date; run python -m scaling_lib.book.cli_reference", file=sys.stderr)
        return 1
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
