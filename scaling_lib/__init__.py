"""scaling_lib: the library behind the executable textbook on transformer inference at scale.

Three layers, and imports flow one way (top-level <- tiny <- book):

- the top level is closed-form math in pure Python (it never imports JAX): inputs (`hardware`, `models`, `dtypes`,
  `units`, `measurements`, `kernels`), the core models (`roofline`, `flops`, `memory`, `inference`, `collectives`) and
  what is built on them (`sharding`, `hops`, `layouts`, `attention_sharding`, `context_limits`, `utilization`,
  `frontier`, `sequence_sharding`, `kv_levers`, `quantization`, `moe`, `speculative`, `serving`, `simulator`,
  `prefix_cache`, `efficiency`, `estimate`, `calibration`, `holdout`, `formats`, `load`, `plan`); reading a reader's own
  checkpoint: `hf_fields` (a config.json and its fields), `hf_families` (each family's shape), `hf_config` (the
  family by architecture, the text tower, the audit of fields, the formats), `mixers` (hybrids' fixed-size state, the
  sparse-attention indexer) and `your_model` (the estimate the command line and the page's form print);
- `scaling_lib.tiny` is JAX: each of its modules runs on the tiny model what its namesake above predicts
  (`tiny.sharding` runs `sharding`, `tiny.moe` runs `moe`, ...), plus `tiny.xla` (meshes, compiled costs,
  collectives) and `tiny.model` (the decoder itself);
- `scaling_lib.book` is the book's own tooling: exercises and their checker, the claims ledger, plotting, display
  and notebook set-up.

`from scaling_lib import get_chip, get_model` gives the inputs readers use most; the exercise checker is the book's
tooling, not math: `from scaling_lib.book import check, solution`. Importing the package loads no `scaling_lib.book`
module (a test checks it).
"""

from .hardware import get_chip
from .models import get_model

__all__ = ["get_chip", "get_model"]
__version__ = "0.2.0"
