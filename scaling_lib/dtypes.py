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
