"""formats: the matmul format weights imply, a model's own precision, which formats plan tries where, and the caveat
every format below 8 bits carries. The expected values are the hardware table's rates and the published
checkpoints, written out here."""

import re


from scaling_lib.formats import matmul_dtype, own_weight_dtype, quality_caveat, searchable

from tests import for_each

# (chip, weights, the matmul format): fp8 and int8 run in their own format where the chip has a native rate, fp4
# formats only on Blackwell; anything else is upcast to bf16 (int4 weights: W4A16)
MATMULS = [("h100", "fp8", "fp8"), ("h100", "int8", "int8"), ("h100", "int4", "bf16"), ("h100", "bf16", "bf16"),
           ("h100", "nvfp4", "bf16"), ("b200", "nvfp4", "nvfp4"), ("b200", "mxfp4", "mxfp4"),
           ("tpu-v5e", "fp8", "bf16"), ("tpu-v5e", "int8", "int8")]


@for_each(MATMULS, ids=str)
def test_the_matmuls_run_in_the_weights_format_where_the_chip_computes_it(chip, weights, matmuls):
    assert matmul_dtype(chip, weights) == matmuls
    # fp4 weights are searched only where they are computed natively; every other format everywhere
    assert searchable(chip, weights) == (weights not in ("nvfp4", "mxfp4") or matmuls == weights)


def test_a_model_is_searched_in_the_precision_its_authors_published():
    assert own_weight_dtype("deepseek-v3") == "fp8"  # DeepSeek released its V3 weights in fp8
    assert own_weight_dtype("llama3-70b") == "bf16"
    assert own_weight_dtype("llama3-70b", "mxfp4") == "mxfp4"  # a config.json's quantization_config wins


@for_each([("int4", "4"), ("nvfp4", "4.5"), ("mxfp4", "4.25"), ("bf16", None),
                                         ("fp8", None), ("int8", None)], ids=str)
def test_every_format_below_8_bits_carries_a_one_line_quality_caveat(dtype, bits):
    caveat = quality_caveat(dtype)
    if bits is None:
        assert caveat is None
    else:
        assert "\n" not in caveat and re.match(rf"{dtype} weights \({re.escape(bits)} bits each\): quality", caveat)
