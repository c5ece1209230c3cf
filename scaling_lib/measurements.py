"""Published measurements of real systems, as data: each row carries its source.

The numbers live in CSV files under `scaling_lib/data/` (typed once, there); this module only reads them into
frozen rows. The tables:

- `trtllm_rows()`: TensorRT-LLM's published offline throughput (total output tokens/s of the whole deployment) for
  LLaMA-3.1-8B and LLaMA-3.3-70B FP8 checkpoints on H100 and H200, 10 input/output shapes each (40 rows). The
  models have the shapes of `models.get_model("llama3-8b")` and `"llama3-70b"`. The page does not state the KV-cache
  dtype; chapter 11 tests both.
- `pope_rows()`: Pope et al. 2022, Tables 2 and 3: PaLM 540B and 62B on TPU v4 at 2,048 tokens of context, one
  prefill and one 64-step decode per scenario (8 rows, latency and MFU).
- `nccl_rows()`: NCCL all-reduce bus bandwidth on 8 H100s, as the NCCL maintainers state it (2 rows).
- `collective_rows()`: published collective timings (nccl-tests on 2-72 H100, H200 and GB200 GPUs, 8 to 64 H100 across
  nodes, the Scaling Book's profiled TPU v5e all-gathers), each as the source gives it (a time, an algorithm
  bandwidth or a bus bandwidth) with its source.
- `published_runs()`: 263 published inference runs for the calibration of chapter 11 (TensorRT-LLM v0.14 across
  tensor-parallel degrees 1-8, FP8 and FP16, dense and Mixtral MoE; TensorRT-LLM 0.5/0.6.1 static batches and
  first-token latencies; JetStream on TPU v5e), each with its source.
- `validation_runs()`: 1,553 further published runs kept out of every fit (TensorRT-LLM v0.9, v0.13, v0.15, v0.17,
  v0.20 and v1.0 tables on H100, H200, A100, B200 and GB200, TP 1-8, FP16, FP8 and NVFP4; JetStream-PyTorch on TPU
  v5e-8; AMD's comparison of a vLLM build on 8 MI300X with TensorRT-LLM 0.16 on 8 H100, offline throughput and batches
  of 1 to 128; dstack's LLaMA-3.1-405B batches of 4 to 256 on 8 MI300X and 8 H100; vLLM's own Qwen3 MoE batches on 1
  and 4 MI300X): the out-of-sample check of `calibration.out_of_sample_summary` (one page column, impossible as
  published, is kept in the file but excluded).
- `sweep_rows()`: published closed-loop concurrency sweeps (TTFT, TPOT, output tokens/s against the number of
  clients), each with its source: dstack's DeepSeek-R1 study on 8 H200 and 8 MI300X (30 rows), SGLang's cookbook runs
  of LLaMA-3.1-70B on 8 A100 and Qwen3-235B and DeepSeek-R1 on 8 B200 at 1 to 100 clients, and of Llama 4 Scout and
  Maverick on 8 MI300X at 16 and 100 clients (its one-client Llama 4 runs are left out: their p99 first token is 39-48
  s, a cold start inside every mean they print), and of Qwen3-Next-80B-A3B and gpt-oss-120b on 8 B200 with ShareGPT
  conversations at 1 and 100 clients (32 rows), and GPUStack's runs at 1 to 8 clients (10 rows), and Google's TPU
  recipe, LLaMA-3.3-70B on a TPU v6e-8 at 64 and 128 clients (2 rows, whose first tokens
  `simulator.benchmark_estimate` prices; their TPOT and tokens/s are the TPU fit's, in gathered_runs.csv). Used in
  chapter 9 and the load model's tests; only the front end (`calibration.fit_request_s`) is fitted on them, on the
  runs at one to four clients.
- `burst_rows()`: GPUStack's published runs that sent every request at once (73 rows), which
  `simulator.burst_estimate` prices; nothing is fitted on them.
- `accelerator_rows()`: this book's own measurements on a real accelerator (one NVIDIA H200, 2026-12-04), grouped in
  runs, each row with its date, software, method and source: the bf16 rates and the critical-batch curve chapter 1
  sets against its prediction (`accelerator_knee`), the book's microbenchmarks before and after they sized their calls,
  and chapter 11's decode sweep of the tiny decoder (`accelerator_decode_sweep`). bench/bench_accelerator.py measures
  the same on whatever accelerator is present and writes rows of this format (`write_accelerator_rows`).

Used in chapter 11, *How close do real systems come?*.
"""

import csv
import functools
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from .dtypes import MixedWeights
from .estimate import Deployment
from .formats import matmul_dtype
from .hardware import get_chip
from .models import Transformer, read_hf_config
from .roofline import SLOWDOWN, critical_batch_from_rates, fit_batch_roofline, slowdown_knee

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class ThroughputRow:
    """One measured offline-throughput benchmark: identical requests, fed at an infinite rate."""

    model: str  # our name for the model's shapes
    checkpoint: str
    gpu: str
    n_gpus: int
    tensor_parallel: int
    input_len: int
    output_len: int
    weight_dtype: str
    output_tokens_per_s: float
    source: str

    @property
    def label(self) -> str:
        return f"{self.model} {self.gpu} TP{self.tensor_parallel} {self.input_len}/{self.output_len}"


@dataclass(frozen=True)
class PopeRow:
    """One Pareto point of Pope et al. 2022 (Tables 2, 3): a prefill over the context, or 64 decode steps."""

    model: str
    scenario: str  # "low latency" or "high throughput"
    phase: str  # "prefill" or "decode"
    chip: str
    chips: int
    batch: int
    context_len: int
    decode_steps: int  # 64 for decode rows, 0 for prefill rows
    ffn_layout: str  # scaling_lib.layouts name: "2d-ws", "wg-xyz"
    attention_sharding: str  # "heads" or "batch"
    weight_dtype: str
    mfu: float
    latency_s: float
    source: str

    @property
    def label(self) -> str:
        return f"{self.model} {self.scenario} {self.phase}"

    @property
    def tokens(self) -> int:
        """Tokens processed: batch x context for prefill, batch x steps for decode."""
        return self.batch * (self.decode_steps if self.phase == "decode" else self.context_len)


@dataclass(frozen=True)
class BusBandwidthRow:
    """A published NCCL bus bandwidth (GB/s) for a collective at large sizes."""

    gpu: str
    n_gpus: int
    collective: str
    algorithm: str
    array_bytes_min: float
    bus_bandwidth: float  # B/s
    source: str


def _read(name: str) -> list:
    with open(DATA / name, newline="") as handle:
        return list(csv.DictReader(handle))


def trtllm_rows() -> tuple:
    """The 40 TensorRT-LLM offline-throughput rows, in the page's order (70B H200, 70B H100, 8B H200, 8B H100)."""
    return tuple(ThroughputRow(model=r["model"], checkpoint=r["checkpoint"], gpu=r["gpu"], n_gpus=int(r["n_gpus"]),
                               tensor_parallel=int(r["tensor_parallel"]), input_len=int(r["input_len"]),
                               output_len=int(r["output_len"]), weight_dtype=r["weight_dtype"],
                               output_tokens_per_s=float(r["output_tokens_per_s"]), source=r["source"])
                 for r in _read("trtllm_offline_throughput.csv"))


def pope_rows() -> tuple:
    """The 8 rows of Pope et al. 2022, Tables 2 and 3."""
    return tuple(PopeRow(model=r["model"], scenario=r["scenario"], phase=r["phase"], chip=r["chip"],
                         chips=int(r["chips"]), batch=int(r["batch"]), context_len=int(r["context_len"]),
                         decode_steps=int(r["decode_steps"]), ffn_layout=r["ffn_layout"],
                         attention_sharding=r["attention_sharding"], weight_dtype=r["weight_dtype"],
                         mfu=float(r["mfu"]), latency_s=float(r["latency_s"]), source=r["source"])
                 for r in _read("pope2022_tables.csv"))


def pope_row(model: str, scenario: str, phase: str) -> PopeRow:
    """One row of Pope et al.'s tables, e.g. pope_row("palm-540b", "low latency", "decode")."""
    rows = pope_rows()
    known_rows = ", ".join(f"({r.model!r}, {r.scenario!r}, {r.phase!r})" for r in rows)
    for name, value in (("model", model), ("scenario", scenario), ("phase", phase)):
        known = sorted({getattr(r, name) for r in rows})
        if not isinstance(value, str) or value not in known:
            raise ValueError(f"unknown {name} {value!r} for a Pope et al. row; use one of {', '.join(known)} "
                             f"(known rows: {known_rows})")
    for row in rows:
        if (row.model, row.scenario, row.phase) == (model, scenario, phase):
            return row
    known = ", ".join(f"({r.model!r}, {r.scenario!r}, {r.phase!r})" for r in pope_rows())
    raise ValueError(f"no Pope et al. row ({model!r}, {scenario!r}, {phase!r}); known rows: {known}")


@dataclass(frozen=True)
class PublishedRun:
    """A configuration Pope et al. 2022 measured for PaLM 540B on 64 TPU v4 chips (Table 2, sec. 4.4).

    `tokens` is the tokens the run processed: batch x prompt length for prefill, batch x generated steps for decode.
    """

    phase: str
    batch: int
    tokens_per_sequence: int
    seconds: float
    weight_dtype: str
    context_len: int
    source: str

    @property
    def tokens(self) -> int:
        return self.batch * self.tokens_per_sequence

    @property
    def seconds_per_step(self) -> float:
        """Decode: seconds per generated token (the whole batch steps together)."""
        return self.seconds / self.tokens_per_sequence


def _published_run(row) -> PublishedRun:
    per_sequence = row.decode_steps if row.phase == "decode" else row.context_len
    return PublishedRun(row.phase, row.batch, per_sequence, row.latency_s, row.weight_dtype, row.context_len,
                        f"{row.source}, MFU {row.mfu:.0%}")


def pope_headline_runs() -> dict:
    """The two runs Pope et al.'s abstract quotes, read from their tables (scaling_lib/data/pope2022_tables.csv):
    "prefill-high-throughput" (PaLM 540B, batch 512 x 2,048 tokens, bf16) and "decode-low-latency" (batch 64, 64
    steps, int8 weights), as `PublishedRun`s. Also importable as the constant `POPE_HEADLINE_RUNS` (read on first
    use)."""
    return {"prefill-high-throughput": _published_run(pope_row("palm-540b", "high throughput", "prefill")),
            "decode-low-latency": _published_run(pope_row("palm-540b", "low latency", "decode"))}


def __getattr__(name: str):
    """`POPE_HEADLINE_RUNS`, read from the CSV when first asked for (importing this module reads no file)."""
    if name == "POPE_HEADLINE_RUNS":
        runs = globals()["POPE_HEADLINE_RUNS"] = pope_headline_runs()
        return runs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def nccl_rows() -> tuple:
    """Published NCCL all-reduce bus bandwidths (B/s) on 8 H100s: the ring algorithm and NVLink SHARP."""
    return tuple(BusBandwidthRow(gpu=r["gpu"], n_gpus=int(r["n_gpus"]), collective=r["collective"],
                                 algorithm=r["algorithm"], array_bytes_min=float(r["array_bytes_min"]),
                                 bus_bandwidth=float(r["bus_bandwidth_GBps"]) * 1e9, source=r["source"])
                 for r in _read("nccl_allreduce_busbw.csv"))


# ------------------------------------------------------------------------------- published runs for the calibration
@dataclass(frozen=True)
class RunRow:
    """One published inference run (`published_runs.csv`, 263 rows: TensorRT-LLM v0.14's table across TP 1-8, FP8
    and FP16, dense and Mixtral MoE; TensorRT-LLM 0.5/0.6.1 static batches and first-token latency; JetStream on TPU
    v5e-8).

    `kind`: "offline" (output tokens/s of the deployment, the engine choosing its batch), "offline_b" (the same at
    `batch` slots per replica), "static" (output tokens/s of one static batch of `batch` sequences: a prefill, then
    output_len - 1 decode steps), "latency" (the seconds that static batch takes), "ttft" (seconds to the first token
    at batch 1) or "tpot" (seconds per output token with `batch` sequences decoding). `measured` is in `unit`.
    """

    source: str
    engine: str
    hardware: str
    chip: str
    n_chips: int
    tensor_parallel: int
    model: str
    model_card: str
    weights: str
    kv_cache: str
    compute: str
    input_len: int
    output_len: int
    batch: int | None
    kind: str
    measured: float
    unit: str
    note: str

    @property
    def label(self) -> str:
        extra = f" b{self.batch}" if self.batch else ""
        model = getattr(self.model, "name", self.model)  # a Transformer read from a config file: its name
        return (f"{model} {self.chip} TP{self.tensor_parallel} {self.weights} {self.kind} "
                f"{self.input_len}/{self.output_len}{extra} ({self.engine.split(' (')[0]})")


# Checkpoints whose weights are not all in one format, by the repository a row's `model_card` names. Meta's FP8
# release of LLaMA-3.1-405B quantizes the feed-forward layers to FP8 row-wise but keeps self-attention and the first
# and last layers in BF16 (the Llama 3 paper, section 6.2 "FP8 quantization"), and the embeddings and the output
# projection too: with 126 layers, (124 x 1 + 2 x 2) / 126 bytes per feed-forward weight. vLLM loading it on 8 H100
# reported 56.77 GiB of weights per GPU (dstack's study, `raw_data/gpu-usage.md`): 56.71 so priced, 47.25 all in FP8.
CHECKPOINT_WEIGHTS = {
    "meta-llama/Llama-3.1-405B-FP8": MixedWeights("fp8", "fbgemm_fp8", attention=2, feed_forward=(124 + 2 * 2) / 126,
                                                  embeddings=2, head=2),
}


def _row_weights(r: dict):
    """A row's weight format: its `weights` column, or the mixed format of the checkpoint it names
    (`CHECKPOINT_WEIGHTS`), whose quantized format the column must then give; for a model read from a config file,
    the mixed format its `quantization_config` stores where the column names that format (gpt-oss's MXFP4 experts
    beside BF16 attention, embeddings and head)."""
    mixed = CHECKPOINT_WEIGHTS.get(r["model_card"])
    if mixed is None:
        stored = _stored_weights(r["model"])
        return stored if stored is not None and str(stored) == r["weights"] else r["weights"]
    if r["weights"] != mixed:
        raise ValueError(f"row of {r['model_card']}: weights {r['weights']!r}, but that checkpoint's quantized "
                         f"format is {str(mixed)!r} (measurements.CHECKPOINT_WEIGHTS); write {str(mixed)!r} in its "
                         "weights column")
    return mixed


def _run_row(r: dict, model) -> RunRow:
    return RunRow(source=r["source"], engine=r["engine"], hardware=r["hardware"], chip=r["chip"],
                  n_chips=int(r["n_chips"]), tensor_parallel=int(r["tensor_parallel"]), model=model,
                  model_card=r["model_card"], weights=_row_weights(r), kv_cache=r["kv_cache"], compute=r["compute"],
                  input_len=int(r["input_len"]), output_len=int(r["output_len"]),
                  batch=int(r["batch"]) if r["batch"] else None, kind=r["kind"], measured=float(r["measured"]),
                  unit=r["unit"], note=r["note"])


def published_runs() -> tuple:
    """The 263 published runs of `published_runs.csv`, in the file's order, each with its source."""
    return tuple(_run_row(r, r["model"]) for r in _read("published_runs.csv"))


def gathered_runs() -> tuple:
    """Published runs gathered for the engine and hardware profiles (`gathered_runs.csv`), each with its source:
    vLLM on 8 AMD MI300X (AMD's performance-results page, five container releases of 2025, and Oracle's Llama 3.1
    405B blog: offline throughput and the end-to-end latency of one batch), JetStream + MaxText serving Mixtral on
    TPU v6e (Google Cloud's recipes). Kinds as `RunRow`'s, plus "latency": seconds for one batch of `batch`
    sequences, its prefill and output_len - 1 decode steps."""
    return tuple(_run_row(r, r["model"]) for r in _read("gathered_runs.csv"))


# Configs of models the library does not name (`book/data/hf_configs/`, each with its source in that README).
HF_CONFIGS = Path(__file__).resolve().parent.parent / "book" / "data" / "hf_configs"
_HF_PREFIX = "hf:"


def _row_model(name: str):
    """A row's model: a library name as it stands, or "hf:<stem>" read from `HF_CONFIGS/<stem>.json`."""
    if not name.startswith(_HF_PREFIX):
        return name
    return _hf_config(name).model


@functools.cache
def _hf_config(name: str):
    """The `models.HfConfig` of a row's "hf:<stem>" model, read once."""
    path = HF_CONFIGS / f"{name[len(_HF_PREFIX):]}.json"
    if not path.is_file():
        raise ValueError(f"model {name!r}: no config at {path}; add the model's config.json there (with its source "
                         "in the README) or use a library model name")
    return read_hf_config(path)


def _stored_weights(name: str):
    """The weight format a row's "hf:<stem>" model's config stores (None: none, or a library model)."""
    return _hf_config(name).weight_dtype if name.startswith(_HF_PREFIX) else None


EXCLUDED = "EXCLUDED:"  # a validation row's note that starts so states why the row cannot be a measurement as given


def validation_runs(include_excluded: bool = False) -> tuple:
    """Published inference runs kept out of every fit (`validation_runs.csv`): TensorRT-LLM's performance tables of
    releases v0.9 (static batches and first-token latency), v0.13, v0.15, v0.17, v0.20 and v1.0 (H100, H200, A100, B200
    and GB200; TP 1-8; FP16, FP8 and NVFP4; LLaMA-2 7B/70B, LLaMA-3/3.1/3.3 8B/70B/405B, Mistral 7B, Mixtral 8x7B/8x22B,
    Qwen3-235B-A22B and Qwen3-30B-A3B), JetStream-PyTorch's further TPU v5e-8 rows, and AMD's own comparison of
    LLaMA-3.1 70B and 405B in FP8 on 8 MI300X (a vLLM build of January 2025) and 8 H100 (TensorRT-LLM 0.16): offline
    throughput and the end-to-end latency of batches of 1 to 128 (rocm-blogs, `LLM_Inference`), and dstack's study of
    LLaMA-3.1-405B in FP8 on 8 MI300X (a vLLM ROCm build of November 2024, run eagerly) and 8 H100 (vLLM 0.6.3, Meta's
    checkpoint: `CHECKPOINT_WEIGHTS`), 4 to 256 prompts at once (`dstackai/benchmarks`), and vLLM's own runs of
    Qwen3-30B-A3B and Qwen3-235B-A22B in FP8 on one and four MI300X (its pull requests #17530 and #17535, May 2025: 200
    prompts at once), and Google's vLLM recipes for TPU7x (Ironwood): Qwen3-32B on one chip, Qwen3-Coder-480B-A35B
    and Qwen3.5-397B-A17B on four, at 1k/1k, 1k/8k and 8k/1k (`AI-Hypercomputer/tpu-recipes`, 2026), each with its
    source. A model the library does not name is read from its config file
    (`HF_CONFIGS`), so its row's `model` is a `Transformer`. The out-of-sample check of chapter 11's estimate
    (`calibration.out_of_sample_summary`) prices these; nothing fits on them.

    A row whose note starts with `EXCLUDED` is physically impossible as published (it beats the bound by more than
    any tolerance; the note gives the arithmetic and the likely page error); it is kept in the file for the record and
    returned only with `include_excluded=True`.
    """
    if not isinstance(include_excluded, bool):
        raise TypeError(f"include_excluded must be True or False, got {include_excluded!r}")
    return _validation_runs() if include_excluded else tuple(r for r in _validation_runs()
                                                            if not r.note.startswith(EXCLUDED))


@functools.cache
def _validation_runs() -> tuple:
    return tuple(_run_row(r, _row_model(r["model"])) for r in _read("validation_runs.csv"))


@dataclass(frozen=True)
class CollectiveRow:
    """One published collective: `seconds` is the time, from whichever of time, algorithm bandwidth (V / t) or bus
    bandwidth (nccl-tests' V / t x 2(n-1)/n for an all-reduce, (n-1)/n otherwise) the source gives. `algorithm`: the
    one the run forced (NCCL_ALGO), or "" for the library's own pick. `kind`: "measurement" (a run's output) or
    "statement" (a maintainer's stated figure)."""

    chip: str
    n_chips: int
    collective: str
    algorithm: str
    array_bytes: float
    time_us: float | None
    busbw_GBps: float | None
    algbw_GBps: float | None
    kind: str
    source: str

    @property
    def seconds(self) -> float:
        if self.time_us is not None:
            return self.time_us * 1e-6
        if self.algbw_GBps is not None:
            return self.array_bytes / (self.algbw_GBps * 1e9)
        share = (2 if self.collective == "all-reduce" else 1) * (self.n_chips - 1) / self.n_chips
        return self.array_bytes * share / (self.busbw_GBps * 1e9)

    @property
    def label(self) -> str:
        forced = f" {self.algorithm}" if self.algorithm else ""
        return f"{self.collective}{forced} {self.array_bytes:.0f} B on {self.n_chips} {self.chip}"


def _optional(value: str) -> float | None:
    return float(value) if value else None


def collective_rows() -> tuple:
    """Published collective timings, one row per (chip, chips, collective, algorithm, size), with their sources."""
    return tuple(CollectiveRow(chip=r["chip"], n_chips=int(r["n_chips"]), collective=r["collective"],
                               algorithm=r["algorithm"], array_bytes=float(r["array_bytes"]),
                               time_us=_optional(r["time_us"]), busbw_GBps=_optional(r["busbw_GBps"]),
                               algbw_GBps=_optional(r["algbw_GBps"]), kind=r["kind"], source=r["source"])
                 for r in _read("collective_measurements.csv"))


# The words of a run's note that say its engine put whole experts on each GPU and kept attention tensor-parallel
# (vLLM's --enable-expert-parallel, SGLang's --ep equal to --tp): `SweepRow.deployment` and
# `calibration.run_deployment` price such runs so.
EXPERT_PARALLELISM_ALONE = "expert parallelism beside tensor-parallel attention"


@dataclass(frozen=True)
class SweepRow:
    """One point of a published closed-loop concurrency sweep (`concurrency_sweeps.csv`): `concurrency` clients,
    each sending its next request of `input_len` prompt and `output_len` output tokens as its last one ends;
    `lengths` "fixed" when every request has exactly those lengths (dstack's), "varied" when they are drawn from a
    dataset or a range and the row holds their means (SGLang's cookbook, GPUStack's ShareGPT runs); means and p99s
    over the run's `requests`, in SI units. `model`: a library name, or a `Transformer` read from a config in
    `HF_CONFIGS` (an "hf:<stem>" in the file)."""

    engine: str
    chip: str
    n_chips: int
    tensor_parallel: int
    model: object
    weights: str
    kv_cache: str
    input_len: int
    output_len: int
    lengths: str
    concurrency: int
    requests: int
    request_rate: float  # requests/s completed
    output_tokens_per_s: float
    ttft_s: float
    ttft_p99_s: float
    tpot_s: float
    tpot_p99_s: float
    e2e_s: float | None  # mean request latency, first byte sent to last token (None: the run did not print it)
    source: str
    expert_parallel: bool = False  # whole experts on each GPU, attention tensor-parallel (the note says so)

    @property
    def label(self) -> str:
        name = getattr(self.model, "name", self.model)
        return f"{name} {self.n_chips} x {self.chip} {self.engine.split(',')[0]} U={self.concurrency}"

    def deployment(self):
        """The `estimate.Deployment` the run served: its chips and tensor parallelism, its weight and cache formats,
        its matmuls in the weights' format where the chip computes it natively, else bf16 (`formats.matmul_dtype`:
        fp8 weights on an A100 are weight-only), its experts whole on each GPU where the run served them so."""
        return Deployment(self.model, self.chip, self.n_chips, tensor_parallel=self.tensor_parallel,
                          weight_dtype=self.weights, kv_dtype=self.kv_cache,
                          compute_dtype=matmul_dtype(self.chip, self.weights), expert_parallel=self.expert_parallel)


def _serving_rows(name: str) -> tuple:
    """The rows of a file of published serving runs in `concurrency_sweeps.csv`'s columns, as `SweepRow`s."""
    return tuple(SweepRow(engine=r["engine"], chip=r["chip"], n_chips=int(r["n_chips"]),
                          tensor_parallel=int(r["tensor_parallel"]), model=_row_model(r["model"]),
                          weights=_row_weights(r), kv_cache=r["kv_cache"], input_len=int(r["input_len"]),
                          output_len=int(r["output_len"]), lengths=r["lengths"],
                          concurrency=int(r["concurrency"]), requests=int(r["requests"]),
                          request_rate=float(r["request_throughput"]),
                          output_tokens_per_s=float(r["output_tokens_per_s"]),
                          ttft_s=float(r["mean_ttft_ms"]) / 1e3, ttft_p99_s=float(r["p99_ttft_ms"]) / 1e3,
                          tpot_s=float(r["mean_tpot_ms"]) / 1e3, tpot_p99_s=float(r["p99_tpot_ms"]) / 1e3,
                          e2e_s=float(r["mean_e2e_latency_ms"]) / 1e3 if r["mean_e2e_latency_ms"] else None,
                          source=r["source"], expert_parallel=EXPERT_PARALLELISM_ALONE in r["note"])
                 for r in _read(name))


def burst_rows() -> tuple:
    """Published runs that sent every request at once (`burst_runs.csv`: GPUStack's performance lab, vLLM's
    `bench serve` with no cap on concurrency and request rate inf; vLLM, SGLang and TensorRT-LLM on 8 A100, H100 and
    H200 and 4 of them, Qwen3-235B-A22B, DeepSeek-R1 and V3.2 and GLM-4.6), as `SweepRow`s whose `concurrency` is
    the `requests`, all in flight at t = 0. `lengths` "fixed": vLLM's random prompts of one length, outputs of at most
    the length asked (the row holds the mean generated); "varied": ShareGPT's conversations (the row holds the means).
    `simulator.burst_estimate` prices them; nothing is fitted on them."""
    return _serving_rows("burst_runs.csv")


def sweep_rows(chip: str | None = None, engine: str | None = None, source: str | None = None) -> tuple:
    """The published closed-loop concurrency sweeps, in the file's order: dstack's DeepSeek-R1 study (8 x H200 with
    vLLM, SGLang and TensorRT-LLM, 8 x MI300X with vLLM and SGLang; fixed prompts of 3,200 tokens, 800 out, 4 to 128
    clients), SGLang's cookbook (8 x A100 and 8 x B200, random lengths of about 500 or 4,000 in and 400 to 4,000 out, 1
    to 100 clients; Llama 4 on 8 x MI300X, about 500 in and out, 16 and 100 clients; Qwen3-Next-80B-A3B and gpt-oss-120b
    on 8 x B200, ShareGPT conversations, 1 and 100 clients; DeepSeek-V3.1 on 8 x MI300X, Qwen3-Coder-Next on 2 x B200
    and MiniMax-M2.5 on 8 x B200 and 8 x H100, the same random lengths, 1 to 100 clients, one-client runs whose mean
    first token is over 1.5 times their median, a warm-up inside the mean, left out) and GPUStack's performance lab
    (vLLM, SGLang and TensorRT-LLM on one H100 and 8 H200, ShareGPT conversations of about 230 tokens in and 220 out, 1
    to 8 clients), and Google's TPU recipe (vLLM on a TPU v6e-8, 3,000 requests of 1,000 + 1,000 tokens from 64 and 128 clients). `chip`,
    `engine` (the engine's first word, case-insensitive, e.g. "vllm") and `source` (the source's first word:
    "dstackai/benchmarks", "sgl-project/sgl-cookbook", "gpustack/gpustack" or "AI-Hypercomputer/tpu-recipes") select."""
    rows = _serving_rows("concurrency_sweeps.csv")
    engines = sorted({r.engine.split()[0].lower() for r in rows})
    if engine is not None and (not isinstance(engine, str) or engine.lower() not in engines):
        raise ValueError(f"engine={engine!r} ran no published sweep; give one of {engines}, or None for all")
    sources = sorted({r.source.split()[0] for r in rows})
    if source is not None and source not in sources:
        raise ValueError(f"source={source!r} published no sweep here; give one of {sources}, or None for all")
    chip = None if chip is None else get_chip(chip).name
    return tuple(r for r in rows if (chip is None or r.chip == chip)
                 and (engine is None or r.engine.split()[0].lower() == engine.lower())
                 and (source is None or r.source.split()[0] == source))


# ---------------------------------------------------------------------- this book's measurements on a real accelerator
ACCELERATOR_CSV = DATA / "accelerator_measurements.csv"
ACCELERATOR_COLUMNS = ("run", "experiment", "chip", "date", "software", "dtype", "batch", "cache_len", "d_model",
                       "d_ff", "size", "best_s", "median_s", "rate", "bound_s", "method", "source")
EXPERIMENTS = ("read", "matmul", "knee", "layer", "decode_step")


@dataclass(frozen=True)
class AcceleratorRow:
    """One measurement of a run on an accelerator (`accelerator_measurements.csv`); fields a kind does not use are None.

    experiment: "read" (W: a sum reading `size` bytes once), "matmul" (C: a square matmul of side `size`), "knee"
    (x[batch, d_model] @ w[d_model, d_ff]), "layer" (x W_in[d_model, d_ff] W_out[d_ff, d_model]) or "decode_step" (one
    step of `batch` sequences over a cache of `cache_len`, beside its bound `bound_s`). best_s, median_s: seconds of
    the call; rate: B/s or FLOP/s as the run recorded it when it kept no time.
    """

    run: str
    experiment: str
    chip: str
    date: str
    software: str
    dtype: str
    batch: int | None
    cache_len: int | None
    d_model: int | None
    d_ff: int | None
    size: int | None
    best_s: float | None
    median_s: float | None
    rate: float | None
    bound_s: float | None
    method: str
    source: str

    @property
    def measured_rate(self) -> float:
        """A read's B/s (size / best_s) or a matmul's FLOP/s (2 size^3 / best_s), or the rate the run recorded."""
        if self.rate is not None:
            return self.rate
        if self.experiment == "read":
            return self.size / self.best_s
        if self.experiment == "matmul":
            return 2.0 * self.size**3 / self.best_s
        raise ValueError(f"a {self.experiment} row has no rate; rates come from read and matmul rows")


def _optional_int(value: str) -> int | None:
    return int(value) if value else None


def _accelerator_row(r: dict) -> AcceleratorRow:
    if r["experiment"] not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {r['experiment']!r} in run {r['run']!r}; use one of {EXPERIMENTS}")
    return AcceleratorRow(run=r["run"], experiment=r["experiment"], chip=r["chip"], date=r["date"],
                          software=r["software"], dtype=r["dtype"], batch=_optional_int(r["batch"]),
                          cache_len=_optional_int(r["cache_len"]), d_model=_optional_int(r["d_model"]),
                          d_ff=_optional_int(r["d_ff"]), size=_optional_int(r["size"]),
                          best_s=_optional(r["best_s"]), median_s=_optional(r["median_s"]), rate=_optional(r["rate"]),
                          bound_s=_optional(r["bound_s"]), method=r["method"], source=r["source"])


def _file(name: str, path, existing: bool) -> Path:
    """`path` as a Path: an existing file, or (existing=False) a file name in an existing folder."""
    if isinstance(path, bool) or not isinstance(path, (str, PathLike)) or not str(path):
        raise ValueError(f"{name} must be a file path (a string or a Path), got {path!r}")
    path = Path(path)
    if existing and not path.is_file():
        raise ValueError(f"{name}={str(path)!r} is not a file; give a CSV bench/bench_accelerator.py wrote, or None "
                         "for the book's own measurements")
    if not existing and (path.is_dir() or not path.parent.is_dir()):
        raise ValueError(f"{name}={str(path)!r} is a folder or lies in no folder; give a file name in an existing "
                         "folder")
    return path


def accelerator_rows(path=None) -> tuple:
    """The rows of `accelerator_measurements.csv` (or of a file bench/bench_accelerator.py wrote), in file order."""
    path = ACCELERATOR_CSV if path is None else _file("path", path, existing=True)
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != ACCELERATOR_COLUMNS:
            raise ValueError(f"path={str(path)!r} has columns {reader.fieldnames}; expected "
                             f"{list(ACCELERATOR_COLUMNS)}")
        return tuple(_accelerator_row(r) for r in reader)


def _rows(rows) -> tuple:
    """`rows` as a tuple of `AcceleratorRow`s; None: the book's own (`accelerator_rows()`)."""
    if rows is None:
        return accelerator_rows()
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise ValueError(f"rows must be AcceleratorRows (from accelerator_rows), got {rows!r}")
    rows = tuple(rows)
    if not all(isinstance(r, AcceleratorRow) for r in rows):
        raise ValueError(f"rows must hold only AcceleratorRows (from accelerator_rows), got {rows[:3]!r}")
    return rows


def write_accelerator_rows(rows, path) -> None:
    """Write `AcceleratorRow`s to a CSV of `accelerator_measurements.csv`'s format (what bench/bench_accelerator.py
    produces; `accelerator_rows(path)` reads it back)."""
    if rows is None:
        raise ValueError("rows is None; give the AcceleratorRows to write")
    rows, path = _rows(rows), _file("path", path, existing=False)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ACCELERATOR_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if getattr(row, k) is None else getattr(row, k) for k in ACCELERATOR_COLUMNS})


def _run(run, rows, name: str = "run") -> tuple:
    """The rows of one run, `name` being the argument that named it."""
    rows = _rows(rows)
    if not isinstance(run, str):
        raise ValueError(f"{name} must be the name of a run, got {run!r}")
    found = tuple(r for r in rows if r.run == run)
    if not found:
        raise ValueError(f"{name}={run!r} is no run of these accelerator measurements; known runs: "
                         f"{', '.join(dict.fromkeys(r.run for r in rows))}")
    return found


@dataclass(frozen=True)
class MeasuredRates:
    """W and C as one run measured them."""

    bytes_per_s: float
    flops_per_s: float
    dtype: str
    chip: str
    source: str


def accelerator_rates(run: str, rows=None) -> MeasuredRates:
    """The read and matmul rates of `run` (its "read" and "matmul" rows)."""
    return _rates(run, rows, "run")


def _rates(run, rows, name: str) -> MeasuredRates:
    """`accelerator_rates`, `name` being the argument that named the run (for the error if it has no rates)."""
    found = _run(run, rows, name)
    kinds = {r.experiment: r for r in found if r.experiment in ("read", "matmul")}
    if set(kinds) != {"read", "matmul"}:
        raise ValueError(f"{name}={run!r} has no read and matmul rows to give W and C")
    return MeasuredRates(kinds["read"].measured_rate, kinds["matmul"].measured_rate, kinds["matmul"].dtype,
                         kinds["matmul"].chip, kinds["matmul"].source)


@dataclass(frozen=True)
class MeasuredKnee:
    """A batch curve timed on an accelerator beside the roofline's prediction from rates measured apart from it.

    The roofline t(B) = max(weight bytes / W, B x 2 D F / C) is flat up to B_crit = C / W x b_w / 2, and reaches 1.5x
    its floor at 1.5 B_crit (`roofline.slowdown_knee`): `predicted_knee` against `knee`."""

    batches: tuple
    seconds: tuple
    rates: MeasuredRates
    weight_dtype: str
    source: str

    @property
    def predicted_batch(self) -> float:
        """B_crit = C / W x b_w / 2 from the rates measured apart."""
        return critical_batch_from_rates(self.rates.flops_per_s, self.rates.bytes_per_s, self.weight_dtype)

    @property
    def predicted_knee(self) -> float:
        """1.5 B_crit: where the roofline's time reaches 1.5x its floor."""
        return SLOWDOWN * self.predicted_batch

    @property
    def knee(self) -> float:
        """The measured knee: the first batch from which every time is at least 1.5x the fastest."""
        return slowdown_knee(self.batches, self.seconds)

    @property
    def fitted_batch(self) -> float:
        """B_crit read off the curve as chapter 1 reads its CPU's (`roofline.fit_batch_roofline`): floor / slope."""
        return fit_batch_roofline(self.batches, self.seconds).knee_batch


def accelerator_knee(run: str = "h200-bf16", rates_run: str | None = None, rows=None) -> MeasuredKnee:
    """The batch curve of `run` (its "knee" or "layer" rows) with the rates of `rates_run` (default: the same run).

    `accelerator_knee()` is the H200 in bf16: x[B, 8192] @ W[8192, 28672], rates from an 8 GiB read and an 8,192-square
    matmul. `accelerator_knee("h200-book-batch-rule")` is the book's own float32 layer with the rates its fixed-size
    calls measured before they grew (a 256 MiB read and a 1,024-square matmul), and with rates_run="h200-book-fp32"
    the same curve against rates measured at 4e9 bytes and 8,192."""
    curve = sorted((r for r in _run(run, rows) if r.experiment in ("knee", "layer")), key=lambda r: r.batch)
    if not curve:
        raise ValueError(f"run {run!r} has no knee or layer rows to give a batch curve")
    return MeasuredKnee(batches=tuple(r.batch for r in curve), seconds=tuple(r.best_s for r in curve),
                        rates=_rates(run, rows, "run") if rates_run is None else _rates(rates_run, rows, "rates_run"),
                        weight_dtype=curve[0].dtype, source=curve[0].source)


def accelerator_sweep_model() -> Transformer:
    """The tiny decoder's shape in chapter 11's sweep on an accelerator: 16 layers, D = 2,048, F = 8,192, 32 query and
    8 KV heads of 64, V = 32,000 (LLaMA-3.2-1B-like; about 1.2e9 parameters, 4.9 GB in float32), the model of the
    "h200-book-sweep" rows and of bench/bench_accelerator.py's sweep."""
    return Transformer(n_layers=16, d_model=2048, d_ff=8192, n_heads=32, n_kv_heads=8, head_dim=64, vocab_size=32000,
                       name="sweep-1b", source="scaling_lib.measurements: chapter 11's decode sweep on an accelerator "
                                               "(a LLaMA-3.2-1B-like shape)")


@dataclass(frozen=True)
class MeasuredDecodeStep:
    """One decode step of chapter 11's sweep timed on an accelerator, beside the bound (estimate.decode_step on the
    run's measured W and C, no efficiency) the run priced it at."""

    chip: str
    batch: int
    cache_len: int
    measured_s: float
    bound_s: float
    source: str

    @property
    def ratio(self) -> float:
        """measured / bound: at least 1 when the bound holds; how far from it the step runs."""
        return self.measured_s / self.bound_s


def accelerator_decode_sweep(run: str = "h200-book-sweep", rows=None) -> tuple:
    """Chapter 11's decode sweep on an accelerator: a `MeasuredDecodeStep` (batch, cache_len, measured_s, bound_s,
    ratio) per "decode_step" row of `run`, in file order. `accelerator_rates(run)` gives the W and C it was priced at;
    `accelerator_sweep_model()` the model."""
    steps = tuple(MeasuredDecodeStep(r.chip, r.batch, r.cache_len, r.best_s, r.bound_s, r.source)
                  for r in _run(run, rows) if r.experiment == "decode_step")
    if not steps:
        raise ValueError(f"run {run!r} has no decode_step rows")
    return steps


@dataclass(frozen=True)
class DecodeStepRow:
    """One engine-grade decode step timed on a real GPU (`h200_decode_step.csv`): `batch` sequences at `context`
    cached tokens; `best_s` the whole step, `attention_only_s` its attention calls alone; it reads
    `matmul_weight_bytes` of weights and `kv_bytes` of cache once."""

    chip: str
    batch: int
    context: int
    best_s: float
    attention_only_s: float
    matmul_weight_bytes: float
    kv_bytes: float
    source: str


def decode_step_rows() -> tuple:
    """This project's H200 decode steps (PyTorch, one CUDA graph, LLaMA-3-8B shapes), each with its source."""
    return tuple(DecodeStepRow(chip=r["chip"], batch=int(r["batch"]), context=int(r["context"]),
                               best_s=float(r["best_s"]), attention_only_s=float(r["attention_only_s"]),
                               matmul_weight_bytes=float(r["matmul_weight_bytes"]), kv_bytes=float(r["kv_bytes"]),
                               source=r["source"])
                 for r in _read("h200_decode_step.csv"))
