"""The book build's execution cache is dropped when the library changed after it was built (scaling_lib.book.
execution_cache): jupyter-cache keys a notebook's outputs on its own code only, so a library change would otherwise
leave stale outputs in an incremental `make book`; and `prefill` executes the notebooks the cache lacks before the build
starts, storing them where the build looks them up."""

import os

import nbformat
import pytest
from jupyter_cache import get_cache

from scaling_lib.book.execution_cache import CACHE, drop_if_stale, mark_built, prefill


def _tree(tmp_path, library_time, cache_time):
    (tmp_path / "scaling_lib").mkdir()
    module = tmp_path / "scaling_lib" / "roofline.py"
    module.write_text("x = 1\n")
    cache = tmp_path / CACHE
    cache.mkdir(parents=True)
    (cache / "global.db").write_text("")
    os.utime(module, (library_time, library_time))
    os.utime(cache, (cache_time, cache_time))
    return cache


@pytest.mark.parametrize("library_time, cache_time, marked, dropped", [
    pytest.param(2_000_000, 1_000_000, False, True, id="older than the library: dropped"),
    pytest.param(1_000_000, 2_000_000, False, False, id="built after the last library change: kept"),
    pytest.param(2_000_000, 1_000_000, True, False, id="a build marked since: current"),
    pytest.param(2_000_000, None, False, False, id="no cache yet: nothing to drop"),
])
def test_the_cache_is_dropped_only_when_the_library_changed_after_the_last_build(tmp_path, library_time, cache_time,
                                                                                   marked, dropped):
    (tmp_path / "scaling_lib").mkdir()
    module = tmp_path / "scaling_lib" / "roofline.py"
    module.write_text("x = 1\n")
    os.utime(module, (library_time, library_time))
    cache = tmp_path / CACHE
    if cache_time is not None:
        cache.mkdir(parents=True)
        (cache / "global.db").write_text("")
        os.utime(cache, (cache_time, cache_time))
    if marked:
        mark_built(tmp_path)
    assert drop_if_stale(tmp_path) is dropped
    assert (cache / "global.db").exists() is (cache_time is not None and not dropped)


def _book(tmp_path, cells):
    """A one-notebook book: _config.yml with the cache on, _toc.yml naming chapter.ipynb."""
    (tmp_path / "_config.yml").write_text("execute:\n  execute_notebooks: cache\n  timeout: 60\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nparts:\n  - chapters:\n      - file: chapter\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter")]
                                        + [nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "chapter.ipynb")
    return tmp_path / "chapter.ipynb"


@pytest.mark.tiny
def test_prefill_stores_each_notebook_where_the_build_looks_for_it(tmp_path):
    """The build (myst-nb) looks a notebook up with jupyter-cache's match_cache_notebook on the notebook as read
    from its file: after prefill that finds the executed outputs, and a second prefill executes nothing."""
    path = _book(tmp_path, ["import os\nprint(6 * 7, os.path.basename(os.getcwd()))"])
    assert prefill(tmp_path, workers=1) == [path]
    cache = get_cache(str(tmp_path / CACHE))
    record = cache.match_cache_notebook(nbformat.read(path, as_version=4))
    executed = cache.get_cache_bundle(record.pk).nb
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert code[0].outputs[0]["text"] == f"42 {tmp_path.name}\n"  # run in the notebook's own folder
    assert prefill(tmp_path, workers=1) == []


def test_a_notebook_that_fails_or_sets_its_own_execution_mode_is_left_to_the_build(tmp_path, capsys):
    # The claims ledger and the exercise index say execution_mode "force" (they read the library, not only their
    # code): the build executes them whatever the cache holds, so prefill does not.
    path = _book(tmp_path, ["print(1)"])
    notebook = nbformat.read(path, as_version=4)
    notebook.metadata["mystnb"] = {"execution_mode": "force"}
    nbformat.write(notebook, path)
    assert prefill(tmp_path, workers=1) == []
    path = _book(tmp_path, ["raise RuntimeError('a failing cell')"])
    assert prefill(tmp_path, workers=1) == []
    assert "failed" in capsys.readouterr().out
    with pytest.raises(KeyError):
        get_cache(str(tmp_path / CACHE)).match_cache_notebook(nbformat.read(path, as_version=4))


def test_a_kernel_that_dies_before_it_starts_is_left_to_the_build(tmp_path, monkeypatch):
    # Two kernels started at once can race for one free port; the loser dies before replying to kernel_info, and
    # jupyter-cache raises instead of returning an error. That notebook is reported and left to the build (which
    # executes notebooks one at a time), not allowed to stop `make book`.
    import scaling_lib.book.execution_cache as execution_cache

    def dies(*args, **kwargs):
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(execution_cache, "single_nb_execution", dies)
    path = _book(tmp_path, ["print(1)"])
    name, text, seconds, error = execution_cache._execute(str(path), 60)
    assert (name, text, seconds) == (str(path), None, 0.0)
    assert "Kernel died before replying to kernel_info" in error
