"""The command-line reference page (book/command_line.md) is the parser's own description of every option."""

import argparse
import re

import pytest

from scaling_lib._validate import MAX_CHIPS
from scaling_lib import __main__ as cli
from scaling_lib.book import cli_reference
from tests import REPO, for_each

COMMANDS = ("estimate", "plan")


def _help(command: str) -> str:
    """What `python -m scaling_lib COMMAND --help` prints, one option per line whatever the terminal's width."""
    parser = cli.parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    sub.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=10_000, max_help_position=10_000)
    return sub.format_help()


def _section(page: str, command: str) -> str:
    return page.split(f"## `{command}`")[1].split("\n## ")[0]


def test_the_page_in_the_book_is_the_one_the_parser_generates_and_check_reports_a_stale_one(tmp_path):
    assert (REPO / cli_reference.PAGE).read_text() == cli_reference.page(), (
        "run .venv/bin/python -m scaling_lib.book.cli_reference")
    assert "book/command_line" in (REPO / "_toc.yml").read_text()
    (tmp_path / "book").mkdir()
    page = tmp_path / cli_reference.PAGE
    page.write_text("stale\n")
    assert cli_reference.main(["--check"], repo=tmp_path) == 1 and page.read_text() == "stale\n"  # not written
    assert cli_reference.main([], repo=tmp_path) == 0 and page.read_text() == cli_reference.page()
    assert cli_reference.main(["--check"], repo=tmp_path) == 0


@for_each(COMMANDS, ids=str)
def test_each_option_of_help_is_a_row_with_its_own_help_text(command):
    section, text = _section(cli_reference.page(), command), _help(command)
    options = re.findall(r"^\s+(--[a-z0-9-]+)", text, flags=re.MULTILINE)
    rows = re.findall(r"^\| `(--[a-z0-9-]+)` \|", section, flags=re.MULTILINE)
    assert options and rows == [option for option in options if option != "--help"]
    for line in text.splitlines():
        found = re.match(r"\s+(--[a-z0-9-]+)(?: \w+| \{[\w,]+\})?\s{2,}(.+)$", line)
        if found and found.group(1) != "--help":
            help_text = " ".join(found.group(2).split()).replace("$", "\\$")
            row = next(r for r in section.splitlines() if r.startswith(f"| `{found.group(1)}` |"))
            assert row.endswith(f"| {help_text} |"), (found.group(1), help_text, row)


def test_defaults_and_requirements_are_the_parsers_and_a_value_type_the_page_cannot_name_is_refused():
    """The defaults a reader relies on, read off a real parse of a minimal command line; an option whose type the page
    has no words for stops the page, naming the option and VALUE_KINDS, the table to add it to."""
    section = _section(cli_reference.page(), "estimate")
    args = cli.parser().parse_args(["estimate", "--model", "llama3-8b", "--chip", "h100", "--chips", "1"])
    assert args.context is None and "| `--context` | positive integer | - |" in section  # 8192 or the config's
    assert args.kv is None and "| `--kv` | number format | - |" in section  # the config's KV format, else bf16
    assert f"| `--chips` | positive integer up to {MAX_CHIPS:,} | required |" in section
    assert "| `--json` | flag | off |" in section and args.json is False
    plan = _section(cli_reference.page(), "plan")
    assert "| `--efficiency` | one of `typical`, `bound` | `typical` |" in plan
    assert "| `--kv` | comma-separated number formats | `" + ",".join(cli.KV_DTYPES) + "` |" in plan
    assert "one of `--model`, `--config` required" in plan
    action = argparse.ArgumentParser().add_argument("--odd", type=float)
    with pytest.raises(ValueError, match=r"--odd.*\bVALUE_KINDS\b"):
        cli_reference._value_kind(action)

