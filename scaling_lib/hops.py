"""Hops: what a latency-bound collective costs on a torus, and what a lower-diameter network changes.

A decode step's collectives are small (chapter 7: 131 kB for batch 16 at D = 8,192 in int8), so their time is not
bytes / bandwidth but a count of serial steps, each with a fixed cost:

    t_collective = rounds x (t_fixed + hops x t_hop)

t_hop is the time to cross one link (about 1 us on a TPU torus, Scaling Book ch. 7 App. C); t_fixed is what a
collective costs before any byte moves (launching it, synchronising the chips, reducing on chip). On a ring of k
chips a bidirectional all-gather or reduce-scatter takes floor(k / 2) hops (`collective_hops`; `collectives` prices it);
on a torus the axes run one after another, so the hops add up. An all-to-all, the pattern of MoE routing and of
batch-sharded attention, must reach the farthest chip: at least the network's diameter in hops, which for a
wraparound torus X x Y x Z is floor(X/2) + floor(Y/2) + floor(Z/2).

A lower-diameter network (TPU 8i's Boardfly) shrinks `hops`; an engine that does the collective's bookkeeping in
hardware (its Collectives Acceleration Engine) shrinks `t_fixed`. Neither changes the bandwidth term, which decode's
small messages hardly use. This module owns the counting of hops (`collective_hops` on one axis, `mesh_hops` over a
slice's axes, `ring_hops`, `torus_diameter`) and the latency-bound time; `collectives` prices a collective's bytes and
latency with them, and decides which axes of a chip's slice wrap (`collectives.slice_hops`). Used in chapter 7,
*Sharding prefill and generation*, and chapter 12, *What TPU 8i changes*.
"""

from ._validate import axes, axis_flags, choice, divisors, flag, non_negative_int, positive, positive_int

# The four collectives the library counts hops for and prices (`collectives.collective_time`).
COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")


def collective_hops(op: str, n_shards: int, wraparound: bool = True) -> int:
    """Hops one collective takes on a bidirectional ring of n chips: floor(n / 2) per pass, two passes for an
    all-reduce.

    Chunks travel both ways round the ring at once. Chip k is min(k, n - k) hops from chip 0, largest at
    k = floor(n / 2), where it is floor(n / 2) (on a ring of 7, chip 3 is 3 hops one way and 4 the other): an
    all-gather, reduce-scatter or all-to-all is one pass of floor(n / 2) hops; an all-reduce is a reduce-scatter
    followed by an all-gather, 2 floor(n / 2) hops (8 on a ring of 8). Without wraparound a pass is n - 1 hops, end
    to end. A latency-bound collective takes hops x the hop latency. Chapter 7's section *Decode collectives are
    latency-bound*.

    Defined in chapter 7, *Sharding prefill and generation*.
    """
    choice("collective op", op, COLLECTIVES)
    n = positive_int("n_shards", n_shards)
    wraparound = flag("wraparound", wraparound)
    passes = 2 if op == "all-reduce" else 1
    return passes * (n // 2 if wraparound else n - 1)


def torus_diameter(mesh_shape, wraparound: bool = True) -> int:
    """Most hops between two chips: sum of floor(a / 2) over the axes with wraparound links, a - 1 without.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    wraparound = flag("wraparound", wraparound)
    return sum((a // 2) if wraparound else (a - 1) for a in axes("mesh_shape", mesh_shape))


def mesh_hops(op: str, mesh_shape, wraparound=True) -> int:
    """Hops of one collective run over every axis of a slice in turn: `collective_hops` summed over the axes, each
    with its own wraparound (floor(a / 2) per pass on an axis of a chips that closes into a ring, a - 1 on one that
    does not; twice that for an all-reduce). `wraparound`: one flag for every axis, or one per axis. The book's one
    rule for hops: `collectives.slice_hops` gives it a chip's slice (which axes wrap), and chapter 7's hops per layer
    (`sharding.decode_hops_per_layer`), its collectives' prices and chapter 12's step (`frontier.layout_cost`) all
    count with it."""
    shape = axes("mesh_shape", mesh_shape)
    return sum(collective_hops(op, a, w) for a, w in zip(shape, axis_flags("wraparound", shape, wraparound)))



def ring_hops(mesh_shape, op: str = "all-gather") -> int:
    """Hops of one collective run over every axis of a torus whose every axis wraps: `mesh_hops` with rings only
    (floor(a / 2) per axis of a chips for an all-gather, reduce-scatter or all-to-all; twice that for an
    all-reduce).

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    return mesh_hops(op, mesh_shape, True)


MAX_TORUS_CHIPS = 2**20  # far beyond any TPU pod (tens of thousands of chips at most); keeps the divisor search fast


def cube_torus(n_chips: int) -> tuple:
    """The most cube-like X <= Y <= Z torus of n chips (8 x 8 x 16 for 1,024): what a TPU slice of that size is.
    n is at most `MAX_TORUS_CHIPS` (2^20), so the search over divisors stays fast.

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    n = positive_int("n_chips", n_chips)
    if n > MAX_TORUS_CHIPS:
        raise ValueError(f"n_chips={n} is more chips than any TPU slice; use at most {MAX_TORUS_CHIPS:,}")
    meshes = [(x, y, n // (x * y)) for x in divisors(n) if x**3 <= n for y in divisors(n // x)
              if y >= x and y * y <= n // x]
    return min(meshes, key=lambda mesh: (mesh[2] - mesh[0], mesh[2]))


def latency_bound_time(hops: int, hop_latency_s: float, fixed_s: float = 0.0, rounds: int = 1) -> float:
    """rounds x (t_fixed + hops x t_hop): a collective whose bytes are too few to matter."""
    hops = non_negative_int("hops", hops)
    positive("hop_latency_s", hop_latency_s)
    positive("fixed_s", fixed_s, allow_zero=True)
    return positive_int("rounds", rounds) * (fixed_s + hops * hop_latency_s)


def decode_collective_latency(n_layers: int, collectives_per_layer: int, hops: int, hop_latency_s: float,
                              fixed_s: float = 0.0) -> float:
    """A decode step's time in latency-bound collectives: L x c x (t_fixed + hops x t_hop).

    Defined in chapter 12, *Choosing a layout by the metric*.
    """
    n_layers, per_layer = positive_int("n_layers", n_layers), positive_int("collectives_per_layer",
                                                                           collectives_per_layer)
    return n_layers * per_layer * latency_bound_time(hops, hop_latency_s, fixed_s)
