"""Keep the book build's execution cache honest about the library.

`make book` (and the tests' build) executes notebooks through jupyter-cache (`execute_notebooks: cache` in
_config.yml), which re-executes a notebook only when its code changes. The notebooks' outputs also depend on
`scaling_lib` and its data, so after a change there the cached outputs would be stale: this drops the cache when any
file under `scaling_lib/` is newer than the cache's last build, and the build then executes every notebook again.

    python -m scaling_lib.book.execution_cache      # run by `make book` before it builds
"""

import shutil
import sys
from pathlib import Path

CACHE = Path("_build") / ".jupyter_cache"
SOURCES = ("scaling_lib",)


def newest_source_mtime(repo: Path) -> float:
    """The latest modification time of any file the notebooks' outputs depend on besides their own code."""
    return max((path.stat().st_mtime for name in SOURCES for path in (repo / name).rglob("*")
                if path.is_file() and "__pycache__" not in path.parts), default=0.0)


def drop_if_stale(repo: Path) -> bool:
    """Remove the execution cache under `repo` if the library changed after it was last built; True if removed."""
    cache = repo / CACHE
    if not cache.is_dir() or newest_source_mtime(repo) <= cache.stat().st_mtime:
        return False
    shutil.rmtree(cache)
    return True


def mark_built(repo: Path) -> None:
    """Record that the cache now holds outputs of the library as it is (after a successful build)."""
    cache = repo / CACHE
    if cache.is_dir():
        cache.touch()


if __name__ == "__main__":
    repo = Path.cwd()
    if "--built" in sys.argv[1:]:
        mark_built(repo)
    elif drop_if_stale(repo):
        print(f"scaling_lib changed since the last build: dropped {CACHE}, every notebook executes again")
