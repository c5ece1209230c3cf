"""How efficiently a real system uses each resource: the `Efficiency` of one engine on one platform, its physical
ranges, and the named profiles the library ships (chapter 11).

An `Efficiency` holds one number per phenomenon (a fraction of a peak rate, a scale on a sourced latency, a fixed
time); `estimate` applies it to each term of a step. Each fitted value lies inside `PHYSICAL_RANGES`, whose comment
gives the evidence for each end. `Calibrated` holds one `Efficiency` per platform ("gpu" for NVIDIA GPUs, "amd" for
AMD's, "tpu"); a `Profile` names one engine's or one hardware family's fit and says what it was fitted on.

`BOUND` prices every resource at peak, overlapped: the bound. `TYPICAL` is fitted on every calibration row, of every
engine (`calibration.fit_profile("typical")`); `PROFILES` holds it and the engine and family profiles, each fitted
on its own rows only. `estimate`, `plan` and the command line (`--engine`) take any of their names.

Used in chapter 11, *How close do real systems come?*.
"""

import math
from dataclasses import dataclass, replace

from .hardware import FullMesh, Torus, get_chip
from .kernels import moe_engines
from .models import get_model

PLATFORMS = ("gpu", "amd", "tpu")
PLATFORM_WORDS = {"gpu": "NVIDIA GPUs", "amd": "AMD GPUs", "tpu": "TPUs"}
# A held-out range whose geometric centre, sqrt(low x high), sits below this says the engine runs slower than the
# estimate (fine-grained experts on MI300X: 0.51); at or above it, not (on NVIDIA GPUs under the typical fit: 0.94;
# on TPU7x: 1.18).
SLOWER_THAN_ESTIMATE = 0.9
# how an NVIDIA GPU's estimate prices a model with fine-grained experts (`estimate.Deployment.narrow_expert_share`)
NARROW_EXPERT_WORDS = ("; the estimate prices their routed experts at the bf16 rate whatever their format, and no "
                       "faster than NVIDIA's timings of MoE layers with experts their size compute, as those timings "
                       "show such experts run (chapter 11)")


def platform_of_chip(chip) -> str:
    """"tpu" for a TPU torus, "amd" for an AMD GPU (joined by Infinity Fabric, a full mesh), "gpu" for the others
    (NVIDIA GPUs behind NVLink switches).

    Defined in chapter 11, *How close do real systems come?*.
    """
    topology = get_chip(chip).topology
    if isinstance(topology, Torus):
        return "tpu"
    return "amd" if isinstance(topology, FullMesh) else "gpu"


# The physical range of each efficiency, with its evidence: `calibration` searches each inside its range, and a value
# that ends at an edge is reported as a finding (chapter 11). Fractions of a data-sheet peak unless said otherwise.
PHYSICAL_RANGES = {
    # matmul and attention FLOP/s: large bf16 GEMMs reach 0.70 of the H200's dense peak in this project's
    # measurement (measurements.md, `matmul_bf16`: 6.89e14 of 9.89e14); Pope et al. 2022 report 76% MFU for PaLM
    # 540B prefill on TPU v4 (Table 2), the best published inference figure; nothing above 0.8 is physical here.
    # NVIDIA's timings of TensorRT-LLM's best GEMMs reach 0.70-0.90 of the data sheet in bf16 and fp8 on A100 to GB200,
    # and 0.51-0.52 in nvfp4 on Blackwell: the estimate caps mfu at that ceiling per format (`kernels.kernel_ceiling`).
    "mfu": (0.2, 0.8),
    # streaming the weights: an engine-grade CUDA-graph decode on one H200 read weights and cache at 0.63 of the data
    # sheet at batch 1 and 0.73-0.85 from batch 64; a plain 8 GiB read reached 0.82 (measurements.md). 0.6-0.92.
    "hbm": (0.6, 0.92),
    # attention reading the KV cache: PyTorch's fused attention read the cache at 3.2-4.2e12 B/s (0.67-0.88 of the
    # H200's 4.8e12) from batch 16; a plain einsum attention at 0.28-0.31 (measurements.md). Paged kernels sit between.
    "kv_hbm": (0.3, 0.92),
    # a collective's line rate: NCCL reaches 0.82 (ring) and 0.69 (NVLS) only above ~1 GiB; its maintainer notes 256 MB
    # is too small for the peak (nccl-tests issue 212), and an engine's per-layer all-reduce is 1-100 MB.
    "network": (0.3, 1.0),
    # a scale on the latency `collectives` prices (NCCL's own model on a GPU, hops x ~1 us on a torus): measured
    # small collectives took 0.8-1.7x NCCL's model on H100 and ~2-3x the hop count on TPU v5e
    # (`calibration.collective_latency_scale`); the acceptance keeps it within 0.5-3x.
    "latency": (0.5, 3.0),
    # host work once per step (scheduling, sampling, launching the step's graph): 0-5 ms per step.
    "overhead_s": (0.0, 5e-3),
    # the per-layer cost of tensor parallelism beyond the collectives' own latency and bytes: each layer's two
    # all-reduces make every GPU wait for the slowest (a PyTorch all-reduce of a few kB took 20-25 us end to end on
    # 8 H100: measurements.collective_rows), and its matmuls are split into thinner, less efficient pieces.
    # TensorRT-LLM's first token for LLaMA-2-70B on 4 H100 (26 ms for 128 tokens, published_runs.csv) leaves at most
    # ~200 us per layer once the weights are read; one GPU has no such cost.
    "layer_s": (0.0, 2e-4),
    # the per-layer cost of a step a GPU engine runs outside a CUDA graph (any step that carries prompt tokens, or a
    # decode batch larger than the engine captures, `estimate.CUDA_GRAPH_MAX_BATCH`): the host launches each of the
    # layer's kernels one at a time, and a launch costs microseconds, as long as a short kernel runs (NVIDIA's
    # "Getting Started with CUDA Graphs" blog: graphs exist to remove that per-kernel cost). An eager layer launches
    # 10-20 kernels (norms, projections, rotary embedding, attention, activation, residuals) at up to ~10 us each:
    # 0-200 us. Nothing on a TPU, where XLA compiles each step into one program.
    "launch_s": (0.0, 2e-4),
    # host work per sequence and step (scheduling it, preparing its inputs, sampling and detokenizing its token):
    # vLLM's profile of LLaMA-3-8B on one H100 found 29% of the time spent scheduling and preparing requests and 33%
    # in the API server, the GPU busy 38% (vLLM blog, 2024-09-05, "vLLM v0.6.0: 2.7x Throughput Improvement"); an
    # engine that overlaps it with the GPU hides it. 0-10 us per sequence: at 10 us a batch of 256 adds 2.6 ms, the
    # order of that 29% of a step of an 8B model.
    "sequence_s": (0.0, 1e-5),
    # a served request's time in the front end, outside every step: the HTTP request, the chat template and
    # tokenization, the scheduler's admission, the first token's detokenization and stream back. None in an
    # in-process benchmark (0). vLLM's profile of LLaMA-3-8B on one H100 found a third of its time in the API server
    # (the blog above); at four clients a 233-token prompt's first token took 28 ms (SGLang), 52 ms (TensorRT-LLM)
    # and 64 ms (vLLM) on one H100, where its prefill takes about 10 ms (GPUStack's performance lab, Qwen3-8B); the
    # largest such excess among the published runs is about 0.1 s. Twice that, 0.2 s, is the top.
    "request_s": (0.0, 0.2),
}


@dataclass(frozen=True)
class Efficiency:
    """How a real system uses each resource, one number per phenomenon (chapter 11), each inside `PHYSICAL_RANGES`
    when fitted:

    - `mfu`: the fraction of peak matmul and attention FLOP/s achieved, in (0, 1];
    - `hbm`: the fraction of peak HBM bandwidth achieved streaming the weights, in (0, 1];
    - `network`: the fraction of a collective's line-rate bandwidth achieved (its bandwidth term is divided by it),
      in (0, 1];
    - `latency`: a scale on the collectives' sourced latency (alpha) terms, > 0 (1.0: as `collectives` prices it);
    - `overhead_s`: fixed host seconds per step (scheduling, sampling, launching the step), >= 0;
    - `overlap`: True composes the terms as the bound does (max over resources), False as a serial engine does
      (module docstring);
    - `kv_hbm`: the fraction of peak HBM bandwidth attention achieves reading (or prefill writing) the KV cache, in
      (0, 1]; None (the default) takes `hbm`;
    - `layer_s`: fixed seconds per layer and step that tensor parallelism adds beyond its collectives' latency and
      bytes (waiting for the slowest GPU at each all-reduce, thinner matmuls), >= 0; nothing on one chip;
    - `launch_s`: seconds per layer of a step a GPU engine runs outside a CUDA graph (the host launching each kernel):
      charged on steps that carry prompt tokens or decode more sequences than the engine captures
      (`estimate.runs_in_cuda_graph`), >= 0; nothing on a TPU;
    - `sequence_s`: host seconds per sequence and step (scheduling, input preparation, sampling, detokenizing), on
      top of `overhead_s`, >= 0;
    - `request_s`: seconds a served request spends in the server's front end outside the engine's steps (HTTP,
      tokenization, admission, streaming the first token back), added to its TTFT under a load (`load`), >= 0;
      nothing in a single-prompt `report`, which prices the engine alone as in-process benchmarks measure it;
    - `moe_kernels`: the engine whose measured MoE layer prices the MoE layers on an NVIDIA GPU
      (`kernels.moe_layer_model`: its chain, a cost per expert run and the bandwidth fraction its experts stream
      at), where the engine's layer was timed on that GPU in the experts' format; "" (the default), or where it was
      not: the experts stream at `hbm` and each MoE layer adds `kernels.moe_layer_floor`.

    `BOUND` is `Efficiency(overlap=True)`: every resource at peak, everything overlapped, no overhead.

    Defined in chapter 11, *How close do real systems come?*.
    """

    mfu: float = 1.0
    hbm: float = 1.0
    network: float = 1.0
    latency: float = 1.0
    overhead_s: float = 0.0
    overlap: bool = False
    kv_hbm: float | None = None
    layer_s: float = 0.0
    launch_s: float = 0.0
    sequence_s: float = 0.0
    request_s: float = 0.0
    moe_kernels: str = ""

    def __post_init__(self):
        for name in ("mfu", "hbm", "network") + (("kv_hbm",) if self.kv_hbm is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"Efficiency.{name} must be a fraction of peak in (0, 1], got {value!r}")
        if isinstance(self.latency, bool) or not isinstance(self.latency, (int, float)) or \
                not 0 < self.latency < math.inf:
            raise ValueError(f"Efficiency.latency must be a positive finite scale on the collectives' latency "
                             f"(1.0: as sourced), got {self.latency!r}")
        for name, what in (("overhead_s", "seconds per step"), ("layer_s", "seconds per layer and step"),
                           ("launch_s", "seconds per layer of a step run outside a CUDA graph"),
                           ("sequence_s", "seconds per sequence and step"),
                           ("request_s", "seconds per served request")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"Efficiency.{name} must be non-negative finite {what}, got {value!r}")
        if not isinstance(self.overlap, bool):
            raise ValueError(f"Efficiency.overlap must be True (the bound's composition) or False (serial), got "
                             f"{self.overlap!r}")
        if not isinstance(self.moe_kernels, str) or (self.moe_kernels and self.moe_kernels not in moe_engines()):
            raise ValueError(f"Efficiency.moe_kernels must be '' or an engine whose MoE layers are stored "
                             f"({', '.join(moe_engines())}), got {self.moe_kernels!r}")

    @property
    def kv_fraction(self) -> float:
        """The fraction of HBM bandwidth the KV cache moves at: `kv_hbm`, or `hbm` when it is None."""
        return self.hbm if self.kv_hbm is None else self.kv_hbm

    def for_chip(self, chip) -> "Efficiency":
        """The efficiency that applies on `chip`: itself (a `Calibrated` pair picks its GPU or TPU half)."""
        return self


@dataclass(frozen=True)
class Calibrated:
    """Efficiencies fitted separately per platform: `gpu` (NVIDIA GPUs behind NVLink switches), `tpu` (a TPU torus)
    and, where published AMD data exist, `amd` (AMD GPUs; None: AMD GPUs take `gpu`). `for_chip` picks the one a chip
    uses (`platform_of_chip`).

    Defined in chapter 11, *How close do real systems come?*.
    """

    gpu: Efficiency
    tpu: Efficiency
    overlap: bool = False
    amd: Efficiency | None = None

    def __post_init__(self):
        for name in ("gpu", "tpu") + (("amd",) if self.amd is not None else ()):
            if not isinstance(getattr(self, name), Efficiency):
                raise TypeError(f"Calibrated.{name} must be an Efficiency, got {getattr(self, name)!r}")
        if not isinstance(self.overlap, bool):
            raise ValueError(f"Calibrated.overlap must be True or False, got {self.overlap!r}")

    def for_chip(self, chip) -> Efficiency:
        """`tpu` on a TPU torus, `amd` on an AMD GPU (`gpu` when there is no `amd`), `gpu` on anything else."""
        platform = platform_of_chip(chip)
        if platform == "amd" and self.amd is None:
            platform = "gpu"
        return getattr(self, platform)


BOUND = Efficiency(overlap=True)
# Fitted by `calibration.fit_typical()` on the calibration split of the published rows (chapter 11;
# `calibration.split_of` states the rule); tests/math/test_calibration.py re-runs the fit and checks these values
# are its result, and measures them on the validation split the fit never saw.
_GPU = Efficiency(mfu=0.64, hbm=0.67, network=0.44, latency=1.05, overhead_s=0.00056, kv_hbm=0.8, layer_s=5e-05,
                  launch_s=0.000156, sequence_s=2.3e-06, request_s=0.028)
_TPU = Efficiency(mfu=0.78, hbm=0.6, network=0.3, latency=1.54, overhead_s=0.005, kv_hbm=0.54, layer_s=6e-05,
                  request_s=0.028)
_AMD = Efficiency(mfu=0.24, hbm=0.6, network=0.61, latency=1.05, overhead_s=0.0, kv_hbm=0.32, layer_s=4.7e-05,
                  request_s=0.028)
_TRT_GPU = Efficiency(mfu=0.63, hbm=0.67, network=0.45, latency=1.05, overhead_s=0.00061, kv_hbm=0.8, layer_s=5.5e-05,
                      launch_s=0.000153, sequence_s=2.3e-06, request_s=0.028)
_VLLM_GPU = Efficiency(mfu=0.64, hbm=0.67, network=0.44, latency=1.05, overhead_s=0.00069, kv_hbm=0.8, layer_s=1e-05,
                       launch_s=0.000156, sequence_s=2.3e-06, request_s=0.05)
_VLLM_TPU = Efficiency(mfu=0.78, hbm=0.6, network=0.3, latency=1.54, overhead_s=0.0, kv_hbm=0.54, layer_s=0.0,
                       request_s=0.05)
_JETSTREAM_TPU = Efficiency(mfu=0.78, hbm=0.6, network=0.3, latency=1.54, overhead_s=0.005, kv_hbm=0.54,
                            layer_s=0.000156, request_s=0.028)
TYPICAL = Calibrated(gpu=_GPU, tpu=_TPU, amd=_AMD)




def _spread_of(spreads: tuple, platform: str) -> tuple:
    """(low, high) of `platform` in a ((platform, low, high), ...) table; () where it has no row."""
    return next(((low, high) for name, low, high in spreads if name == platform), ())


@dataclass(frozen=True)
class Profile:
    """One named fit: the efficiencies of one engine (or one hardware family) on the platforms its published rows
    cover, and what it was fitted on, in words (`calibration.profile_report` counts the rows and measures the fit on
    rows it never saw).

    `platforms`: those it was fitted on; `for_chip` refuses a chip of another, naming the profiles that cover it.
    `caveat`: a warning said whenever the profile is used (a fit on a handful of rows says so), and for a model with
    fine-grained experts, which the estimate misses more widely, what its estimate is worth (`fine_grained_words`).
    `spread` and `fine_grained_spread`: what the estimate times brackets on rows the fit never saw, for every model
    and for fine-grained experts alone (`spread_on`).
    """

    name: str
    engine: str  # which engine (and releases) the fit describes
    efficiency: Calibrated
    platforms: tuple
    fitted_on: str
    caveats: tuple = ()  # ((platform, words), ...): said whenever the profile prices a chip of that platform
    spread: tuple = ()  # ((platform, low, high), ...): measured / predicted on the rows the fit never saw, 10th-90th %
    fine_grained_spread: tuple = ()  # the same over the held-out rows of models with fine-grained experts only

    def spread_on(self, chip, model=None) -> tuple:
        """(low, high) of measured / predicted on the held-out rows of `chip`'s platform (`holdout.profile_spread`);
        for a `model` with fine-grained experts (`models.Transformer.fine_grained_experts`) those of such models
        (`fine_grained_spread_on`) where the profile has any there; () where there are none."""
        if model is not None and get_model(model).fine_grained_experts and self.fine_grained_spread_on(chip):
            return self.fine_grained_spread_on(chip)
        return _spread_of(self.spread, platform_of_chip(chip))

    def fine_grained_spread_on(self, chip) -> tuple:
        """(low, high) of measured / predicted on the held-out rows of models with fine-grained experts on `chip`'s
        platform (`holdout.profile_spread(..., experts="fine-grained")`); () where there are none."""
        return _spread_of(self.fine_grained_spread, platform_of_chip(chip))

    @property
    def overlap(self) -> bool:
        return False

    def caveat(self, chip, model=None) -> str:
        """The warning this profile carries on `chip`'s platform ("" when none), and for a `model` with fine-grained
        experts the wider miss of such models (`fine_grained_words`)."""
        words = [dict(self.caveats).get(platform_of_chip(chip), "")]
        if model is not None and get_model(model).fine_grained_experts:
            words.append(self.fine_grained_words(chip))
        return "; ".join(w for w in words if w)

    def fine_grained_words(self, chip) -> str:
        """What the estimate of a model with fine-grained experts is worth on `chip`: the held-out spread of such
        models' runs under this profile (the range the estimate then prints), said to be missed more widely than
        others where it reaches outside the profile's range for every model, and to run slower than the estimate
        where its geometric centre is below `SLOWER_THAN_ESTIMATE`; or, where it has none on that platform, the
        typical fit's on NVIDIA GPUs (said slower by the same rule). On an NVIDIA GPU it adds how their experts are
        priced (`NARROW_EXPERT_WORDS`)."""
        own, where = self.fine_grained_spread_on(chip), PLATFORM_WORDS[platform_of_chip(chip)]
        what, wider = ("fine-grained experts (routed experts narrower than the model)",
                       "the estimate misses such models more widely than others")
        if own:
            general = _spread_of(self.spread, platform_of_chip(chip))
            words = [what] + ([wider] if general and not general[0] <= own[0] <= own[1] <= general[1] else [])
            words.append(f"their held-out runs on {where} came out at {own[0]:.2f}-{own[1]:.2f} of it for 4 in 5 "
                         "(the range printed for them)")
            if math.sqrt(own[0] * own[1]) < SLOWER_THAN_ESTIMATE:
                words.append("expect the engine slower than the estimate")
            return ": ".join(words) + (NARROW_EXPERT_WORDS if platform_of_chip(chip) == "gpu" else "")
        low, high = _spread_of(PROFILES["typical"].fine_grained_spread, "gpu")
        slower = ": expect the engine slower than the estimate" if math.sqrt(low * high) < SLOWER_THAN_ESTIMATE else ""
        return (f"{what}: {wider}; this profile has no held-out run of one on {where}, and under the typical fit "
                f"their runs on NVIDIA GPUs came out at {low:.2f}-{high:.2f} of it for 4 in 5{slower}")

    def for_chip(self, chip) -> Efficiency:
        """The efficiency of `chip`'s platform, or a ValueError naming the profiles fitted on that platform."""
        platform = platform_of_chip(chip)
        if platform not in self.platforms:
            covering = [p.name for p in PROFILES.values() if platform in p.platforms]
            raise ValueError(f"engine profile {self.name!r} ({self.engine}) was fitted on {', '.join(self.platforms)} "
                             f"rows only and {get_chip(chip).name} is a {platform} chip; use one of "
                             f"{', '.join(covering)}")
        return self.efficiency.for_chip(chip)


# The TPU fits rest on Pope et al.'s four PaLM 540B rows, three JetStream rows, two JetStream + MaxText Mixtral
# recipes and three rows of Google's vLLM recipe on TPU v6e: say so whenever they price a TPU.
_TPU_CAVEAT = ("fitted on a handful of TPU rows (Pope et al.'s PaLM tables, JetStream's published runs and Google's "
               "vLLM recipe on v6e), several of its efficiencies on an edge of their physical range: read a TPU "
               "estimate as a rough guide")
_VLLM_TPU_CAVEAT = ("vLLM on TPU is fitted on one published recipe (Llama-3.3-70B on one v6e-8 at two loads): only "
                    "its per-step costs are vLLM's, both fitted to zero, the edge of their range; held out, Google's "
                    "runs on v6e and Ironwood (TPU7x) fall on both sides of it; read it as a rough guide")
_SGLANG_CAVEAT = ("SGLang publishes serving runs, not the step-level tables the fit prices: only its front end (the "
                  "time a request spends outside the engine's steps) and, on NVIDIA GPUs it was timed on, its MoE "
                  "layers (NVIDIA's timings of its kernels) are SGLang's own; its other rates and per-step costs are "
                  "the typical fit's")
# Stored by `calibration.fit_profile(name)` and `holdout.profile_spread(name, platform, experts=...)`;
# tests/math/test_calibration.py and test_holdout.py re-run both and check these are their results.
PROFILES = {
    "typical": Profile("typical", "every engine of the calibration rows (the broadest fit): TensorRT-LLM and a little "
                       "vLLM on NVIDIA GPUs, vLLM on AMD GPUs, JetStream, vLLM and Pope et al.'s engine on TPUs",
                       TYPICAL,
                       ("gpu", "amd", "tpu"), "every calibration row of every engine", (("tpu", _TPU_CAVEAT),),
                       (("gpu", 0.86, 1.2), ("amd", 0.72, 1.09), ("tpu", 0.77, 1.54)),
                       (("gpu", 0.62, 1.44), ("amd", 0.48, 0.55), ("tpu", 0.91, 1.54))),
    "tensorrt-llm": Profile("tensorrt-llm", "TensorRT-LLM, releases 0.5 to 1.0 (TRT engines and the PyTorch backend)",
                            Calibrated(gpu=_TRT_GPU, tpu=_TPU), ("gpu",),
                            "TensorRT-LLM's published tables on H100 and H200 (v0.5, v0.6.1, v0.14, v1.0)", (),
                            (("gpu", 0.87, 1.2),), (("gpu", 0.62, 1.44),)),
    "vllm": Profile("vllm", "vLLM (2024-2025): on ROCm for AMD GPUs, on CUDA for NVIDIA GPUs, on TPU v6e",
                    Calibrated(gpu=_VLLM_GPU, tpu=_VLLM_TPU, amd=replace(_AMD, request_s=0.05)), ("gpu", "amd", "tpu"),
                    "AMD's and Oracle's vLLM runs on 8 MI300X; on NVIDIA GPUs only vLLM's CI latency runs at batch 8 "
                    "(three on A100 set its per-step costs, three on H200 are held out; its rates are the typical "
                    "fit's); on TPU Google's vLLM recipe for Llama-3.3-70B on v6e-8 (three rows set its per-step "
                    "costs, one is held out; its rates are the typical fit's)",
                    (("gpu", "vLLM's NVIDIA half rests on three small-batch runs (A100): only its per-step costs are "
                             "vLLM's"), ("tpu", _VLLM_TPU_CAVEAT)),
                    (("amd", 0.72, 1.09), ("tpu", 0.58, 1.29)),
                    (("amd", 0.48, 0.55), ("tpu", 0.76, 1.29))),
    "jetstream": Profile("jetstream", "JetStream (MaxText and PyTorch) and Pope et al.'s PaLM engine on TPUs",
                         Calibrated(gpu=_GPU, tpu=_JETSTREAM_TPU), ("tpu",),
                         "Pope et al.'s TPU v4 tables, JetStream on TPU v5e and JetStream + MaxText on TPU v6e",
                         (("tpu", _TPU_CAVEAT),), (("tpu", 0.88, 1.43),)),
    "mi300x": Profile("mi300x", "AMD MI300X-class GPUs under vLLM on ROCm (2024-2025)", TYPICAL, ("amd",),
                      "AMD's published vLLM tables for 8 MI300X and Oracle's Llama 3.1 405B runs", (),
                      (("amd", 0.72, 1.09),), (("amd", 0.48, 0.55),)),
    "sglang": Profile("sglang", "SGLang (0.5, 2025)", Calibrated(replace(_GPU, request_s=0.018, moe_kernels="SGLang"),
                                                                 replace(_TPU, request_s=0.018),
                                                                 amd=replace(_AMD, request_s=0.018)),
                      ("gpu", "amd"),
                      "no step-level runs (SGLang publishes serving runs under a load): the typical fit's rates and "
                      "per-step costs, but its MoE layers on B200, H100 and H200 in bf16 or fp8 priced by NVIDIA's "
                      "timings of SGLang 0.5.9's layer (kernels.moe_layer_model); its own front end, fitted on its "
                      "published runs at one to four clients of models whose steps it prices (SGLang's cookbook: "
                      "LLaMA-3.1-70B on 8 A100, gpt-oss-120b on 8 B200; GPUStack's Qwen3-8B on one H100)",
                      tuple((platform, _SGLANG_CAVEAT) for platform in ("gpu", "amd")), ()),
}


def resolve_efficiency(efficiency):
    """None -> BOUND, "bound" -> BOUND, "typical" -> TYPICAL, the name of a profile (`PROFILES`) -> that `Profile`;
    an Efficiency, Calibrated or Profile passes through."""
    if efficiency is None or (isinstance(efficiency, str) and efficiency == "bound"):
        return BOUND
    if isinstance(efficiency, str) and efficiency == "typical":
        return TYPICAL
    if isinstance(efficiency, str) and efficiency in PROFILES:
        return PROFILES[efficiency]
    if isinstance(efficiency, (Efficiency, Calibrated, Profile)):
        return efficiency
    raise ValueError(f"efficiency must be None (the bound), 'typical', an engine profile ({', '.join(PROFILES)}) or "
                     f"an Efficiency(mfu, hbm, network, latency, overhead_s), got {efficiency!r}")
