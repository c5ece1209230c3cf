"""The tiny JAX model, and each closed-form prediction of the library run on it.

Each module runs what its namesake in `scaling_lib` predicts: `tiny.sharding` executes the layouts `sharding`
prices, `tiny.layouts` the partitionings of `layouts`, `tiny.moe` the routing of `moe`, `tiny.speculative` the
acceptance arithmetic of `speculative`, `tiny.quantize` the formats of `quantization`, `tiny.paged` the paged cache
of `kv_levers`, `tiny.flops` the FLOP and byte counts of `flops` and `roofline`. `tiny.model` is the decoder they
share; `tiny.xla` reads meshes, compiled costs and collectives off XLA; `tiny.measure` measures this CPU's memory
bandwidth and matmul rate and times a batched matmul against the CPU's own roofline (chapter 1, the worked problems);
`tiny.estimate` times decode steps against `estimate` (chapter 11).

Importing any of these imports JAX. Call `tiny.xla.setup_devices()` (or the notebooks' `book.notebook.setup()`)
before JAX initialises its backend to get the book's 8 emulated CPU devices.
"""
