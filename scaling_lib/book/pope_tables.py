"""Pope et al. 2022, Tables 2 and 3, as data: the eight measured PaLM configurations on TPU v4.

The rows live in `book/data/pope2022_tables.csv` (columns chip, model, scenario, phase, chips, batch, ffn_layout,
attention_sharding, weights, mfu, latency_s, source), copied from the paper's tables; this module reads them into
frozen `PopeRow`s. What the tables' captions state once for every row is kept here: every point has a 2,048-token
context, a prefill row processes 2,048-token prompts and a decode row times 64 decode steps.

Used in chapter 12, *Choosing a layout by the metric*, and by the claims ledger (claims P4, P6).
"""

import csv
from dataclasses import dataclass
from pathlib import Path

from ..layouts import mfu
from ..models import get_model, param_count

CSV_PATH = Path(__file__).resolve().parents[2] / "book" / "data" / "pope2022_tables.csv"
CONTEXT_LEN = 2048  # tokens of context at every Pareto point of Tables 2 and 3
PREFILL_TOKENS = 2048  # prompt tokens per sequence in a prefill row
DECODE_STEPS = 64  # decode steps timed in a decode row
COLUMNS = ("chip", "model", "scenario", "phase", "chips", "batch", "ffn_layout", "attention_sharding", "weights",
           "mfu", "latency_s", "source")


@dataclass(frozen=True)
class PopeRow:
    """One measured configuration. `latency_s` is the whole prefill pass, or all 64 decode steps."""

    chip: str
    model: str
    scenario: str
    phase: str
    chips: int
    batch: int
    ffn_layout: str
    attention_sharding: str
    weights: str
    mfu: float  # as published, rounded to a whole percent
    latency_s: float
    source: str

    @property
    def label(self) -> str:
        return f"{get_model(self.model).name} {self.scenario} {self.phase}"

    @property
    def tokens(self) -> int:
        """Tokens processed in `latency_s`: B x 2,048 prompt tokens, or B x 64 generated tokens."""
        return self.batch * (PREFILL_TOKENS if self.phase == "prefill" else DECODE_STEPS)

    @property
    def step_s(self) -> float:
        """The latency a user sees per step: the prefill pass, or one decode step (latency / 64)."""
        return self.latency_s / (1 if self.phase == "prefill" else DECODE_STEPS)

    def recomputed_mfu(self) -> float:
        """2 P tokens / (latency x chips x 275 TFLOP/s): `layouts.mfu` from the published latency."""
        return mfu(param_count(get_model(self.model)), self.tokens, self.latency_s, self.chip, self.chips)


def pope_rows(path=CSV_PATH) -> tuple:
    """The eight rows of Tables 2 and 3, in file order (540B then 62B; low latency then high throughput)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}; the book keeps Pope et al.'s Tables 2-3 in book/data/pope2022_tables.csv")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path.name} has columns {reader.fieldnames}; expected {list(COLUMNS)}")
        rows = []
        for raw in reader:
            rows.append(PopeRow(chip=raw["chip"], model=raw["model"], scenario=raw["scenario"], phase=raw["phase"],
                                chips=int(raw["chips"]), batch=int(raw["batch"]), ffn_layout=raw["ffn_layout"],
                                attention_sharding=raw["attention_sharding"], weights=raw["weights"],
                                mfu=float(raw["mfu"]), latency_s=float(raw["latency_s"]), source=raw["source"]))
    return tuple(rows)
