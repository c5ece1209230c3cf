"""Live explorers for the rendered book: Plotly figures whose sliders and dropdowns switch between traces that Python
precomputed from scaling_lib, so they respond in the HTML page with no kernel and no network.

Every number an explorer can show is computed here, by the same library functions the chapters call; the page's
plotly.js (copied locally into the built book by book/_ext/explorers.py, never fetched from a CDN) only swaps
precomputed arrays. Two kinds of control combine without any hand-written logic:
  a dropdown picks which group of traces is visible (`visible` restyle), and
  a slider replaces the y (and x) data of every trace at once (`restyle` with one array per trace),
so a (dropdown, slider) pair shows a 2-D grid of precomputed states. These are for readers of the HTML book.

Their twins for readers who run the notebooks are at the end of this module: ipywidgets controls over every input of
the chapter's report (`roofline_widgets`, `step_time_widgets`), which recompute it with a live kernel; the notebook
keeps one line, `display(roofline_widgets())`. Used in chapters 1, 5 and 9.
"""

import json
import re
from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go

from ..hardware import chip_names
from ..inference import decode_step_time, explain_decode
from ..memory import max_batch_size
from ..models import model_names
from ..roofline import attainable_flops, explain_matmul, matmul_intensity, ridge_point
from ..serving import prefill_latency
from ..simulator import ENGINES, ServingConfig, poisson_workload, simulate, simulate_disaggregated
from .plotting import CHIP_COLORS, draw_matmul_on_roofline

_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
_FALLBACK = ("This interactive figure runs in the built HTML book, which ships its own plotly.js; in a running "
             "notebook, use the ipywidgets explorer next to it.")


@dataclass(frozen=True)
class Explorer:
    """A precomputed interactive figure: `figure` is Plotly's JSON-able dict (data, layout with its controls)."""

    name: str  # also the id of its <div> in the page
    figure: dict
    height_px: int = 460

    def __post_init__(self):
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", self.name):
            raise ValueError(f"Explorer name {self.name!r} is the id of its <div> in the page: letters, digits, '-' "
                             "and '_', starting with a letter, such as 'roofline-explorer'")

    @property
    def data_bytes(self) -> int:
        """Size of the figure's JSON, what the page carries for this explorer (the issue's budget: 300 kB)."""
        return len(self.json())

    def json(self) -> str:
        return json.dumps(self.figure, separators=(",", ":"), sort_keys=True)

    def html(self) -> str:
        """A <div> and the script that draws it with the page's Plotly (a message when Plotly is absent)."""
        return (f'<div class="book-explorer" id="{self.name}" style="width:100%;height:{self.height_px}px"></div>\n'
                f"<script>(function () {{\n"
                f'  var el = document.getElementById("{self.name}");\n'
                f"  if (typeof Plotly === \"undefined\") {{ el.textContent = {json.dumps(_FALLBACK)}; return; }}\n"
                f"  var fig = {_inside_script(self.json())};\n"
                f"  Plotly.newPlot(el, fig.data, fig.layout, {json.dumps(_CONFIG, sort_keys=True)});\n"
                f"}})();</script>")

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:  # the text a notebook stores beside the HTML: short, not the whole figure
        return f"Explorer({self.name!r}, {self.data_bytes / 1e3:.1f} kB of precomputed states)"


def _inside_script(json_text: str) -> str:
    """JSON text that cannot end or comment out the <script> it is written into: '<', '>' and '&' (only ever inside
    JSON strings) as their \\u escapes, so a model named '</script><img ...>' stays data; U+2028 and U+2029 too."""
    for char in "<>&\u2028\u2029":
        json_text = json_text.replace(char, f"\\u{ord(char):04x}")
    return json_text


def _figure_dict(fig: go.Figure) -> dict:
    """Plotly's own validated JSON form of a figure, with floats rounded to 4 significant digits (page size)."""
    def rounded(value):
        if isinstance(value, float):
            return float(f"{value:.4g}")
        if isinstance(value, list):
            return [rounded(v) for v in value]
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return value
    return rounded(json.loads(fig.to_json()))


def _layout(title: str, x_title: str, y_title: str, **axes) -> dict:
    return dict(title=dict(text=title, x=0.01), template="none", margin=dict(l=70, r=20, t=60, b=140),
                xaxis=dict(title=dict(text=x_title), showgrid=True, gridcolor="#eee", **axes.get("x", {})),
                yaxis=dict(title=dict(text=y_title), showgrid=True, gridcolor="#eee", **axes.get("y", {})),
                legend=dict(orientation="h", y=-0.45), font=dict(size=12))


def _dropdown(labels, visible_sets, active=0) -> dict:
    return dict(type="dropdown", x=0.0, y=1.12, xanchor="left", yanchor="bottom", active=active,
                buttons=[dict(label=label, method="restyle", args=[{"visible": visible}])
                         for label, visible in zip(labels, visible_sets)])


def _slider(prefix: str, labels, restyles, active=0) -> dict:
    return dict(active=active, currentvalue=dict(prefix=prefix), pad=dict(t=50), len=0.9, x=0.05,
                steps=[dict(label=label, method="restyle", args=list(args)) for label, args in zip(labels, restyles)])


# ------------------------------------------------------------------------------------------------- chapter 1
ROOFLINE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 192, 240, 256, 320, 384, 512, 768, 1024, 2048, 4096)


def roofline_explorer(chips=None, batches=ROOFLINE_BATCHES, d_in: int = 8192, d_out: int = 8192) -> Explorer:
    """Chapter 1's roofline: pick a chip, slide the batch B of a bf16 [B, D] x [D, F] matmul along its roofline.

    For each chip: the roofline min(C, I W_hbm) (`roofline.attainable_flops`) and one marker at the matmul's
    intensity (`roofline.matmul_intensity`) for the slider's batch. The marker turns from memory- to compute-bound
    where B passes the chip's ridge point."""
    chips = tuple(chip_names() if chips is None else chips)
    intensities = np.logspace(-0.3, 4.3, 60)
    fig = go.Figure()
    for chip in chips:
        rates = [attainable_flops(float(i), chip) / 1e12 for i in intensities]
        fig.add_trace(go.Scatter(x=intensities.tolist(), y=rates, mode="lines", name=f"{chip} roofline",
                                 line=dict(color=CHIP_COLORS.get(chip, "#7f7f7f"))))
    points = {chip: [(matmul_intensity(b, d_in, d_out), attainable_flops(matmul_intensity(b, d_in, d_out), chip)
                      / 1e12) for b in batches] for chip in chips}
    start = batches.index(64) if 64 in batches else 0
    for chip in chips:
        x, y = points[chip][start]
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers+text", name=f"{chip}: the matmul",
                                 marker=dict(size=12, color=CHIP_COLORS.get(chip, "#7f7f7f"), symbol="diamond"),
                                 text=[_bound_text(chip, x)], textposition="top center"))
    n = len(chips)
    visible = [[c == k for c in range(n)] * 2 for k in range(n)]
    marker_ids = list(range(n, 2 * n))
    restyles = [({"x": [[points[c][j][0]] for c in chips], "y": [[points[c][j][1]] for c in chips],
                  "text": [[_bound_text(c, points[c][j][0])] for c in chips]}, marker_ids)
                for j in range(len(batches))]
    layout = _layout(f"A [B, {d_in:,}] x [{d_in:,}, {d_out:,}] bf16 matmul on its chip's roofline",
                     "arithmetic intensity (FLOPs per byte)", "attainable TFLOP/s",
                     x=dict(type="log"), y=dict(type="log"))
    layout["updatemenus"] = [_dropdown(chips, visible, active=chips.index("tpu-v5e") if "tpu-v5e" in chips else 0)]
    layout["sliders"] = [_slider("batch B = ", [str(b) for b in batches], restyles, active=start)]
    fig.update_layout(**layout)
    for trace, show in zip(fig.data, visible[layout["updatemenus"][0]["active"]]):
        trace.visible = show
    return Explorer("roofline-explorer", _figure_dict(fig))


def _bound_text(chip, intensity) -> str:
    return "compute-bound" if intensity >= ridge_point(chip) else "memory-bound"


# ------------------------------------------------------------------------------------------------- chapter 5
STEP_CONFIGS = (("llama3-70b", "tpu-7x", 8), ("llama3-70b", "tpu-v5e", 16), ("llama3-70b", "h100", 8),
                ("llama3-8b", "tpu-v5e", 4), ("llama3-8b", "h100", 1), ("llama2-13b", "tpu-v5e", 8))
STEP_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
STEP_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
_TERMS = (("kv_s", "reading the KV cache"), ("weight_s", "loading the weights"), ("compute_s", "the matmul FLOPs"),
          ("total_s", "the step (bound)"))


def step_time_explorer(configs=STEP_CONFIGS, contexts=STEP_CONTEXTS, batches=STEP_BATCHES) -> Explorer:
    """Chapter 5's step time: pick a server, slide the context; the bound's terms against batch (bf16).

    Each curve is `inference.decode_step_time(...)` in ms; the dotted vertical line is `memory.max_batch_size`,
    the largest batch whose KV caches fit next to the weights at that context (none: the weights do not fit)."""
    configs = tuple(configs)
    fig = go.Figure()
    colors = ("#fc9272", "#9ecae1", "#a1d99b", "#333333")
    per_config = len(_TERMS) + 1
    data = {}
    for model, chip, n in configs:
        for context in contexts:
            # the explorer draws the bound past the largest batch that fits and marks where that is (`fits`)
            steps = [decode_step_time(model, chip, n, b, context, check_capacity=False) for b in batches]
            fits = max_batch_size(model, chip, n, context)
            data[(model, chip, n, context)] = ([[getattr(s, term) * 1e3 for s in steps] for term, _ in _TERMS],
                                               fits)
    peak = max(max(series[-1]) for series, _ in data.values())
    start = contexts.index(8192) if 8192 in contexts else 0
    for model, chip, n in configs:
        series, fits = data[(model, chip, n, contexts[start])]
        for (term, label), values, color in zip(_TERMS, series, colors):
            fig.add_trace(go.Scatter(x=list(batches), y=values, mode="lines+markers", name=label,
                                     line=dict(color=color, width=3 if term == "total_s" else 2)))
        fig.add_trace(go.Scatter(x=[fits, fits], y=[0, peak], mode="lines", name="largest batch that fits in HBM",
                                 line=dict(color="#888", dash="dot")))
    labels = [f"{model} on {n} x {chip}" for model, chip, n in configs]
    visible = [[c == k for c in range(len(configs)) for _ in range(per_config)] for k in range(len(configs))]
    restyles = []
    for context in contexts:
        xs, ys = [], []
        for model, chip, n in configs:
            series, fits = data[(model, chip, n, context)]
            xs += [list(batches)] * len(_TERMS) + [[fits, fits]]
            ys += series + [[0, peak]]
        restyles.append(({"x": xs, "y": ys},))
    layout = _layout("Decode step-time bound against batch (bf16 weights, KV and math)", "batch B (sequences)",
                     "ms per step", x=dict(type="log"), y=dict(rangemode="tozero"))
    layout["updatemenus"] = [_dropdown(labels, visible)]
    layout["sliders"] = [_slider("context S = ", [f"{c:,}" for c in contexts], restyles, active=start)]
    fig.update_layout(**layout)
    for trace, show in zip(fig.data, visible[0]):
        trace.visible = show
    return Explorer("step-time-explorer", _figure_dict(fig))


# ------------------------------------------------------------------------------------------------- chapter 9
SERVING_LOADS = (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
SERVING_WORKLOADS = (("short prompts (256-1,024 tokens)", (256, 1024)), ("long prompts (2,048-6,144 tokens)",
                                                                         (2048, 6144)))
SERVING_PERCENTILES = (50, 90, 99)


def serving_explorer(config: ServingConfig | None = None, loads=SERVING_LOADS, workloads=SERVING_WORKLOADS,
                     percentiles=SERVING_PERCENTILES, n_requests: int = 200, seed: int = 0) -> Explorer:
    """Chapter 9's engines under load: pick a workload, slide the percentile; TTFT and TPOT per engine vs load.

    Each point is one seeded `simulator.simulate` (or `simulate_disaggregated`) run of `n_requests` Poisson requests on three co-located servers
    (or two prefill + one decode server when disaggregated), with outputs of 64 to 512 tokens."""
    config = config or ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=32, max_context_len=8192)
    loads, workloads = tuple(loads), tuple(workloads)
    results = {}
    for w, (_, prompt_len) in enumerate(workloads):
        for rate in loads:
            work = poisson_workload(rate, n_requests, prompt_len=prompt_len, output_len=(64, 512), seed=seed)
            for engine in ENGINES:
                if engine == "disaggregated":
                    run = simulate_disaggregated(config, work, n_prefill_servers=2, n_decode_servers=1)
                else:
                    run = simulate(config, work, engine, n_servers=3)
                results[(w, rate, engine)] = run
    fig = go.Figure().set_subplots(1, 2, subplot_titles=("time to first token (s)", "time per output token (ms)"))
    colors = {"naive": "#7f7f7f", "interleaved": "#1f77b4", "chunked": "#2ca02c", "disaggregated": "#d62728"}

    def series(w, engine, q):
        ttft = [float(np.nanpercentile(results[(w, r, engine)].ttft_s, q)) for r in loads]
        tpot = [1e3 * float(np.nanpercentile(results[(w, r, engine)].tpot_s, q)) for r in loads]
        return ttft, tpot

    start = len(percentiles) - 1
    for w in range(len(workloads)):
        for engine in ENGINES:
            ttft, tpot = series(w, engine, percentiles[start])
            fig.add_trace(go.Scatter(x=list(loads), y=ttft, mode="lines+markers", name=engine, legendgroup=engine,
                                     line=dict(color=colors[engine])), row=1, col=1)
            fig.add_trace(go.Scatter(x=list(loads), y=tpot, mode="lines+markers", name=engine, legendgroup=engine,
                                     showlegend=False, line=dict(color=colors[engine])), row=1, col=2)
    per_workload = 2 * len(ENGINES)
    visible = [[k == w for k in range(len(workloads)) for _ in range(per_workload)] for w in range(len(workloads))]
    restyles = []
    for q in percentiles:
        ys = []
        for w in range(len(workloads)):
            for engine in ENGINES:
                ys += list(series(w, engine, q))
        restyles.append(({"y": ys},))
    fig.update_layout(title=dict(text=f"Engines under load: {config.model} on {config.n_chips} x {config.chip} "
                                      "per server", x=0.01), template="none", margin=dict(l=60, r=20, t=90, b=140),
                      legend=dict(orientation="h", y=-0.45), font=dict(size=12),
                      updatemenus=[_dropdown([label for label, _ in workloads], visible)],
                      sliders=[_slider("percentile ", [f"p{q}" for q in percentiles], restyles, active=start)])
    fig.update_xaxes(title_text="load (requests per second)", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(type="log", showgrid=True, gridcolor="#eee")
    for trace, show in zip(fig.data, visible[0]):
        trace.visible = show
    return Explorer("serving-explorer", _figure_dict(fig), height_px=500)


def prefill_reference_s(config: ServingConfig, prompt_len: int) -> float:
    """One batch-1 prefill on the explorer's server (`serving.prefill_latency`): the floor of any TTFT it shows."""
    return prefill_latency(config.model, config.chip, config.n_chips, prompt_len, config.mfu)


# ----------------------------------------------------------------- ipywidgets twins, for a notebook with a kernel
def _powers_of_two(lo: int, hi: int) -> list[int]:
    return [2**k for k in range(lo, hi + 1)]


def roofline_widgets(d_in: int = 8192, d_out: int = 8192):
    """Chapter 1's explorer in a running notebook: a chip, the weight and math precisions and the batch B of a
    [B, d_in] x [d_in, d_out] matmul; each change prints `roofline.explain_matmul`'s report and redraws the matmul on
    its chip's roofline. The twin of `roofline_explorer`, which the HTML book shows."""
    chip_box = widgets.Dropdown(options=chip_names(), value="tpu-v5e", description="chip")
    weight_box = widgets.Dropdown(options=("bf16", "fp8", "int8"), value="bf16", description="weights")
    math_box = widgets.Dropdown(options=("bf16", "fp8", "int8"), value="bf16", description="math")
    batch_slider = widgets.SelectionSlider(options=_powers_of_two(0, 13), value=64, description="batch B")
    out = widgets.Output()

    def update(_change=None):
        with out:
            out.clear_output(wait=True)
            try:
                report = explain_matmul(chip_box.value, batch_slider.value, d_in, d_out, weight_box.value,
                                        math_box.value)
            except ValueError as error:  # e.g. a chip with no native rate for that math dtype
                print(error)
                return
            print(report.describe())
            fig, ax = plt.subplots(figsize=(6.0, 3.6), dpi=100)
            draw_matmul_on_roofline(ax, report)
            plt.show()

    for control in (chip_box, weight_box, math_box, batch_slider):
        control.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox([chip_box, weight_box, math_box]), batch_slider, out])


def step_time_widgets():
    """Chapter 5's explorer in a running notebook: dropdowns and sliders for every input of
    `inference.explain_decode`, and an output area showing its report. The twin of `step_time_explorer`."""
    dtypes = ("bf16", "fp8", "int8", "int4")
    controls = {
        "model": widgets.Dropdown(options=model_names(), value="llama3-70b", description="model"),
        "chip": widgets.Dropdown(options=chip_names(), value="tpu-7x", description="chip"),
        "n_chips": widgets.Dropdown(options=_powers_of_two(0, 8), value=8, description="chips"),
        "batch": widgets.SelectionSlider(options=_powers_of_two(0, 12), value=64, description="batch"),
        "context_len": widgets.SelectionSlider(options=_powers_of_two(7, 17), value=32768, description="context"),
        "weight_dtype": widgets.Dropdown(options=dtypes, value="bf16", description="weights"),
        "kv_dtype": widgets.Dropdown(options=dtypes, value="bf16", description="KV cache"),
        "compute_dtype": widgets.Dropdown(options=("bf16", "fp8", "int8"), value="bf16", description="math"),
    }
    report_area = widgets.Output()

    def show(_change=None):
        with report_area:
            report_area.clear_output(wait=True)
            try:
                print(explain_decode(**{name: control.value for name, control in controls.items()}).describe())
            except ValueError as error:  # e.g. a compute dtype the chip has no rate for
                print(f"Not a valid configuration: {error}")

    for control in controls.values():
        control.observe(show, names="value")
    show()
    boxes = list(controls.values())
    return widgets.VBox([widgets.HBox(boxes[:4]), widgets.HBox(boxes[4:]), report_area])
