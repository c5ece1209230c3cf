"""Quantized numbers for the tiny JAX model: int8 / fp8 KV entries, int8 weights and int8 x int8 matmuls.

(What quantization saves on a real server -- bytes, batch, step time, B_crit -- is `scaling_lib.quantization`;
this module is the JAX side that shows the same ideas running.)

Symmetric absmax quantization with a scale per slice:
    scale = max|x| / q_max   over the quantized axes,    q = round(x / scale)  (int8, q_max = 127)
                                                         q = fp8(x / scale)    (float8_e4m3fn, q_max = 448)
    x ~ q x scale.
Rounding to int8 errs by at most scale / 2 per element; e4m3 keeps 3 mantissa bits, a relative error of at most
2^-4 per element. KV entries get one scale per (token, head), so a large key in one head does not coarsen the
others; weights get one scale per output channel (the contracted axes share it), the usual choices
({cite}`tpuinference` for fp8 / int8 on TPU).

Weights (`quantize_params`): every linear layer (wq, wk, wv, wo, w_gate, w_up, w_down) becomes a `QuantizedWeight`;
the embedding and the norms stay in float. Two ways to multiply by it (`QuantizedWeight.apply`):
  "weight-only"  convert the int8 values to the activation dtype, matmul, multiply by the per-channel scale:
                 half the weight bytes of bf16, the same math;
  "int8"         also quantize the activations per row, multiply int8 x int8 with int32 accumulation
                 (lax.dot_general(..., preferred_element_type=int32)), rescale by both scales.
"""

from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.tree_util import register_dataclass

# Storage dtype of each KV / weight format the tiny model supports.
STORAGE_DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "int8": jnp.int8, "fp8": jnp.float8_e4m3fn}
QUANTIZED = ("int8", "fp8")  # formats that need a scale next to the values
Q_MAX = {"int8": 127.0, "fp8": float(jnp.finfo(jnp.float8_e4m3fn).max)}  # largest representable magnitude
WEIGHT_MODES = ("weight-only", "int8")

# The linear layers of `model.Params`: name -> (contracted axes, output axes), not counting the stacked layer axis.
LINEAR_LAYERS = {"wq": (1, 2), "wk": (1, 2), "wv": (1, 2), "wo": (2, 1), "w_gate": (1, 1), "w_up": (1, 1),
                 "w_down": (1, 1)}


def check_format(kv_dtype):
    """`kv_dtype` if it names a storage format of STORAGE_DTYPES, else a ValueError listing them."""
    if kv_dtype not in STORAGE_DTYPES:
        raise ValueError(f"unknown KV/weight format {kv_dtype!r}; use one of {', '.join(map(repr, STORAGE_DTYPES))}")


def quantize(x, dtype: str, axis):
    """Symmetric absmax quantization of x over `axis` (an int or tuple): returns (values, scale float32, keepdims).

    scale = max|x| / q_max over `axis` (1 where a slice is all zero); values = round(x / scale) in int8, or
    x / scale cast to float8_e4m3fn. inf and NaN are refused (ValueError), not quantized: one inf would make its
    slice's scale inf and store every other value of the slice as 0. The check runs on concrete arrays; under `jit`
    the values cannot be inspected.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    if dtype not in QUANTIZED:
        raise ValueError(f"quantize takes 'int8' or 'fp8', got {dtype!r}; float formats need no scale")
    x32 = jnp.asarray(x).astype(jnp.float32)
    if not isinstance(x32, jax.core.Tracer):
        _check_finite("quantize: x", np.asarray(x32))
    amax = jnp.max(jnp.abs(x32), axis=axis, keepdims=True)
    scale = jnp.where(amax > 0, amax / Q_MAX[dtype], 1.0)
    scaled = x32 / scale
    if dtype == "int8":
        return jnp.clip(jnp.round(scaled), -127, 127).astype(jnp.int8), scale
    return scaled.astype(jnp.float8_e4m3fn), scale


def _check_finite(what, array):
    """inf or NaN cannot be quantized: one inf makes its slice's scale inf, so every other value of the slice
    rounds to 0 (or NaN), and a NaN is stored as 0. Refuse instead (a value the host can see; under `jit` the
    values are tracers and cannot be looked at, so there the caller is responsible)."""
    bad = np.size(array) - np.count_nonzero(np.isfinite(array))
    if bad:
        raise ValueError(f"{what} has {bad} non-finite value{'s' if bad != 1 else ''} (inf or NaN); quantization "
                         "would turn its whole slice into zeros or NaN: find where it comes from, or clip it first")


def dequantize(values, scale, dtype=jnp.float32):
    """values x scale, in `dtype` (the inverse of `quantize`, up to its rounding error).

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    return (values.astype(jnp.float32) * scale).astype(dtype)


@register_dataclass
@dataclass(frozen=True)
class QuantizedWeight:
    """An int8 weight with one float32 scale per output channel.

    values [..., in..., out...] int8 (leading axes, e.g. the stacked layer axis, are carried along);
    scale has the same rank with size 1 on the n_in contracted axes. w ~ values x scale.
    `w[i]` slices the leading axis of both, so `model.Params.layer(i)` works unchanged.
    """
    values: jax.Array
    scale: jax.Array
    n_in: int = field(metadata=dict(static=True))  # contracted axes (just before the output axes)
    n_out: int = field(metadata=dict(static=True))  # output axes (trailing)
    mode: str = field(metadata=dict(static=True))  # "weight-only" or "int8"

    def __getitem__(self, index):
        return QuantizedWeight(self.values[index], self.scale[index], self.n_in, self.n_out, self.mode)

    @property
    def nbytes(self) -> int:
        """Bytes of the int8 values plus the float32 scales."""
        return int(self.values.nbytes + self.scale.nbytes)

    def dequantize(self, dtype=jnp.float32):
        return dequantize(self.values, self.scale, dtype)

    def apply(self, x):
        """x [..., in...] times this weight -> [..., out...], in x's dtype (see the module docstring for modes)."""
        if self.values.ndim != self.n_in + self.n_out:
            raise ValueError(f"apply needs one layer's weight (rank {self.n_in + self.n_out}), got rank "
                             f"{self.values.ndim}; slice the layer axis first (params.layer(i))")
        out_shape = self.values.shape[self.n_in:]
        w_scale = self.scale.reshape(out_shape)  # per output channel
        dims = ((tuple(range(x.ndim - self.n_in, x.ndim)), tuple(range(self.n_in))), ((), ()))
        if self.mode == "weight-only":
            y = lax.dot_general(x, self.values.astype(x.dtype), dims)
            return (y * w_scale).astype(x.dtype)
        x_q, x_scale = quantize(x, "int8", tuple(range(x.ndim - self.n_in, x.ndim)))  # one scale per row
        acc = lax.dot_general(x_q, self.values, dims, preferred_element_type=jnp.int32)
        row_scale = x_scale.reshape(x.shape[:x.ndim - self.n_in] + (1,) * self.n_out)
        return (acc.astype(jnp.float32) * row_scale * w_scale).astype(x.dtype)


def quantize_weight(w, n_in: int, n_out: int, mode: str = "weight-only") -> QuantizedWeight:
    """int8 per-output-channel quantization of w [..., in (n_in axes), out (n_out axes)]."""
    if mode not in WEIGHT_MODES:
        raise ValueError(f"unknown weight mode {mode!r}; use one of {', '.join(map(repr, WEIGHT_MODES))}")
    if w.ndim < n_in + n_out:
        raise ValueError(f"a weight of shape {w.shape} has fewer than n_in + n_out = {n_in + n_out} axes")
    contracted = tuple(range(w.ndim - n_out - n_in, w.ndim - n_out))
    # On the host in NumPy: the same arithmetic as `quantize`, without compiling a kernel per weight shape.
    w32 = np.asarray(w, np.float32)
    _check_finite("quantize_weight: w", w32)
    amax = np.max(np.abs(w32), axis=contracted, keepdims=True)
    scale = np.where(amax > 0, amax / np.float32(Q_MAX["int8"]), np.float32(1.0)).astype(np.float32)
    values = np.clip(np.round(w32 / scale), -127, 127).astype(np.int8)
    return QuantizedWeight(jnp.asarray(values), jnp.asarray(scale), n_in, n_out, mode)


def quantize_params(params, mode: str = "weight-only"):
    """A copy of `model.Params` whose linear layers are int8 `QuantizedWeight`s (embeddings and norms stay float).

    Every function of `scaling_lib.tiny.model` and `scaling_lib.tiny.paged` accepts the result in place of the float params.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    if mode not in WEIGHT_MODES:
        raise ValueError(f"unknown weight mode {mode!r}; use one of {', '.join(map(repr, WEIGHT_MODES))}")
    changes = {}
    for name, (n_in, n_out) in LINEAR_LAYERS.items():
        w = getattr(params, name)
        if isinstance(w, QuantizedWeight):
            raise ValueError(f"params.{name} is already quantized; quantize the float params once")
        changes[name] = quantize_weight(w, n_in, n_out, mode)
    return replace(params, **changes)


def linear_weight_bytes(params) -> int:
    """Bytes of the linear layers' weights (values and any scales): what a decode step streams from HBM.

    Defined in chapter 6, *Shrinking the KV cache*.
    """
    total = 0
    for name in LINEAR_LAYERS:
        w = getattr(params, name)
        total += w.nbytes if isinstance(w, QuantizedWeight) else int(w.nbytes)
    return total
