"""The live explorers of the HTML book carry exactly the library's numbers, stay small, and draw offline.

The browser half (a slider moved in headless Chromium changes the plot) is in tests/book/test_build.py."""

import json

import numpy as np
import pytest

from scaling_lib.book.explorers import (ROOFLINE_BATCHES, STEP_BATCHES, STEP_CONFIGS, STEP_CONTEXTS, Explorer,
                                        roofline_explorer, serving_explorer, step_time_explorer)
from scaling_lib.inference import decode_step_time
from scaling_lib.memory import max_batch_size
from scaling_lib.models import get_model
from scaling_lib.roofline import attainable_flops, matmul_intensity, ridge_point


@pytest.fixture(scope="module")
def explorers():
    return {"roofline": roofline_explorer(), "step": step_time_explorer(), "serving": serving_explorer()}


def test_each_explorer_carries_under_300_kb_no_network_reference_and_the_same_bytes_every_build(explorers):
    for explorer in explorers.values():
        html = explorer.html()
        assert explorer.data_bytes < 300_000
        assert "http://" not in html and "https://" not in html
        assert f'id="{explorer.name}"' in html and "Plotly.newPlot" in html
    # Built twice, byte for byte the same (smaller grids than the book's: the same code, seeded simulations included).
    assert roofline_explorer(batches=(1, 256)).json() == roofline_explorer(batches=(1, 256)).json()
    assert serving_explorer(loads=(1.0, 3.0), n_requests=40).json() == \
        serving_explorer(loads=(1.0, 3.0), n_requests=40).json()


def test_roofline_explorer_slider_moves_the_matmul_to_the_library_intensity(explorers):
    figure = explorers["roofline"].figure
    steps = figure["layout"]["sliders"][0]["steps"]
    assert [step["label"] for step in steps] == [str(b) for b in ROOFLINE_BATCHES]
    chips = [button["label"] for button in figure["layout"]["updatemenus"][0]["buttons"]]
    v5e = chips.index("tpu-v5e")
    for batch, step in zip(ROOFLINE_BATCHES, steps):
        restyle, traces = step["args"]
        x = restyle["x"][v5e][0]
        assert x == pytest.approx(matmul_intensity(batch, 8192, 8192), rel=1e-3)
        assert restyle["y"][v5e][0] == pytest.approx(attainable_flops(x, "tpu-v5e") / 1e12, rel=1e-3)
        assert restyle["text"][v5e][0] == ("compute-bound" if x >= ridge_point("tpu-v5e") else "memory-bound")
    # Each dropdown entry shows exactly one chip's roofline and marker.
    for k, button in enumerate(figure["layout"]["updatemenus"][0]["buttons"]):
        visible = button["args"][0]["visible"]
        assert sum(visible) == 2 and visible[k] and visible[len(chips) + k]


def test_step_time_explorer_curves_are_decode_step_time(explorers):
    steps = explorers["step"].figure["layout"]["sliders"][0]["steps"]
    per_config = 5
    rng = np.random.default_rng(0)
    for _ in range(6):  # a handful of random (context, configuration, batch) points
        s, c, b = (int(rng.integers(len(STEP_CONTEXTS))), int(rng.integers(len(STEP_CONFIGS))),
                   int(rng.integers(len(STEP_BATCHES))))
        model, chip, n = STEP_CONFIGS[c]
        ys = steps[s]["args"][0]["y"]
        bound = decode_step_time(model, chip, n, STEP_BATCHES[b], STEP_CONTEXTS[s], check_capacity=False)
        for term, values in zip(("kv_s", "weight_s", "compute_s", "total_s"), ys[c * per_config:]):
            assert values[b] == pytest.approx(getattr(bound, term) * 1e3, rel=1e-3)
        fits = steps[s]["args"][0]["x"][c * per_config + 4][0]
        assert fits == max_batch_size(model, chip, n, STEP_CONTEXTS[s])


def test_serving_explorer_percentiles_are_ordered_and_ttft_grows_with_load(explorers):
    figure = explorers["serving"].figure
    steps = figure["layout"]["sliders"][0]["steps"]
    p50, p99 = (np.array(step["args"][0]["y"], dtype=float) for step in (steps[0], steps[-1]))
    assert np.all(p99 >= p50 - 1e-9)
    naive_ttft = p99[0]  # first trace: short prompts, naive engine, TTFT against load
    assert naive_ttft[-1] > naive_ttft[0]


def test_figure_data_cannot_end_the_script_it_is_written_into():
    # A model named like markup (a pasted config's _name_or_path) stays data: the only "</script>" is the page's own,
    # and the figure read back from the page is the figure.
    hostile = get_model("llama3-8b").with_(name="</script><img src=x onerror=alert(1)><!--&")
    explorer = step_time_explorer(configs=((hostile, "h100", 1),), contexts=(1024,), batches=(1, 8))
    html = explorer.html()
    assert html.count("</script>") == 1 and html.endswith("</script>") and "<img" not in html and "<!--" not in html
    figure = html[html.index("var fig = ") + len("var fig = "):html.index(";\n  Plotly.newPlot")]
    assert json.loads(figure) == explorer.figure and hostile.name in figure.encode().decode("unicode_escape")
    with pytest.raises(ValueError, match=r"Explorer name '\"><script>' is the id of its <div>"):
        Explorer('"><script>', {})
