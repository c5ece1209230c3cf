"""The figure checks themselves: a figure drawn from the library passes, a planted plotting bug or a figure nobody
checks raises, and a check's inputs come from the notebook's show_figure call, never from its namespace: a missing or
misnamed input raises (nbval then runs every check on every figure of every notebook, inside the notebooks' own run)."""

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scaling_lib.book import figure_checks  # noqa: E402
from scaling_lib.book.figure_checks import FigureDataError, check_figure, core, figure_check, show_figure  # noqa: E402
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


def kv_share_figure(share):
    """Chapter 5's 'when the cache takes over' figure, with `share(step)` as the plotted quantity."""
    contexts = np.unique(np.geomspace(64, 131072, 30).astype(int))
    fig, ax = plt.subplots()
    for batch in (1, 64):
        steps = [decode_step_time("llama3-70b", "tpu-7x", 8, batch, int(s), check_capacity=False) for s in contexts]
        ax.semilogx(contexts, [share(s) for s in steps], label=f"B = {batch}")
    ax.axvline(kv_compute_crossover_context("llama3-70b", "tpu-7x"), label="$S^*$ = 2,000 tokens")
    ax.set_title("llama3-70b on 8 x tpu-7x (bf16): when the cache takes over")
    return fig


def test_a_figure_drawn_from_the_library_passes():
    fig = kv_share_figure(lambda s: s.kv_s / s.total_s)
    assert check_figure(fig, strict=True) == 1
    plt.close(fig)


@pytest.mark.parametrize("bug", [lambda s: s.kv_s / (s.kv_s + s.compute_s),  # dropped the weight read
                                 lambda s: s.kv_s / s.total_s * 100])  # percent on an axis of fractions
def test_a_plotting_bug_is_caught(bug):
    fig = kv_share_figure(bug)
    with pytest.raises(FigureDataError, match=r"KV share at B = \d+: plotted"):
        check_figure(fig, strict=True)
    plt.close(fig)


def test_a_figure_with_the_wrong_series_or_a_missing_point_is_caught():
    tokens = np.unique(np.logspace(0, 4, 50).astype(int))
    fig, ax = plt.subplots()
    ax.loglog(tokens, [attention_intensity(int(t), int(t)) for t in tokens], label="prefill, MHA")
    ax.loglog(tokens, [attention_intensity(1, int(s), 8) for s in tokens], label="decode, MHA")  # the GQA curve
    ax.loglog(tokens, [attention_intensity(1, int(s), 8) for s in tokens], label="decode, GQA $G = 8$")
    ax.axhline(ridge_point("tpu-v5e"), label="ridge point, tpu-v5e")
    ax.set_title("Attention intensity: prefill grows with the prompt, decode stays near G")
    with pytest.raises(FigureDataError, match="decode attention intensity"):
        check_figure(fig, strict=True)
    plt.close(fig)
    fig, ax = plt.subplots()
    rows = kv_lever_table("llama2-13b", 8192, batch=64)
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r.stored_saving for r in rows], height=0.4, label="capacity (bytes stored)")
    ax.barh(y + 0.2, [r.read_saving for r in rows][:-1] + [1.0], height=0.4, label="bandwidth (bytes read per step)")
    ax.set_yticks(y, [r.lever for r in rows])
    ax.set_title("LLaMA-2-13B, batch 64 up to 8,192 tokens: KV-cache levers")
    with pytest.raises(FigureDataError, match="read savings"):
        check_figure(fig, strict=True)
    plt.close(fig)


def test_an_unchecked_figure_raises_only_in_strict_mode():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set_title("a reader's own figure")
    assert check_figure(fig, strict=False) == 0
    assert check_figure(fig, dict(chip="tpu-v4"), strict=False) == 0  # a retitled chapter figure, shown with inputs
    with pytest.raises(FigureDataError, match=r"a reader's own figure.*has no data check"):
        check_figure(fig, strict=True)
    plt.close(fig)


def test_install_wraps_show_once_and_checks_every_open_figure(monkeypatch):
    shown = []
    monkeypatch.setattr(core, "_ORIGINAL_SHOW", None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(True))
    figure_checks.install()
    figure_checks.install()  # idempotent
    fig = kv_share_figure(lambda s: s.kv_s / s.total_s * 2)
    with pytest.raises(FigureDataError):
        plt.show()
    assert not shown  # the broken figure never reached the screen
    plt.close(fig)
    fig = kv_share_figure(lambda s: s.kv_s / s.total_s)
    plt.show()
    assert shown == [True]
    plt.close(fig)


def frontier_figure(dtype_of):
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


def test_the_frontier_figure_passes_and_catches_curves_of_the_wrong_weights():
    assert check_figure(frontier_figure(lambda dtype: dtype), strict=True) == 1
    swapped = frontier_figure(lambda dtype: {"bf16": "int8", "int8": "bf16"}[dtype])
    with pytest.raises(FigureDataError, match="bf16 frontier"):
        check_figure(swapped, strict=True)


def prefill_figure(n_chips=8):
    """Chapter 14's batched-prefill figure of llama3-70b on `n_chips` TPU v5e."""
    fig, (latency_ax, rate_ax) = plt.subplots(1, 2)
    batches = np.arange(1, 9)
    for ax, title in ((latency_ax, "Latency of a batched prefill"), (rate_ax, "Throughput of a batched prefill")):
        seconds = np.array([prefill_latency("llama3-70b", "tpu-v5e", n_chips, 32, batch=int(b)) for b in batches])
        ax.plot(batches, seconds * 1e3 if ax is latency_ax else batches * 32 / seconds, label="T = 32")
        ax.set_title(title)
    return fig


def test_the_prefill_figure_catches_the_wrong_chip_count():
    fig = prefill_figure(8)
    inputs = dict(model="llama3-70b", chip="tpu-v5e", n_chips=16)  # the notebook's 16 chips, drawn for 8
    with pytest.raises(FigureDataError, match="Latency of a batched prefill: T = 32"):
        check_figure(fig, inputs, strict=True)
    assert check_figure(fig, dict(inputs, n_chips=8), strict=True) == 1


def test_a_missing_input_raises_naming_the_input_and_the_check():
    fig = prefill_figure(8)
    with pytest.raises(TypeError, match=r"ch14\._ch14_prefill.*\['n_chips'\]"):
        check_figure(fig, dict(model="llama3-70b", chip="tpu-v5e"), strict=True)
    with pytest.raises(TypeError, match=r"\['model', 'chip', 'n_chips'\].*show_figure\(model="):
        check_figure(fig, strict=True)


def test_plain_show_of_a_figure_whose_check_needs_inputs_raises_and_show_figure_passes_them(monkeypatch):
    shown = []
    monkeypatch.setattr(core, "_ORIGINAL_SHOW", None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(True))
    figure_checks.install()
    prefill_figure(8)
    with pytest.raises(TypeError, match="n_chips"):
        plt.show()  # the notebook forgot its inputs: an error, not a silent skip
    assert not shown
    show_figure(model="llama3-70b", chip="tpu-v5e", n_chips=8)
    assert shown == [True]


def test_an_input_no_check_takes_raises():
    fig = prefill_figure(8)  # a notebook that renamed its input (N instead of n_chips) or passes a stray one
    with pytest.raises(TypeError, match=r"\['N'\] are taken by no check"):
        check_figure(fig, dict(model="llama3-70b", chip="tpu-v5e", n_chips=8, N=8), strict=True)


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


def test_a_check_fed_the_wrong_input_fails():
    assert check_figure(speculation_figure(0.05), dict(cost=0.05), strict=True) == 1
    with pytest.raises(FigureDataError, match=r"speedup, \$\\alpha\$ = 0\.6: plotted"):
        check_figure(speculation_figure(0.05), dict(cost=0.1), strict=True)  # the notebook drew another cost


def test_a_check_cannot_default_an_input():
    before = list(figure_checks.CHECKS)
    with pytest.raises(TypeError, match=r"inputs \['chip'\] have defaults"):
        @figure_check(r"^never matches$")
        def fallback(suptitle, axes, *, chip="tpu-v4"):
            pass
    assert figure_checks.CHECKS == before


def test_every_check_lives_in_its_chapters_module():
    modules = {module.__name__ for module in figure_checks.CHAPTERS}
    assert {check.function.__module__ for check in figure_checks.CHECKS} == modules  # and each registers one
    assert len(figure_checks.CHECKS) >= 41


def test_the_package_never_reads_the_notebooks_namespace():
    """The behaviour is pinned above (inputs come only from show_figure); this guards the source as well."""
    package = Path(figure_checks.__file__).parent
    for path in sorted(package.glob("*.py")):
        source = path.read_text()
        found = re.findall(r"get_ipython|user_ns|\bns\.get\b|\bns\[|globals\(\)", source)
        assert not found, f"{path.name} reads the notebook's namespace: {found}"


def _growth_figure(scale_mean=1.0):
    """Chapter 13's second figure (issue 24, item 23), drawn from qwix_quant on small inputs."""
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


@pytest.mark.tiny  # runs Qwix and JAX
def test_chapter_13_error_growth_figure_is_checked_against_qwix():
    fig, ns = _growth_figure()
    assert check_figure(fig, ns, strict=True) == 1
    plt.close(fig)
    fig, ns = _growth_figure(scale_mean=2.0)
    with pytest.raises(FigureDataError, match="mean error"):
        check_figure(fig, ns, strict=True)


def test_a_readers_figure_with_a_chapter_title_and_other_data_shows_when_the_tests_are_not_running(monkeypatch):
    shown = []
    monkeypatch.delenv(core.STRICT_ENV, raising=False)
    monkeypatch.setattr(core, "_ORIGINAL_SHOW", None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(True))
    from scaling_lib.book.notebook import setup
    setup()
    prefill_figure(8)  # chapter 14's title, drawn for 8 chips while the reader says 16: a check would raise
    plt.show()
    show_figure(model="llama3-70b", chip="tpu-v5e", n_chips=16)
    assert shown == [True, True] and plt.show is not None and core._ORIGINAL_SHOW is None  # show never wrapped
