"""What a collective costs on each kind of network: a TPU torus, a GPU switch and a GPU full mesh.

A collective over n chips moves an array of V bytes (the gathered output of an all-gather, the unreduced input of a
reduce-scatter or all-reduce, the array resharded by an all-to-all). Its time is a latency (alpha) plus a bandwidth
term, bytes / line rate (`CollectiveTime.total_s`); `CollectiveTime.bound_s` is a true lower bound for that
collective alone: the larger of the shortest latency physics allows and the line-rate bandwidth term of the best
algorithm the hardware has.

**Torus (TPU ICI), one axis of n chips**, W = W_ici,bidi, the bandwidth a chip sends along that axis (its two links
one way each, = one link's two directions, `Torus.axis_bandwidth`; W_ici = W / 2 is one link one way). With
wraparound the axis is a bidirectional ring (Scaling Book ch. 3):

    all-gather, reduce-scatter:  V / W          all-reduce:  2 V / W          all-to-all:  V / (4 W)

and a pass takes floor(n / 2) hops of ~1 us: chunks travel both ways round the ring, and the farthest chip is
floor(n / 2) hops away (`hops.collective_hops`); an all-reduce (a reduce-scatter then an all-gather) is two passes.
Whether an axis wraps depends on the slice, not the chip: `hardware.Torus.wraparound_axes`. Without wraparound the
axis is a line: the chip at each end has a single link on it, through which it must receive the other n - 1
shards, (n - 1) V / n bytes at W_ici, so an all-gather takes 2 (n - 1) / n x V / W (1.5 V / W on 4 chips, the
Scaling Book's 3 x shard / W_ici), and a pass is n - 1 hops. An all-to-all is bounded by the bisection: half the
chips send V / 4 to the other half, across 2 links a direction on a ring and 1 on a line.

**Switch (GPU NVLink domain), n GPUs under one set of NVSwitches**, W = one GPU's injection bandwidth, one way
(450 GB/s on H100). Every GPU sends and receives only its own share, whoever its peers are, so (nccl-tests'
doc/PERFORMANCE.md derives the same volumes to define its "bus bandwidth"):

    all-gather, reduce-scatter:  V (n-1)/n / W    all-reduce:  2 V (n-1)/n / W    all-to-all:  V (n-1)/n^2 / W

With in-switch reduction (NVLink SHARP, "NVLS") any all-reduce must still move V each way per GPU (its share of
every other GPU's chunk goes up once, (n-1) V / n, plus the chunk it owns, V / n; the reduced array comes back, V):
the bound. NCCL's NVLS moves V (n + 1) / n each way (an NVLS all-gather sends the array one way and 1/n of it the
other, an all-reduce is a reduce-scatter plus an all-gather): the priced algorithm. The latency is NCCL's own model
(`hardware.NCCL_LATENCY`, from NCCL's src/graph/tuning.cc): a ring pays a base latency plus one NVLink step per ring
step, 2 (n - 1) steps for an all-reduce (6.6 + 14 x 0.6 = 15 us on 8 GPUs with the LL protocol), a tree
2 (n - 1) steps inside a node and 2 log2(nodes) network steps, NVLS a flat 25 us. As NCCL does, the model picks the
algorithm and protocol with the least latency + bytes / (efficiency x line rate) (`CollectiveTime.expected_s`),
with NCCL's efficiencies relative to its Simple protocol (LL 1/2, LL128 0.92, NVLS 0.85 on Hopper) and the NCCL
maintainers' application-level rates (370 of NVLink 4's 450 GB/s, 47 of a 400 Gb/s NIC's 50 GB/s): the ring with
LL for small arrays, NVLS or Simple for large ones. `CollectiveTime` keeps that pick's latency and its line-rate
bandwidth term apart, so that a caller can apply its own efficiencies to each (`efficiency` is NCCL's for the pick).

**Full mesh (AMD Infinity Fabric)**, n GPUs each joined to every other by one link of W_link each way: each GPU
sends its share straight to each peer over that peer's link, V / n per link for an all-gather (2 V / n for an
all-reduce, V / n^2 for an all-to-all), so on all 8 GPUs it matches a switch of 7 W_link, and on 2 it gets a seventh
of that.

**Across nodes** (n a multiple of the domain size g, m = n / g nodes) NCCL pipelines the stages, so the slowest sets
the time (bus bandwidth = the least of the stages'). NCCL's ring runs through all n GPUs: each sends its ring share
over NVLink, and a node's ring crossings share its g NICs, 1/g of that share each. The tree and NVLS tree reduce
inside each node and send each GPU's 1/g of the inter-node all-reduce over its NIC, 2 (V / g)(m - 1)/m. The bound
takes, for each GPU, its share over NVLink and NIC together, and for each node what it must take in through its g
NICs. The latency is NCCL's for the ranks and nodes (network steps cost more).

Used in chapter 7, *Sharding prefill and generation*, and chapter 11, *How close do real systems come?*.
"""

import math
from dataclasses import dataclass

from ._validate import axes as check_axes
from ._validate import axis_flags, checked_by, choice, flag, positive, positive_int
from .hardware import NCCL_LATENCY, FullMesh, SwitchDomain, Torus, get_chip
from .hops import COLLECTIVES, collective_hops, mesh_hops

NETWORKS = ("ici", "dcn")
PROTOCOLS = ("LL", "LL128", "Simple")
SWITCH_ALGORITHMS = ("ring", "tree", "nvls")


@dataclass(frozen=True)
class CollectiveTime:
    """A collective's bandwidth term (bytes at the line rate), its latency term and the time it takes (their sum).

    `algorithm`: what priced it ("ring", "line", "tree-LL", "nvls", ...). `efficiency`: the fraction of the line rate
    NCCL's own model gives that algorithm (1 on a torus). `floor_s`: a true lower bound (`bound_s`), when the
    algorithm priced is not the fastest the hardware has.
    """

    op: str
    bandwidth_s: float
    latency_s: float
    algorithm: str = ""
    efficiency: float = 1.0
    floor_s: float | None = None

    @property
    def total_s(self) -> float:
        """latency + bandwidth: a collective pays both (alpha + bytes / bandwidth)."""
        return self.latency_s + self.bandwidth_s

    @property
    def bound_s(self) -> float:
        """A lower bound on this collective alone: max(physical latency, best algorithm's line-rate bandwidth)."""
        return max(self.latency_s, self.bandwidth_s) if self.floor_s is None else self.floor_s

    @property
    def expected_s(self) -> float:
        """latency + bandwidth / efficiency: NCCL's own estimate of the algorithm it picks (= total_s on a torus)."""
        return self.latency_s + self.bandwidth_s / self.efficiency

    @property
    def bound(self) -> str:
        return "latency" if self.latency_s > self.bandwidth_s else "bandwidth"


def collective_bandwidth(chip) -> float:
    """W of the collective costs above, B/s: a torus axis (one ICI link's two directions) or a GPU's NVLink injection.

    The bandwidth at which an all-gather's output grows on a large group: V / W. 9e10 B/s on TPU v5e, 2e11 on
    Ironwood, 4.5e11 on H100 (18 NVLink links x 25 GB/s, one way).

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    topology = get_chip(chip).network
    return topology.axis_bandwidth if isinstance(topology, Torus) else topology.injection_bandwidth


def _switch_volume(op: str, n: int) -> float:
    """Bytes one GPU moves per byte of the array, for op over n GPUs behind a switch (module docstring)."""
    share = (n - 1) / n
    return {"all-gather": share, "reduce-scatter": share, "all-reduce": 2 * share, "all-to-all": share / n}[op]


def _torus_arguments(*, op, array_bytes, chip, n_shards, wraparound):
    """`torus_collective_time`'s checks: a collective, a byte count, a TPU torus, a shard count; `wraparound` None
    takes the torus's rule for an axis of n_shards chips (`hardware.Torus.axis_wraps`)."""
    choice("collective op", op, COLLECTIVES)
    chip = get_chip(chip)
    if not isinstance(chip.network, Torus):
        raise ValueError(f"chip={chip.name!r} is not a TPU torus ({chip.interconnect}): torus_collective_time prices "
                         "one axis of a torus; use collective_time, which prices a switch or a mesh too")
    n = positive_int("n_shards", n_shards)
    wraps = chip.network.axis_wraps(n) if wraparound is None else flag("wraparound", wraparound)
    return dict(op=op, array_bytes=positive("array_bytes", array_bytes, allow_zero=True), chip=chip, n_shards=n,
                wraparound=wraps)


@checked_by(_torus_arguments)
def torus_collective_time(*, op: str, array_bytes: float, chip, n_shards: int,
                          wraparound: bool | None = None) -> CollectiveTime:
    """One collective of V = `array_bytes` over one torus axis of n chips: hops x t_hop + a bandwidth term (module
    docstring). A ring (`wraparound`): V / W for an all-gather or a reduce-scatter, 2 V / W for an all-reduce, V / (4 W)
    for an all-to-all, with W = W_ici,bidi, in floor(n / 2) hops a pass. A line: an end chip takes the other
    (n - 1) V / n bytes through its single link at W_ici, once a pass (twice for an all-reduce), in n - 1 hops a pass;
    an all-to-all crosses the middle over one link each way, V / (2 W). The bound keeps a ring's exact share
    (n - 1) / n, which V / W rounds up to 1. The checks run first (`_torus_arguments`), so the body is the formula.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    torus, n, v = chip.network, n_shards, array_bytes
    if n == 1:
        return CollectiveTime(op, 0.0, 0.0, "none")
    passes = 2 if op == "all-reduce" else 1  # an all-reduce is a reduce-scatter, then an all-gather
    if wraparound:  # a bidirectional ring
        bandwidth_s = {"all-to-all": v / 4, "all-reduce": 2 * v}.get(op, v) / torus.axis_bandwidth
        exact_s = bandwidth_s if op == "all-to-all" else bandwidth_s * (n - 1) / n
    elif op == "all-to-all":  # a line: V / 4 across the middle, one link each way
        bandwidth_s = exact_s = v / 2 / torus.axis_bandwidth
    else:  # a line: each end chip's one link carries the other (n - 1) V / n
        bandwidth_s = exact_s = passes * (n - 1) / n * v / torus.link_bandwidth
    latency_s = collective_hops(op, n, wraparound) * torus.hop_latency
    return CollectiveTime(op, bandwidth_s, latency_s, "ring" if wraparound else "line", 1.0, max(latency_s, exact_s))


def _nccl(table: str, algorithm: str, protocol: str) -> float:
    return NCCL_LATENCY.lookup(table, algorithm, protocol)


def _nvls_efficiency(topology: SwitchDomain) -> float:
    return dict(NCCL_LATENCY.nvls_efficiency).get(topology.generation, 0.0) if topology.in_switch_reduction else 0.0


def _ring_latency(op: str, protocol: str, n: int, m: int) -> float:
    """NCCL's ring latency over n ranks on m nodes: base + intra-node steps x NVLink step + network steps x network
    step; an all-reduce has 2 (n - 1) steps (2 (m - 1) of them between nodes), the others n - 1 (m - 1)."""
    steps = 2 * (n - 1) if op == "all-reduce" else n - 1
    net_steps = 0 if m == 1 else (2 * (m - 1) if op == "all-reduce" else m - 1)
    intra = _nccl("nvlink", "ring", protocol)
    if m > 1:  # a ring spanning nodes pays at least the network overhead on every step (x3 with Simple)
        intra = max(intra, NCCL_LATENCY.net_overhead * (3 if protocol == "Simple" else 1))
    return (_nccl("base", "ring", protocol) + (steps - net_steps) * intra
            + net_steps * _nccl("net", "ring", protocol))


def _tree_latency(protocol: str, n: int, m: int) -> float:
    """NCCL's tree all-reduce latency: base + 2 ((n / m - 1) NVLink steps + log2(m) network steps)."""
    return _nccl("base", "tree", protocol) + 2 * ((n // m - 1) * _nccl("nvlink", "tree", protocol)
                                                  + int(math.log2(m)) * _nccl("net", "tree", protocol))


def _nvls_latency(m: int) -> float:
    """NCCL's NVLS latency: the NVLS hop, and across nodes the NVLS tree's network hop twice per level."""
    return NCCL_LATENCY.nvls + 2 * int(math.log2(m)) * NCCL_LATENCY.nvls_tree_net


def _switch_stages(family: str, op: str, v: float, topology: SwitchDomain, net: float | None, n: int) -> list:
    """[(line-rate seconds, efficiency before the protocol's)] of each pipelined stage of an algorithm family:
    the NVLink stage, and across nodes each GPU's NIC (module docstring)."""
    g, w = topology.domain_size, topology.injection_bandwidth
    link, nic = NCCL_LATENCY.nvlink_efficiency, NCCL_LATENCY.net_efficiency
    m = max(1, n // g)
    if op == "all-to-all":  # each GPU's V/n: (n-g)/n of it leaves the node, the rest crosses NVLink; at once
        if m == 1:
            return [(_switch_volume(op, n) * v / w, link)]
        return [(v / n * (g - 1) / n / w, link), (v / n * (n - g) / n / net, nic)]
    if family == "ring":  # a flat ring through every GPU; across nodes each NIC carries 1/g of a GPU's ring traffic
        share = _switch_volume(op, n) * v
        return [(share / w, link)] + ([(share / g / net, nic)] if m > 1 else [])
    hierarchical = [(_switch_volume(op, m) * v / g / net, nic)] if m > 1 else []
    if family == "tree":  # reduce up a chain and broadcast down: 2 V per GPU (NCCL's algbw = busbw / 2)
        return [(2 * v / w, link)] + hierarchical
    inner = min(n, g)  # nvls: V (k + 1) / k each way over the k GPUs of the node, at NVLS's efficiency too
    return [(v * (inner + 1) / inner / w, link * _nvls_efficiency(topology))] + hierarchical


def _switch_floor(op: str, v: float, topology: SwitchDomain, net: float | None, n: int) -> float:
    """Line-rate lower bound of the bandwidth term: what each GPU must take in, over all its links at once (with
    in-switch reduction an all-reduce's V), and across nodes what each node must take in through its g NICs."""
    g, w = topology.domain_size, topology.injection_bandwidth
    m = max(1, n // g)
    volume = v if op == "all-reduce" and topology.in_switch_reduction else _switch_volume(op, n) * v
    floor = volume / (w + (net if m > 1 else 0.0))
    if m > 1:  # per NIC, 1/g of its node's share; an all-to-all's V/n x (n - g)/n is (m - 1)/m^2 x V/g, the same form
        floor = max(floor, _switch_volume(op, m) * v / g / net)
    return floor


def _switch_time(op, array_bytes, chip, topology: SwitchDomain, n, algorithm=None) -> CollectiveTime:
    g = topology.domain_size
    if n > g and n % g:
        raise ValueError(f"n_shards={n} on {chip.name} spans {n / g:g} nodes of {g} GPUs; a collective across "
                         f"nodes needs whole nodes: use a multiple of {g} (or at most {g} GPUs)")
    m = max(1, n // g)
    net = chip.dcn_bandwidth if m > 1 else None
    families = ["ring"]
    if op == "all-reduce":
        families.append("tree")
        if _nvls_efficiency(topology) > 0:
            families.append("nvls")
    if algorithm is not None:
        if algorithm not in families:
            raise ValueError(f"algorithm={algorithm!r}: NCCL has no such {op} over {n} {chip.name} GPUs; use one "
                             f"of {tuple(families)} or None (NCCL's pick)")
        families = [algorithm]
    candidates = []  # (name, latency, line-rate seconds, efficiency)
    for family in families:
        stages = _switch_stages(family, op, array_bytes, topology, net, n)
        line = max(seconds for seconds, _ in stages)
        for protocol in ("Simple",) if family == "nvls" else PROTOCOLS:
            factor = 1.0 if family == "nvls" else _nccl("efficiency", family, protocol)
            expected = max(seconds / (eff * factor) for seconds, eff in stages)
            latency = (_ring_latency(op, protocol, n, m) if family == "ring" else
                       _tree_latency(protocol, n, m) if family == "tree" else _nvls_latency(m))
            label = "all-to-all" if op == "all-to-all" else family  # point to point, not a ring
            name = family if family == "nvls" else f"{label}-{protocol}"
            candidates.append((name, latency, line, line / expected if expected else 1.0, latency + expected))
    name, latency, bandwidth, efficiency, _ = min(candidates, key=lambda c: (c[4], c[0]))
    # The shortest latency physics allows: one NVLink step (one network step across nodes).
    floor_latency = _nccl("nvlink", "ring", "LL") if m == 1 else _nccl("net", "ring", "LL")
    floor = max(floor_latency, _switch_floor(op, array_bytes, topology, net, n))
    return CollectiveTime(op, bandwidth, latency, name, efficiency, floor)


def _mesh_time(op, array_bytes, chip, topology: FullMesh, n, algorithm=None) -> CollectiveTime:
    """A full mesh (module docstring): each GPU exchanges its share with every peer directly, one link per peer, all
    links at once; beyond one mesh, priced like a switch of the same injection bandwidth across nodes."""
    if n > topology.domain_size:
        chip.dcn_bandwidth  # a ValueError naming the missing scale-out figure when no source gives it
        return _switch_time(op, array_bytes, chip, SwitchDomain(
            topology.peers, topology.link_bandwidth, topology.domain_size, topology.collective_latency,
            topology.scale_out_bandwidth, generation="ampere"), n, algorithm)
    if algorithm not in (None, "ring"):
        raise ValueError(f"algorithm={algorithm!r}: a full mesh has no switch to reduce in or tree to build; use "
                         "algorithm=None")
    per_link = {"all-gather": 1 / n, "reduce-scatter": 1 / n, "all-reduce": 2 / n, "all-to-all": 1 / n**2}[op]
    line = per_link * array_bytes / topology.link_bandwidth
    candidates = []
    for protocol in PROTOCOLS:
        efficiency = NCCL_LATENCY.nvlink_efficiency * _nccl("efficiency", "ring", protocol)
        latency = _ring_latency(op, protocol, n, 1)
        candidates.append((latency + line / efficiency, f"mesh-{protocol}", latency, efficiency))
    _, name, latency, efficiency = min(candidates)
    # However traffic is routed, each GPU takes in its share over its peers links at most.
    floor = _switch_volume(op, n) * array_bytes / topology.injection_bandwidth
    return CollectiveTime(op, line, latency, name, efficiency, max(_nccl("nvlink", "ring", "LL"), floor))


def collective_time(op: str, array_bytes: float, chip, n_shards: int, wraparound: bool | None = None,
                    algorithm: str | None = None) -> CollectiveTime:
    """Time of one collective over n_shards chips: one torus axis (a ring or a line) or one switched domain, or
    whole nodes of it (see the module docstring for the formulas). `wraparound` overrides the torus's rule for one
    axis of n chips (`hardware.Torus.axis_wraps`; ignored on a switch). `algorithm` ("ring", "tree" or "nvls",
    switches only) prices that algorithm, as NCCL_ALGO forces it; None (the default) picks as NCCL's model does.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    choice("collective op", op, COLLECTIVES)
    chip = get_chip(chip)
    positive("array_bytes", array_bytes, allow_zero=True)
    n = positive_int("n_shards", n_shards)
    if wraparound is not None:
        wraparound = flag("wraparound", wraparound)
    if algorithm is not None:
        choice("algorithm", algorithm, SWITCH_ALGORITHMS)
        if isinstance(chip.topology, Torus):
            raise ValueError(f"algorithm={algorithm!r} picks a GPU switch's algorithm; "
                             f"{chip.name} is a torus: leave algorithm=None")
    if n == 1:
        return CollectiveTime(op, 0.0, 0.0, "none")
    topology = chip.network
    if isinstance(topology, Torus):
        return torus_collective_time(op=op, array_bytes=array_bytes, chip=chip, n_shards=n, wraparound=wraparound)
    if isinstance(topology, FullMesh):
        return _mesh_time(op, array_bytes, chip, topology, n, algorithm)
    return _switch_time(op, array_bytes, chip, topology, n, algorithm)


def _bisection_all_to_all(array_bytes: float, topology: Torus, shape: tuple, wraps: tuple) -> float:
    """V / 4 each way across the cut that halves the longest axis: (N / a) links a direction, twice if it wraps."""
    n = math.prod(shape)
    longest = max(range(len(shape)), key=lambda i: (shape[i], wraps[i]))
    links = n // shape[longest] * (2 if wraps[longest] else 1)
    return array_bytes / 4 / (links * topology.link_bandwidth)


def slice_wraps(chip, mesh_shape, wraparound=None, *, whole_slice: bool | None = None) -> tuple:
    """Which axes of `mesh_shape` close into rings on `chip`'s torus, one flag per axis: `wraparound` (True, False, or
    one flag per axis) when given, else the chip's rule. `whole_slice` (default: when the shape has as many axes as
    the torus) reads the shape as a whole slice, with the rule for that slice (`hardware.Torus.wraparound_axes`: a
    v5p 2 x 2 x 4 has none, a v4 4 x 4 x 4 wraps every axis); otherwise the axes are a group of a larger slice, or a
    logical mesh whose place on the physical slice is unknown, and each wraps as an axis of its size does in the
    chip's slices (`hardware.Torus.axis_wraps`: the (4, 4) group of a v5p 4 x 4 x 4 wraps). A chip that is not a
    torus (a GPU's NVLink switch) has no axes and no hops: ValueError."""
    chip = get_chip(chip)
    shape = check_axes("mesh_shape", mesh_shape)
    topology = chip.network
    if not isinstance(topology, Torus):
        raise ValueError(f"{chip.name} is not a TPU torus ({chip.interconnect}): its collectives take no hops round "
                         "axes; price them with collective_time (NCCL's latency), or pass a TPU chip")
    whole = len(shape) == topology.axes if whole_slice is None else flag("whole_slice", whole_slice)
    if wraparound is not None:  # one flag for every axis, or one per axis, as `hops.mesh_hops` reads them
        return axis_flags("wraparound", shape, wraparound)
    if whole:
        return topology.wraparound_axes(shape)
    return tuple(topology.axis_wraps(a) for a in shape)


def slice_hops(op: str, chip, mesh_shape, wraparound=None, *, whole_slice: bool | None = None) -> int:
    """Hops of one collective over every axis of `mesh_shape` on `chip`'s torus, the axes one after another:
    `hops.mesh_hops` with the wraparound of `slice_wraps` (floor(a / 2) per pass on an axis of a chips that wraps,
    a - 1 on one that does not; an all-reduce is two passes). The book's one rule for hops: the latency of
    `mesh_collective` is these hops x t_hop, chapter 7 counts h(n) with it (`sharding.decode_hops_per_layer`),
    chapter 12 prices each collective's latency with it (`frontier.layout_cost`, on logical meshes:
    `whole_slice=False`) and chapter 14 the sequence-sharded all-reduces (`sequence_sharding`)."""
    choice("collective op", op, COLLECTIVES)
    return mesh_hops(op, mesh_shape, slice_wraps(chip, mesh_shape, wraparound, whole_slice=whole_slice))


def mesh_collective(op: str, array_bytes: float, chip, mesh_shape, wraparound=None) -> CollectiveTime:
    """A collective over every chip of `mesh_shape`, the shape of the slice. On a torus the axes' links run at once,
    so their rates add (V / k on k like axes), and the axes are reduced one after another, so their hops add
    (`slice_hops`); an all-to-all is bounded by the bisection of the slice (module docstring). Which axes wrap:
    `slice_wraps` (`wraparound` True, False or one flag per axis, else the chip's rule for the slice). A switch sees
    one group of prod(shape).

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("collective op", op, COLLECTIVES)
    chip = get_chip(chip)
    positive("array_bytes", array_bytes, allow_zero=True)
    shape = check_axes("mesh_shape", mesh_shape)
    if not isinstance(chip.network, Torus):
        return collective_time(op, array_bytes, chip, math.prod(shape))
    topology = chip.network
    wraps = slice_wraps(chip, shape, wraparound)
    axes = [(a, w) for a, w in zip(shape, wraps) if a != 1]
    if not axes:
        return CollectiveTime(op, 0.0, 0.0, "none")
    per_byte = [collective_time(op, 1.0, chip, a, wraparound=w) for a, w in axes]
    latency = mesh_hops(op, shape, wraps) * topology.hop_latency  # the axes one after another: their hops add
    if op == "all-to-all" and len(axes) > 1:
        bandwidth = _bisection_all_to_all(array_bytes, topology, tuple(a for a, _ in axes), tuple(w for _, w in axes))
        return CollectiveTime(op, bandwidth, latency, "bisection", 1.0, max(latency, bandwidth))
    bandwidth = array_bytes / sum(1 / t.bandwidth_s for t in per_byte)
    # a ring's exact share (a - 1) / a of the bytes, which its V / W rounds up to 1 (`torus_collective_time`)
    exact = [t.bandwidth_s * ((a - 1) / a if w and op != "all-to-all" else 1) for t, (a, w) in zip(per_byte, axes)]
    floor = array_bytes / sum(1 / e for e in exact)
    return CollectiveTime(op, bandwidth, latency, "+".join(t.algorithm for t in per_byte), 1.0,
                          max(latency, floor))


def latency_bound_bytes(chip, n_shards: int) -> float:
    """Below this many bytes an all-gather over n_shards chips is latency-bound: where `collective_time`'s two
    terms meet. On a wraparound torus ring n W_link t_hop (the Scaling Book's 360 kB for 8 v5e chips, 800 kB on
    8 Ironwood chips); on a switch NCCL's small-message latency (the ring with the LL protocol) x W_inj x n / (n - 1)
    (about 5.6 MB on 8 H100).

    Defined in chapter 7, *Sharding prefill and generation*.
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

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("collective op", op, COLLECTIVES)
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


# --- Pope et al.'s per-chip collectives (chapter 8): bytes per chip, priced by one of two conventions ---------------
# Two conventions turn a collective's bytes per chip into seconds (`layouts` explains where they differ):
#   "pope"          every collective uses the chip's whole interconnect, ici_links x ici_link_bandwidth (6 x 45 GB/s
#                   = 270 GB/s on TPU v4), as in Pope et al. sec. 2 and App. A;
#   "scaling-book"  a collective over n_axes mesh axes gets n_axes x the bidirectional bandwidth of one link
#                   (Scaling Book ch. 3, used in ch. 7 Question 7).
CONVENTIONS = ("pope", "scaling-book")


@dataclass(frozen=True)
class Collective:
    """One collective of Pope et al.'s cost model: bytes on each chip (the gathered output, the unreduced input, the
    resharded block) and the sizes of the mesh axes it runs over. `layouts.ffn_collectives` and
    `attention_sharding.attention_collectives` build them."""

    op: str  # "all-gather", "reduce-scatter" or "all-to-all"
    tensor: str  # "activations" or "weights"
    bytes_per_chip: float
    group: tuple  # sizes of the mesh axes it runs over

    def seconds(self, chip, convention: str = "pope") -> float:
        """bytes / bandwidth, with the bandwidth of the named convention (CONVENTIONS, above)."""
        chip = get_chip(chip)
        choice("convention", convention, CONVENTIONS)
        if convention == "pope":
            return self.bytes_per_chip / (chip.ici_links * chip.ici_link_bandwidth)
        axes = sum(1 for size in self.group if size > 1)
        return self.bytes_per_chip / (axes * chip.ici_bidirectional)


def ring_bytes_sent(collective: Collective) -> float:
    """Bytes one chip sends for `collective` over a ring of m = prod(group) chips: (m-1)/m x bytes_per_chip.

    The cost model (Pope et al. App. A) counts bytes_per_chip -- the gathered output, the unreduced input, the
    resharded block -- and drops (m-1)/m; a ring all-gather passes m-1 of the m blocks through each chip.

    Defined in chapter 8, *Partitioning layouts*.
    """
    if not isinstance(collective, Collective):
        raise ValueError(f"collective must be a collectives.Collective, got {type(collective).__name__}")
    k = math.prod(collective.group)
    return collective.bytes_per_chip * (k - 1) / k
