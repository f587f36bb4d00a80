#!/usr/bin/env python3
"""EPO's weights, gradients and optimizer states against Megatron-LM's own formula.

Megatron-LM estimates the memory of the most loaded model shard's parameters, fp32 gradients and
Adam states (megatron/training/theoretical_memory_usage.py, compute_weight_and_optimizer_memory:
6 bytes per parameter plus 12 over the data-parallel size with the distributed optimizer, the
experts' share over the expert data-parallel size). This reads JSON lines of cases (Megatron-LM
arguments, world size, and what `epo predict --mlm-args` put for weights, gradients and
optimizer states), runs Megatron's parser and validate_args on the arguments and its formula, and
prints both with the difference.

  MEGATRON_PATH=DIR python3 bench/megatron_memory_oracle.py CASES.jsonl [--json OUT.json]

One pipeline stage per case (PP 1): Megatron's formula puts the embedding, the output layer and
the MTP block on its most loaded shard, which EPO places by layout.
"""
import contextlib
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_rules_oracle import EXTRA, args_of, cases_args, use_megatron  # noqa: E402


def megatron_bytes(case):
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.theoretical_memory_usage import compute_weight_and_optimizer_memory
    argv = args_of(case["args"])
    os.environ["WORLD_SIZE"] = str(case["world_size"])
    os.environ["RANK"] = "0"
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"  # validate_args' TP check; no effect here
    sys.argv = ["megatron"] + argv + EXTRA
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        args = parse_args()
        validate_args(args, {})
    # The tokenizer pads the vocabulary to a multiple of make_vocab_size_divisible_by x TP.
    multiple = args.make_vocab_size_divisible_by * args.tensor_model_parallel_size
    args.padded_vocab_size = -(-args.vocab_size // multiple) * multiple
    return compute_weight_and_optimizer_memory(args)


def main():
    a = cases_args()
    use_megatron()
    rows = []
    for line in open(a.cases):
        case = json.loads(line)
        epo = case["epo_weights_bytes"] + case["epo_gradients_bytes"] + case["epo_optimizer_bytes"]
        try:
            mb = megatron_bytes(case)
        except BaseException as e:  # noqa: BLE001
            print("%-46s megatron refused: %s" % (case["what"], str(e)[:200]))
            continue
        diff = epo / mb - 1
        rows.append({"what": case["what"], "epo_gib": epo / 2**30, "megatron_gib": mb / 2**30,
                     "diff_pct": 100 * diff})
        print("%-46s epo %8.2f GiB  megatron %8.2f GiB  %+6.2f %%" %
              (case["what"], epo / 2**30, mb / 2**30, 100 * diff))
    if rows:
        d = sorted(abs(r["diff_pct"]) for r in rows)
        print("# %d cases: median |difference| %.2f %%, max %.2f %%" % (len(d), d[len(d) // 2], d[-1]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
