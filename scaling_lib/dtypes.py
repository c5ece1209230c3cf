"""Number formats: how many bytes one element of each dtype takes.

Dtypes are plain strings everywhere in the book ("bf16", "fp8", "int8", "int4", "fp32"), so that a reader can
type them in an exercise without importing anything.
"""

BYTES_PER_ELEMENT = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}


def bytes_per_element(dtype: str) -> float:
    """Bytes taken by one element of `dtype` (int4 packs two elements per byte, so 0.5)."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except (KeyError, TypeError):
        known = ", ".join(repr(name) for name in BYTES_PER_ELEMENT)
        raise ValueError(f"unknown dtype {dtype!r}; use one of {known}") from None
