"""Accelerator specifications: the one table of hardware constants in the book.

Every number the book computes about a chip starts here. Each row names its source; a notebook never types a
spec. Units are SI: FLOP/s (or OP/s for integer math) per chip, bytes, bytes per second, seconds.

Sources (full references in book/references.bib):
- [SB2]  Austin et al., "How to Scale Your Model", ch. 2 "How to Think About TPUs", spec table (TPU v4, v5e, v5p,
         v6e; ICI one-way bandwidth per link and ~1 us per hop).
- [SB7]  the same book, ch. 7 "All About Transformer Inference" (v5e 1.97e14 bf16 / 3.94e14 int8, 8.2e11 B/s,
         16 GB; H100 9.89e14 / 3.35e12 B/s).
- [TPU7] the TPU inference chapter used as a seed (Ironwood / TPU7x: 2.307e15 bf16, 4.614e15 fp8, 7.38e12 B/s HBM,
         192 GB, 1.2e12 B/s bidirectional ICI per chip = 2e11 B/s per axis, bidirectional).
- [PJ22] Pope et al. 2022, "Efficiently Scaling Transformer Inference" (TPU v4: 270 GB/s ICI per chip, 32 GiB).
- [NV]   NVIDIA data sheets (H100 SXM, H200 SXM, B200): dense (non-sparse) tensor-core rates, HBM bandwidth and
         capacity, NVLink 4/5 with 18 links per GPU.
"""

from dataclasses import dataclass

from .dtypes import bytes_per_element

GB = 1e9
GIB = 2**30


@dataclass(frozen=True)
class Chip:
    """One accelerator chip.

    `peak_flops_table` maps a compute dtype to the dense peak rate of one chip (FLOP/s, or OP/s for int8);
    a dtype the chip has no native matrix unit for is absent and `peak_flops` refuses it.
    `ici_link_bandwidth` is one direction of one interconnect link (B/s); `ici_bidirectional` is both directions.
    """

    name: str
    peak_flops_table: tuple  # ((dtype, FLOP/s), ...)
    hbm_bandwidth: float  # B/s per chip
    hbm_capacity: float  # bytes per chip
    ici_link_bandwidth: float  # B/s per link, one direction
    ici_links: int  # links per chip
    ici_hop_latency: float  # seconds per hop
    source: str
    interconnect: str = "ICI"

    def __post_init__(self):
        for field_name in ("hbm_bandwidth", "hbm_capacity", "ici_link_bandwidth", "ici_hop_latency"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"{self.name}: {field_name} must be positive, got {getattr(self, field_name)!r}")
        for dtype, rate in self.peak_flops_table:
            bytes_per_element(dtype)  # validates the dtype name
            if not rate > 0:
                raise ValueError(f"{self.name}: peak FLOP/s for {dtype} must be positive, got {rate!r}")

    @property
    def ici_bidirectional(self) -> float:
        """Both directions of one link, B/s."""
        return 2.0 * self.ici_link_bandwidth

    @property
    def compute_dtypes(self) -> tuple:
        """The dtypes this chip has a native matrix rate for."""
        return tuple(dtype for dtype, _ in self.peak_flops_table)

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s (OP/s for integers) of one chip when the matmul runs in `dtype`."""
        bytes_per_element(dtype)
        for known_dtype, rate in self.peak_flops_table:
            if known_dtype == dtype:
                return rate
        raise ValueError(
            f"{self.name} has no native {dtype} matrix rate in the hardware table; "
            f"use compute_dtype in {self.compute_dtypes} (quantized weights can still be upcast to bf16)"
        )


_SB2 = "Scaling Book ch. 2 spec table"
_CHIPS = (
    Chip(
        name="tpu-v4",
        peak_flops_table=(("bf16", 2.75e14), ("int8", 2.75e14)),
        hbm_bandwidth=1.2e12,
        hbm_capacity=32 * GIB,
        ici_link_bandwidth=4.5e10,
        ici_links=6,
        ici_hop_latency=1e-6,
        source=f"{_SB2}; Pope et al. 2022 (32 GiB HBM, 6 links x 45 GB/s = 270 GB/s ICI per chip)",
    ),
    Chip(
        name="tpu-v5e",
        peak_flops_table=(("bf16", 1.97e14), ("int8", 3.94e14)),
        hbm_bandwidth=8.2e11,
        hbm_capacity=16 * GB,
        ici_link_bandwidth=4.5e10,
        ici_links=4,
        ici_hop_latency=1e-6,
        source=f"{_SB2}; Scaling Book ch. 7 (1.97e14 bf16, 3.94e14 int8, 8.2e11 B/s, 16 GB, ~1 us per hop)",
    ),
    Chip(
        name="tpu-v5p",
        peak_flops_table=(("bf16", 4.59e14), ("int8", 9.18e14)),
        hbm_bandwidth=2.8e12,
        hbm_capacity=96 * GB,
        ici_link_bandwidth=9e10,
        ici_links=6,
        ici_hop_latency=1e-6,
        source=_SB2,
    ),
    Chip(
        name="tpu-v6e",
        peak_flops_table=(("bf16", 9.2e14), ("int8", 1.84e15)),
        hbm_bandwidth=1.6e12,
        hbm_capacity=32 * GB,
        ici_link_bandwidth=9e10,
        ici_links=4,
        ici_hop_latency=1e-6,
        source=_SB2,
    ),
    Chip(
        name="tpu-7x",
        peak_flops_table=(("bf16", 2.307e15), ("fp8", 4.614e15)),
        hbm_bandwidth=7.38e12,
        hbm_capacity=192 * GB,
        ici_link_bandwidth=1e11,
        ici_links=6,
        ici_hop_latency=1e-6,
        source="TPU inference chapter (Ironwood): 1.2e12 B/s bidirectional ICI per chip over 6 links = 2e11 B/s "
        "per link in both directions together, so 1e11 B/s each way",
    ),
    Chip(
        name="h100",
        peak_flops_table=(("bf16", 9.89e14), ("fp8", 1.979e15), ("int8", 1.979e15)),
        hbm_bandwidth=3.35e12,
        hbm_capacity=80 * GB,
        ici_link_bandwidth=2.5e10,
        ici_links=18,
        ici_hop_latency=1e-6,
        source="NVIDIA H100 SXM data sheet (dense); Scaling Book ch. 7 (9.89e14 / 3.35e12); NVLink 4: 18 x 50 GB/s "
        "bidirectional; hop latency assumed ~1 us (not in the sources)",
        interconnect="NVLink",
    ),
    Chip(
        name="h200",
        peak_flops_table=(("bf16", 9.89e14), ("fp8", 1.979e15), ("int8", 1.979e15)),
        hbm_bandwidth=4.8e12,
        hbm_capacity=141 * GB,
        ici_link_bandwidth=2.5e10,
        ici_links=18,
        ici_hop_latency=1e-6,
        source="NVIDIA H200 SXM data sheet (dense); NVLink 4; hop latency assumed ~1 us (not in the sources)",
        interconnect="NVLink",
    ),
    Chip(
        name="b200",
        peak_flops_table=(("bf16", 2.25e15), ("fp8", 4.5e15), ("int8", 4.5e15)),
        hbm_bandwidth=8e12,
        hbm_capacity=192 * GB,
        ici_link_bandwidth=5e10,
        ici_links=18,
        ici_hop_latency=1e-6,
        source="NVIDIA B200 data sheet (dense); NVLink 5: 18 x 100 GB/s bidirectional; hop latency assumed ~1 us",
        interconnect="NVLink",
    ),
)

CHIPS = {chip.name: chip for chip in _CHIPS}
ALIASES = {"ironwood": "tpu-7x", "tpu7x": "tpu-7x", "v5e": "tpu-v5e", "v5p": "tpu-v5p", "v6e": "tpu-v6e",
           "v4": "tpu-v4", "trillium": "tpu-v6e"}


def chip_names() -> tuple:
    """Canonical names of every chip in the table."""
    return tuple(CHIPS)


def get_chip(name) -> Chip:
    """Look a chip up by name (case-insensitive; "ironwood" is an alias of "tpu-7x"). A `Chip` passes through."""
    if isinstance(name, Chip):
        return name
    if not isinstance(name, str):
        raise ValueError(f"chip must be a name or a Chip, got {name!r}")
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in CHIPS:
        known = ", ".join(sorted(CHIPS)) + "; aliases: " + ", ".join(sorted(ALIASES))
        raise ValueError(f"unknown chip {name!r}; known chips: {known}")
    return CHIPS[key]
