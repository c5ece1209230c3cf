"""Mutation score of the closed-form modules, measured with mutmut (run by `make mutation`).

mutmut generates every mutant of scaling_lib's top-level modules (configured in pyproject.toml, [tool.mutmut]): about
15,300 (TESTING.md counts them by module group). On 2 shared cores a sample of 600 takes 15 to 30 minutes and all of
them about 25 times as long, so by default this script tests a uniform random sample
(seeded, so the same sample every time) and reports the killed fraction with its 95% confidence interval:

    python tools/mutation_score.py [--sample N] [--seed S] [--all] [--modules collectives estimate ...]

mutmut 3 writes its mutants into `mutants/` under the directory it runs in, and a fresh run needs that folder gone.
So it never runs in the repository root (where a folder of that name may be yours): each run copies what mutmut
reads (pyproject.toml, the source, the tests and [tool.mutmut]'s also_copy) into `.mutation/`, a folder this script
makes, marks and alone removes, and runs mutmut there. Inspect a mutant with
`cd .mutation && ../.venv/bin/mutmut show NAME`.

Mutants listed in tools/mutation_equivalent.txt ("name  reason", one per line) are equivalent to the original
(no test could tell them apart, e.g. `np.argsort(kind="STABLE")`, which numpy reads as "stable"); they are excluded
from the score and the reasons printed. Timeouts count as killed (the mutant made a test hang).
"""

import argparse
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTMUT = [str(REPO / ".venv" / "bin" / "mutmut")]
WORK = REPO / ".mutation"  # mutmut's working directory (it writes WORK / "mutants"); made and removed by this script
MARKER = ".made-by-tools-mutation_score"  # a folder without this file is not ours and is never removed
EQUIVALENT = REPO / "tools" / "mutation_equivalent.txt"
KILLED = {"killed", "timeout", "segfault"}
LINE = re.compile(r"^\s*(?P<name>scaling_lib\.[^:\s]+): (?P<status>.+?)\s*$")


def copied_paths(repo: Path) -> list:
    """What mutmut reads, relative to the repository: pyproject.toml, [tool.mutmut]'s source_paths and also_copy,
    and tests/ (which mutmut copies too)."""
    config = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["mutmut"]
    names = ["pyproject.toml", "tests", *config.get("source_paths", []), *config.get("also_copy", [])]
    return list(dict.fromkeys(Path(name.rstrip("/")) for name in names))


def fresh_work_tree(repo: Path = REPO, work: Path = WORK) -> Path:
    """Replace `work` with a fresh copy of what mutmut reads from `repo`, and return it. Only a folder this function
    made (it holds the MARKER file) is removed; any other folder at that path stops the run, untouched."""
    if work.exists() or work.is_symlink():
        if not (work.is_dir() and not work.is_symlink() and (work / MARKER).is_file()):
            sys.exit(f"{work} exists and was not made by {Path(__file__).name}; move it away (nothing was removed)")
        shutil.rmtree(work)
    work.mkdir()
    (work / MARKER).write_text(f"made by {Path(__file__).name}, which removes this folder on its next run\n")
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis")
    for relative in copied_paths(repo):
        source, target = repo / relative, work / relative
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return work


def results() -> dict:
    """{mutant name: status} for every generated mutant, from `mutmut results --all true`."""
    if not WORK.is_dir():
        return {}
    out = subprocess.run(MUTMUT + ["results", "--all", "true"], cwd=WORK, capture_output=True, text=True).stdout
    return {m["name"]: m["status"] for m in map(LINE.match, out.splitlines()) if m}


def equivalent() -> dict:
    if not EQUIVALENT.exists():
        return {}
    rows = [line.split(None, 1) for line in EQUIVALENT.read_text().splitlines() if line.strip()
            and not line.startswith("#")]
    return {name: reason.strip() for name, reason in rows}


def module_of(name: str) -> str:
    return name.split(".")[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=600, help="mutants to test (default 600)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--all", action="store_true", help="test every mutant (about 15,300: some 25 times a 600-mutant sample's time)")
    parser.add_argument("--modules", nargs="+", metavar="MODULE",
                        help="sample only mutants of these modules (e.g. collectives estimate), as for a new module")
    parser.add_argument("--report-only", action="store_true", help="do not run mutmut, only read its results")
    args = parser.parse_args()
    os.environ["SCALING_BOOK_FUZZ"] = "thorough"  # mutmut's test runs draw every Hypothesis example, as `make test` does

    if not args.report_only:
        # Generating the mutants and collecting which tests cover which function happens on any run; a run of the
        # one-function dtypes module does that and little else. Every run starts from a fresh copy of the tree.
        fresh_work_tree()
        subprocess.run(MUTMUT + ["run", "--max-children", "2", "scaling_lib.dtypes*"], cwd=WORK,
                       stdout=subprocess.DEVNULL)
    every = results()
    if not every:
        sys.exit("no mutants found: run `make mutation` (it installs mutmut and generates them)")
    names = sorted(n for n in every if not args.modules or module_of(n) in args.modules)
    if not names:
        sys.exit(f"no mutants in modules {args.modules}; module names are e.g. {sorted({module_of(n) for n in every})[:5]}")
    chosen = names if args.all else sorted(random.Random(args.seed).sample(names, min(args.sample, len(names))))
    if not args.report_only:
        pending = [n for n in chosen if every[n] in ("not checked",)]
        for start in range(0, len(pending), 200):  # keep each command line short
            subprocess.run(MUTMUT + ["run", "--max-children", "2", *pending[start:start + 200]], cwd=WORK,
                           stdout=subprocess.DEVNULL)
        every = results()

    skip = equivalent()
    status = {n: every.get(n, "not generated") for n in chosen if n not in skip}
    counts = Counter("killed" if s in KILLED else s for s in status.values())
    tested = counts["killed"] + counts["survived"]
    score = counts["killed"] / tested if tested else float("nan")
    half = 1.96 * math.sqrt(score * (1 - score) / tested) if tested else float("nan")
    by_module = defaultdict(Counter)
    for n, s in status.items():
        by_module[module_of(n)]["killed" if s in KILLED else s] += 1

    print(f"mutants generated: {len(every)} in {len({module_of(n) for n in every})} modules; "
          f"{'all' if args.all else f'a random sample of {len(chosen)} (seed {args.seed})'} tested")
    print(f"excluded as equivalent: {sum(1 for n in chosen if n in skip)}")
    print(f"killed {counts['killed']}, survived {counts['survived']}, other {dict(counts - Counter(killed=0, survived=0))}")
    print(f"MUTATION SCORE: {score:.1%} killed (95% CI +-{half:.1%}) of {tested} tested mutants")
    for module, c in sorted(by_module.items()):
        n = c["killed"] + c["survived"]
        print(f"  {module:<14} {c['killed']:>4} / {n:<4} killed" + (f" ({c['killed'] / n:.0%})" if n else ""))
    survivors = sorted(n for n, s in status.items() if s == "survived")
    if survivors:
        print("survivors (inspect with `cd .mutation && ../.venv/bin/mutmut show NAME`):")
        for n in survivors:
            print("  " + n)


if __name__ == "__main__":
    main()
