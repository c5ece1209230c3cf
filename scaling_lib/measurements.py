"""Published measurements of real systems, as data: each row carries its source.

The numbers live in CSV files under `scaling_lib/data/` (typed once, there); this module only reads them into
frozen rows. Three tables:

- `trtllm_rows()`: TensorRT-LLM's published offline throughput (total output tokens/s of the whole deployment) for
  LLaMA-3.1-8B and LLaMA-3.3-70B FP8 checkpoints on H100 and H200, 10 input/output shapes each (40 rows). The
  models have the shapes of `models.get_model("llama3-8b")` and `"llama3-70b"`. The page does not state the KV-cache
  dtype; chapter 11 tests both.
- `pope_rows()`: Pope et al. 2022, Tables 2 and 3: PaLM 540B and 62B on TPU v4 at 2,048 tokens of context, one
  prefill and one 64-step decode per scenario (8 rows, latency and MFU).
- `nccl_rows()`: NCCL all-reduce bus bandwidth on 8 H100s, as the NCCL maintainers state it (2 rows).

Used in chapter 11, *How close do real systems come?*.
"""

import csv
from dataclasses import dataclass
from pathlib import Path

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
    """The 40 TensorRT-LLM offline-throughput rows, in the page's order (70B H200, 70B H100, 8B H200, 8B H100).

    Used in chapter 11, *How close do real systems come?*.
    """
    return tuple(ThroughputRow(model=r["model"], checkpoint=r["checkpoint"], gpu=r["gpu"], n_gpus=int(r["n_gpus"]),
                               tensor_parallel=int(r["tensor_parallel"]), input_len=int(r["input_len"]),
                               output_len=int(r["output_len"]), weight_dtype=r["weight_dtype"],
                               output_tokens_per_s=float(r["output_tokens_per_s"]), source=r["source"])
                 for r in _read("trtllm_offline_throughput.csv"))


def pope_rows() -> tuple:
    """The 8 rows of Pope et al. 2022, Tables 2 and 3.

    Used in chapter 11, *How close do real systems come?* and chapter 12, *Choosing a layout by the metric*.
    """
    return tuple(PopeRow(model=r["model"], scenario=r["scenario"], phase=r["phase"], chip=r["chip"],
                         chips=int(r["chips"]), batch=int(r["batch"]), context_len=int(r["context_len"]),
                         decode_steps=int(r["decode_steps"]), ffn_layout=r["ffn_layout"],
                         attention_sharding=r["attention_sharding"], weight_dtype=r["weight_dtype"],
                         mfu=float(r["mfu"]), latency_s=float(r["latency_s"]), source=r["source"])
                 for r in _read("pope2022_tables.csv"))


def pope_row(model: str, scenario: str, phase: str) -> PopeRow:
    """One row of Pope et al.'s tables, e.g. pope_row("palm-540b", "low latency", "decode").

    Used in chapter 12, *Choosing a layout by the metric*.
    """
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


def nccl_rows() -> tuple:
    """Published NCCL all-reduce bus bandwidths (B/s) on 8 H100s: the ring algorithm and NVLink SHARP.

    Used in chapter 11, *How close do real systems come?*.
    """
    return tuple(BusBandwidthRow(gpu=r["gpu"], n_gpus=int(r["n_gpus"]), collective=r["collective"],
                                 algorithm=r["algorithm"], array_bytes_min=float(r["array_bytes_min"]),
                                 bus_bandwidth=float(r["bus_bandwidth_GBps"]) * 1e9, source=r["source"])
                 for r in _read("nccl_allreduce_busbw.csv"))
