"""What a collective costs on each kind of network: a TPU torus and a GPU switch.

A collective over n chips moves an array of V bytes (the gathered output of an all-gather, the unreduced input of a
reduce-scatter or all-reduce, the array resharded by an all-to-all). Its time is the larger of a bandwidth term
and a latency term (`CollectiveTime.total_s`): a lower bound, since real collectives pay both.

**Torus (TPU ICI), one axis of n chips joined in a bidirectional ring** (Scaling Book ch. 3), W = W_ici,bidi, the
bandwidth a chip sends along that axis (its two links one way each, = one link's two directions,
`Torus.axis_bandwidth`; W_ici is one link one way):

    all-gather, reduce-scatter:  V / W          all-reduce:  2 V / W          all-to-all:  V / (4 W)

and each takes `collective_hops` hops of at least ~1 us each however small its chunk: chunks travel both ways round
the ring, so one pass is ceil(n / 2) hops, and an all-reduce (a reduce-scatter then an all-gather) two passes.
Without wraparound an axis is a line: the middle link still carries V / 2 each way (same bandwidth term), but the
farthest chunk travels n - 1 hops per pass.

**Switch (GPU NVLink domain), n GPUs under one set of NVSwitches**, W = one GPU's injection bandwidth, one way
(450 GB/s on H100). Every GPU sends and receives only its own share, whoever its peers are, so (nccl-tests'
doc/PERFORMANCE.md derives the same volumes to define its "bus bandwidth"):

    all-gather, reduce-scatter:  V (n-1)/n / W    all-reduce:  2 V (n-1)/n / W    all-to-all:  V (n-1)/n^2 / W

and each costs at least a fixed latency of a few microseconds (`SwitchDomain.collective_latency`; no hops to
count). Across nodes (n a multiple of the domain size g, m = n / g nodes) collectives are hierarchical: the
inter-node stage moves V / g per GPU over its scale-out NIC, e.g. an all-gather takes
(V/g)(m-1)/m / W_net + V (g-1)/g / W, with one fixed latency per stage.

In-switch reduction (NVLink SHARP) lets a real 8-GPU all-reduce beat the all-reduce volume above by a few percent
(measured 480 GB/s of NCCL bus bandwidth on 8 H100 against 450 GB/s line rate); the model leaves it out.
Used in chapter 7, *Sharding prefill and generation*, and chapter 11, *How close do real systems come?*.
"""

import math
from dataclasses import dataclass

from ._validate import axes as check_axes
from ._validate import choice, flag, positive, positive_int
from .hardware import SwitchDomain, Torus, get_chip

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")
_TORUS_FACTOR = {"all-gather": 1.0, "reduce-scatter": 1.0, "all-reduce": 2.0, "all-to-all": 0.25}
NETWORKS = ("ici", "dcn")


@dataclass(frozen=True)
class CollectiveTime:
    """A collective's bandwidth term, its latency term and the time it takes (the larger of the two)."""

    op: str
    bandwidth_s: float
    latency_s: float

    @property
    def total_s(self) -> float:
        return max(self.bandwidth_s, self.latency_s)

    @property
    def bound(self) -> str:
        return "latency" if self.latency_s > self.bandwidth_s else "bandwidth"


def collective_bandwidth(chip) -> float:
    """W of the collective costs above, B/s: a torus axis (one ICI link's two directions) or a GPU's NVLink injection.

    The bandwidth at which an all-gather's output grows on a large group: V / W. 9e10 B/s on TPU v5e, 2e11 on
    Ironwood, 4.5e11 on H100 (18 NVLink links x 25 GB/s, one way).

    Used in chapter 7, *Sharding prefill and generation*.
    """
    topology = get_chip(chip).network
    return topology.axis_bandwidth if isinstance(topology, Torus) else topology.injection_bandwidth


def _switch_volume(op: str, n: int) -> float:
    """Bytes one GPU moves per byte of the array, for op over n GPUs behind a switch (module docstring)."""
    share = (n - 1) / n
    return {"all-gather": share, "reduce-scatter": share, "all-reduce": 2 * share, "all-to-all": share / n}[op]


def collective_hops(op: str, n_shards: int, wraparound: bool = True) -> int:
    """Hops one collective takes on a bidirectional ring of n chips: ceil(n / 2) per pass, two passes for an all-reduce.

    Chunks travel both ways round the ring at once, so the farthest chip is ceil(n / 2) hops away: an all-gather,
    reduce-scatter or all-to-all is one pass of ceil(n / 2) hops; an all-reduce is a reduce-scatter followed by an
    all-gather, 2 ceil(n / 2) hops (8 on a ring of 8). Without wraparound a pass is n - 1 hops. A latency-bound
    collective takes hops x the hop latency. Chapter 7's section *Decode collectives are latency-bound*.

    Used in chapter 7, *Sharding prefill and generation*.
    """
    choice("collective", op, COLLECTIVES)
    n = positive_int("n_shards", n_shards)
    wraparound = flag("wraparound", wraparound)
    if n == 1:
        return 0
    passes = 2 if op == "all-reduce" else 1
    return passes * (math.ceil(n / 2) if wraparound else n - 1)


def _torus_time(op, array_bytes, topology: Torus, n, wraparound) -> CollectiveTime:
    return CollectiveTime(op, bandwidth_s=_TORUS_FACTOR[op] * array_bytes / topology.axis_bandwidth,
                          latency_s=collective_hops(op, n, wraparound) * topology.hop_latency)


def _switch_time(op, array_bytes, chip, topology: SwitchDomain, n) -> CollectiveTime:
    g, w = topology.domain_size, topology.injection_bandwidth
    if n <= g:
        return CollectiveTime(op, _switch_volume(op, n) * array_bytes / w, topology.collective_latency)
    if n % g:
        raise ValueError(f"n_shards={n} on {chip.name} spans {n / g:g} nodes of {g} GPUs; a collective across "
                         f"nodes needs whole nodes: use a multiple of {g} (or at most {g} GPUs)")
    m, net = n // g, chip.dcn_bandwidth
    if op == "all-to-all":  # each GPU's V/n: (n-g)/n of it leaves the node, (g-1)/n stays; both run at once
        off_node = array_bytes / n * (n - g) / n / net
        on_node = array_bytes / n * (g - 1) / n / w
        return CollectiveTime(op, max(off_node, on_node), 2 * topology.collective_latency)
    inner = _switch_volume("all-gather", g) * array_bytes / w  # V (g-1)/g inside each node
    outer = _switch_volume(op, m) * (array_bytes / g) / net  # the inter-node stage on V / g per GPU
    stages = 3 if op == "all-reduce" else 2
    inner_passes = 2 if op == "all-reduce" else 1  # reduce-scatter in, all-gather out
    return CollectiveTime(op, inner_passes * inner + outer, stages * topology.collective_latency)


def collective_time(op: str, array_bytes: float, chip, n_shards: int, wraparound: bool | None = None
                    ) -> CollectiveTime:
    """Time of one collective over n_shards chips: one torus axis (a ring) or one switched domain (see the module
    docstring for the formulas). `wraparound` overrides the torus's (ignored on a switch).

    Used in chapter 7, *Sharding prefill and generation* and chapter 11, *How close do real systems come?*.
    """
    choice("collective", op, COLLECTIVES)
    chip = get_chip(chip)
    positive("array_bytes", array_bytes, allow_zero=True)
    n = positive_int("n_shards", n_shards)
    if n == 1:
        return CollectiveTime(op, 0.0, 0.0)
    topology = chip.network
    if isinstance(topology, Torus):
        return _torus_time(op, array_bytes, topology, n, topology.wraparound if wraparound is None else wraparound)
    return _switch_time(op, array_bytes, chip, topology, n)


def mesh_collective(op: str, array_bytes: float, chip, mesh_shape) -> CollectiveTime:
    """A collective over every chip of `mesh_shape`. On a torus the k axes' links share the bandwidth term (V / k)
    and the axes are reduced one after another, so the hop latencies add; a switch sees one group of prod(shape)."""
    chip = get_chip(chip)
    axes = [a for a in check_axes("mesh_shape", mesh_shape) if a != 1]
    if not axes:
        return CollectiveTime(op, 0.0, 0.0)
    if not isinstance(chip.topology, Torus):
        return collective_time(op, array_bytes, chip, math.prod(axes))
    bandwidth = collective_time(op, array_bytes, chip, math.prod(axes)).bandwidth_s / len(axes)
    latency = sum(collective_time(op, array_bytes, chip, a).latency_s for a in axes)
    return CollectiveTime(op, bandwidth, latency)


def latency_bound_bytes(chip, n_shards: int) -> float:
    """Below this many bytes an all-gather over n_shards chips is latency-bound: where `collective_time`'s two
    terms meet. On a torus ring n W_link t_hop (the Scaling Book's 360 kB for 8 v5e chips, 800 kB on 8 Ironwood
    chips); on a switch latency x W_inj x n / (n - 1) (about 3 MB on 8 H100).

    Used in chapter 7, *Sharding prefill and generation*; chapter 10, *Speculative decoding, mixture of experts and
    quantization*; and chapter 11, *How close do real systems come?*.
    """
    chip = get_chip(chip)
    n = positive_int("n_shards", n_shards)
    if n == 1:
        return 0.0
    one_byte = collective_time("all-gather", 1.0, chip, n)
    return one_byte.latency_s / one_byte.bandwidth_s


def bus_bandwidth(op: str, array_bytes: float, seconds: float, n_shards: int) -> float:
    """NCCL's "bus bandwidth" of a collective: the algorithm bandwidth V / t times 2(n-1)/n (all-reduce) or
    (n-1)/n (all-gather, reduce-scatter, all-to-all), so that it can be compared with a link's line rate
    (nccl-tests, doc/PERFORMANCE.md). For the switch model above it equals the injection bandwidth.

    Used in chapter 11, *How close do real systems come?*.
    """
    choice("collective", op, COLLECTIVES)
    positive("array_bytes", array_bytes)
    positive("seconds", seconds)
    n = positive_int("n_shards", n_shards)
    factor = (2 if op == "all-reduce" else 1) * (n - 1) / n
    return array_bytes / seconds * factor


def transfer_bandwidth(chip, n_chips: int, network: str = "dcn") -> float:
    """B/s at which n chips send data out of their slice or node ("dcn": n x the per-chip DCN or scale-out NIC
    bandwidth) or to chips of the same slice or node ("ici": n x one ICI link one way on a torus, n x the NVLink
    injection bandwidth on a switch). Used for the disaggregated KV-cache transfer of chapter 9."""
    chip = get_chip(chip)
    n = positive_int("n_chips", n_chips)
    choice("network", network, NETWORKS)
    if network == "dcn":
        return n * chip.dcn_bandwidth
    per_chip = chip.ici_link_bandwidth if isinstance(chip.topology, Torus) else collective_bandwidth(chip)
    return n * per_chip
