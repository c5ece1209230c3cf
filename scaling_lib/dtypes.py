"""Number formats: how many bytes one element of each dtype takes.

Dtypes are plain strings everywhere in the book ("bf16", "fp8", "int8", "int4", "fp32", "nvfp4", "mxfp4"), so that a
reader can type them in an exercise without importing anything.

The two 4-bit floating-point formats store each value as a 4-bit E2M1 number plus a shared scale per block:

    nvfp4 (NVIDIA):              one 8-bit (FP8 E4M3) scale per 16 values:   4 + 8 / 16 = 4.5 bits per value
    mxfp4 (OCP Microscaling):    one 8-bit (E8M0) scale per 32 values:       4 + 8 / 32 = 4.25 bits per value

Sources: modal.com/llm-almanac/block-quants (NVFP4: 16-element blocks with an FP8 E4M3 scale, and one FP32 scale
per tensor, negligible per element) and zeroentropy.dev/concepts/mxfp4 (OCP MXFP4: 32-element blocks sharing one
E8M0 scale, E2M1 elements, 4.25 bits per element). A chip computes in them only if its hardware table lists them
(`hardware.Chip.peak_flops`): Blackwell (B200, GB200) does; earlier GPUs and the TPUs here do not.
"""

E2M1_BITS = 4  # one FP4 (E2M1) value
FP4_SCALE_BITS = 8  # one block scale: FP8 E4M3 (nvfp4) or E8M0 (mxfp4)
BLOCK_VALUES = {"nvfp4": 16, "mxfp4": 32}  # values sharing one scale

BYTES_PER_ELEMENT = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    **{name: (E2M1_BITS + FP4_SCALE_BITS / block) / 8 for name, block in BLOCK_VALUES.items()},
}
FP4_DTYPES = tuple(BLOCK_VALUES)


def bytes_per_element(dtype: str) -> float:
    """Bytes taken by one element of `dtype` (int4 packs two elements per byte, so 0.5; nvfp4 4.5 bits, mxfp4
    4.25 bits, scales included)."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except (KeyError, TypeError):
        known = ", ".join(repr(name) for name in BYTES_PER_ELEMENT)
        raise ValueError(f"unknown dtype {dtype!r}; use one of {known}") from None


# The groups a checkpoint's weights fall into, as `memory.weight_groups` counts them and a `quantization_config`
# names them (`modules_to_not_convert`, `ignore`): attention (with MLA's projections and DeepSeek-V3.2's indexer), the
# recurrent mixers of a hybrid (`mixers`), the routed experts, the other feed-forward weights (dense layers and
# shared experts), the routers, the input embedding table and the output projection.
WEIGHT_GROUPS = ("attention", "state", "experts", "feed_forward", "router", "embeddings", "head")


class MixedWeights(str):
    """The weight format of a mixed-precision checkpoint (a `quantization_config` that leaves some modules in bf16,
    or stores block scales beside each weight): a dtype string, the format of its quantized weights (what
    `bytes_per_element` and a chip's matmul rates read, and what a report prints), which also knows the bytes per
    weight of every group in `WEIGHT_GROUPS`, scales included.

    gpt-oss-120b: MixedWeights("mxfp4", experts=0.53125, attention=2, router=2, embeddings=2, head=2, ...): its
    experts in MXFP4 (4.25 bits), the rest in bf16. It compares equal to its format's name ("mxfp4"), so every table
    keyed by format finds it; `memory.param_bytes` and `memory.weight_groups` read the groups."""

    def __new__(cls, dtype: str, method: str = "", **bytes_per_weight):
        if dtype not in BYTES_PER_ELEMENT:
            bytes_per_element(dtype)  # the standard message for an unknown dtype
        unknown = sorted(set(bytes_per_weight) - set(WEIGHT_GROUPS))
        if unknown:
            raise ValueError(f"MixedWeights: unknown weight group(s) {', '.join(unknown)}; the groups are "
                             f"{', '.join(WEIGHT_GROUPS)}")
        for group, value in bytes_per_weight.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 8:
                raise ValueError(f"MixedWeights: bytes per weight of {group} must be a number in (0, 8], got "
                                 f"{value!r}")
        made = super().__new__(cls, dtype)
        made.method = method
        made.bytes_per_weight = {g: float(bytes_per_weight.get(g, BYTES_PER_ELEMENT[dtype])) for g in WEIGHT_GROUPS}
        return made

    def group_bytes(self, group: str) -> float:
        """Bytes per weight of one group, scales included."""
        return self.bytes_per_weight[group]

    def __repr__(self) -> str:
        kept = ", ".join(f"{g}={b:g}" for g, b in self.bytes_per_weight.items())
        return f"MixedWeights({str(self)!r}, {kept})"

    def __reduce__(self):  # pickles (multiprocessing) with its groups
        return (_mixed_weights, (str(self), self.method, self.bytes_per_weight))


def _mixed_weights(dtype: str, method: str, bytes_per_weight: dict) -> MixedWeights:
    return MixedWeights(dtype, method, **bytes_per_weight)
