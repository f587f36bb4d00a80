#!/usr/bin/env python3
"""Cases for bench/megatron_memory_oracle.py: Megatron-LM arguments and EPO's memory per case.

For each preset and layout (PP 1) takes the arguments `epo plan --emit mlm` writes for the
preset, sets the layout's parallel sizes, and records what `epo predict --mlm-args` puts for
weights, gradients and optimizer states. Writes JSON lines to OUT.

  EPO_BIN=build/cli/epo python3 bench/megatron_memory_cases.py OUT.jsonl [--dir TMPDIR]
"""
import argparse
import json
import os
import re
import subprocess

CASES = [("qwen3-30b-a3b", 16, [(1, 8, 1), (1, 16, 1), (2, 8, 1), (4, 4, 1)]),
         ("qwen3-235b-a22b", 64, [(1, 64, 1), (2, 32, 1), (4, 16, 1), (8, 8, 1)]),
         ("deepseek-v3", 256, [(1, 64, 1), (1, 256, 1), (2, 64, 1), (8, 32, 1)]),
         ("mixtral-8x7b", 16, [(1, 8, 1), (2, 8, 1), (4, 4, 1), (2, 8, 2)]),
         ("moonlight-16b-a3b", 16, [(1, 8, 1), (2, 8, 1), (1, 16, 1)]),
         ("kimi-k2", 256, [(1, 64, 1), (2, 128, 1)]),
         ("qwen2-57b-a14b", 16, [(1, 8, 1), (2, 8, 1), (4, 4, 1)])]


def with_layout(text, tp, ep, etp):
    for flag, val in (("--tensor-model-parallel-size", tp), ("--pipeline-model-parallel-size", 1),
                      ("--expert-model-parallel-size", ep), ("--expert-tensor-parallel-size", etp),
                      ("--context-parallel-size", 1)):
        text = re.sub(r"%s \S+" % re.escape(flag), "%s %s" % (flag, val), text)
    for flag in ("--num-virtual-stages-per-pipeline-rank", "--pipeline-model-parallel-layout",
                 "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"):
        text = re.sub(r"%s \S+ \\\n" % re.escape(flag), "", text)
    text = text.replace("--sequence-parallel \\\n", "")
    if tp > 1:
        text = text.replace("--micro-batch-size", "--sequence-parallel \\\n--micro-batch-size", 1)
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dir", default="memory_cases")
    a = ap.parse_args()
    epo = os.environ.get("EPO_BIN", "build/cli/epo")
    os.makedirs(a.dir, exist_ok=True)
    with open(a.out, "w") as out:
        for model, gpus, layouts in CASES:
            base = os.path.join(a.dir, model + ".txt")
            subprocess.run([epo, "plan", "--model", model, "--gpus", str(gpus), "--emit", "mlm",
                            "--out", base], check=True, capture_output=True)
            for tp, ep, etp in layouts:
                text = with_layout(open(base).read(), tp, ep, etp)
                path = os.path.join(a.dir, "%s-tp%d-ep%d-etp%d" % (model, tp, ep, etp))
                open(path + ".txt", "w").write(text)
                subprocess.run([epo, "predict", "--mlm-args", path + ".txt", "--gpus", str(gpus),
                                "--fast", "--json", path + ".json"], check=True, capture_output=True)
                m = json.load(open(path + ".json"))["memory"]
                out.write(json.dumps({
                    "what": "%s %d GPUs tp%d ep%d etp%d pp1" % (model, gpus, tp, ep, etp),
                    "world_size": gpus, "args": text, "epo_weights_bytes": m["weights_bytes"],
                    "epo_gradients_bytes": m["gradients_bytes"],
                    "epo_optimizer_bytes": m["optimizer_bytes"]}) + "\n")


if __name__ == "__main__":
    main()
