"""Serving in closed form: prefill latency, how many prefill servers feed a decode server, and KV transfer.

Prefill is compute-bound, decode is bandwidth-bound (Scaling Book ch. 7), so a serving system sizes and places the
two phases separately. The functions here price each piece with `inference` and `memory`; `scaling_lib.simulator`
puts them together in a discrete-event simulation of whole engines (the simulator imports this module, never the
reverse).
"""

import math
from dataclasses import dataclass

from ._validate import fraction, positive, positive_int
from .collectives import transfer_bandwidth
from .hardware import get_chip
from .inference import decode_step_time, prefill_time
from .memory import kv_cache_bytes, param_bytes
from .models import active_param_count, get_model

# ---------------------------------------------------------------------------------------------------------------
# Closed forms: prefill latency, the server ratio, KV transfer
# ---------------------------------------------------------------------------------------------------------------

def prefill_latency(model, chip, n_chips: int, prompt_len: int, mfu: float = 0.4, batch: int = 1,
                    weight_dtype: str = "bf16", compute_dtype: str = "bf16") -> float:
    """max(2 P B T / (n C MFU), P_bytes / (n W)): `inference.prefill_time`, floored by one read of the weights.

    The default MFU of 40% is the Scaling Book's assumption in ch. 8 (LLaMA-3-70B, 8,192 tokens, 16 v5e: 0.91 s).
    The floor only matters for prompts of a few tokens, where prefill is a decode step in disguise.

    Defined in chapter 9, *Serving engines*.
    """
    chip = get_chip(chip)
    compute = prefill_time(model, chip, n_chips, prompt_len, mfu, batch, compute_dtype)  # validates the arguments
    return max(compute, param_bytes(model, weight_dtype) / (n_chips * chip.hbm_bandwidth))


def prefill_to_decode_ratio(prefill_s: float, decode_step_s: float, decode_batch: int, decode_steps: int) -> float:
    """R_p / R_d = T_prefill x B / (T_step x n_steps): prefill servers needed per decode server.

    R_p prefill servers (batch-1 prefill) finish R_p / T_prefill requests per second; R_d decode servers running
    batch B for n_steps steps per request finish R_d B / (T_step n_steps). Equal rates give the ratio (Scaling Book
    ch. 8: 0.91 s, 19 ms, B = 32, 512 steps -> R_p ~ 3 R_d; the source writes P and G).

    Defined in chapter 9, *Serving engines*.
    """
    positive("prefill_s", prefill_s)
    positive("decode_step_s", decode_step_s)
    positive_int("decode_batch", decode_batch)
    positive_int("decode_steps", decode_steps)
    return prefill_s * decode_batch / (decode_step_s * decode_steps)


@dataclass(frozen=True)
class ServerRatio:
    """Request rates of one prefill and one decode server, and the prefill servers needed per decode server."""

    prefill_s: float  # one batch-1 prefill
    decode_step_s: float  # one decode step at the mean context of a generation
    prefill_requests_per_s: float  # one prefill server
    decode_requests_per_s: float  # one decode server

    @property
    def prefill_per_decode(self) -> float:
        return self.decode_requests_per_s / self.prefill_requests_per_s


def server_ratio(model, chip, prompt_len: int, output_len: int, decode_batch: int, n_prefill_chips: int,
                 n_decode_chips: int, mfu: float = 0.4, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                 compute_dtype: str = "bf16", *, check_capacity: bool = True) -> ServerRatio:
    """`prefill_to_decode_ratio` from the model: T_prefill from `prefill_latency`, T_step from `decode_step_time`.

    The step is taken at the mean context of a generation, prompt_len + output_len / 2: the bound is linear in
    context, so that mean step times output_len equals the sum over the generation. Raises ValueError when the
    decode batch does not fit in the decode server's HBM at that context (`check_capacity=False` prices it as if it
    fitted: used to show what would not fit).

    Defined in chapter 9, *Serving engines*.
    """
    positive_int("output_len", output_len)
    positive_int("decode_batch", decode_batch)
    positive_int("n_prefill_chips", n_prefill_chips)
    positive_int("n_decode_chips", n_decode_chips)
    t_prefill = prefill_latency(model, chip, n_prefill_chips, prompt_len, mfu, 1, weight_dtype, compute_dtype)
    t_step = decode_step_time(model, chip, n_decode_chips, decode_batch, prompt_len + output_len / 2,
                              weight_dtype, kv_dtype, compute_dtype, check_capacity=check_capacity).total_s
    return ServerRatio(prefill_s=t_prefill, decode_step_s=t_step, prefill_requests_per_s=1.0 / t_prefill,
                       decode_requests_per_s=decode_batch / (t_step * output_len))


def kv_transfer_bytes(model, prompt_len: int, kv_dtype: str = "bf16") -> float:
    """The KV cache a prefill server hands to a decode server: `memory.kv_cache_bytes` of the prompt.

    Defined in chapter 9, *Serving engines*.
    """
    positive("prompt_len", prompt_len)
    return kv_cache_bytes(model, prompt_len, 1, kv_dtype)


def default_transfer_bandwidth(chip, n_chips: int, network: str = "dcn") -> float:
    """Bandwidth of the KV-cache hand-off from a prefill server of n chips to a decode server, B/s.

    Separate serving slices (or GPU nodes) are joined by the data-centre network, not by ICI or NVLink: "dcn" (the
    default) is n x the per-chip DCN bandwidth of a TPU (25 Gb/s on v5e, 100 Gb/s on Ironwood, Google Cloud's TPU
    pages) or n x the scale-out NIC of a GPU (400 Gb/s InfiniBand). "ici" applies only when prefill and decode chips
    sit in one slice (or one NVLink node): n x one ICI link one way, or n x the NVLink injection bandwidth
    (`collectives.transfer_bandwidth`).
    """
    return transfer_bandwidth(chip, n_chips, network)


def kv_transfer_time(model, prompt_len: int, chip, n_chips: int, bandwidth: float | None = None,
                     kv_dtype: str = "bf16", network: str = "dcn") -> float:
    """KV bytes / bandwidth (B/s); bandwidth defaults to `default_transfer_bandwidth(chip, n_chips, network)`.

    Defined in chapter 9, *Serving engines*.
    """
    default = default_transfer_bandwidth(chip, n_chips, network)  # validates chip, n_chips, network
    bandwidth = default if bandwidth is None else positive("bandwidth", bandwidth)
    return kv_transfer_bytes(model, prompt_len, kv_dtype) / bandwidth


def prefill_saturating_tokens(model, chip, mfu: float = 0.4, weight_dtype: str = "bf16",
                              compute_dtype: str = "bf16") -> float:
    """T_sat = MFU x C / W x P_bytes / (2 P): the prompt tokens at which `prefill_latency`'s FLOP time
    (2 P B T / (n C MFU)) reaches its weight-read floor (P_bytes / (n W)); the chip count cancels.

    `prefill_latency` discounts the FLOPs by the MFU and reads the weights at full bandwidth, so T_sat here is MFU
    times the Scaling Book's rule of thumb (ch. 7: about 240 tokens on v5e in bf16, peak rate and peak bandwidth);
    `mfu=1.0` gives that rule. About 96 tokens for LLaMA-3-70B in bf16 on TPU v5e at 40% MFU.

    Defined in chapter 14, *Serving details*.
    """
    m, c = get_model(model), get_chip(chip)
    mfu = fraction("mfu", mfu, "the fraction of peak FLOP/s achieved")
    return (mfu * c.peak_flops(compute_dtype) / c.hbm_bandwidth * param_bytes(m, weight_dtype)
            / (2.0 * active_param_count(m)))


def prefill_free_batch(model, chip, prompt_len: int, mfu: float = 0.4, weight_dtype: str = "bf16",
                       compute_dtype: str = "bf16") -> int:
    """The most prompts of `prompt_len` tokens whose joint prefill is still bound by the weight read, so each extra
    prompt rides along at no cost in latency: floor(T_sat / T) (`prefill_saturating_tokens`). One more prompt makes
    the prefill compute-bound (`prefill_saturating_batch` is the first such batch when T does not divide T_sat). 0
    when a prompt is longer than T_sat: even one prompt's prefill is compute-bound, and none rides free.

    Defined in chapter 14, *Serving details*.
    """
    prompt_len = positive_int("prompt_len", prompt_len)
    return math.floor(prefill_saturating_tokens(model, chip, mfu, weight_dtype, compute_dtype) / prompt_len)


def prefill_saturating_batch(model, chip, prompt_len: int, mfu: float = 0.4, weight_dtype: str = "bf16",
                             compute_dtype: str = "bf16") -> int:
    """The fewest prompts of `prompt_len` tokens whose joint prefill is compute-bound: ceil(T_sat / T)
    (`prefill_saturating_tokens`). At that batch the FLOP time has already reached (or passed) the weight read; the
    largest batch that still rides on the weight read is `prefill_free_batch`.

    Above it, more prompts only add latency (the time grows with B T, tokens per second do not), so an engine
    prefills at batch 1 unless prompts are shorter than T_sat (Scaling Book ch. 7, "interleaved").

    Defined in chapter 14, *Serving details*.
    """
    prompt_len = positive_int("prompt_len", prompt_len)
    saturating_tokens = prefill_saturating_tokens(model, chip, mfu, weight_dtype, compute_dtype)
    return max(1, math.ceil(saturating_tokens / prompt_len))
