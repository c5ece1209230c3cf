"""Which number formats a deployment runs in: the matmul format weights imply, a model's own precision, and what a
format below 8 bits costs in quality.

- **Matmuls.** Weights in fp8 or int8 run their matmuls in that format (8-bit activations, as vLLM's and
  TensorRT-LLM's fp8 and int8 W8A8 kernels do) when the chip has a native rate for it, and so do nvfp4 and mxfp4 on
  chips that compute them (Blackwell); any other format is upcast to bf16 for the matmul (int4 weights: W4A16).
  `estimate` and `plan` both follow this rule unless told otherwise (`compute_dtype`, `--compute`).
- **A model's own precision** is what its authors published: bf16, unless a checkpoint was released in a smaller
  format (DeepSeek-V3's fp8 weights) or a `config.json`'s quantization_config says so. `plan` searches only that
  unless the reader widens the search, and tries nvfp4 and mxfp4 only on chips that compute them.
- **Quality.** Fewer than 8 bits per weight loses accuracy in a way this library does not model; every format
  below 8 bits is printed with `quality_caveat`.

Used in the appendix *Apply the book to your model*.
"""

from .dtypes import FP4_DTYPES, bytes_per_element
from .hardware import get_chip
from .models import get_model

# Weight formats whose matmuls run natively in that format when the chip has a rate for it.
NATIVE_MATMUL = ("fp8", "int8", "nvfp4", "mxfp4")
# Every weight format `plan` can search when the reader widens it (`--weights all`).
ALL_WEIGHT_DTYPES = ("bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4")
# Checkpoints published in a format other than bf16, by the model name of `models.MODELS`: (format, source).
PUBLISHED_WEIGHTS = {
    "deepseek-v3": ("fp8", "huggingface.co/deepseek-ai/DeepSeek-V3, config.json quantization_config: quant_method "
                           "fp8, e4m3 weights in 128 x 128 blocks"),
}


def matmul_dtype(chip, weight_dtype: str) -> str:
    """The format the matmuls run in for weights in `weight_dtype` on `chip`: the weights' own when it is one of
    `NATIVE_MATMUL` and the chip has a native rate for it, else bf16 (module docstring)."""
    chip = get_chip(chip)
    bytes_per_element(weight_dtype)
    if weight_dtype in NATIVE_MATMUL and weight_dtype in chip.compute_dtypes:
        return weight_dtype
    return "bf16"


def own_weight_dtype(model, config_dtype: str | None = None) -> str:
    """The precision `model` was published in: `config_dtype` (a config.json's quantization_config, when given),
    else `PUBLISHED_WEIGHTS`, else bf16."""
    if config_dtype is not None:
        bytes_per_element(config_dtype)
        return config_dtype
    name = get_model(model).name
    return PUBLISHED_WEIGHTS[name][0] if name in PUBLISHED_WEIGHTS else "bf16"


def searchable(chip, weight_dtype: str) -> bool:
    """Whether `plan` tries weights in `weight_dtype` on `chip`: every format does, except nvfp4 and mxfp4 on a chip
    with no native rate for them."""
    bytes_per_element(weight_dtype)
    return weight_dtype not in FP4_DTYPES or weight_dtype in get_chip(chip).compute_dtypes


def quality_caveat(weight_dtype: str) -> str | None:
    """One line for a weight format below 8 bits (int4, nvfp4, mxfp4), None for 8 bits and more."""
    bits = bytes_per_element(weight_dtype) * 8
    if bits >= 8:
        return None
    return (f"{weight_dtype} weights ({bits:g} bits each): quality can drop below the published model's; this "
            "library prices speed, not accuracy, so check the model at this format before serving it")
