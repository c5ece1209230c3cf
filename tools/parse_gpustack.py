"""Regenerate the GPUStack performance-lab rows from one pinned commit of `gpustack/gpustack`.

Reads every `bench serve` result block ("Serving Benchmark Result") of the pages under docs/performance-lab/ that
ran a deployment `estimate.Deployment` can express (a chip of ours, a model of ours or a config in
book/data/hf_configs/, bf16/fp8 weights, tensor parallelism with or without expert parallelism or SGLang's
data-parallel attention), and writes

to standard output, in the columns of scaling_lib/data/concurrency_sweeps.csv (`lengths` "varied" for ShareGPT's
conversations, "fixed" for vLLM's random prompts of one length), one of two kinds:

- `--kind closed` (the default): closed-loop blocks (`--max-concurrency`, the block's "Maximum request
  concurrency"); concurrency_sweeps.csv holds these rows;
- `--kind burst`: blocks run with no `--max-concurrency` and no `--request-rate` (vLLM's defaults: every prompt
  sent at once, request rate inf; the block's "Peak concurrent requests" equals its requests), `concurrency` = the
  requests, all in flight at t = 0 (a transient, not a steady state): scaling_lib/data/burst_runs.csv holds these.

No block of these pages was run at a finite request rate (open loop), so no open-loop file is written.
Every other block is listed with the reason it was left out (`--skipped`).

Usage: python tools/parse_gpustack.py --repo GIT_DIR [--kind closed|burst] [--skipped]
GIT_DIR: a clone of github.com/gpustack/gpustack that holds COMMIT; this script reads it with `git show`.
"""

import argparse
import csv
import re
import subprocess
import sys
from pathlib import Path

COMMIT = "47277d79f4a5bae12a2d25e9ecbed2a2177a5f2d"  # 2026-08-21, the newest in the fetched snapshot
ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ["source", "engine", "hardware", "chip", "n_chips", "tensor_parallel", "model", "model_card", "weights",
           "kv_cache", "input_len", "output_len", "lengths", "concurrency", "requests", "request_throughput",
           "output_tokens_per_s", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "mean_e2e_latency_ms",
           "note"]

# Pages whose deployments the library can express: the model's shapes, the chip, the checkpoint's own precision.
# GLM-4.6's config (public copies of it) has GLM-4.5's architecture fields; only its context (202,752) is longer.
GLM = dict(model="hf:glm-4.5", model_card="zai-org/GLM-4.6 (GLM-4.5's shapes: book/data/hf_configs/glm-4.5.json)",
           native="bf16")
PAGES = {
    "docs/performance-lab/qwen3-8b/h100-latency.md": dict(
        chip="h100", hardware="H100 SXM 80 GB", model="hf:qwen3-8b", model_card="Qwen/Qwen3-8B", native="bf16",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.3.post3", "TensorRT-LLM": "1.2.0rc1"}),
    "docs/performance-lab/qwen3-235b-a22b/h100.md": dict(
        chip="h100", hardware="H100 SXM 80 GB (8-GPU node)", model="qwen3-235b-a22b",
        model_card="Qwen/Qwen3-235B-A22B-Instruct-2507", native="bf16",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.5.post1"}),
    "docs/performance-lab/qwen3-235b-a22b/a100.md": dict(
        chip="a100", hardware="A100 SXM 80 GB (8-GPU node)", model="qwen3-235b-a22b",
        model_card="Qwen/Qwen3-235B-A22B-Instruct-2507", native="bf16",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.5.post1"}),
    "docs/performance-lab/deepseek-r1/h200.md": dict(
        chip="h200", hardware="H200 SXM 141 GB (8-GPU node)", model="deepseek-v3",
        model_card="deepseek-ai/DeepSeek-R1-0528 (DeepSeek-V3's shapes)", native="fp8",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.3", "TensorRT-LLM": "1.0.0"}),
    "docs/performance-lab/deepseek-v3.2/h200.md": dict(
        chip="h200", hardware="H200 SXM 141 GB (8-GPU node)", model="hf:deepseek-v3.2",
        model_card="deepseek-ai/DeepSeek-V3.2", native="fp8",
        engines={"vLLM": "0.13.0", "SGLang": "0.5.6.post2", "TensorRT-LLM": "1.2.0rc5"}),
    "docs/performance-lab/glm-4.x/h200.md": dict(
        GLM, chip="h200", hardware="H200 SXM 141 GB (8-GPU node)",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.3", "TensorRT-LLM": "1.0.0"}),
    "docs/performance-lab/glm-4.x/h100.md": dict(
        GLM, chip="h100", hardware="H100 SXM 80 GB (8-GPU node)",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.3", "TensorRT-LLM": "1.0.0"}),
    "docs/performance-lab/glm-4.x/a100.md": dict(
        GLM, chip="a100", hardware="A100 SXM 80 GB (8-GPU node)",
        engines={"vLLM": "0.11.0", "SGLang": "0.5.3", "TensorRT-LLM": "1.0.0"}),
}
# Pages left out whole, with the reason.
PAGES_LEFT_OUT = {
    "qwen3-8b/910b.md": "Ascend 910B: no such chip in the library",
    "qwen3-30b-a3b/910b.md": "Ascend 910B: no such chip in the library",
    "qwen3-14b/a100.md": "Qwen3-14B: no shapes in the library (needs book/data/hf_configs/qwen3-14b.json)",
    "qwen3-14b/h100.md": "Qwen3-14B: no shapes in the library (needs book/data/hf_configs/qwen3-14b.json)",
    "qwen3-32b/a100.md": "Qwen3-32B: no shapes in the library (needs book/data/hf_configs/qwen3-32b.json)",
    "qwen3-32b/h100.md": "Qwen3-32B: no shapes in the library (needs book/data/hf_configs/qwen3-32b.json)",
    "glm-4.5-air/a100.md": "GLM-4.5-Air: no shapes in the library (needs book/data/hf_configs/glm-4.5-air.json)",
    "glm-4.5-air/h100.md": "GLM-4.5-Air: no shapes in the library (needs book/data/hf_configs/glm-4.5-air.json)",
    "gpt-oss-20b/a100.md": "gpt-oss: served from its MXFP4 checkpoint (4-bit expert weights), below 8 bits",
    "gpt-oss-20b/h100.md": "gpt-oss: served from its MXFP4 checkpoint (4-bit expert weights), below 8 bits",
    "gpt-oss-120b/a100.md": "gpt-oss: served from its MXFP4 checkpoint (4-bit expert weights), below 8 bits",
    "gpt-oss-120b/h100.md": "gpt-oss: served from its MXFP4 checkpoint (4-bit expert weights), below 8 bits",
    "glm-5.2/h200.md": "GLM-5.2: no shapes in the library; GPUStack's benchmark tool, not vllm bench serve",
    "qwen3.5-9b/h100.md": "Qwen3.5 (hybrid attention): no shapes in the library; guidellm-converted blocks",
    "qwen3.5-9b/h100-latency.md": "Qwen3.5 (hybrid attention): no shapes in the library; guidellm-converted blocks",
    "qwen3.5-35b-a3b/h200.md": "Qwen3.5 (hybrid attention): no shapes in the library; guidellm-converted blocks",
    "qwen3.5-35b-a3b/h200-latency.md": "Qwen3.5 (hybrid attention): no shapes in the library; guidellm-converted "
                                       "blocks",
}
# The random workloads the pages name (their Benchmark Dataset section): comment label -> (input, output) asked.
RANDOM = {"32k": (32000, 100), "4k": (4000, 200), "2k": (2000, 100), "128": (128, 4)}
FIELDS = {"Successful requests": "requests", "Maximum request concurrency": "concurrency",
          "Total input tokens": "in_total", "Total generated tokens": "out_total",
          "Request throughput (req/s)": "request_throughput", "Output token throughput (tok/s)": "output_tokens_per_s",
          "Peak concurrent requests": "peak", "Mean TTFT (ms)": "mean_ttft_ms", "P99 TTFT (ms)": "p99_ttft_ms",
          "Mean TPOT (ms)": "mean_tpot_ms", "P99 TPOT (ms)": "p99_tpot_ms", "Traffic request rate": "rate"}
# Serve-command switches the library has no knob for (kernels, compilation, speculation, scheduling tricks).
SKIP_FLAGS = [
    (r"speculative|EAGLE|\bmtp\b", "speculative decoding"),
    (r"torch-compile", "torch.compile (an engine optimization the library does not model)"),
    (r"attention-backend|ATTENTION_BACKEND|nsa-(prefill|decode)-backend", "an attention-kernel choice"),
    (r"DEEP_?GEMM=0|DG_ENABLED=0", "DeepGEMM turned off (a kernel choice)"),
    (r"async-scheduling", "vLLM async scheduling (a scheduler optimization the library does not model)"),
    (r"(-pp|--pp-size|--pp_size)\s+[2-9]", "pipeline parallelism"),
    (r"prefix|lmcache", "prefix caching"),
    (r"AWQ|GPTQ|int4|w4a", "weights below 8 bits"),
    (r"-dcp\s", "decode context parallelism"),
]
KEPT_FLAGS = r"(--max-num-batched-tokens|--max_num_tokens|--chunked-prefill-size|--cuda-graph-max-bs|--max-num-seqs" \
             r"|--enable_chunked_prefill|--max_seq_len|--max-model-len|--context-length|--gpu-memory-utilization" \
             r"|--kv-cache-dtype)(?:[ =](\S+))?"


def page_text(repo: str, path: str) -> list:
    return subprocess.run(["git", f"--git-dir={repo}", "show", f"{COMMIT}:{path}"], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def fenced_after(lines: list, i: int) -> tuple:
    """The code fence that starts after line i: its lines (indent, backslash continuations and comments joined
    away, environment exports kept) and the index of its closing fence."""
    j = i + 1
    while "```" not in lines[j]:
        j += 1
    k = j + 1
    body = []
    while "```" not in lines[k]:
        body.append(lines[k].strip())
        k += 1
    text = " ".join(s.rstrip("\\").strip() for s in body if s and not s.startswith("#"))
    return re.sub(r"\s+", " ", text), k


def blocks(lines: list):
    """Each result block: (end line, 1-based), its fields, the serve command in force, the comment label above it
    inside its fence (a dataset such as '# random 4K input', or a variant flag such as '# --max_num_tokens=32768'),
    and the heading it sits under."""
    command, heading, label = None, "", None
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("#") and not line.startswith(" ") and s.lstrip("#").startswith(" "):
            heading = s.lstrip("# ").strip()
        if re.search(r'info "[^"]*serving script"', s, re.I):
            command, _ = fenced_after(lines, i)
        if s.startswith("```"):
            label = None
        elif s.startswith("# ") and line.startswith("    "):
            label = s[2:].strip()
        if "Serving Benchmark Result" in s:
            j, vals = i, {}
            while not (j > i and lines[j].strip().startswith("=" * 20)):
                m = re.match(r"\s*([A-Za-z0-9 ()/.\-]+?):\s+(\S+)\s*$", lines[j])
                if m and m.group(1).strip() in FIELDS:
                    vals[FIELDS[m.group(1).strip()]] = m.group(2)
                j += 1
            yield j + 1, vals, command, label, heading
            label = None


def flag(command: str, *names, default=None):
    for name in names:
        m = re.search(rf"(?:^|\s){re.escape(name)}[ =](\d+)", command)
        if m:
            return int(m.group(1))
    return default


def deployment(meta: dict, command: str, label: str | None):
    """(fields, skip reason): the deployment a serve command ran, or why the library cannot express it."""
    text = command
    if label and label.startswith("--"):  # the block's own variant replaces the command's value of that flag
        name = re.split(r"[ =]", label)[0]
        text = re.sub(rf"\s{re.escape(name)}(?:[ =]\S+)?", "", text) + " " + label
    for pattern, reason in SKIP_FLAGS:
        if re.search(pattern, text, re.I):
            return None, reason
    engine = ("vLLM" if "vllm serve" in command else "SGLang" if "sglang" in command else
              "TensorRT-LLM" if "trtllm-serve" in command else None)
    tp = flag(command, "-tp", "--tp-size", "--tp", "--tp_size", "--tensor-parallel-size", default=1)
    dp = flag(command, "-dp", "--dp-size", "--dp", "--data-parallel-size", default=1)
    ep = flag(command, "--ep-size", "--ep_size", default=1) > 1 or "--enable-expert-parallel" in command
    dp_attention = "--enable-dp-attention" in command
    if dp_attention and dp == 1:
        return None, (f"SGLang --enable-dp-attention with no --dp: attention stays tensor-parallel over {tp} (SGLang "
                      "splits it tp/dp ways), plain TP's layout on DP attention's code path; ambiguous, left out")
    if dp_attention and dp != tp:
        return None, f"SGLang DP attention in {dp} groups of {tp // dp}: the library's flag splits it over all chips"
    if dp > 1 and not dp_attention:
        return None, "data-parallel replicas behind one endpoint of the engine (not measured per replica)"
    weights = "fp8" if re.search(r"FP8", command) else meta["native"]
    kv = "fp8" if re.search(r"--kv-cache-dtype[ =]fp8", text) else "bf16"
    layout = f"TP{tp}" + (" + DP-attention" if dp_attention else "") + (" + EP" if ep else "")
    kept = list(dict.fromkeys(m.group(0) for m in re.finditer(KEPT_FLAGS, text)))
    return dict(engine=engine, tp=tp, ep=ep, dp_attention=dp_attention, weights=weights, kv=kv, layout=layout,
                kept=kept), None


def dataset(label: str | None, vals: dict) -> tuple:
    """(dataset name, asked input, asked output) of a block: random lengths the label names, else ShareGPT (the
    pages' default workload), or the generation-heavy random 1K/2K one DeepSeek-V3.2's page adds unlabelled."""
    n = int(vals["requests"])
    mean_in, mean_out = int(vals["in_total"]) / n, int(vals["out_total"]) / n
    m = re.search(r"random (32k|4k|2k|128) input", label or "", re.I)
    if m:
        return "random", *RANDOM[m.group(1).lower()]
    if abs(mean_in - 1000) < 1 and abs(mean_out - 2000) < 1:
        return "random", 1000, 2000
    return "sharegpt", None, None


def rows(repo: str):
    """(kept rows: (kind, row), left out: (page, end line, reason))."""
    kept, left_out, seen = [], [], {}
    for page, meta in PAGES.items():
        lines = page_text(repo, page)
        for end, vals, command, label, heading in blocks(lines):
            where = f"{page} L{end}"
            if "rate" in vals and vals["rate"] != "inf":
                left_out.append((where, "open loop: no block of these pages has one; not handled"))
                continue
            d, reason = deployment(meta, command or "", label)
            if d is None:
                left_out.append((where, f"{reason} ({heading}: {command})"))
                continue
            key = tuple(vals[k] for k in ("requests", "in_total", "out_total", "mean_ttft_ms", "mean_tpot_ms",
                                          "output_tokens_per_s"))
            if key in seen:
                left_out.append((where, f"the same numbers as the block ending at line {seen[key]} (reprinted)"))
                continue
            seen[key] = end
            n = int(vals["requests"])
            name, ask_in, ask_out = dataset(label, vals)
            closed = "concurrency" in vals
            n_chips = d["tp"]
            version = meta["engines"][d["engine"]]
            load = (f"closed loop at --max-concurrency {vals['concurrency']}" if closed else
                    f"no --max-concurrency and no --request-rate: all {n} prompts sent at once (request rate inf; "
                    f"peak concurrent requests {float(vals['peak']):.0f})")
            workload = (f"ShareGPT ({n} successful requests)" if name == "sharegpt" else
                        f"random dataset --random-input-len {ask_in} --random-output-len {ask_out} ({n} prompts)")
            source = (f"gpustack/gpustack {page} @{COMMIT} (GPUStack performance lab), the vllm bench serve result "
                      f"block ending at line {end}: {workload}, {load}")
            notes = [f"serve command: {command}" + (f" [variant in the block: {label}]" if label and
                                                    label.startswith("--") else ""),
                     f"section '{heading}'"]
            if name == "random":
                notes.append(f"random lengths at vllm bench serve's default range ratio 0 (fixed); input_len and "
                             f"output_len are the printed totals over the {n} requests (asked {ask_in}/{ask_out}; "
                             "fewer out where the model stopped early: no --ignore-eos)")
            else:
                notes.append(f"ShareGPT conversations: input_len and output_len are the printed totals over the "
                             f"{n} requests")
            if meta["chip"] == "a100" and d["weights"] == "fp8":
                notes.append("FP8 checkpoint on A100 (no fp8 tensor cores): weight-only fp8, bf16 matmuls "
                             "(compute_dtype='bf16'; SweepRow.deployment() would ask for fp8 matmuls and refuse)")
            if "8-GPU node" in meta["hardware"] and n_chips < 8:
                notes.append(f"one TP{n_chips} instance on {n_chips} of the node's 8 GPUs (the page's summary table "
                             "doubles its throughput, 'x2', to compare with the 8-GPU baseline)")
            if d["ep"]:
                notes.append("expert parallel: estimate.Deployment(expert_parallel=True)")
            if d["dp_attention"]:
                notes.append("data-parallel attention over all the chips: Deployment(attention_data_parallel=True)")
            if d["kept"]:
                notes.append("engine settings the row keeps but the Deployment does not carry: " + ", ".join(d["kept"]))
            notes.append("KV cache " + ("fp8 (--kv-cache-dtype)" if d["kv"] == "fp8" else
                                        "bf16 (the engine's default; the page sets none)"))
            if meta["model"].startswith("hf:"):
                notes.append(f"model shapes from book/data/hf_configs/{meta['model'][3:]}.json "
                             "(models.from_hf_config)")
            notes.append("mean E2E latency not printed by vllm bench serve (left empty)")
            if not closed:
                notes.append("a burst, not a steady state: concurrency = requests, all in flight at t = 0")
            row = dict(source=source, engine=f"{d['engine']} {version}, {d['layout']}",
                       hardware=f"{n_chips} x {meta['hardware']}, {d['layout']}", chip=meta["chip"],
                       n_chips=n_chips, tensor_parallel=d["tp"], model=meta["model"], model_card=meta["model_card"],
                       weights=d["weights"], kv_cache=d["kv"], input_len=round(int(vals["in_total"]) / n),
                       output_len=round(int(vals["out_total"]) / n),
                       concurrency=int(vals["concurrency"]) if closed else n, requests=n,
                       request_throughput=vals["request_throughput"],
                       output_tokens_per_s=vals["output_tokens_per_s"], mean_ttft_ms=vals["mean_ttft_ms"],
                       p99_ttft_ms=vals["p99_ttft_ms"], mean_tpot_ms=vals["mean_tpot_ms"],
                       p99_tpot_ms=vals["p99_tpot_ms"], mean_e2e_latency_ms="", note="; ".join(notes))
            kept.append(("closed" if closed else "burst", row))
    return kept, left_out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="git dir of a clone of gpustack/gpustack holding the commit")
    parser.add_argument("--kind", choices=("closed", "burst"), default="closed", help="which blocks to print")
    parser.add_argument("--skipped", action="store_true", help="print the blocks left out and why (to stderr)")
    args = parser.parse_args(argv)
    kept, left_out = rows(args.repo)
    out = csv.DictWriter(sys.stdout, COLUMNS, lineterminator="\n")
    out.writeheader()
    out.writerows(dict(row, lengths="fixed" if "random dataset" in row["source"] else "varied")
                  for kind, row in kept if kind == args.kind)
    if args.skipped:
        for page, reason in PAGES_LEFT_OUT.items():
            print(f"docs/performance-lab/{page}: whole page: {reason}", file=sys.stderr)
        for where, reason in left_out:
            print(f"{where}: {reason}", file=sys.stderr)


if __name__ == "__main__":
    main()
