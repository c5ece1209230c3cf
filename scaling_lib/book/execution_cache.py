"""Keep the book build's execution cache honest about the library, and fill it two notebooks at a time.

`make book` executes notebooks through jupyter-cache (`execute_notebooks: cache` in _config.yml), which re-executes a
notebook only when its code changes. The notebooks' outputs also depend on `scaling_lib` and its data, so after a
change there the cached outputs would be stale: this drops the cache when any file under `scaling_lib/` is newer than
the cache's last build, and the build then executes every notebook again.

The build executes the notebooks one after the other. Before it starts, `prefill` executes the book's notebooks that
the cache lacks in parallel (one kernel per worker, WORKERS at a time) exactly as the build would (jupyter-cache's
`single_nb_execution`, in the notebook's folder, with the configuration's timeout and no errors allowed) and stores
them in the cache under the same key, so the build finds them there (a notebook whose own metadata sets another
execution mode, such as the claims ledger's "force", is left to the build). A notebook that fails is left out of the
cache: the build then executes it itself and reports the error as before. (The tests' build renders stored outputs
and executes nothing: tests/book/conftest.py.)

    python -m scaling_lib.book.execution_cache            # run by `make book` before it builds: drop, then prefill
    python -m scaling_lib.book.execution_cache --built    # after a successful build: the cache is current
"""

import shutil
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.cache.main import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution

from .backlinks import notebooks

CACHE = Path("_build") / ".jupyter_cache"
SOURCES = ("scaling_lib",)
WORKERS = 2  # the quick start's machine has 2 cores; each notebook's kernel runs its cells on one


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


def _execute(path: str, timeout: int):
    """Execute one notebook as the build would; return (path, the executed notebook as JSON text or None, seconds,
    the error's traceback or None). A kernel that fails to start (two kernels started at once can race for one free
    port: "Address already in use", then "Kernel died before replying to kernel_info") is an error like any other:
    the build executes that notebook again on its own."""
    notebook = nbformat.read(path, as_version=4)
    try:
        result = single_nb_execution(notebook, cwd=str(Path(path).parent), timeout=timeout, allow_errors=False,
                                     meta_override=True)
    except Exception:  # noqa: BLE001 - the kernel's start, not the notebook: left to the build
        return path, None, 0.0, traceback.format_exc()
    if result.err is not None:
        return path, None, result.time, result.exc_string
    return path, nbformat.writes(notebook), result.time, None


def prefill(repo: Path, workers: int = WORKERS) -> list[Path]:
    """Execute, `workers` at a time, the book's notebooks whose outputs the execution cache lacks, and store them in
    it as the build would. Returns the notebooks stored; a notebook that fails is reported and left to the build."""
    config = yaml.safe_load((repo / "_config.yml").read_text(encoding="utf-8"))
    execute = config.get("execute", {})
    if execute.get("execute_notebooks") != "cache":
        return []
    timeout = int(execute.get("timeout", 30))
    cache = get_cache(str(repo / CACHE))
    pending = []
    for path in (book.path for book in notebooks(repo)):  # the table of contents' notebooks, in its order
        notebook = nbformat.read(path, as_version=4)
        if notebook.metadata.get("mystnb", {}).get("execution_mode", "cache") != "cache":
            continue  # a notebook that sets its own mode (the ledger's "force": it reads the library) skips the cache
        try:
            cache.match_cache_notebook(notebook)
        except KeyError:
            pending.append(str(path))
    stored = []
    if not pending:
        return stored
    print(f"executing {len(pending)} notebooks, {workers} at a time, into the build's execution cache")
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for path, text, seconds, error in pool.map(_execute, pending, [timeout] * len(pending)):
            if error is not None:
                print(f"{path} failed; the build executes it again and reports the error")
                continue
            record = cache.add_nb_to_project(path)
            cache.cache_notebook_bundle(CacheBundleIn(nbformat.reads(text, as_version=4), record.uri,
                                                      data={"execution_seconds": seconds}),
                                        check_validity=False, overwrite=True)
            stored.append(Path(path))
    return stored


if __name__ == "__main__":
    repo = Path.cwd()
    if "--built" in sys.argv[1:]:
        mark_built(repo)
    else:
        if drop_if_stale(repo):
            print(f"scaling_lib changed since the last build: dropped {CACHE}, every notebook executes again")
        prefill(repo)
