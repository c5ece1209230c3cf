"""Accelerator specifications: the one table of hardware constants in the book.

Every number the book computes about a chip starts here. Each row names its source; a notebook never types a
spec. Units are SI: FLOP/s (or OP/s for integer math) per chip, bytes, bytes per second, seconds.

Two kinds of chip-to-chip network (`Torus`, `SwitchDomain`): a TPU slice joins its chips in a 2D or 3D torus of
point-to-point ICI links, two per axis (one to each neighbour), and talks to other slices over the data-centre
network (DCN); an HGX GPU node joins its 8 GPUs through NVSwitches, so every GPU reaches every other at its full
NVLink injection bandwidth, and talks to other nodes over a scale-out network (InfiniBand, one NIC per GPU).
`collectives` prices all-gathers, reduce-scatters, all-reduces and all-to-alls on both.

Sources (full references in book/references.bib):
- [SB2]  Austin et al., "How to Scale Your Model", ch. 2 "How to Think About TPUs", spec table (TPU v4, v5e, v5p,
         v6e; ICI one-way bandwidth per link and ~1 us per hop).
- [SB7]  the same book, ch. 7 "All About Transformer Inference" (v5e 1.97e14 bf16 / 3.94e14 int8, 8.2e11 B/s,
         16 GB; H100 9.89e14 / 3.35e12 B/s).
- [TPU7] the TPU inference chapter used as a seed (Ironwood / TPU7x: 7,380 GB/s of HBM "against 200 GB/s per
         axis"), and Google Cloud's TPU7x page (2,307 / 4,614 TFLOP/s bf16 / fp8, 192 GiB, 7,380 GB/s HBM, 1,200 GB/s
         bidirectional ICI per chip, 100 Gb/s DCN per chip, a 3D torus like v5p).
- [GC]   Google Cloud TPU system-architecture pages (v5e: 8 chips per host with 2 x 100 Gb/s NICs, i.e. 25 Gb/s
         of DCN per chip; v5p: 50 Gb/s DCN per chip; v6e and TPU7x: 100 Gb/s DCN per chip).
- [SB2-wrap] the same chapter (github.com/jax-ml/scaling-book, tpus.md at commit 0819a7d8): slices smaller
         than a 4 x 4 x 4 cube (2x2x1, 2x2x2, 2x2x4) have no wraparound links, multiples of a full cube do (the
         optical switches provide them); v5e and v6e pods are 16 x 16 and smaller slices have no wraps on axes
         under 16 (a v5e 8 x 16 wraps on its long axis); sharding.md's worked answer: a 4-chip v5e axis has no
         wraparound, so an all-gather over it takes (n - 1) x shard / W_ici one way.
- [PJ22] Pope et al. 2022, "Efficiently Scaling Transformer Inference" (TPU v4: 270 GB/s ICI per chip, 32 GiB).
- [NV]   NVIDIA data sheets (H100 SXM, H200 SXM, B200): dense (non-sparse) tensor-core rates, HBM bandwidth and
         capacity; NVLink 4 (H100, H200): 18 links, 900 GB/s per GPU counting both directions, so 450 GB/s each way;
         NVLink 5 (B200): 18 links, 1.8 TB/s both directions (MLPerf Inference system descriptions for DGX H200 and
         B200 nodes list the same links and 8 GPUs per node). The NCCL maintainers confirm that 900 GB/s is the sum
         of both directions at wire speed (github.com/NVIDIA/nccl issue 1442).
- [SMI]  nvidia-smi memory.total as the devices report it in public nvidia-smi logs (exact-string search of
         GitHub): 81559 MiB on 'NVIDIA H100 80GB HBM3', 143771 MiB on 'NVIDIA H200', 81920 MiB on 'NVIDIA
         A100-SXM4-80GB', 183359 MiB on 'NVIDIA B200', 189471 MiB on 'NVIDIA GB200' (the labels' 80 GB, 141 GB
         and 180 GB are the marketing figures; the A100's is 80 GiB, five 16 GiB stacks of HBM2e, all exposed).
- [NIC]  MLPerf Inference system descriptions (DGX H200: 400 Gb/s InfiniBand NICs, one per GPU for GPU traffic;
         a B200 node: 8 x ConnectX-7 400 Gb/s), i.e. 50 GB/s of scale-out bandwidth per GPU.
- [NCCL] a small NCCL all-reduce between H100s over NVLink takes about 6 us with CUDA graphs
         (github.com/NVIDIA/nccl issue 1259): the fixed cost of one collective in a switched domain.
- [NCCL-tune] NCCL's own tuning model (`NCCL_LATENCY`): github.com/NVIDIA/nccl src/graph/tuning.cc at commit
         5067397c: per-collective base latencies and per-step NVLink and network latencies by algorithm and
         protocol (ring LL: 6.6 us + 0.6 us per NVLink step), and the NVLS (in-switch reduction) latency.
"""

import functools
import math
from dataclasses import dataclass

from ._validate import axes as axes_of
from ._validate import positive, positive_int
from .dtypes import FP4_DTYPES, bytes_per_element

GB = 1e9
GIB = 2**30
MIB = 2**20
GBIT = 1e9 / 8  # bytes per second in one Gb/s
WRAP_AXIS_CHIPS = 16  # TPU v5e / v6e: an axis wraps only when it spans 16 chips [SB2-wrap]
CUBE_EDGE = 4  # TPU v4 / v5p / Ironwood: wraparounds come with whole 4 x 4 x 4 cubes [SB2-wrap]


def _missing(chip_name: str, field: str, fix: str):
    raise ValueError(f"{chip_name}: {field} is not in the hardware table (no source gives it); {fix}")


@dataclass(frozen=True)
class Torus:
    """A TPU slice's ICI: chips on a 2D or 3D torus, two links per axis (one to each neighbour).

    `link_bandwidth` is one direction of one link (B/s); a chip pushes 2 x link_bandwidth out along one axis (its
    two links on that axis), the bidirectional bandwidth of one link, which is the W_ici of the Scaling Book's
    collective costs. `wraparound`: whether a full pod's axes close into rings. A slice smaller than the pod may
    not: `wrap_rule` says which of its axes do (`wraparound_axes`). `dcn_bandwidth` is the data-centre network
    bandwidth per chip (B/s, one way) between slices; None where no source gives it.

    Wraparound rules [SB2-wrap]: "axis16" (TPU v5e, v6e: 16 x 16 pods without optical switches) gives an axis its
    wraparound link only when it spans 16 chips, whatever the other axes; "cube" (TPU v4, v5p and, as a 3D torus
    like v5p [TPU7], Ironwood) gets wraparounds from the optical switches of whole 4 x 4 x 4 cubes, so every axis
    wraps when the slice is made of whole cubes (each of its three axes a multiple of 4) and none does otherwise.
    """

    axes: int
    link_bandwidth: float  # B/s per link, one direction
    hop_latency: float  # seconds per hop
    dcn_bandwidth: float | None  # B/s per chip between slices
    wraparound: bool = True
    links_per_axis: int = 2
    kind: str = "torus"
    network: str = "ICI"
    wrap_rule: str = "cube"

    @property
    def links(self) -> int:
        """ICI links per chip: two per axis."""
        return self.axes * self.links_per_axis

    @property
    def axis_bandwidth(self) -> float:
        """B/s a chip sends along one axis (both its links on that axis, one way each) = one link's two directions."""
        return self.links_per_axis * self.link_bandwidth

    def wraparound_axes(self, mesh_shape) -> tuple:
        """Which axes of a slice of shape `mesh_shape` close into rings, by `wrap_rule` (class docstring).

        "axis16": an axis wraps when it spans 16 chips. "cube": all axes wrap when the slice has three axes, each a
        multiple of 4 (whole 4 x 4 x 4 cubes: 4 x 4 x 4, 4 x 4 x 8, 8 x 8 x 16 ...); otherwise none. A torus
        whose `wraparound` is False never wraps.
        """
        shape = axes_of("mesh_shape", mesh_shape)
        if not self.wraparound:
            return tuple(False for _ in shape)
        if self.wrap_rule == "axis16":
            return tuple(a == WRAP_AXIS_CHIPS for a in shape)
        whole_cubes = len(shape) == 3 and all(a % CUBE_EDGE == 0 for a in shape)
        return tuple(whole_cubes for _ in shape)

    def check_mesh(self, mesh_shape, chip_name: str) -> tuple:
        """`mesh_shape` (its axes checked) when its axes of more than one chip are at most the torus's axes; else a
        ValueError: a 2D torus (v5e, v6e) has no third axis of links to lay a third mesh axis on."""
        shape = axes_of("mesh_shape", mesh_shape)
        spread = tuple(a for a in shape if a > 1)
        if len(spread) > self.axes:
            merged = (spread[0], math.prod(spread[1:])) if self.axes == 2 else (math.prod(spread),)
            raise ValueError(f"mesh_shape {shape} lays chips along {len(spread)} axes and {chip_name}'s torus has "
                             f"{self.axes}, and no links join chips along another; use at most {self.axes} axes of "
                             f"more than one chip, e.g. mesh_shape={merged}")
        return shape

    def axis_wraps(self, n_chips: int) -> bool:
        """Whether one axis of n chips wraps when the rest of its slice is unknown: under "axis16" when n = 16;
        under "cube" when n is a multiple of 4, i.e. the axis of a slice made of whole cubes (a ring of 8 Ironwood
        chips in a 4 x 4 x 8 slice wraps; 2 chips never do). `wraparound_axes` decides it for a known slice.
        """
        n = positive_int("n_chips", n_chips)
        if not self.wraparound:
            return False
        return n == WRAP_AXIS_CHIPS if self.wrap_rule == "axis16" else n % CUBE_EDGE == 0


@dataclass(frozen=True)
class SwitchDomain:
    """An NVLink domain: every GPU reaches every other through NVSwitches at its full injection bandwidth.

    `injection_bandwidth`: B/s one GPU sends into the switches (equally, receives), one direction, all its links
    together. `domain_size`: GPUs under one set of switches; `domain`: what that set is, an HGX/DGX "node" of 8 GPUs
    or a rack-scale "NVL72 rack" of 72 GB200 GPUs (18 compute trays joined by the rack's NVLink switch trays), so a
    domain is not always one node. `collective_latency`: the fixed
    part of one collective however small, NCCL's base latency of its ring algorithm with the LL protocol
    (`NCCL_LATENCY`); what grows with the ranks and nodes is in `NCCL_LATENCY` too. `scale_out_bandwidth`: B/s
    per GPU, one way, between nodes. `link_bandwidth` x `links` = injection bandwidth. `in_switch_reduction`:
    whether the NVSwitches reduce in the switch (NVLink SHARP, which NCCL calls NVLS; Hopper and Blackwell
    switches). `generation`: the NCCL tuning column the GPU falls in ("ampere", "hopper", "blackwell").
    """

    links: int
    link_bandwidth: float  # B/s per NVLink link, one direction
    domain_size: int
    collective_latency: float  # seconds per collective
    scale_out_bandwidth: float | None  # B/s per GPU between nodes
    kind: str = "switch"
    network: str = "NVLink"
    in_switch_reduction: bool = False
    generation: str = "hopper"
    domain: str = "node"  # what one NVLink domain of domain_size GPUs is

    @property
    def injection_bandwidth(self) -> float:
        """B/s one GPU sends into the switch fabric, one direction: links x per-link bandwidth."""
        return self.links * self.link_bandwidth


@dataclass(frozen=True)
class FullMesh:
    """GPUs joined pairwise by direct links, no switch (AMD Infinity Fabric on an 8-GPU MI300X platform).

    Each GPU has `peers` links, one to every other GPU of its `domain_size`; `link_bandwidth` is one direction of
    one link. A GPU talking to one peer gets one link, 1/peers of its `injection_bandwidth`; a collective over all
    domain_size GPUs uses every link at once. `collective_latency`, `scale_out_bandwidth` as in `SwitchDomain`.
    """

    peers: int
    link_bandwidth: float  # B/s per link, one direction
    domain_size: int
    collective_latency: float  # seconds per collective
    scale_out_bandwidth: float | None  # B/s per GPU between nodes
    kind: str = "mesh"
    network: str = "Infinity Fabric"
    domain: str = "node"  # the platform whose domain_size GPUs the mesh joins

    @property
    def links(self) -> int:
        """Links per GPU: one per peer."""
        return self.peers

    @property
    def injection_bandwidth(self) -> float:
        """B/s one GPU sends over all its links at once, one direction."""
        return self.peers * self.link_bandwidth


@dataclass(frozen=True)
class NcclLatency:
    """NCCL's model of a collective: latencies in seconds per algorithm and protocol, and bandwidth efficiencies.

    From NCCL's tuning model [NCCL-tune]: `base[(algorithm, protocol)]` is paid once per collective; `nvlink` and
    `net` are paid per step on an NVLink hop and on a scale-out (network) hop. `nvls` is the whole latency of an
    in-switch (NVLS) collective inside one node; `nvls_tree_net` what each network level of the NVLS tree adds
    (twice per level: up and down). `net_overhead`: per intra-node step of a ring that spans nodes, at least this
    (x3 with the Simple protocol). `efficiency[(algorithm, protocol)]`: the fraction of the Simple protocol's
    bandwidth NCCL's model gives each (LL 1/2, LL128 0.92, Simple 1; a tree all-reduce 0.92, with LL a further
    1/3.8 and LL128 7/9). `nvls_efficiency`: NVLS's factor, by GPU generation.

    From NCCL's maintainers: `nvlink_efficiency`, the application-level NVLink bandwidth with the Simple protocol
    as a fraction of the line rate, 370 / 450 GB/s on H100 [NCCL-app]; `net_efficiency`, the same for a
    400 Gb/s InfiniBand NIC, 46-48 of 50 GB/s (47 / 50) [NCCL-nic]. `nvls_volume`: NVLS all-reduce moves the
    array and one n-th of it each way, V (n + 1) / n [NCCL-nvls].
    """

    base: tuple  # ((algorithm, protocol, seconds), ...)
    nvlink: tuple
    net: tuple
    nvls: float
    nvls_tree_net: float
    net_overhead: float
    efficiency: tuple  # ((algorithm, protocol, fraction), ...)
    nvls_efficiency: tuple  # ((generation, fraction), ...)
    nvlink_efficiency: float
    net_efficiency: float
    source: str

    def lookup(self, table: str, algorithm: str, protocol: str) -> float:
        """One entry of `base`, `nvlink`, `net` or `efficiency`."""
        value = self._entries.get((table, algorithm, protocol))
        if value is None:
            raise ValueError(f"no NCCL {table} entry for algorithm {algorithm!r} with protocol {protocol!r}")
        return value

    @functools.cached_property
    def _entries(self) -> dict:
        """{(table, algorithm, protocol): value} of the four tables (every collective priced reads a few)."""
        return {(table, a, p): value for table in ("base", "nvlink", "net", "efficiency")
                for a, p, value in getattr(self, table)}


NCCL_LATENCY = NcclLatency(
    base=(("tree", "LL", 6.8e-6), ("tree", "LL128", 14.0e-6), ("tree", "Simple", 8.4e-6),
          ("ring", "LL", 6.6e-6), ("ring", "LL128", 14.0e-6), ("ring", "Simple", 8.4e-6)),
    nvlink=(("tree", "LL", 0.6e-6), ("tree", "LL128", 1.25e-6), ("tree", "Simple", 4.0e-6),
            ("ring", "LL", 0.6e-6), ("ring", "LL128", 1.9e-6), ("ring", "Simple", 3.4e-6)),
    net=(("tree", "LL", 5.0e-6), ("tree", "LL128", 8.5e-6), ("tree", "Simple", 14.0e-6),
         ("ring", "LL", 2.7e-6), ("ring", "LL128", 4.0e-6), ("ring", "Simple", 14.0e-6)),
    nvls=25e-6,
    nvls_tree_net=20.9e-6,
    net_overhead=1.0e-6,
    efficiency=(("ring", "LL", 0.5), ("ring", "LL128", 0.92), ("ring", "Simple", 1.0),
                ("tree", "LL", 0.92 / 3.8), ("tree", "LL128", 0.92 * 7 / 9), ("tree", "Simple", 0.92)),
    nvls_efficiency=(("ampere", 0.0), ("hopper", 0.85), ("blackwell", 0.74)),
    nvlink_efficiency=370 / 450,
    net_efficiency=47 / 50,
    source="[NCCL-tune] github.com/NVIDIA/nccl src/graph/tuning.cc at commit "
    "5067397c2676d5aed50042fc39e5c8ee96eb0027 (ncclTunerConstantsDefaults: baseLatencies, hwLatencies for NVLINK and "
    "NET, nvlsEfficiency; ncclTopoTuneModel: ring latency base + steps x hop, tree all-reduce base + 2 (ranks per "
    "node - 1) x NVLink hop + 2 log2(nodes) x network hop, NVLS the NVLS hop, NVLS tree + 2 log2(nodes) x its "
    "network hop; LL at half the bandwidth, LL128 at 0.92, tree all-reduce at 0.92 (LL a further 1/3.8, LL128 7/9 in "
    "one node); getNetOverhead 1 us on x86 Intel, x3 with Simple; ncclTopoGetAlgoTime: time = latency + bytes / "
    "bandwidth). [NCCL-app] NCCL maintainer, github.com/NVIDIA/nccl issue 1442 and nccl-tests issue 212: 370 GB/s of "
    "the 450 GB/s NVLink 4 line rate each way at application level (~20% protocol overhead). [NCCL-nic] NCCL "
    "maintainer, github.com/NVIDIA/nccl-tests issue 290: 46-48 GB/s per NDR 400 Gb/s NIC. [NCCL-nvls] NCCL maintainer, "
    "github.com/NVIDIA/nccl issue 1506: an NVLS all-gather sends the array one way and 1/n of it the other; an "
    "all-reduce is a reduce-scatter and an all-gather, so V (n + 1) / n each way",
)


@dataclass(frozen=True)
class Chip:
    """One accelerator chip.

    `peak_flops_table` maps a compute dtype to the dense peak rate of one chip (FLOP/s, or OP/s for int8);
    a dtype the chip has no native matrix unit for is absent and `peak_flops` refuses it. `topology` is its
    chip-to-chip network (`Torus` or `SwitchDomain`). `ici_link_bandwidth` is one direction of one link (B/s);
    `ici_bidirectional` is both directions of one link; `ici_hop_latency` exists only on a torus. A lone device
    (the reader's CPU, chapter 11) has `topology=None`: asking for its network is a ValueError.
    """

    name: str
    peak_flops_table: tuple  # ((dtype, FLOP/s), ...)
    hbm_bandwidth: float  # B/s per chip
    hbm_capacity: float  # bytes per chip
    topology: Torus | SwitchDomain | FullMesh | None
    source: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Chip name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.source, str) or not self.source:
            raise ValueError(f"{self.name}: source must be a string saying where the numbers come from, got "
                             f"{self.source!r}")
        for field_name in ("hbm_bandwidth", "hbm_capacity"):
            positive(f"{self.name}: {field_name}", getattr(self, field_name))  # finite, > 0, not a bool or a string
        table = self.peak_flops_table
        if isinstance(table, (str, bytes)) or not isinstance(table, (tuple, list)) or not table or not all(
                isinstance(entry, (tuple, list)) and len(entry) == 2 for entry in table):
            raise ValueError(f"{self.name}: peak_flops_table must be a non-empty tuple of (dtype, FLOP/s) pairs, got "
                             f"{table!r}")
        if not isinstance(self.topology, (Torus, SwitchDomain, FullMesh, type(None))):
            raise ValueError(f"{self.name}: topology must be a Torus, a SwitchDomain, a FullMesh or None (a lone device), "
                             f"got {self.topology!r}")
        for field_name in ("link_bandwidth", "hop_latency", "collective_latency", "dcn_bandwidth",
                           "scale_out_bandwidth"):
            value = getattr(self.topology, field_name, None)
            if value is not None and not value > 0:
                raise ValueError(f"{self.name}: topology {field_name} must be positive or None, got {value!r}")
        for dtype, rate in self.peak_flops_table:
            try:
                bytes_per_element(dtype)  # validates the dtype name
            except ValueError as error:
                raise ValueError(f"{self.name}: peak_flops_table: {error}") from None
            positive(f"{self.name}: peak_flops_table's FLOP/s for {dtype}", rate)

    @property
    def network(self) -> Torus | SwitchDomain | FullMesh:
        """The chip's topology; a ValueError for a lone device, which has none."""
        if self.topology is None:
            _missing(self.name, "topology", "a lone device has no chip-to-chip network; use n_chips=1")
        return self.topology

    @property
    def interconnect(self) -> str:
        """'ICI' (a TPU torus), 'NVLink' (a GPU switch domain), 'Infinity Fabric' (a full mesh) or 'none'."""
        return "none" if self.topology is None else self.topology.network

    @property
    def ici_link_bandwidth(self) -> float:
        """One direction of one chip-to-chip link, B/s."""
        return self.network.link_bandwidth

    @property
    def ici_links(self) -> int:
        """Chip-to-chip links per chip."""
        return self.network.links

    @property
    def ici_bidirectional(self) -> float:
        """Both directions of one link, B/s."""
        return 2.0 * self.ici_link_bandwidth

    @property
    def ici_hop_latency(self) -> float:
        """Seconds per torus hop; a switched GPU domain has none (its collectives have a fixed latency instead)."""
        if not isinstance(self.network, Torus):
            _missing(self.name, "ici_hop_latency", "an NVLink switch domain (or a full mesh) has no hops; use "
                     "chip.topology.collective_latency, the fixed cost of one collective")
        return self.topology.hop_latency

    @property
    def dcn_bandwidth(self) -> float:
        """B/s per chip, one way, to chips outside its slice or node: the DCN on a TPU, the scale-out NIC on a GPU."""
        if isinstance(self.network, Torus):
            value, field = self.topology.dcn_bandwidth, "dcn_bandwidth"
        else:
            value, field = self.topology.scale_out_bandwidth, "scale_out_bandwidth"
        if value is None:
            _missing(self.name, field, "pass the bandwidth yourself (e.g. bandwidth=... in serving.kv_transfer_time)")
        return value

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
_B200_FP4 = 9e15  # dense FP4 FLOP/s of one HGX B200 GPU (source in its row)
_GB200_FP4 = 1e16  # dense FP4 FLOP/s of one GB200 GPU (source in its row)
_NVL72_GPUS = 72  # GPUs in one GB200 NVL72 NVLink domain
_HOP = 1e-6  # ~1 us per ICI hop [SB2, SB7]
_NVLINK4 = dict(links=18, link_bandwidth=25 * GB, domain_size=8,
                collective_latency=NCCL_LATENCY.lookup("base", "ring", "LL"), scale_out_bandwidth=400 * GBIT,
                in_switch_reduction=True, generation="hopper")
_NVLINK5 = dict(_NVLINK4, link_bandwidth=50 * GB, generation="blackwell")
_NV_NET = ("NVLink: 18 links per GPU, 8 GPUs per HGX node behind NVSwitches with in-switch reduction (NVLS); "
           "400 Gb/s InfiniBand per GPU between nodes [NIC]; NCCL's latency model [NCCL-tune]")
_CHIPS = (
    Chip(
        name="tpu-v4",
        peak_flops_table=(("bf16", 2.75e14), ("int8", 2.75e14)),
        hbm_bandwidth=1.2e12,
        hbm_capacity=32 * GIB,
        topology=Torus(axes=3, link_bandwidth=4.5e10, hop_latency=_HOP, dcn_bandwidth=None),
        source=f"{_SB2}; Pope et al. 2022 (32 GiB HBM, 6 links x 45 GB/s = 270 GB/s ICI per chip); 3D torus; "
        "no DCN figure in the sources",
    ),
    Chip(
        name="tpu-v5e",
        peak_flops_table=(("bf16", 1.97e14), ("int8", 3.94e14)),
        hbm_bandwidth=8.2e11,
        hbm_capacity=16 * GB,
        topology=Torus(axes=2, link_bandwidth=4.5e10, hop_latency=_HOP, dcn_bandwidth=25 * GBIT,
                       wrap_rule="axis16"),
        source=f"{_SB2}; Scaling Book ch. 7 (1.97e14 bf16, 3.94e14 int8, 8.2e11 B/s, 16 GB, ~1 us per hop); "
        "2D torus; Google Cloud v5e page (2 x 100 Gb/s NICs per 8-chip host: 25 Gb/s DCN per chip)",
    ),
    Chip(
        name="tpu-v5p",
        peak_flops_table=(("bf16", 4.59e14), ("int8", 9.18e14)),
        hbm_bandwidth=2.8e12,
        hbm_capacity=96 * GB,
        topology=Torus(axes=3, link_bandwidth=9e10, hop_latency=_HOP, dcn_bandwidth=50 * GBIT),
        source=f"{_SB2}; 3D torus; Google Cloud v5p page (50 Gb/s DCN per chip)",
    ),
    Chip(
        name="tpu-v6e",
        peak_flops_table=(("bf16", 9.2e14), ("int8", 1.84e15)),
        hbm_bandwidth=1.6e12,
        hbm_capacity=32 * GB,
        topology=Torus(axes=2, link_bandwidth=9e10, hop_latency=_HOP, dcn_bandwidth=100 * GBIT,
                       wrap_rule="axis16"),
        source=f"{_SB2}; 2D torus; Google Cloud TPU7x page's comparison table (100 Gb/s DCN per v6e chip)",
    ),
    Chip(
        name="tpu-7x",
        peak_flops_table=(("bf16", 2.307e15), ("fp8", 4.614e15)),
        hbm_bandwidth=7.38e12,
        hbm_capacity=192 * GIB,  # Google Cloud TPU7x page: "HBM capacity per chip (GiB)" 192
        topology=Torus(axes=3, link_bandwidth=1e11, hop_latency=_HOP, dcn_bandwidth=100 * GBIT),
        source="TPU inference chapter (Ironwood: 7,380 GB/s of HBM against 200 GB/s per axis, i.e. beta = 36.9); "
        "Google Cloud TPU7x page (192 GiB of HBM per chip; 7,380 GB/s HBM; 1,200 GB/s bidirectional ICI per chip; 100 Gb/s DCN per chip; "
        "3D torus). One chip has 6 links, two per axis: 1,200 / 6 = 200 GB/s per link counting both directions, "
        "100 GB/s each way, so a chip sends 2 x 100 = 200 GB/s along one axis: the chapter's 'per axis' and one "
        "link's two directions are the same 200 GB/s",
    ),
    Chip(
        name="h100",
        peak_flops_table=(("bf16", 9.89e14), ("fp16", 9.89e14), ("fp8", 1.979e15), ("int8", 1.979e15)),
        hbm_bandwidth=3.35e12,
        hbm_capacity=81559 * MIB,
        topology=SwitchDomain(**_NVLINK4),
        source="NVIDIA H100 SXM data sheet (dense rates; FP16 tensor cores run at the BF16 rate; NVLink 900 GB/s both directions = 450 GB/s each way); "
        f"Scaling Book ch. 7 (9.89e14 / 3.35e12); HBM as the device exposes it: nvidia-smi reports 81559 MiB of "
        f"memory.total on an 'NVIDIA H100 80GB HBM3' [SMI]; {_NV_NET}",
    ),
    Chip(
        name="h200",
        peak_flops_table=(("bf16", 9.89e14), ("fp16", 9.89e14), ("fp8", 1.979e15), ("int8", 1.979e15)),
        hbm_bandwidth=4.8e12,
        hbm_capacity=143771 * MIB,
        topology=SwitchDomain(**_NVLINK4),
        source="NVIDIA H200 SXM data sheet (dense rates; FP16 tensor cores run at the BF16 rate; NVLink 900 GB/s both directions); MLPerf DGX H200 system "
        "description (18 x NVLink 4, 900 GB/s; 8 GPUs; 400 Gb/s InfiniBand); HBM as the device exposes it: "
        f"nvidia-smi reports 143771 MiB of memory.total on an 'NVIDIA H200' [SMI]; {_NV_NET}",
    ),
    Chip(
        name="b200",
        peak_flops_table=(("bf16", 2.25e15), ("fp16", 2.25e15), ("fp8", 4.5e15), ("int8", 4.5e15),
                          *((fp4, _B200_FP4) for fp4 in FP4_DTYPES)),
        hbm_bandwidth=8e12,
        hbm_capacity=183359 * MIB,
        topology=SwitchDomain(**_NVLINK5),
        source="NVIDIA B200 data sheet (dense rates, FP16 at the BF16 rate; NVLink 5: 18 links, 1.8 TB/s both directions = 900 GB/s each "
        "way); dense FP4 9,000 TFLOPS on HGX B200 at 1,000 W (glennklockwood.com/garden/processors/B200, from "
        "NVIDIA's Blackwell data sheet; DGX B200: 72 PFLOPS dense FP4 for 8 GPUs); HBM as the device exposes it: "
        "nvidia-smi reports 183359 MiB of memory.total on an 'NVIDIA B200' [SMI] (the DGX B200 page's 1,440 GB for "
        f"8 GPUs, 180 GB each, is the marketing figure); MLPerf B200 node description (8 GPUs, 8 x 400 Gb/s ConnectX-7); {_NV_NET}",
    ),
    Chip(
        name="gb200",
        peak_flops_table=(("bf16", 2.5e15), ("fp16", 2.5e15), ("fp8", 5e15), ("int8", 5e15),
                          *((fp4, _GB200_FP4) for fp4 in FP4_DTYPES)),
        hbm_bandwidth=8e12,
        hbm_capacity=189471 * MIB,
        topology=SwitchDomain(**dict(_NVLINK5, domain_size=_NVL72_GPUS, scale_out_bandwidth=None,
                                     domain="NVL72 rack")),
        source="the B200 GPU of GB200 at 1,200 W (glennklockwood.com/garden/processors/B200, from NVIDIA's data "
        "sheet): dense 2,500 TFLOPS bf16 and fp16, 5,000 fp8 and int8, 10,000 FP4; 8 TB/s HBM; GB200 NVL72: 72 GPUs in one "
        "NVLink 5 domain at 1.8 TB/s per GPU (both directions) (aiwiki.ai/wiki/nvidia_gb200_nvl72, quoting NVIDIA; "
        "its 13.4 TB of HBM3e for the 72 is the marketing figure); HBM as the device exposes it: nvidia-smi reports "
        "189471 MiB of memory.total on an 'NVIDIA GB200' [SMI]; the domain is one rack, not one node: 18 compute trays "
        "of 4 GPUs joined by 9 NVLink Switch trays (setloop.io/blog/gb200-nvl72-architecture); NVLink SHARP (NVLS) "
        "in the NVLink switches; no "
        "scale-out figure in the sources (a collective beyond 72 GPUs is refused)",
    ),
    Chip(
        name="a100",
        peak_flops_table=(("bf16", 3.12e14), ("fp16", 3.12e14), ("int8", 6.24e14)),
        hbm_bandwidth=2.039e12,
        hbm_capacity=81920 * MIB,
        topology=SwitchDomain(links=12, link_bandwidth=25 * GB, domain_size=8,
                              collective_latency=NCCL_LATENCY.lookup("base", "ring", "LL"),
                              scale_out_bandwidth=200 * GBIT, in_switch_reduction=False, generation="ampere"),
        source="NVIDIA A100 80GB SXM4 data sheet as tabulated at glennklockwood.com/garden/processors/A100 (dense "
        "312 TFLOPS bf16/fp16, 624 TOPS int8; 80 GB HBM2e at 2.039 TB/s; NVLink 3 300 + 300 GB/s, i.e. 12 links x "
        "25 GB/s each way); HBM as the device exposes it: nvidia-smi reports 81920 MiB of memory.total on an "
        "'NVIDIA A100-SXM4-80GB' [SMI]; NVSwitch without in-switch reduction (NCCL's NVLS efficiency for Ampere is 0 "
        "[NCCL-tune]); DGX A100: eight Mellanox 200 Gb/s NICs, one per GPU (geektopia.es, 2020-05-14 DGX A100 "
        "announcement)",
    ),
    Chip(
        name="mi300x",
        peak_flops_table=(("bf16", 1.3074e15), ("fp16", 1.3074e15), ("fp8", 2.6149e15), ("int8", 2.6149e15)),
        hbm_bandwidth=5.3e12,
        hbm_capacity=192 * GIB,
        topology=FullMesh(peers=7, link_bandwidth=64 * GB, domain_size=8,
                          collective_latency=NCCL_LATENCY.lookup("base", "ring", "LL"), scale_out_bandwidth=None),
        source="ROCm documentation, MI300 series microarchitecture (mirrored at github.com/steqeq/0000 "
        "docs/conceptual/gpu-arch/mi300.md, commit 1a1eda56): matrix bf16/fp16 1,307.4 TFLOPS, fp8 and int8 2,614.9, "
        "5.3 TB/s HBM, eight GPUs fully connected by seven Infinity Fabric links each; 192 GiB of VRAM (the same "
        "docs' gpu-arch-info.rst table); each "
        "link 128 GB/s both directions, 64 GB/s each way (wheelersnetwork.com/2024/01, on the MI300 launch: 16 lanes "
        "at 32 Gb/s); collective latency: NCCL's model stands in for RCCL's (no published RCCL figure used); no "
        "scale-out figure in the sources",
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
