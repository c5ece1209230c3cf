"""The figure checks themselves (scaling_lib.book.figure_checks): a figure drawn from the library passes, a planted
plotting bug or, under the tests, a figure nobody checks raises; a check's inputs come from the notebook's show_figure
call, never from its namespace, so a missing, stray or defaulted input raises; and outside the tests a reader's own
figure always shows (nbval then runs every check on every figure of every notebook, inside the notebooks' own run)."""

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scaling_lib.book import figure_checks  # noqa: E402
from scaling_lib.book.figure_checks import FigureDataError, check_figure, core, figure_check, show_figure  # noqa: E402
from scaling_lib.book.notebook import setup  # noqa: E402
from scaling_lib.frontier import measured_mfu, measured_step_s, pareto_frontier, sweep  # noqa: E402
from scaling_lib.inference import decode_step_time, kv_compute_crossover_context  # noqa: E402
from scaling_lib.kv_levers import kv_lever_table  # noqa: E402
from scaling_lib.measurements import pope_rows  # noqa: E402
from scaling_lib.roofline import attention_intensity, ridge_point  # noqa: E402
from scaling_lib.serving import prefill_latency  # noqa: E402
from scaling_lib.speculative import best_lookahead, expected_tokens_per_step, speedup  # noqa: E402


@pytest.fixture(autouse=True)
def no_open_figures():
    plt.close("all")
    yield
    plt.close("all")


def kv_share_figure(share=lambda s: s.kv_s / s.total_s):
    """Chapter 5's 'when the cache takes over' figure, with `share(step)` as the plotted quantity."""
    contexts = np.unique(np.geomspace(64, 131072, 30).astype(int))
    fig, ax = plt.subplots()
    for batch in (1, 64):
        steps = [decode_step_time("llama3-70b", "tpu-7x", 8, batch, int(s), check_capacity=False) for s in contexts]
        ax.semilogx(contexts, [share(s) for s in steps], label=f"B = {batch}")
    ax.axvline(kv_compute_crossover_context("llama3-70b", "tpu-7x"), label="$S^*$ = 2,000 tokens")
    ax.set_title("llama3-70b on 8 x tpu-7x (bf16): when the cache takes over")
    return fig


def intensity_figure_with_the_gqa_curve_as_mha():
    """Chapter 1's attention-intensity figure whose multi-head decode curve is the GQA one."""
    tokens = np.unique(np.logspace(0, 4, 50).astype(int))
    fig, ax = plt.subplots()
    ax.loglog(tokens, [attention_intensity(int(t), int(t)) for t in tokens], label="prefill, MHA")
    ax.loglog(tokens, [attention_intensity(1, int(s), 8) for s in tokens], label="decode, MHA")  # the GQA curve
    ax.loglog(tokens, [attention_intensity(1, int(s), 8) for s in tokens], label="decode, GQA $G = 8$")
    ax.axhline(ridge_point("tpu-v5e"), label="ridge point, tpu-v5e")
    ax.set_title("Attention intensity: prefill grows with the prompt, decode stays near G")
    return fig


def lever_figure_with_a_wrong_last_bar():
    """Chapter 6's KV-cache levers, the last bandwidth bar drawn at 1."""
    fig, ax = plt.subplots()
    rows = kv_lever_table("llama2-13b", 8192, batch=64)
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r.stored_saving for r in rows], height=0.4, label="capacity (bytes stored)")
    ax.barh(y + 0.2, [r.read_saving for r in rows][:-1] + [1.0], height=0.4, label="bandwidth (bytes read per step)")
    ax.set_yticks(y, [r.lever for r in rows])
    ax.set_title("LLaMA-2-13B, batch 64 up to 8,192 tokens: KV-cache levers")
    return fig


def frontier_figure(dtype_of=lambda dtype: dtype):
    """Chapter 12's latency-MFU panel for PaLM 62B decode; `dtype_of(label_dtype)` is the dtype actually swept."""
    fig, ax = plt.subplots()
    for dtype in ("bf16", "int8"):
        front = pareto_frontier(sweep("palm-62b", "tpu-v4", "decode", weight_dtype=dtype_of(dtype), pad_heads=True))
        ax.plot([p.total_s * 1e3 for p in front], [100 * p.mfu for p in front], label=f"model frontier, {dtype} weights")
    for row in (r for r in pope_rows() if (r.model, r.phase) == ("palm-62b", "decode")):
        ax.plot(measured_step_s(row) * 1e3, 100 * measured_mfu(row), "k*")
    ax.set_title("palm-62b, decode")
    fig.suptitle("Latency against MFU on TPU v4: the cost model's frontier and the measured configurations")
    return fig


def prefill_figure(n_chips=8):
    """Chapter 14's batched-prefill figure of llama3-70b on `n_chips` TPU v5e."""
    fig, (latency_ax, rate_ax) = plt.subplots(1, 2)
    batches = np.arange(1, 9)
    for ax, title in ((latency_ax, "Latency of a batched prefill"), (rate_ax, "Throughput of a batched prefill")):
        seconds = np.array([prefill_latency("llama3-70b", "tpu-v5e", n_chips, 32, batch=int(b)) for b in batches])
        ax.plot(batches, seconds * 1e3 if ax is latency_ax else batches * 32 / seconds, label="T = 32")
        ax.set_title(title)
    return fig


PREFILL_INPUTS = dict(model="llama3-70b", chip="tpu-v5e", n_chips=8)


def speculation_figure(cost):
    """Chapter 10's first figure, drawn for draft cost `cost`."""
    ks = np.arange(0, 11)
    fig, (left, right) = plt.subplots(1, 2)
    for a in (0.6, 0.8):
        left.plot(ks, [expected_tokens_per_step(int(k), a) for k in ks], label=f"$\\alpha$ = {a}")
        right.plot(ks, [speedup(int(k), a, cost) for k in ks], label=f"$\\alpha$ = {a}")
        best = best_lookahead(a, cost)
        right.plot([best], [speedup(best, a, cost)], "k*")
    left.set_title(r"Tokens per step saturate at $1/(1-\alpha)$")
    right.set_title(f"Speedup, draft cost c = {cost:.3f}")
    return fig


def growth_figure(scale_mean=1.0):
    """Chapter 13's error-growth figure, drawn from qwix_quant on small inputs, and the inputs its check takes."""
    from scaling_lib.tiny import qwix_quant as qq

    lengths = (32, 128)

    def inputs_of_length(k, seed=2):
        g = np.random.default_rng(seed)
        return g.standard_normal((8, k)).astype(np.float32), (g.standard_normal((k, 16)) / 16).astype(np.float32)

    fig, axes = plt.subplots(1, len(qq.SCHEMES))
    for ax, scheme in zip(axes, qq.SCHEMES):
        bounds, worst, mean = [], [], []
        for k in lengths:
            xs, ws = inputs_of_length(k)
            err = np.abs(np.asarray(qq.matmul(xs, ws, scheme), np.float64) - xs.astype(np.float64) @ ws)
            bounds.append(qq.matmul_error_bound(xs, ws, scheme).max())
            worst.append(err.max())
            mean.append(err.mean() * scale_mean)
        ax.loglog(lengths, bounds, label="largest bound")
        ax.loglog(lengths, worst, label="largest error")
        ax.loglog(lengths, mean, label="mean error")
        ax.set_title(scheme)
    fig.suptitle("Quantization error of a 8 x K x 16 matmul against K")
    return fig, {"lengths": lengths, "inputs_of_length": inputs_of_length}


# (a figure as a notebook draws it, the inputs its show_figure call passes, the error a check raises or None)
FIGURES = [
    pytest.param(lambda: (kv_share_figure(), {}), None, id="chapter 5's KV share"),
    pytest.param(lambda: (kv_share_figure(lambda s: s.kv_s / (s.kv_s + s.compute_s)), {}),
                 r"KV share at B = \d+: plotted", id="the weight read dropped from the step"),
    pytest.param(lambda: (kv_share_figure(lambda s: s.kv_s / s.total_s * 100), {}), r"KV share at B = \d+: plotted",
                 id="percent on an axis of fractions"),
    pytest.param(lambda: (kv_share_figure(lambda s: s.kv_s / s.total_s * (1 + 1e-8)), {}),
                 r"KV share at B = \d+: plotted", id="one part in 10^8: ten times the 1e-9 a check allows"),
    pytest.param(lambda: (intensity_figure_with_the_gqa_curve_as_mha(), {}), "decode attention intensity",
                 id="the wrong series under a label"),
    pytest.param(lambda: (lever_figure_with_a_wrong_last_bar(), {}), "read savings", id="one bar wrong"),
    pytest.param(lambda: (frontier_figure(), {}), None, id="chapter 12's frontier"),
    pytest.param(lambda: (frontier_figure(lambda dtype: {"bf16": "int8", "int8": "bf16"}[dtype]), {}),
                 "bf16 frontier", id="the curves of the wrong weights"),
    pytest.param(lambda: (prefill_figure(8), PREFILL_INPUTS), None, id="chapter 14's prefill"),
    pytest.param(lambda: (prefill_figure(8), dict(PREFILL_INPUTS, n_chips=16)), "Latency of a batched prefill: T = 32",
                 id="drawn for 8 chips where the notebook says 16"),
    pytest.param(lambda: (speculation_figure(0.05), dict(cost=0.05)), None, id="chapter 10's speedup"),
    pytest.param(lambda: (speculation_figure(0.05), dict(cost=0.1)), r"speedup, \$\\alpha\$ = 0\.6: plotted",
                 id="drawn for another draft cost than the notebook's"),
    pytest.param(lambda: growth_figure(), None, id="chapter 13's error growth, against Qwix"),
    pytest.param(lambda: growth_figure(scale_mean=2.0), "mean error", id="one curve doubled"),
]


@pytest.mark.parametrize("draw, error", FIGURES)
def test_a_figure_drawn_from_the_library_passes_and_a_planted_plotting_bug_is_caught(draw, error):
    fig, inputs = draw()
    if error is None:
        assert check_figure(fig, inputs, strict=True) == 1
    else:
        with pytest.raises(FigureDataError, match=error):
            check_figure(fig, inputs, strict=True)


def _a_check_with_a_default():
    @figure_check(r"^never matches$")
    def fallback(suptitle, axes, *, chip="tpu-v4"):
        pass


@pytest.mark.parametrize("call, error", [
    pytest.param(lambda: check_figure(prefill_figure(8), dict(model="llama3-70b", chip="tpu-v5e"), strict=True),
                 r"ch14\._ch14_prefill.*\['n_chips'\]", id="one missing"),
    pytest.param(lambda: check_figure(prefill_figure(8), {}, strict=True),
                 r"\['model', 'chip', 'n_chips'\].*show_figure\(model=", id="all missing: the call to write"),
    pytest.param(lambda: check_figure(prefill_figure(8), dict(PREFILL_INPUTS, N=8), strict=True),
                 r"\['N'\] are taken by no check", id="a stray or renamed input"),
    pytest.param(_a_check_with_a_default, r"inputs \['chip'\] have defaults",
                 id="a check that would default an input is not registered"),
])
def test_a_figure_s_inputs_are_exactly_those_its_check_takes_with_no_default(call, error):
    before = list(figure_checks.CHECKS)
    with pytest.raises(TypeError, match=error):
        call()
    assert figure_checks.CHECKS == before


def test_under_the_tests_show_checks_every_open_figure_before_it_reaches_the_screen(monkeypatch):
    shown = []
    monkeypatch.setattr(core, "_ORIGINAL_SHOW", None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(True))
    figure_checks.install()
    figure_checks.install()  # idempotent: show is wrapped once
    fig = kv_share_figure(lambda s: s.kv_s / s.total_s * 2)
    with pytest.raises(FigureDataError):
        plt.show()
    assert not shown  # the broken figure never reached the screen
    plt.close(fig)
    fig = kv_share_figure()
    plt.show()
    assert shown == [True]
    plt.close(fig)
    prefill_figure(8)
    with pytest.raises(TypeError, match="n_chips"):
        plt.show()  # the notebook forgot its inputs: an error, not a silent skip
    assert shown == [True]
    show_figure(**PREFILL_INPUTS)
    assert shown == [True, True]


def test_outside_the_tests_a_readers_figure_shows_and_under_them_an_unchecked_figure_raises(monkeypatch):
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_title("a reader's own figure")
    assert check_figure(fig, strict=False) == 0
    assert check_figure(fig, dict(chip="tpu-v4"), strict=False) == 0  # a retitled chapter figure, shown with inputs
    with pytest.raises(FigureDataError, match=r"a reader's own figure.*has no data check"):
        check_figure(fig, strict=True)
    plt.close(fig)
    shown = []
    monkeypatch.delenv(core.STRICT_ENV, raising=False)
    monkeypatch.setattr(core, "_ORIGINAL_SHOW", None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(True))
    setup()
    prefill_figure(8)  # chapter 14's title, drawn for 8 chips while the reader says 16: a check would raise
    plt.show()
    show_figure(model="llama3-70b", chip="tpu-v5e", n_chips=16)
    assert shown == [True, True] and plt.show is not None and core._ORIGINAL_SHOW is None  # show never wrapped


def test_every_check_lives_in_its_chapters_module_and_never_reads_the_notebooks_namespace():
    modules = {module.__name__ for module in figure_checks.CHAPTERS}
    assert {check.function.__module__ for check in figure_checks.CHECKS} == modules  # and each registers one
    assert len(figure_checks.CHECKS) >= 41
    # the behaviour is pinned above (inputs come only from show_figure); this guards the source as well
    package = Path(figure_checks.__file__).parent
    for path in sorted(package.glob("*.py")):
        found = re.findall(r"get_ipython|user_ns|\bns\.get\b|\bns\[|globals\(\)", path.read_text())
        assert not found, f"{path.name} reads the notebook's namespace: {found}"
