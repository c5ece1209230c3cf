"""Qwix on the tiny model: the same decoder as Flax NNX modules, quantized by Qwix rules chosen by regex.

Qwix (Google's JAX quantization library, `qwix==0.1.8`) quantizes by interception: while a Flax model runs under
`qwix.quantize_model`, every `jax.lax.dot_general`, `jnp.einsum`, `conv_general_dilated` and `ragged_dot` call is
routed to Qwix, which looks up the first `qwix.QuantizationRule` whose `module_path` regex matches the Flax module
the call runs in and, if the rule sets a `weight_qtype`, replaces the op with a quantized one:

    weight_qtype only         weight-only: the weight is stored quantized (per output channel, absmax), the
                              activation stays float;
    weight_qtype + act_qtype  dynamic-range: the activation is also quantized at run time, per row (per token);
    act_static_scale=True     static-range: activation scales come from calibration statistics instead.

`scaling_lib.tiny.quantize` does the int8 cases by hand with `lax.dot_general`; this module builds the tiny model
(`tiny.model.Params`) as an NNX module tree whose linear layers sit at paths `layers/<i>/<name>` (wq, wk, wv, wo,
w_gate, w_up, w_down), so a rule's regex selects them, and lets Qwix do the rest. `TinyFlax.__call__` is the same
forward pass as `tiny.model.forward` (it calls the same `rms_norm`, `rope` and `attention`).

Interception stops at a Pallas kernel: Qwix wraps `pallas_call` so that nothing inside a kernel is rewritten; a
kernel quantizes with the `qwix.pallas` helpers (quantize outside, `qpl.pallas_call`, `qpl.dot_general` inside).

Used in chapter 13, *Quantizing with Qwix*.
"""

import contextlib
import logging
import re
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np
import qwix
import qwix.pallas as qpl
from absl import logging as absl_logging
from flax import nnx
from jax.experimental import pallas as pl

from ..quantization import absmax_scale, rounding_bound
from .model import Params, attention, rms_norm, rope
from .quantize import LINEAR_LAYERS, QuantizedWeight

LINEAR_SPECS = {"wq": "btd,dnh->btnh", "wk": "btd,dkh->btkh", "wv": "btd,dkh->btkh", "wo": "btnh,nhd->btd",
                "w_gate": "btd,df->btf", "w_up": "btd,df->btf", "w_down": "btf,fd->btd"}
LINEAR_PATHS = r"layers/\d+/(" + "|".join(LINEAR_SPECS) + ")"
SCHEMES = {
    "weight-only int8": {"weight_qtype": jnp.int8},
    "int8 x int8": {"weight_qtype": jnp.int8, "act_qtype": jnp.int8},
    "fp8 x fp8": {"weight_qtype": jnp.float8_e4m3fn, "act_qtype": jnp.float8_e4m3fn},
}
_LOG = re.compile(r"\[QWIX\] module='(?P<module>[^']*)' op=(?P<op>\w+) rule=(?P<rule>\w+)")


class Linear(nnx.Module):
    """One weight and the einsum that applies it: the op Qwix intercepts, at this module's path.

    Defined in chapter 13, *Quantizing with Qwix*.
    """

    def __init__(self, kernel, spec: str):
        self.kernel = nnx.Param(kernel)
        self.spec = spec

    def __call__(self, x):
        return jnp.einsum(self.spec, x, self.kernel[...])


class Layer(nnx.Module):
    """One decoder layer: pre-norm attention and gated MLP, as `tiny.model.qkv` / `finish`."""

    def __init__(self, weights: dict, window):
        self.attn_norm = nnx.Param(weights["attn_norm"])
        self.mlp_norm = nnx.Param(weights["mlp_norm"])
        for name, spec in LINEAR_SPECS.items():
            setattr(self, name, Linear(weights[name], spec))
        self.window = window

    def __call__(self, x, positions):
        h = rms_norm(x, self.attn_norm[...])
        q, k, v = rope(self.wq(h), positions), rope(self.wk(h), positions), self.wv(h)
        x = x + self.wo(attention(q, k, v, positions, positions, self.window))
        h = rms_norm(x, self.mlp_norm[...])
        return x + self.w_down(jax.nn.silu(self.w_gate(h)) * self.w_up(h))


class TinyFlax(nnx.Module):
    """`tiny.model` as NNX modules: embed, layers/<i>/{wq,...,w_down}, final_norm, unembed (a Linear unless tied).

    Defined in chapter 13, *Quantizing with Qwix*.
    """

    def __init__(self, params: Params):
        if not isinstance(params, Params) or not isinstance(params.wq, jax.Array):
            raise ValueError("TinyFlax takes float tiny.model.Params (from init_params), not quantized ones")
        c = params.config
        self.embed = nnx.Param(params.embed)
        self.layers = nnx.List([Layer(params.layer(i), c.sliding_window) for i in range(c.n_layers)])
        self.final_norm = nnx.Param(params.final_norm)
        self.unembed = Linear(params.embed.T if params.unembed is None else params.unembed, "btd,dv->btv")

    def __call__(self, tokens):
        """Logits [B, T, V] (float32) of a causal pass over tokens [B, T]: `tiny.model.forward`'s numbers."""
        B, T = tokens.shape
        positions = jnp.broadcast_to(jnp.arange(T), (B, T))
        x = self.embed[...][tokens]
        for layer in self.layers:
            x = layer(x, positions)
        return self.unembed(rms_norm(x, self.final_norm[...])).astype(jnp.float32)


def rule_set(scheme, module_path=LINEAR_PATHS):
    """One Qwix rule: quantize as SCHEMES[scheme] says every op that runs in a module
    whose path the regex `module_path` matches (the whole path).

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    return [qwix.QuantizationRule(module_path=module_path, **SCHEMES[scheme])]


def rules(scheme: str, module_path: str = LINEAR_PATHS) -> list:
    """[QuantizationRule(module_path, **SCHEMES[scheme])]: one rule for the modules the regex matches (`rule_set`,
    its arguments checked).

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; use one of {', '.join(map(repr, SCHEMES))}")
    try:
        re.compile(module_path)
    except re.error as error:
        raise ValueError(f"module_path {module_path!r} is not a valid regex: {error}") from None
    return rule_set(scheme, module_path)


@dataclass(frozen=True)
class InterceptedOp:
    """One op Qwix saw while quantizing: the module path it ran in, its name (einsum0, ...), the rule that matched
    (an index into the rules, or None: the op ran unchanged)."""

    module_path: str
    op: str
    rule: int | None


@dataclass(frozen=True)
class QwixResult:
    """A quantized model, what Qwix intercepted, and which weights it now stores quantized.

    Defined in chapter 13, *Quantizing with Qwix*.
    """

    model: TinyFlax
    intercepted: tuple
    quantized_weights: dict  # module path -> (qvalue dtype, scale shape)
    unused_rules: tuple

    @property
    def weight_bytes(self) -> int:
        """Bytes of every weight of the linear layers (qvalue + scale where quantized), as the model stores them."""
        return linear_weight_bytes(self.model)


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.ops = []

    def emit(self, record):
        match = _LOG.search(record.getMessage())
        if match:
            rule = match["rule"]
            self.ops.append(InterceptedOp(match["module"], match["op"], None if rule == "None" else int(rule)))


@contextlib.contextmanager
def qwix_log():
    """While the block runs, Qwix's debug log (one line per op it intercepts, with the rule it chose) is read into
    the yielded list of `InterceptedOp`s and kept out of stderr.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    capture, logger = _Capture(), logging.getLogger("absl")
    verbosity = absl_logging.get_verbosity()
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(capture)
    absl_logging.set_verbosity(absl_logging.DEBUG)
    try:
        yield capture.ops
    finally:
        absl_logging.set_verbosity(verbosity)
        logger.removeHandler(capture)
        logger.propagate = propagate


def quantize(params: Params, quantization_rules, example_tokens) -> QwixResult:
    """Qwix post-training quantization of the tiny model: `qwix.quantize_model(TinyFlax(params),
    qwix.PtqProvider(rules), example_tokens)`, recording the ops Qwix intercepted (its debug log).

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    return quantize_module(TinyFlax(params), quantization_rules, jnp.asarray(example_tokens, jnp.int32))


def ptq(module, quantization_rules, *example_inputs) -> QwixResult:
    """Qwix post-training quantization: run the module once on example inputs under
    `qwix.quantize_model`; each op whose module path a rule matches becomes its
    quantized form, and the weight it multiplies is stored quantized.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    provider = qwix.PtqProvider(quantization_rules)
    with qwix_log() as intercepted:  # each op Qwix saw, and the rule it chose
        model = qwix.quantize_model(module, provider, *example_inputs)
    unused = tuple(provider.get_unused_rules())  # rules that matched no op
    return QwixResult(model, tuple(intercepted), quantized_weights(model), unused)


def quantize_module(module, quantization_rules, *example_inputs) -> QwixResult:
    """`quantize` for any NNX module whose weights sit in `kernel` params (Linear, PallasLinear, ...): the rules
    checked, then `ptq`.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    quantization_rules = list(quantization_rules)
    if not quantization_rules or not all(isinstance(r, qwix.QuantizationRule) for r in quantization_rules):
        raise ValueError("quantization_rules must be a non-empty list of qwix.QuantizationRule (see `rules`)")
    return ptq(module, quantization_rules, *example_inputs)


def _qarrays(model):
    """{module path: (qvalue, scale)} for every Linear whose kernel Qwix stores quantized."""
    found = {}
    for path, kernel in _weights(model):
        leaves = jax.tree.leaves(kernel)
        if len(leaves) > 1:  # a WithAux(QArray): the quantized values and their float32 scales
            qvalue, scale = sorted(leaves, key=lambda leaf: leaf.dtype == jnp.float32)
            found[path] = (qvalue, scale)
    return found


def _weights(model):
    """(module path, the kernel's stored value) for every module of the model that holds a weight `kernel`."""
    for path, module in nnx.iter_modules(model):
        if hasattr(module, "kernel"):
            yield "/".join(map(str, path)), module.kernel


def quantized_weights(model) -> dict:
    """{module path: (stored dtype, scale shape)} for every Linear whose kernel Qwix replaced by a quantized one.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    return {path: (str(qvalue.dtype), tuple(scale.shape)) for path, (qvalue, scale) in _qarrays(model).items()}


def as_hand_written(result: QwixResult, params: Params, mode: str = "weight-only") -> Params:
    """`params` with every linear layer replaced by a `tiny.quantize.QuantizedWeight` holding Qwix's own int8
    values and scales: `tiny.model` then runs the hand-written matmul on exactly what Qwix stored.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    stored = _qarrays(result.model)
    n_layers = params.config.n_layers
    changes = {}
    for name, (n_in, n_out) in LINEAR_LAYERS.items():
        paths = [f"layers/{i}/{name}" for i in range(n_layers)]
        if not all(path in stored for path in paths) or stored[paths[0]][0].dtype != jnp.int8:
            raise ValueError(f"Qwix did not store {name} as int8 in every layer; quantize all seven linear layers "
                             "with an int8 weight_qtype (scheme 'weight-only int8' or 'int8 x int8') first")
        values = jnp.stack([stored[path][0] for path in paths])
        scale = jnp.stack([stored[path][1] for path in paths]).astype(jnp.float32)
        changes[name] = QuantizedWeight(values, scale, n_in, n_out, mode)
    return replace(params, **changes)


def linear_weight_bytes(model) -> int:
    """Bytes the seven linear layers of every layer occupy (qvalue + scale when quantized): the decode step's
    weight stream, comparable with `tiny.quantize.linear_weight_bytes` (the unembedding is not counted)."""
    return sum(int(leaf.nbytes) for path, kernel in _weights(model) if path.startswith("layers/")
               for leaf in jax.tree.leaves(kernel))


@nnx.jit
def logits(model, tokens):
    """`model(tokens)` compiled: the quantized ops Qwix substituted are traced into one XLA program."""
    return model(tokens)


# --- one matmul through Qwix's functional API, and what any symmetric absmax scheme guarantees ---------------------

def matmul(x, w, scheme: str):
    """x [M, K] @ w [K, N] with Qwix's functional API: `qwix.quantize` (per output channel for w, per row for x
    when the scheme quantizes activations) and `qwix.dot_general`.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; use one of {', '.join(map(repr, SCHEMES))}")
    kinds = SCHEMES[scheme]
    qw = qwix.quantize(jnp.asarray(w), kinds["weight_qtype"], channelwise_axes=[1])
    lhs = jnp.asarray(x)
    if "act_qtype" in kinds:
        lhs = qwix.quantize(lhs, kinds["act_qtype"], channelwise_axes=[0])
    return qwix.dot_general(lhs, qw, (((1,), (0,)), ((), ())))


def _rounding_error(values, axis, qtype):
    """Elementwise bound on |v - dequantize(quantize(v))| for symmetric absmax with one scale per slice along
    `axis` (`quantization.absmax_scale`): half a step for int8; 2^-4 |v| + 2^-10 x scale for e4m3 (3 mantissa bits;
    below the smallest normal the spacing is 2^-9 of the scale). A slice of zeros has nothing to round."""
    v = np.abs(np.asarray(values, np.float64))
    amax = v.max(axis=axis, keepdims=True)
    if qtype == jnp.int8:
        return np.broadcast_to(np.vectorize(lambda a: rounding_bound(a, "int8") if a > 0 else 0.0)(amax), v.shape)
    return 2.0**-4 * v + 2.0**-10 * np.vectorize(lambda a: absmax_scale(a, "fp8") if a > 0 else 0.0)(amax)


def matmul_error_bound(x, w, scheme: str):
    """|x w - Q(x) Q(w)| <= |x| dW + dX |w| + dX dW elementwise (dX = 0 for weight-only), each d the rounding
    bound of `_rounding_error`, plus 1e-6 |x| |w| for float32 accumulation. A bound, not an estimate.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; use one of {', '.join(map(repr, SCHEMES))}")
    kinds = SCHEMES[scheme]
    x64, w64 = np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(w, np.float64))
    dw = _rounding_error(w, 0, kinds["weight_qtype"])
    dx = _rounding_error(x, 1, kinds["act_qtype"]) if "act_qtype" in kinds else np.zeros_like(x64)
    return x64 @ dw + dx @ w64 + dx @ dw + 1e-6 * (x64 @ w64)


# --- Pallas: interception stops at the kernel boundary; qwix.pallas quantizes inside one -------------------------------

def _matmul_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


def _quantized_matmul_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = qpl.dot_general(x_ref[...], w_ref[...], (((1,), (0,)), ((), ())))


def _whole_array_call(kernel, x, w, call):
    """A one-block pallas_call of x [M, K] @ w [K, N] (interpreted on CPU; a real kernel on TPU)."""
    m, n = x.shape[0], w.shape[1]
    return call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
                in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0)), pl.BlockSpec(w.shape, lambda i: (0, 0))],
                out_specs=pl.BlockSpec((m, n), lambda i: (0, 0)), grid=(1,),
                interpret=jax.default_backend() == "cpu")(x, w)


class PallasLinear(nnx.Module):
    """A Linear whose matmul runs inside a Pallas kernel: Qwix's rules cannot reach it (the op inside is not
    intercepted, and the weight stays float).

    Defined in chapter 13, *Quantizing with Qwix*.
    """

    def __init__(self, kernel):
        self.kernel = nnx.Param(kernel)

    def __call__(self, x):
        return _whole_array_call(_matmul_kernel, x, self.kernel[...], pl.pallas_call)


def pallas_quantized_matmul(x, w, weight_qtype=jnp.int8):
    """What a kernel author does instead (`qwix.pallas`): quantize the weight outside (`qpl.quantize`, per output
    channel), pass the QArray through `qpl.pallas_call`, multiply with `qpl.dot_general` inside the kernel.
    Blocks must meet the TPU tiling (multiples of 8 x 128) even when interpreted.

    Defined in chapter 13, *Quantizing with Qwix*.
    """
    qw = qpl.quantize(jnp.asarray(w), weight_qtype, channelwise_axes=[1])
    return _whole_array_call(_quantized_matmul_kernel, jnp.asarray(x), qw, qpl.pallas_call)
