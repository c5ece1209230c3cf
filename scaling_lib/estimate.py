"""The full estimate of a deployment: what the sources' bounds leave out, and how efficient real systems are.

Two levels of model. `inference.decode_step_time` and `inference.prefill_time` are the sources' bounds: weights,
KV cache and matmul FLOPs, split perfectly over the chips, nothing else. This module adds, per chip of one
tensor-parallel group (a "replica"):

- communication, priced by the chip's topology (`collectives`: a TPU torus or a GPU NVLink switch), with Megatron's
  two all-reduces per layer ("1d-ws") or one of Pope et al.'s layouts on a torus (`layouts.ffn_collectives`), plus
  the two all-to-alls per layer of a batch-split KV cache;
- attention FLOPs (`flops.forward_flops`, `flops.decode_step_flops` with the mask skipped): causal in prefill,
  over the cache in decode, local layers at most their window;
- the weights actually read: the matmul weights (the input embedding table is a lookup, not read whole) and, for a
  mixture of experts, only the experts a batch touches (`moe.expected_experts_touched`, uniform routing);
- KV placement beyond K-way tensor parallelism, stated ("batch-split" or "replicated": `memory.kv_replication`);
- memory capacity: a batch that does not fit raises ValueError naming the bytes needed and available;
- an `Efficiency` per phenomenon: `BOUND` (all at peak, perfectly overlapped) is a lower bound on the step; `TYPICAL`
  is calibrated on published measurements, separately for GPUs and TPUs (chapter 11; `calibration.fit_typical`).

One step (decode, prefill, or a continuous-batching iteration mixing both) is priced two ways.

**The bound** (`BOUND`): every resource at its peak and everything that can overlap overlapped, so the step takes as
long as its busiest resource:

    T_bound = max(T_kv + T_weights (HBM traffic), T_matmul + T_attention (FLOPs), T_comm,bandwidth,
                  T_comm,latency (the chain of collective latencies each token's layers wait on))

Nothing an engine does beats it (Pope et al. overlap collectives with matmuls; chapter 12). It ignores the
deployment's `memory_utilization` and `max_sequences`: all of HBM, no cap on the batch.

**The estimate** (`TYPICAL`, or any `Efficiency` with `overlap=False`) keeps the serial structure real engines have,
each resource at its calibrated efficiency, plus the costs outside the model's arithmetic:

    T = overhead + max(T_kv, T_attention) + max(T_weights, T_matmul) + T_elementwise
        + latency_scale x T_comm,latency + T_comm,bandwidth / network
    overhead = overhead_s + sequences x sequence_s + n_layers x (layer_s [tensor-parallel] + launch_s [eager])
               + n_moe_layers x t_moe [NVIDIA GPU]

the host's work per step and per sequence it schedules, each mixture-of-experts layer's chain of small kernels on an
NVIDIA GPU (`kernels.moe_layer_floor`, measured), the tensor-parallel layers' wait at their all-reduces, and on
a step a GPU engine does not replay as one CUDA graph (prompt tokens in it, or a decode batch above
`CUDA_GRAPH_MAX_BATCH`: `runs_in_cuda_graph`) the launch of every layer's kernels. On a GPU, T_elementwise is the
kernels between the matmuls (norms, rotary embedding, the activation function, a mixture of experts' dispatch and
combine) streaming the step's tokens' activations at the weight-streaming rate (`memory.elementwise_bytes_per_token`).
T_matmul runs at peak x min(mfu, ceiling): no faster than the format's best published kernel on the chip
(`kernels.kernel_ceiling`; it binds for nvfp4 on Blackwell). On an NVIDIA GPU the routed experts of a model with
fine-grained experts run at the bf16 rate whatever their format (`Deployment.narrow_expert_share`): NVIDIA's timings
of such layers show fp8 and nvfp4 barely faster, or slower; and no faster than those timings compute a layer of
experts their size (`Deployment.expert_kernel_fraction`: 0.34-0.50 of the bf16 peak for Qwen3-30B-A3B's on
Blackwell). A profile that names an engine whose MoE layer was timed on the chip in the experts' format
(`Efficiency.moe_kernels`: SGLang's) prices each MoE layer by that engine's measured layer instead
(`kernels.moe_layer_model`): t_floor + n x t_expert in the overhead for the n experts (or slices) each chip runs, and
the experts' bytes in T_weights at the fraction f its kernels stream them at.

Attention streams the KV cache or computes, the weight matmuls stream the weights or compute; attention, matmuls
and collectives run one after another. The estimate applies the engine's memory reserve (`memory_utilization`) and
its cap on concurrent sequences (`max_sequences`).

`offline_throughput` turns it into the number an offline benchmark (identical requests, infinite arrival rate)
measures: output tokens/s of the whole deployment, in the steady state of continuous batching at the largest batch
that fits. Used in chapter 11, *How close do real systems come?*.
"""

import functools
import itertools
import math
from dataclasses import dataclass

from ._validate import axes as check_axes
from ._validate import MAX_CHIPS, at_most, choice, divisors, fraction, hourly_price, non_negative_int, positive
from ._validate import positive_int
from .collectives import mesh_collective
from .dtypes import bytes_per_element
from .flops import decode_step_flops, forward_flops, matmul_params
from .hardware import Torus, get_chip
from .attention_sharding import attention_collectives
from .layouts import LAYOUTS, ffn_collectives, optimal_2d_mesh
from .memory import KV_PLACEMENTS, kv_bytes_per_token, kv_cache_bytes, kv_head_groups, kv_read_bytes, kv_replication
from .memory import param_bytes as model_param_bytes
from .memory import elementwise_bytes_per_token, state_bytes_per_sequence, weight_bytes_by_group, weights_read_bytes
from .memory import weight_groups
from .models import get_model
from .moe import expected_experts_touched
from .kernels import expert_matmul_fraction, kernel_ceiling, moe_layer_floor, moe_layer_model
from .efficiency import (BOUND, PHYSICAL_RANGES, PROFILES, TYPICAL, Calibrated, Efficiency, Profile,  # noqa: F401
                         platform_of_chip, resolve_efficiency)


def _torus_mesh(n: int, axes: int) -> tuple:
    """The most even factorisation of n into `axes` factors, largest first (2 x 2 x 2 for 8 on a 3D torus)."""
    candidates = divisors(n)
    shapes = [s for s in itertools.product(candidates, repeat=axes) if math.prod(s) == n]
    return tuple(sorted(min(shapes, key=lambda s: (max(s), -min(s))), reverse=True))


# No tensor-parallel group is larger than one ICI slice or NVLink domain: the largest TPU slice is Ironwood's 9,216
# chips (Google Cloud TPU documentation). A larger group is refused before any mesh is searched.
MAX_TENSOR_PARALLEL = 16_384


def largest_tensor_parallel(chip) -> int | None:
    """The largest tensor-parallel group the hardware table can price on `chip`: one NVLink or Infinity Fabric
    domain when no source gives the bandwidth between its nodes (MI300X, GB200 NVL72), else no limit (None)."""
    topology = get_chip(chip).topology
    if topology is None or isinstance(topology, Torus) or topology.scale_out_bandwidth is not None:
        return None
    return topology.domain_size


# vLLM's defaults for the two engine settings (`gpu_memory_utilization=0.9`; `max_num_seqs` is 256 there, TensorRT-LLM
# runs up to 2,048 and more): the fraction of HBM an engine lets weights and caches use, and its cap on the sequences
# one replica decodes at once.
MEMORY_UTILIZATION = 0.9
MAX_SEQUENCES = 2048

# The largest decode batch a GPU engine replays as one CUDA graph: vLLM captures decode steps of 1, 2, 4 and 8 to 256
# sequences in steps of 8 (vllm/worker/model_runner.py, `_BATCH_SIZES_TO_CAPTURE`); a step with prompt tokens, or a
# larger batch, runs eagerly, its kernels launched one at a time (`Efficiency.launch_s`).
CUDA_GRAPH_MAX_BATCH = 256


def runs_in_cuda_graph(chip, decode_batch: float, prefill_tokens: float) -> bool:
    """Whether a GPU engine replays this step as one captured CUDA graph: a pure decode step of at most
    `CUDA_GRAPH_MAX_BATCH` sequences on a GPU. A step with prompt tokens or a larger batch is launched kernel by kernel
    (`Efficiency.launch_s` per layer); a TPU step is one compiled XLA program, never launched kernel by kernel (True)."""
    topology = get_chip(chip).topology
    return _in_graph(topology, positive("decode_batch", decode_batch, allow_zero=True),
                     positive("prefill_tokens", prefill_tokens, allow_zero=True))


def _in_graph(topology, decode_batch: float, prefill_tokens: float) -> bool:
    return isinstance(topology, Torus) or (not prefill_tokens and decode_batch <= CUDA_GRAPH_MAX_BATCH)


@dataclass(frozen=True)
class Deployment:
    """A model served on n chips: `tensor_parallel` chips per replica (default all n), n / tensor_parallel replicas.

    `kv_placement` says what happens to the KV cache when tensor_parallel exceeds the K KV heads: "batch-split"
    (the Scaling Book's rule: split the batch, two all-to-alls per layer) or "replicated" (each chip keeps its
    group's whole KV head). Default None: "replicated" on GPUs (what vLLM and TensorRT-LLM do),
    "batch-split" on a TPU torus. `ffn_layout` is Megatron's "1d-ws" (any chip) or one of Pope et al.'s torus
    layouts ("2d-ws", "wg-x", "wg-xy", "wg-xyz"), laid on `mesh_shape` (default: the best 2D weight-stationary mesh
    for Pope's layouts, the most even torus for "1d-ws").

    Two engine settings, which the estimate applies and the bound ignores (all of HBM, no cap):
    `memory_utilization` (default 0.9, vLLM's `gpu_memory_utilization`): the fraction of each chip's HBM the engine
    lets weights and KV caches use, the rest being its runtime and activations; `max_sequences` (default 2,048): the
    most sequences one replica decodes at once (vLLM's `max_num_seqs`, TensorRT-LLM's max batch size).

    Two ways to serve a mixture of experts on the replica's chips, beside tensor parallelism (both "1d-ws" only):
    `expert_parallel` puts whole routed experts on each chip (n_experts / tensor_parallel each) instead of a slice of
    every expert; `attention_data_parallel` gives each chip whole attention weights and its own share of the
    sequences, caches included, so no KV head is replicated. With both, each MoE layer sends every token's hidden
    state to the chips of its k experts and back: two all-to-alls of tokens x k x D, and no all-reduce; with
    attention data-parallel alone, an all-gather of the tokens before each feed-forward and a reduce-scatter after
    (`_collectives`). Expert parallelism alone keeps the tokens on every chip, so it moves the same all-reduces as
    tensor parallelism (DeepSeek-V3 report, sec. 3.4; SGLang's "DP attention" and TensorRT-LLM's
    `enable_attention_dp`).

    Defined in chapter 5, *A model of the decode step*.
    """

    model: object
    chip: object
    n_chips: int
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    compute_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    tensor_parallel: int | None = None
    kv_placement: str | None = None
    ffn_layout: str = "1d-ws"
    mesh_shape: tuple | None = None
    memory_utilization: float = MEMORY_UTILIZATION
    max_sequences: int = MAX_SEQUENCES
    expert_parallel: bool = False
    attention_data_parallel: bool = False

    def __post_init__(self):
        model, chip = get_model(self.model), get_chip(self.chip)
        n = positive_int("n_chips", self.n_chips)
        tp = n if self.tensor_parallel is None else positive_int("tensor_parallel", self.tensor_parallel)
        if tp > MAX_TENSOR_PARALLEL:
            given = f"n_chips={n} (with tensor_parallel unset, " if self.tensor_parallel is None else ""
            raise ValueError(f"{given}tensor_parallel={tp}{')' if given else ''} chips in one model copy: no ICI slice "
                             f"or NVLink domain is that "
                             f"large (at most {MAX_TENSOR_PARALLEL:,} here); pass tensor_parallel=<chips per copy> "
                             "and serve the rest as replicas")
        for name in ("weight_dtype", "kv_dtype", "activation_dtype"):
            bytes_per_element(getattr(self, name))
        chip.peak_flops(self.compute_dtype)  # refuses a compute dtype the chip has no rate for
        placement = self.kv_placement
        if placement is None:
            placement = "batch-split" if isinstance(chip.topology, Torus) else "replicated"
        choice("kv_placement", placement, KV_PLACEMENTS)
        choice("ffn_layout", self.ffn_layout, LAYOUTS)
        utilization = fraction("memory_utilization", self.memory_utilization,
                               "the share of HBM the engine may use for weights and KV caches")
        max_sequences = positive_int("max_sequences", self.max_sequences)
        at_most("n_chips", n, MAX_CHIPS, "more chips than any machine has")
        if n % tp:
            raise ValueError(f"tensor_parallel={tp} does not divide n_chips={n}: the chips form n / tensor_parallel "
                             f"identical replicas; pick a divisor of {n}")
        for name in ("expert_parallel", "attention_data_parallel"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.expert_parallel and (model.n_experts == 1 or model.n_experts % tp):
            raise ValueError(f"expert_parallel=True puts n_experts / tensor_parallel whole experts on each chip: "
                             f"{model.name} has {model.n_experts} expert(s) and tensor_parallel={tp}; use a mixture "
                             f"of experts whose expert count tensor_parallel divides, or expert_parallel=False")
        if (self.expert_parallel or self.attention_data_parallel) and self.ffn_layout != "1d-ws":
            raise ValueError(f"expert_parallel and attention_data_parallel replace Megatron's layout, not "
                             f"ffn_layout={self.ffn_layout!r}: use ffn_layout='1d-ws'")
        domain = largest_tensor_parallel(chip)
        if domain is not None and tp > domain:
            raise ValueError(f"tensor_parallel={tp} spans {math.ceil(tp / domain)} {chip.name} nodes of {domain} and "
                             f"the hardware table has no bandwidth between {chip.name} nodes (no source gives it); "
                             f"keep each copy of the model in one node: tensor_parallel={domain} or fewer (n_chips="
                             f"{n} then runs as replicas)")
        if self.ffn_layout == "1d-ws" and model.n_heads % tp and not self.attention_data_parallel:
            raise ValueError(f"tensor_parallel={tp} does not divide n_heads={model.n_heads} of {model.name}: "
                             "Megatron tensor parallelism gives each chip whole query heads; use one of "
                             f"{divisors(model.n_heads)} (or a Pope et al. layout such as ffn_layout='2d-ws' on a "
                             "TPU torus)")
        if self.ffn_layout != "1d-ws" and not isinstance(chip.topology, Torus):
            raise ValueError(f"ffn_layout={self.ffn_layout!r} is one of Pope et al.'s torus layouts and {chip.name} "
                             f"is not a TPU torus ({chip.interconnect}): use ffn_layout='1d-ws' (Megatron tensor "
                             "parallelism)")
        if self.mesh_shape is None:
            if not isinstance(chip.topology, Torus):
                mesh = (tp,)
            elif self.ffn_layout == "1d-ws":
                mesh = _torus_mesh(tp, chip.topology.axes)
            else:
                mesh = optimal_2d_mesh(tp, model, chip)
        elif isinstance(chip.topology, Torus):
            mesh = chip.topology.check_mesh(self.mesh_shape, chip.name)
        else:
            mesh = check_axes("mesh_shape", self.mesh_shape)
        if math.prod(mesh) != tp:
            raise ValueError(f"mesh_shape {mesh} holds {math.prod(mesh)} chips, not tensor_parallel={tp}; "
                             f"pick axes whose product is {tp}")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "chip", chip)
        object.__setattr__(self, "tensor_parallel", tp)
        object.__setattr__(self, "mesh_shape", mesh)
        object.__setattr__(self, "kv_placement", placement)
        object.__setattr__(self, "memory_utilization", float(utilization))
        object.__setattr__(self, "max_sequences", max_sequences)

    @property
    def replicas(self) -> int:
        return self.n_chips // self.tensor_parallel

    def hbm_limit(self, efficiency=None) -> float:
        """Bytes of one chip's HBM that weights and caches may use: all of it for the bound (`overlap` True),
        `memory_utilization` of it for an estimate."""
        overlap = resolve_efficiency(efficiency).overlap
        return self.chip.hbm_capacity * (1.0 if overlap else self.memory_utilization)

    def sequence_cap(self, efficiency=None) -> float:
        """The most sequences one replica decodes at once: no cap for the bound, `max_sequences` for an estimate."""
        return math.inf if resolve_efficiency(efficiency).overlap else self.max_sequences

    @functools.cached_property
    def kv_copies(self) -> float:
        """Copies of the KV cache one replica holds (`memory.kv_replication`); one with attention data-parallel,
        where each sequence's whole cache lives on the chip that attends to it."""
        if self.attention_data_parallel:
            return 1.0
        return kv_replication(self.model, self.tensor_parallel, self.kv_placement)

    @functools.cached_property
    def attention_bytes(self) -> float:
        """The attention weights (every layer's projections, `models.param_breakdown`), in bytes, in the
        checkpoint's format for them (`memory.weight_bytes_by_group`)."""
        return weight_bytes_by_group(self.model, self.weight_dtype)["attention"]

    @functools.cached_property
    def weight_bytes_per_chip(self) -> float:
        """Every weight stored (all experts, both embedding tables), split tensor_parallel ways; with attention
        data-parallel the attention weights are whole on every chip."""
        split = model_param_bytes(self.model, self.weight_dtype) / self.tensor_parallel
        return split + (self.attention_bytes * (1 - 1 / self.tensor_parallel) if self.attention_data_parallel else 0.0)

    @functools.cached_property
    def kv_shards(self) -> int:
        """Chips that split one replica's batch of caches between them: tensor_parallel / gcd(K, tensor_parallel)
        for a batch-split cache beyond the K KV heads (each of them holds whole sequences of its heads), else 1."""
        groups, tp = kv_head_groups(self.model), self.tensor_parallel
        return tp // math.gcd(groups, tp) if self.kv_placement == "batch-split" and tp > groups else 1

    def kv_bytes_per_chip(self, sequences: float, tokens_each: float) -> float:
        """HBM the busiest chip holds for `sequences` caches of `tokens_each` tokens (`memory.kv_cache_bytes`:
        sliding windows, local and global layers and latent attention included), times the copies, over the chips;
        plus a hybrid's fixed-size states (`memory.state_bytes_per_sequence`), split over the chips by head.
        A batch-split cache is never split within a sequence: each of the `kv_shards` chips sharing a head holds
        whole sequences, the busiest ceil(sequences / kv_shards) of them (one sequence on 8 shards: all of its
        cache on one chip, not an eighth on each)."""
        total = kv_cache_bytes(self.model, tokens_each, self._held(sequences), self.kv_dtype) * self.kv_copies
        return (total + sequences * self.state_bytes_per_sequence) / self.tensor_parallel

    def _held(self, sequences: float) -> float:
        """Sequences whose caches the busiest chip's head group holds: `sequences` rounded up to whole sequences
        per shard (`kv_shards`)."""
        shards = self.kv_shards
        return sequences if shards == 1 else math.ceil(sequences / shards) * shards

    @functools.cached_property
    def state_bytes_per_sequence(self) -> float:
        """A hybrid's fixed-size state per sequence (`memory.state_bytes_per_sequence`; 0 for other models)."""
        return state_bytes_per_sequence(self.model)

    def kv_read_per_chip(self, sequences: float, tokens_each: float) -> float:
        """Bytes one decode step moves on the busiest chip for its caches: the KV it reads (`memory.kv_read_bytes`:
        under sparse attention only the top-k latents; whole sequences per shard as `kv_bytes_per_chip`) times the
        copies, and each hybrid state read once and written back once, over the chips."""
        read = kv_read_bytes(self.model, tokens_each, self._held(sequences), self.kv_dtype) * self.kv_copies
        return (read + 2 * sequences * self.state_bytes_per_sequence) / self.tensor_parallel

    @functools.cached_property
    def elementwise_bytes_per_token(self) -> float:
        """`memory.elementwise_bytes_per_token` on one chip of this deployment, computed once: attention
        data-parallel, each chip streams only its own share of the tokens (1 / t of the whole layer's traffic)."""
        if self.attention_data_parallel:
            return elementwise_bytes_per_token(self.model, 1, self.activation_dtype) / self.tensor_parallel
        return elementwise_bytes_per_token(self.model, self.tensor_parallel, self.activation_dtype)

    @functools.cached_property
    def attention_dtype(self) -> str:
        """The format attention's two products (Q K^T and P V) run in: the cache's where the chip multiplies that
        format natively, else the activations'; and never narrower than the matmuls', whose outputs the queries and
        scores are. An FP8 attention kernel quantizes the queries and reads an FP8 cache as stored (vLLM's
        quantized-KV-cache docs: Flash Attention 3 with an FP8 cache); no kernel multiplies a cache in 4 bits, so a
        cache narrower than 8 bits is widened to FP8 (or, on a chip without FP8, to the activations' format). So
        NVFP4 weights beside an FP8 cache attend in FP8, and FP8 matmuls beside a BF16 cache in BF16. An engine that
        widens an FP8 cache to BF16 before attending runs slower than this prices. `step_estimate` prices attention
        FLOPs at this format's rate. Chapter 11."""
        cache = "fp8" if bytes_per_element(self.kv_dtype) < 1 else self.kv_dtype
        if cache not in self.chip.compute_dtypes:
            cache = self.activation_dtype
        return max((self.compute_dtype, cache), key=bytes_per_element)

    @functools.cached_property
    def matmul_params(self) -> float:
        """`flops.matmul_params` of the model (k experts per token), computed once per deployment."""
        return matmul_params(self.model)

    @functools.cached_property
    def narrow_expert_share(self) -> float:
        """The share of `matmul_params` in routed experts that an NVIDIA GPU computes at the bf16 rate, whatever their
        format, and no faster than NVIDIA's timed MoE layers of their size compute (`expert_kernel_fraction`): the k
        routed experts of each MoE layer (`memory.weight_groups`' experts x k / E) of a model with fine-grained
        experts (F < D) on an NVIDIA GPU; 0 otherwise (`kernels`: NVIDIA's timings of such layers gain 0.75-1.6x
        from fp8 or nvfp4, wide experts 1.8-2.2x)."""
        m = self.model
        if not m.fine_grained_experts or platform_of_chip(self.chip) != "gpu":
            return 0.0
        return weight_groups(m)["experts"] * m.n_active_experts / m.n_experts / self.matmul_params

    @functools.cached_property
    def expert_kernel_fraction(self) -> float:
        """The most of the bf16 peak the routed experts of `narrow_expert_share` reach: `kernels.kernel_ceiling`'s
        bf16 ceiling, or less, `kernels.expert_matmul_fraction` of the model's expert size in the matmuls' format
        where NVIDIA timed such layers on the chip; 1.0 where the share is 0."""
        if not self.narrow_expert_share:
            return 1.0
        m = self.model
        timed = expert_matmul_fraction(self.chip, self.compute_dtype, m.d_model, m.d_ff)
        return min(kernel_ceiling(self.chip, "bf16"), 1.0 if timed is None else timed)

    @functools.cached_property
    def expert_bytes_per_expert_per_chip(self) -> float:
        """Bytes one routed expert of every MoE layer puts on one chip: the experts' weights (`memory.weight_groups`,
        in the experts' own format) / E / tensor_parallel (a slice of each, or whole experts on a share of the chips:
        the same bytes per expert and chip on average)."""
        m = self.model
        return weight_bytes_by_group(m, self.weight_dtype)["experts"] / m.n_experts / self.tensor_parallel

    def moe_layer_model(self, engine: str):
        """`kernels.moe_layer_model` of `engine`'s MoE layer on this deployment's chip in its experts' format (bf16 or
        fp8 weights), or None: no such timing stored, no routed experts, or a chip other than an NVIDIA GPU."""
        if self.model.n_experts == 1 or platform_of_chip(self.chip) != "gpu" or str(self.weight_dtype) not in (
                "bf16", "fp8"):
            return None
        return moe_layer_model(engine, self.chip, str(self.weight_dtype))

    def weights_read_per_chip(self, tokens: float) -> float:
        """Weight bytes one step reads on one chip: the matmul weights (not the input embedding table) and, on each
        MoE layer, the shared experts plus the expected number of distinct routed experts that `tokens` tokens
        touch (`moe.expected_experts_touched`, uniform routing) instead of the k each token uses; each weight group
        in its own format (`memory.weights_read_bytes`: a mixed-precision checkpoint's experts and attention
        differ)."""
        return self._kept(("weights", tokens if self.model.n_experts > 1 else None),
                          lambda: self._weights_read_per_chip(tokens))

    @functools.cached_property
    def _memo(self) -> dict:
        """What a step prices again and again on this deployment (a plan or a load prices thousands of steps):
        the weights read at a token count, the attention FLOPs at a context."""
        return {}

    def _kept(self, key: tuple, compute):
        """`compute()`, kept in `_memo` under `key`; the memo is emptied at 4,096 entries (a long simulation prices
        ever new contexts)."""
        if key not in self._memo:
            if len(self._memo) >= 4096:
                self._memo.clear()
            self._memo[key] = compute()
        return self._memo[key]

    def _attention_flops(self, decode_context: float, prefill_len: int) -> tuple:
        """(FLOPs of one decode token attending to round(decode_context) cached tokens, FLOPs of attention over one
        prompt of `prefill_len` tokens), summed over the layers, masked blocks skipped (`flops`)."""
        m = self.model
        return self._kept(("attention", decode_context, prefill_len), lambda: (
            decode_step_flops(m, max(1, round(decode_context)), 1, skip_masked=True).attention,
            forward_flops(m, prefill_len, 1, skip_masked=True).attention))

    def _weights_read_per_chip(self, tokens: float) -> float:
        m = self.model
        touched = expected_experts_touched(m.n_experts, m.n_active_experts, tokens) if m.n_experts > 1 else None
        read = weights_read_bytes(m, self.weight_dtype, touched) / self.tensor_parallel
        return read + (self.attention_bytes * (1 - 1 / self.tensor_parallel) if self.attention_data_parallel else 0.0)

    def describe(self) -> str:
        m = self.model
        groups = kv_head_groups(m)
        kv = (f"KV heads split {min(self.tensor_parallel, groups)} ways"
              + ("" if self.tensor_parallel <= groups else f", then {self.kv_placement}"))
        if self.attention_data_parallel:
            kv = "attention data-parallel: each chip's sequences keep their whole caches"
        experts = "; experts whole on each chip (expert parallel)" if self.expert_parallel else ""
        return (f"{m.name} on {self.n_chips} x {self.chip.name} ({self.replicas} replica(s) of "
                f"{self.tensor_parallel}-way {self.ffn_layout} on {self.mesh_shape}); weights {self.weight_dtype}, "
                f"KV {self.kv_dtype}, math {self.compute_dtype}; {kv}{experts}")


@dataclass(frozen=True)
class StepEstimate:
    """One step of one replica, per chip, in seconds, by component (each at the efficiency asked for), and what it
    holds in HBM.

    total_s: with `overlap` (the bound) max(kv_s + weights_s, matmul_s + attention_s, comm_bandwidth_s,
    comm_latency_s); otherwise overhead_s + max(kv_s, attention_s) + max(weights_s, matmul_s) + elementwise_s +
    comm_s (module docstring).
    """

    weights_s: float  # reading the weights
    kv_s: float  # reading (decode) or writing (prefill) the KV cache
    matmul_s: float  # weight-matmul FLOPs
    attention_s: float  # attention FLOPs (Q K^T and P V)
    comm_s: float  # collectives: their latency terms plus their bandwidth terms
    comm_latency_s: float  # the latency (alpha) part of comm_s, summed over the step's collectives
    batch: float  # sequences in the step (per replica)
    tokens: float  # tokens pushed through the weights (per replica)
    kv_placement: str
    hbm_bytes_per_chip: float  # weights + KV caches held
    hbm_capacity: float  # the bytes the step may use: all of HBM for the bound, memory_utilization of it otherwise
    overhead_s: float = 0.0  # time per step outside the model's terms: host (per step and per sequence) + layers'
    overlap: bool = False  # True: the bound's composition
    layer_s: float = 0.0  # the part of overhead_s the tensor-parallel layers cost (n_layers x Efficiency.layer_s)
    launch_s: float = 0.0  # the part of overhead_s an eager step's launches cost (n_layers x Efficiency.launch_s)
    sequence_s: float = 0.0  # the part of overhead_s the host spends per sequence (sequences x Efficiency.sequence_s)
    elementwise_s: float = 0.0  # the kernels between the matmuls streaming activations (GPU estimate only)
    kernel_ceiling: float = 1.0  # the cap on matmul_s's fraction of peak: `kernels.kernel_ceiling` (1.0 for the bound)
    expert_matmul_s: float = 0.0  # the part of matmul_s in narrow experts at the bf16 rate (`narrow_expert_share`)
    expert_kernel_ceiling: float = 1.0  # its cap: `Deployment.expert_kernel_fraction`
    moe_floor_s: float = 0.0  # the part of overhead_s the MoE layers' kernels cost (`kernels.moe_layer_floor`)
    # where an engine's measured MoE layer prices them (`Efficiency.moe_kernels`): that engine, and the MoE layers'
    # whole time by its `kernels.MoeLayerModel` (their chain and per-expert costs, in moe_floor_s, and their experts'
    # streaming, in weights_s)
    moe_engine: str = ""
    moe_layers_s: float = 0.0

    @property
    def comm_bandwidth_s(self) -> float:
        """The bandwidth part of comm_s."""
        return self.comm_s - self.comm_latency_s

    @property
    def flops_s(self) -> float:
        """matmul + attention FLOPs at the achieved rate."""
        return self.matmul_s + self.attention_s

    @property
    def total_s(self) -> float:
        if self.overlap:
            return max(self.kv_s + self.weights_s, self.flops_s, self.comm_bandwidth_s, self.comm_latency_s)
        return (self.overhead_s + max(self.kv_s, self.attention_s) + max(self.weights_s, self.matmul_s)
                + self.elementwise_s + self.comm_s)

    @property
    def bound(self) -> str:
        """The largest component: 'weights', 'kv', 'flops' or 'communication'."""
        parts = {"weights": self.weights_s, "kv": self.kv_s, "flops": self.flops_s, "communication": self.comm_s}
        return max(parts, key=parts.get)


def _require_deployment(deployment, function: str):
    """A ValueError for anything but a Deployment, pointing a model name at `inference`'s closed-form functions."""
    if isinstance(deployment, Deployment):
        return deployment
    raise ValueError(f"deployment must be an estimate.Deployment (estimate.{function}'s first argument), got "
                     f"{deployment!r}; build one "
                    "with estimate.Deployment(model, chip, n_chips, ...), or for the sources' bound of a named model "
                    "use inference.decode_step_time(model, chip, n_chips, batch, context_len) (and "
                    "inference.prefill_time)")


def _fits_or_raise(deployment: Deployment, needed: float, what: str, fix: str, efficiency=None):
    """ValueError naming the bytes `what` needs per chip and the bytes a chip has (or, for an estimate, the share
    `memory_utilization` lets the engine use), when it does not fit."""
    capacity, weights = deployment.hbm_limit(efficiency), deployment.weight_bytes_per_chip
    if needed <= capacity:
        return
    if weights > capacity:
        fix = (f"the weights alone ({weights / 1e9:.1f} GB per chip) exceed it: quantize them or raise "
               "tensor_parallel")
    has = f"one {deployment.chip.name} has {capacity / 1e9:.1f} GB"
    if not resolve_efficiency(efficiency).overlap:
        has = (f"the engine may use {capacity / 1e9:.1f} GB of one {deployment.chip.name}'s "
               f"{deployment.chip.hbm_capacity / 1e9:.1f} GB (memory_utilization={deployment.memory_utilization:g})")
    raise ValueError(f"{what} does not fit: it needs {needed / 1e9:.1f} GB per chip ({weights / 1e9:.1f} GB of "
                     f"weights + {(needed - weights) / 1e9:.1f} GB of KV cache) but {has}; {fix}")


def _within_cap(deployment: Deployment, per_replica: float, efficiency, what: str):
    """ValueError when an estimate's replica would run more sequences than the engine's `max_sequences`."""
    if per_replica > deployment.sequence_cap(efficiency):
        raise ValueError(f"{what}: {per_replica:,} sequences per replica exceed max_sequences="
                         f"{deployment.max_sequences:,}, the engine's cap; use a smaller batch or raise max_sequences "
                         "(the bound, efficiency=None, has no cap)")


# A collective priced at this many times its bytes shows its line-rate floor alone (the latency floor is negligible).
_FLOOR_SCALE = 2.0**30


def _collectives(deployment: Deployment, tokens: float, decode_batch: float, floors: bool = False) -> tuple:
    """(bandwidth, latency) line-rate seconds of one step's collectives on one chip, all layers: as `collectives`
    prices them (NCCL's algorithm at line rate and its latency), or with `floors` the bound's (the best algorithm's
    line rate, the shortest physical latency: `CollectiveTime.bound_s` at zero bytes and at 2^30 x the bytes).

    "1d-ws": two all-reduces of the step's [tokens, D] activations per layer. Pope et al.'s layouts: the
    feed-forward collectives of `layouts.ffn_collectives` (PaLM's parallel block shares them with attention). A
    batch-split KV cache adds two all-to-alls of the decode queries / outputs per layer.
    """
    d = deployment
    m, chip, tp = d.model, d.chip, d.tensor_parallel
    if tp == 1:
        return 0.0, 0.0
    act = bytes_per_element(d.activation_dtype)
    if d.attention_data_parallel:
        return _data_parallel_collectives(d, tokens * act, floors)
    if d.ffn_layout == "1d-ws":
        steps = [("all-reduce", d.mesh_shape, tokens * m.d_model * act, None)] * 2  # after attention, after the FFN
    else:
        steps = [(c.op, c.group, None, c) for c in ffn_collectives(d.ffn_layout, m, tokens, d.mesh_shape,
                                                                   d.weight_dtype, d.activation_dtype)]
    groups = kv_head_groups(m)
    if decode_batch and tp > groups and d.kv_placement == "batch-split":
        if d.ffn_layout != "1d-ws" and groups == 1 and decode_batch % tp == 0:
            steps += [(c.op, c.group, None, c) for c in attention_collectives(
                "batch", int(decode_batch), m.n_heads, m.head_dim, d.mesh_shape, d.activation_dtype)]
        else:
            shards = (tp // math.gcd(groups, tp),)
            steps += [("all-to-all", shards, decode_batch * m.n_heads * m.head_dim * act, None)] * 2
    bandwidth = latency = 0.0
    priced = {}  # the same collective twice per layer (Megatron's two all-reduces) is priced once
    for op, group, volume, layout in steps:
        if layout is not None:  # Pope et al.'s layouts: their bandwidth (all of a chip's links), torus latency
            bandwidth += layout.seconds(chip, "pope")
            latency += _floor_latency(op, chip, group) if floors else _latency(op, chip, group)
            continue
        key = (op, group, volume)
        if key not in priced:
            priced[key] = _priced_collective(op, volume, chip, group, floors)
        bandwidth, latency = bandwidth + priced[key][0], latency + priced[key][1]
    return m.n_layers * bandwidth, m.n_layers * latency


@functools.lru_cache(maxsize=8192)
def _priced_collective(op: str, volume: float, chip, group: tuple, floors: bool) -> tuple:
    """(bandwidth, latency) seconds of one collective of `volume` bytes over `group` on `chip` (`_collectives`), kept:
    a plan or a fit prices the same collective at the same batch many times."""
    if floors:
        return (mesh_collective(op, volume * _FLOOR_SCALE, chip, group).bound_s / _FLOOR_SCALE,
                _floor_latency(op, chip, group))
    step = mesh_collective(op, volume, chip, group)
    return step.bandwidth_s, step.latency_s


def _data_parallel_collectives(d: Deployment, bytes_per_dim: float, floors: bool) -> tuple:
    """Attention data-parallel: no collective around attention; around each MoE layer with expert parallelism two
    all-to-alls of the routed copies (tokens x k x D), otherwise (and on dense layers) an all-gather of the tokens'
    hidden states (tokens x D) and a reduce-scatter of the same."""
    m = d.model
    moe_layers = m.n_moe_layers if d.expert_parallel else 0
    steps = [(moe_layers, ("all-to-all", bytes_per_dim * m.n_active_experts * m.d_model)),
             (m.n_layers - moe_layers, ("all-gather", bytes_per_dim * m.d_model)),
             (m.n_layers - moe_layers, ("reduce-scatter", bytes_per_dim * m.d_model))]
    bandwidth = latency = 0.0
    for layers, (op, volume) in steps:
        if not layers:
            continue
        if floors:
            each = (mesh_collective(op, volume * _FLOOR_SCALE, d.chip, d.mesh_shape).bound_s / _FLOOR_SCALE,
                    _floor_latency(op, d.chip, d.mesh_shape))
        else:
            step = mesh_collective(op, volume, d.chip, d.mesh_shape)
            each = (step.bandwidth_s, step.latency_s)
        count = layers * (2 if op == "all-to-all" else 1)  # dispatch and combine
        bandwidth, latency = bandwidth + count * each[0], latency + count * each[1]
    return bandwidth, latency


@functools.lru_cache(maxsize=256)
def _latency(op: str, chip, group: tuple) -> float:
    """The latency `collectives` prices for a collective over `group` (a torus's hops do not depend on the bytes)."""
    return mesh_collective(op, 0.0, chip, group).latency_s


@functools.lru_cache(maxsize=256)
def _floor_latency(op: str, chip, group: tuple) -> float:
    """The shortest latency physics allows a collective over `group`: its `bound_s` at zero bytes."""
    return mesh_collective(op, 0.0, chip, group).bound_s


def step_estimate(deployment: Deployment, *, decode_batch: float = 0.0, decode_context: float = 0.0,
                  prefill_tokens: float = 0.0, prefill_len: int = 1, held_sequences: float = 0.0,
                  held_tokens_each: float = 0.0, efficiency=None) -> StepEstimate:
    """One step of one replica mixing `decode_batch` sequences at mean context `decode_context` and
    `prefill_tokens` prompt tokens from prompts of `prefill_len` tokens; HBM holds `held_sequences` caches of
    `held_tokens_each` tokens. `decode_step`, `prefill` and `offline_throughput` call it; see the module docstring.
    It prices what it is given (no capacity check: `decode_step` and `prefill` make it).
    """
    d = _require_deployment(deployment, "step_estimate")
    eff = resolve_efficiency(efficiency).for_chip(d.chip)
    for name, value in (("decode_batch", decode_batch), ("decode_context", decode_context),
                        ("prefill_tokens", prefill_tokens), ("held_sequences", held_sequences),
                        ("held_tokens_each", held_tokens_each)):
        positive(name, value, allow_zero=True)
    positive_int("prefill_len", prefill_len)
    m, chip, tp = d.model, d.chip, d.tensor_parallel
    hbm = chip.hbm_bandwidth * eff.hbm
    kv_rate = chip.hbm_bandwidth * eff.kv_fraction
    # an engine's matmuls reach at most what the format's best measured kernel reaches on the chip, and a narrow
    # expert's no more than in bf16 (`Deployment.narrow_expert_share`); the bound, the data sheet's peak in the format
    ceiling = 1.0 if eff.overlap else kernel_ceiling(chip, d.compute_dtype)
    rate = chip.peak_flops(d.compute_dtype) * min(eff.mfu, ceiling)
    narrow = 0.0 if eff.overlap else d.narrow_expert_share
    expert_ceiling = d.expert_kernel_fraction if narrow else 1.0
    expert_rate = chip.peak_flops("bf16") * min(eff.mfu, expert_ceiling) if narrow else rate
    attention_rate = chip.peak_flops(d.attention_dtype) * eff.mfu
    tokens = decode_batch + prefill_tokens
    # decode reads its caches (and a hybrid's states, read and written back); prefill writes the new tokens' entries
    # (every layer keeps the newest token) and each prompt's final state
    kv_moved = (d.kv_read_per_chip(decode_batch, decode_context) if decode_batch else 0.0) + \
        (prefill_tokens * kv_bytes_per_token(m, d.kv_dtype) * d.kv_copies / tp) + \
        (prefill_tokens / prefill_len * d.state_bytes_per_sequence / tp)
    # FLOPs summed over the layers (local layers score at most their window)
    per_decode, per_prompt = d._attention_flops(decode_context if decode_batch else 1, prefill_len)
    attention = (decode_batch * per_decode if decode_batch else 0.0) + \
        (prefill_tokens / prefill_len * per_prompt if prefill_tokens else 0.0)
    matmul = 2.0 * tokens * d.matmul_params / tp  # 2 FLOPs per weight per token, k experts per token
    expert_matmul_s = narrow * matmul / expert_rate
    # the bound: the best algorithm at line rate, the shortest latency physics allows; the estimate: NCCL's pick
    bandwidth, latency = _collectives(d, tokens, decode_batch, floors=eff.overlap)
    bandwidth, latency = bandwidth / eff.network, latency * eff.latency
    serial = not eff.overlap and bool(tokens)  # the bound has no fixed costs, nor has an empty step
    layers = m.n_layers * eff.layer_s if serial and tp > 1 else 0.0  # tensor-parallel layers
    launch = m.n_layers * eff.launch_s if serial and not _in_graph(chip.topology, decode_batch, prefill_tokens) \
        else 0.0
    sequences = (decode_batch + prefill_tokens / prefill_len) * eff.sequence_s if serial else 0.0
    # A mixture of experts reads the experts its tokens touch, which grow slower than the tokens: a mix of decodes and
    # prompt tokens averaged into one step reads more than the steps it stands for read on average (prompts come in
    # lumps). So the bound counts, on a step that decodes, only the experts its decode tokens touch: every step of the
    # mix reads at least those.
    routed = decode_batch if eff.overlap and decode_batch else tokens
    weights = d.weights_read_per_chip(routed) / hbm if tokens else 0.0
    layer_model = d.moe_layer_model(eff.moe_kernels) if serial and eff.moe_kernels else None
    if layer_model:  # the engine's measured MoE layer: its chain, a cost per expert run, its experts' own stream rate
        touched = expected_experts_touched(m.n_experts, m.n_active_experts, routed)
        expert_bytes = d.expert_bytes_per_expert_per_chip * touched
        weights += expert_bytes * (1 / (chip.hbm_bandwidth * layer_model.stream_fraction) - 1 / hbm)
        run = touched / tp if d.expert_parallel else touched  # whole experts split over the chips, or slices of all
        moe_floor = m.n_moe_layers * (layer_model.floor_s + run * layer_model.expert_s)
        moe_layers = m.n_moe_layers * layer_model.layer_s(run, expert_bytes / m.n_moe_layers)
    else:
        moe_layers = 0.0
        moe_floor = m.n_moe_layers * moe_layer_floor() if serial and platform_of_chip(chip) == "gpu" else 0.0
    fixed = eff.overhead_s + layers + launch + sequences + moe_floor if serial else 0.0
    # the kernels between a GPU engine's matmuls stream each token's activations; the bound fuses them away, and so
    # does XLA on a TPU (`memory.elementwise_bytes_per_token`)
    elementwise = tokens * d.elementwise_bytes_per_token / hbm if serial and not isinstance(chip.topology, Torus) \
        else 0.0
    return StepEstimate(weights_s=weights,
                        kv_s=kv_moved / kv_rate, matmul_s=(1 - narrow) * matmul / rate + expert_matmul_s,
                        attention_s=attention / tp / attention_rate, comm_s=bandwidth + latency,
                        comm_latency_s=latency, batch=decode_batch, tokens=tokens,
                        kv_placement=d.kv_placement,
                        hbm_bytes_per_chip=d.weight_bytes_per_chip + d.kv_bytes_per_chip(held_sequences,
                                                                                          held_tokens_each),
                        hbm_capacity=d.hbm_limit(eff), overhead_s=fixed, overlap=eff.overlap, layer_s=layers,
                        launch_s=launch, sequence_s=sequences, elementwise_s=elementwise, kernel_ceiling=ceiling,
                        expert_matmul_s=expert_matmul_s, expert_kernel_ceiling=expert_ceiling, moe_floor_s=moe_floor,
                        moe_engine=layer_model.engine if layer_model else "", moe_layers_s=moe_layers)


def _per_replica(deployment: Deployment, batch: int) -> int:
    """The sequences each replica runs: batch / replicas, which must be whole."""
    batch = positive_int("batch", batch)
    if batch % deployment.replicas:
        raise ValueError(f"batch={batch} does not split over {deployment.replicas} replicas; use a multiple of "
                         f"{deployment.replicas}")
    return batch // deployment.replicas


def decode_step(deployment: Deployment, batch: int, context_len: int, efficiency=None) -> StepEstimate:
    """One decode step of `batch` sequences (the whole deployment's; split evenly over its replicas) that each
    attend to `context_len` cached tokens. Raises ValueError when the weights and caches do not fit (in all of HBM
    for the bound, in `memory_utilization` of it for an estimate) or, for an estimate, when a replica's share
    exceeds `max_sequences`.

    Defined in chapter 5, *A model of the decode step*.
    """
    d = _require_deployment(deployment, "decode_step")
    eff = resolve_efficiency(efficiency)
    per_replica, context_len = _per_replica(d, batch), positive_int("context_len", context_len)
    what = f"batch {batch} at {context_len:,} tokens of context on {d.describe()}"
    _within_cap(d, per_replica, eff, what)
    needed = d.weight_bytes_per_chip + d.kv_bytes_per_chip(per_replica, context_len)
    _fits_or_raise(d, needed, what,
                   f"the largest batch that fits is {max_batch(d, context_len, eff)}; shorten the context, quantize "
                   "the KV cache or the weights, or add chips", eff)
    return step_estimate(d, decode_batch=per_replica, decode_context=context_len, held_sequences=per_replica,
                         held_tokens_each=context_len, efficiency=eff)


def prefill(deployment: Deployment, prompt_len: int, batch: int = 1, efficiency=None) -> StepEstimate:
    """One prefill pass over `batch` prompts of `prompt_len` tokens (split evenly over the replicas): matmul FLOPs,
    causal attention FLOPs, writing the KV cache, reading the weights once, the collectives. Raises ValueError when
    the weights and the new caches do not fit (as `decode_step`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    d = _require_deployment(deployment, "prefill")
    eff = resolve_efficiency(efficiency)
    per_replica, prompt_len = _per_replica(d, batch), positive_int("prompt_len", prompt_len)
    what = f"a prefill of {batch} x {prompt_len:,} tokens on {d.describe()}"
    _within_cap(d, per_replica, eff, what)
    needed = d.weight_bytes_per_chip + d.kv_bytes_per_chip(per_replica, prompt_len)
    _fits_or_raise(d, needed, what, "use fewer or shorter prompts per pass, quantize, or add chips", eff)
    return step_estimate(d, prefill_tokens=per_replica * prompt_len, prefill_len=prompt_len,
                         held_sequences=per_replica, held_tokens_each=prompt_len, efficiency=eff)


def decode_time(deployment: Deployment, batch: int, context_len: int, steps: int, efficiency=None) -> float:
    """Seconds for `steps` decode steps of `batch` sequences starting from `context_len` cached tokens (a
    non-negative integer): steps x the step at the mean context, context_len + (steps + 1) / 2. Every term of a step
    is affine in the context, so this is their sum (where terms trade places inside a max it is slightly below the
    sum: still a bound). The memory check uses the last step's context.

    Defined in chapter 11, *How close do real systems come?*.
    """
    d = _require_deployment(deployment, "decode_time")
    steps = positive_int("steps", steps)
    context_len = non_negative_int("context_len", context_len)
    decode_step(d, batch, context_len + steps, efficiency)  # raises if the last step does not fit
    per_replica = batch // d.replicas
    mean = step_estimate(d, decode_batch=per_replica, decode_context=context_len + (steps + 1) / 2,
                         held_sequences=per_replica, held_tokens_each=context_len + steps, efficiency=efficiency)
    return steps * mean.total_s


def max_batch(deployment: Deployment, context_len: float, efficiency=None) -> int:
    """Sequences of `context_len` tokens whose caches fit next to the weights, over the whole deployment: in all of
    HBM with no cap for the bound (efficiency None), in `memory_utilization` of it and at most `max_sequences` per
    replica for an estimate."""
    d = _require_deployment(deployment, "max_batch")
    positive("context_len", context_len)
    eff = resolve_efficiency(efficiency)
    free = d.hbm_limit(eff) - d.weight_bytes_per_chip
    per_chip = d.kv_bytes_per_chip(d.kv_shards, context_len)  # one whole sequence on each chip of a head group
    per_replica = 0 if free <= 0 else min(int(math.floor(free / per_chip)) * d.kv_shards, d.sequence_cap(eff))
    return d.replicas * per_replica


@dataclass(frozen=True)
class OfflineEstimate:
    """The steady state of continuous batching with identical requests (I prompt tokens, O output tokens).

    Each replica keeps `batch` sequences decoding, at contexts spread evenly from I + 1 to I + O - 1 (mean
    I + O / 2, which sets the KV memory and reads); every iteration also prefills batch x I / (O - 1) prompt tokens
    to replace the batch / (O - 1) requests that finish, each of which has produced O tokens (its first from the
    prefill). Output tokens/s = replicas x batch x O / (O - 1) / T_iteration.
    """

    deployment: Deployment
    input_len: int
    output_len: int
    efficiency: object  # the Efficiency (or Calibrated pair) it was priced at
    batch: int  # per replica
    step: StepEstimate  # one iteration of one replica

    @property
    def output_tokens_per_s(self) -> float:
        o = self.output_len
        return self.deployment.replicas * self.batch * o / (o - 1) / self.step.total_s

    @property
    def mean_context(self) -> float:
        return self.input_len + self.output_len / 2


def offline_estimate(deployment: Deployment, input_len: int, output_len: int, efficiency=None,
                     slots: int | None = None) -> OfflineEstimate:
    """`offline_throughput` for a `Deployment`, with the iteration's components (`OfflineEstimate`). `slots`: the
    sequences each replica keeps decoding, when the engine fixes them (JetStream's slots); default the largest batch
    that fits (`max_batch` at the mean context, which for an estimate applies the engine settings).

    Defined in chapter 11, *How close do real systems come?*.
    """
    d = _require_deployment(deployment, "offline_estimate")
    i, o = positive_int("input_len", input_len), positive_int("output_len", output_len)
    if o < 2:
        raise ValueError(f"output_len={o}: an offline decode benchmark needs at least 2 output tokens; "
                         "use estimate.prefill for prompt-only work")
    eff = resolve_efficiency(efficiency)
    mean_context = i + o / 2
    what = f"one request of {i:,} + {o:,} tokens on {d.describe()}"
    if slots is None:
        batch = max_batch(d, mean_context, eff) // d.replicas
        if batch < 1:
            _fits_or_raise(d, d.weight_bytes_per_chip + d.kv_bytes_per_chip(1, mean_context), what,
                           "quantize the weights or the KV cache, or add chips", eff)
    else:
        batch = positive_int("slots", slots)
        what = f"{batch:,} slots of {i:,} + {o:,} tokens on {d.describe()}"
        _within_cap(d, batch, eff, what)
        _fits_or_raise(d, d.weight_bytes_per_chip + d.kv_bytes_per_chip(batch, mean_context), what,
                       f"use fewer slots (at most {max_batch(d, mean_context, eff) // d.replicas} fit), quantize "
                       "the weights or the KV cache, or add chips", eff)
    step = step_estimate(d, decode_batch=batch, decode_context=mean_context, prefill_tokens=batch * i / (o - 1),
                         prefill_len=i, held_sequences=batch, held_tokens_each=mean_context, efficiency=eff)
    return OfflineEstimate(deployment=d, input_len=i, output_len=o, efficiency=eff, batch=batch, step=step)


def offline_throughput(model, chip, n_chips: int, input_len: int, output_len: int, *, weight_dtype: str = "bf16",
                       kv_dtype: str = "bf16", compute_dtype: str = "bf16", efficiency=None,
                       tensor_parallel: int | None = None, kv_placement: str | None = None,
                       memory_utilization: float = MEMORY_UTILIZATION, max_sequences: int = MAX_SEQUENCES) -> float:
    """Output tokens/s of the whole deployment for identical requests (input_len prompt tokens, output_len output
    tokens) arriving at an infinite rate, served with continuous batching at the largest batch that fits, prefill
    included: what an engine's offline throughput benchmark measures (`OfflineEstimate` has the formula).

    `model`: a name or a `Transformer` (dense or MoE). `efficiency`: None (the bound: every resource at peak and
    overlapped, all of HBM, no cap on the batch: never beaten by a measured system), "typical" (calibrated on
    published measurements, chapter 11, with the engine settings `memory_utilization` and `max_sequences`), or an
    `Efficiency`. `kv_placement` None: "replicated" on GPUs, "batch-split" on TPUs (`Deployment`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    deployment = Deployment(model, chip, n_chips, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            compute_dtype=compute_dtype, tensor_parallel=tensor_parallel, kv_placement=kv_placement,
                            memory_utilization=memory_utilization, max_sequences=max_sequences)
    return offline_estimate(deployment, input_len, output_len, efficiency).output_tokens_per_s


# ------------------------------------------------------------------------------------- one call for a reader's model
@dataclass(frozen=True)
class Report:
    """What serving `model` on n chips costs, in one place (`report` builds it; `describe` prints it).

    Times are seconds, sizes bytes, rates tokens/s; `_bound` is the estimate at 100% efficiency (a lower bound on
    the time), `_typical` at the calibrated `TYPICAL` efficiencies (chapter 11). Costs are None without a price.
    """

    deployment: Deployment
    batch: int
    context_len: int
    prompt_len: int
    weight_bytes: float  # every weight, all chips together
    kv_bytes_per_token: float  # one token of one sequence
    max_batch: int  # sequences of context_len tokens the engine runs (memory_utilization, max_sequences)
    decode_step_bound_s: float
    decode_step_typical_s: float
    prefill_bound_s: float  # one prompt of prompt_len tokens
    prefill_typical_s: float
    price_per_chip_hour: float | None

    @property
    def tokens_per_s_bound(self) -> float:
        """Output tokens/s of the whole deployment at this batch (no faster than this)."""
        return self.batch / self.decode_step_bound_s

    @property
    def tokens_per_s_typical(self) -> float:
        return self.batch / self.decode_step_typical_s

    def _dollars_per_million(self, tokens_per_s: float):
        if self.price_per_chip_hour is None:
            return None
        return self.price_per_chip_hour * self.deployment.n_chips / 3600.0 / tokens_per_s * 1e6

    @property
    def dollars_per_million_tokens_bound(self):
        """$ per million output tokens at the bound's throughput: price x chips / 3600 / tokens/s x 1e6."""
        return self._dollars_per_million(self.tokens_per_s_bound)

    @property
    def dollars_per_million_tokens_typical(self):
        return self._dollars_per_million(self.tokens_per_s_typical)

    def as_dict(self) -> dict:
        """Every number of the report, in SI units, for scripts (`python -m scaling_lib estimate --json`)."""
        d = self.deployment
        return {"model": d.model.name, "chip": d.chip.name, "n_chips": d.n_chips, "tensor_parallel": d.tensor_parallel,
                "expert_parallel": d.expert_parallel, "attention_data_parallel": d.attention_data_parallel,
                "weight_dtype": d.weight_dtype, "kv_dtype": d.kv_dtype, "compute_dtype": d.compute_dtype,
                "batch": self.batch, "context_len": self.context_len, "prompt_len": self.prompt_len,
                "weight_bytes": self.weight_bytes, "kv_bytes_per_token": self.kv_bytes_per_token,
                "max_batch": self.max_batch, "decode_step_bound_s": self.decode_step_bound_s,
                "decode_step_typical_s": self.decode_step_typical_s, "prefill_bound_s": self.prefill_bound_s,
                "prefill_typical_s": self.prefill_typical_s, "tokens_per_s_bound": self.tokens_per_s_bound,
                "tokens_per_s_typical": self.tokens_per_s_typical, "price_per_chip_hour": self.price_per_chip_hour,
                "dollars_per_million_tokens_bound": self.dollars_per_million_tokens_bound,
                "dollars_per_million_tokens_typical": self.dollars_per_million_tokens_typical}

    def describe(self) -> str:
        """A small table for a terminal or a notebook."""
        rows = [("deployment", self.deployment.describe()),
                ("weights", f"{self.weight_bytes / 1e9:,.1f} GB ({self.weight_bytes / self.deployment.n_chips / 1e9:,.1f}"
                            " GB per chip)"),
                ("KV cache per token", f"{self.kv_bytes_per_token / 1e3:,.1f} kB"),
                ("largest batch that fits", f"{self.max_batch:,} sequences of {self.context_len:,} tokens (the "
                                            f"engine's {self.deployment.memory_utilization:.0%} of HBM, at most "
                                            f"{self.deployment.max_sequences:,} per replica)"),
                ("batch", f"{self.batch:,}"),
                ("decode step", f"{self.decode_step_bound_s * 1e3:,.2f} ms bound, "
                                f"{self.decode_step_typical_s * 1e3:,.2f} ms typical"),
                ("prefill", f"{self.prefill_bound_s * 1e3:,.1f} ms bound, {self.prefill_typical_s * 1e3:,.1f} ms "
                            f"typical ({self.prompt_len:,}-token prompt)"),
                ("output tokens/s", f"{self.tokens_per_s_bound:,.0f} bound, {self.tokens_per_s_typical:,.0f} typical")]
        if self.price_per_chip_hour is not None:
            rows.append(("$ per million output tokens", f"{self.dollars_per_million_tokens_bound:,.3f} at the bound, "
                                                        f"{self.dollars_per_million_tokens_typical:,.3f} typical "
                                                        f"(at ${self.price_per_chip_hour:g} per chip-hour)"))
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def report(model, chip, n_chips: int, *, batch: int | None = None, context_len: int = 8192,
           prompt_len: int | None = None, weight_dtype: str = "bf16", kv_dtype: str | None = None,
           compute_dtype: str = "bf16", price_per_chip_hour: float | None = None,
           memory_utilization: float = MEMORY_UTILIZATION, max_sequences: int = MAX_SEQUENCES,
           kv_placement: str | None = None, tensor_parallel: int | None = None, efficiency="typical",
           expert_parallel: bool = False, attention_data_parallel: bool = False) -> Report:
    """Weights, KV per token, the largest batch that fits, the decode step (bound and typical), the prefill time,
    tokens/s and $ per million output tokens, for one deployment, in one call.

    batch None: the largest batch the engine runs at `context_len` (`max_batch` with the engine settings
    `memory_utilization` and `max_sequences` of `Deployment`; the bound and the typical step are both priced at
    it). kv_dtype None: bf16, whatever the weights (an int4 or fp8 checkpoint does not make the engine's cache 4 or 8
    bits; say kv_dtype="fp8" for an 8-bit cache). kv_placement None: `Deployment`'s default. tensor_parallel None:
    one group of all n_chips (`Deployment`'s default); otherwise n_chips / tensor_parallel replicas. `efficiency`: the
    "typical" columns' efficiencies, "typical" (the broadest fit) or an engine profile's name (`PROFILES`).
    `expert_parallel` and `attention_data_parallel`: a mixture of experts served as `Deployment` says. prompt_len None:
    context_len; a prompt longer than the context is refused. The price is the user's (no price is built in): dollars per chip per hour. Each number is the
    corresponding function of this module (`max_batch`, `decode_step`, `prefill`) or of `memory`. Also behind
    `python -m scaling_lib estimate`.

    Defined in the appendix *Apply the book to your model*.
    """
    deployment = Deployment(model, chip, n_chips, weight_dtype=weight_dtype,
                            kv_dtype="bf16" if kv_dtype is None else kv_dtype, compute_dtype=compute_dtype,
                            kv_placement=kv_placement, memory_utilization=memory_utilization,
                            max_sequences=max_sequences, tensor_parallel=tensor_parallel,
                            expert_parallel=expert_parallel, attention_data_parallel=attention_data_parallel)
    context_len = positive_int("context_len", context_len)
    prompt_len = context_len if prompt_len is None else positive_int("prompt_len", prompt_len)
    if prompt_len > context_len:
        raise ValueError(f"prompt_len={prompt_len} is longer than context_len={context_len}, the tokens a sequence "
                         f"holds in all: give a context at least as long as the prompt")
    if price_per_chip_hour is not None:
        hourly_price("price_per_chip_hour", price_per_chip_hour)
    typical = resolve_efficiency(efficiency)
    if typical.overlap:
        raise ValueError(f"efficiency={efficiency!r}: the report's typical columns need an estimate ('typical' or an "
                         f"engine profile: {', '.join(PROFILES)}); its bound columns are always the bound")
    fits = max_batch(deployment, context_len, typical)
    if batch is None:
        if fits < 1:
            decode_step(deployment, deployment.replicas, context_len, typical)  # raises, naming the bytes needed
        batch = fits
    # the estimate first: a batch larger than the engine runs is refused naming `fits`, the largest batch reported
    step_typical = decode_step(deployment, batch, context_len, typical)
    step_bound = decode_step(deployment, batch, context_len, BOUND)
    first = prefill(deployment, prompt_len, deployment.replicas, BOUND)
    first_typical = prefill(deployment, prompt_len, deployment.replicas, typical)
    return Report(deployment=deployment, batch=batch, context_len=context_len, prompt_len=prompt_len,
                  weight_bytes=model_param_bytes(deployment.model, weight_dtype),
                  kv_bytes_per_token=kv_bytes_per_token(deployment.model, deployment.kv_dtype), max_batch=fits,
                  decode_step_bound_s=step_bound.total_s, decode_step_typical_s=step_typical.total_s,
                  prefill_bound_s=first.total_s, prefill_typical_s=first_typical.total_s,
                  price_per_chip_hour=price_per_chip_hour)
