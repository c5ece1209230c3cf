"""The book build's execution cache is dropped when the library changed after it was built (scaling_lib.book.
execution_cache): jupyter-cache keys a notebook's outputs on its own code only, so a library change would otherwise
leave stale outputs in an incremental `make book`."""

import os

from scaling_lib.book.execution_cache import CACHE, drop_if_stale, mark_built


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


def test_a_cache_older_than_the_library_is_dropped(tmp_path):
    cache = _tree(tmp_path, library_time=2_000_000, cache_time=1_000_000)
    assert drop_if_stale(tmp_path) and not cache.exists()


def test_a_cache_built_after_the_last_library_change_is_kept(tmp_path):
    cache = _tree(tmp_path, library_time=1_000_000, cache_time=2_000_000)
    assert not drop_if_stale(tmp_path) and (cache / "global.db").exists()


def test_marking_a_build_makes_the_cache_current(tmp_path):
    cache = _tree(tmp_path, library_time=2_000_000, cache_time=1_000_000)
    mark_built(tmp_path)
    assert not drop_if_stale(tmp_path) and cache.exists()


def test_no_cache_yet_is_nothing_to_drop(tmp_path):
    (tmp_path / "scaling_lib").mkdir()
    assert not drop_if_stale(tmp_path)
