#!/usr/bin/env python3
"""Every key `epo plan --emit bridge` writes names a field of Megatron-Bridge's real config classes.

Reads the config dataclasses from a Megatron-Bridge and a Megatron-LM checkout without importing
them (their annotated class attributes, bases followed by name): ConfigContainer's sections
model (GPTModelProvider, MLAModelProvider, HybridModelProvider), train (TrainingConfig), dataset
(GPTDatasetConfig), ddp (DistributedDataParallelConfig), optimizer (OptimizerConfig) and
comm_overlap (CommOverlapConfig); mixed_precision must name a preset function of
training/mixed_precision.py and comm_overlap._target_ the CommOverlapConfig class. Then runs
`epo plan --emit bridge` for each plan below and checks every key it writes.

  EPO_BIN=build/cli/epo python3 bench/bridge_fields_oracle.py --bridge BRIDGE_CHECKOUT \\
      --megatron MEGATRON_CHECKOUT
"""
import argparse
import ast
import os
import pathlib
import subprocess
import sys

PLANS = {
    "default plan": "",
    "DeepSeek-V3 on 1,024 H100": "--model deepseek-v3 --hardware dgx-h100 --gpus 1024 "
                                 "--gbs 16384",
    "FP8 (Qwen3-30B-A3B, H100)": "--precision fp8",
    "MXFP8, fused grouped MLP (DeepSeek-V3, 256 GB200)": "--model deepseek-v3 --hardware "
                                                         "gb200-nvl72 --gpus 256 --gbs 4096 "
                                                         "--precision fp8",
    "NVFP4 (Nemotron-3-Super, 64 GB300)": "--model nemotron-3-super --hardware gb300-nvl72 "
                                          "--gpus 64 --gbs 512 --precision nvfp4",
    "flex / DeepEP, graphs": "--layout tp=1,pp=1,ep=16 --dispatcher flex --flex-backend deepep",
    "flex / HybridEP": "--layout tp=1,pp=1,ep=16 --dispatcher flex --flex-backend hybridep",
    "alltoall, TP 2 PP 2, offloading": "--layout tp=2,pp=2,ep=8 --dispatcher alltoall "
                                       "--offload-modules core_attn,attn_proj",
}
SECTIONS = {
    "model": ["GPTModelProvider", "MLAModelProvider", "HybridModelProvider"],
    "train": ["TrainingConfig"],
    "dataset": ["GPTDatasetConfig"],
    "ddp": ["DistributedDataParallelConfig"],
    "optimizer": ["OptimizerConfig"],
    "comm_overlap": ["CommOverlapConfig"],
}


def read_classes(roots):
    """class name -> (fields, base names), merged over every definition of that name."""
    classes = {}
    for root in roots:
        for path in pathlib.Path(root).rglob("*.py"):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                fields, bases = classes.setdefault(node.name, (set(), set()))
                for b in node.bases:
                    name = b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None)
                    if name:
                        bases.add(name)
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        fields.add(stmt.target.id)
    return classes


def all_fields(classes, name, seen=None):
    seen = seen if seen is not None else set()
    if name in seen or name not in classes:
        return set()
    seen.add(name)
    fields, bases = classes[name]
    out = set(fields)
    for b in bases:
        out |= all_fields(classes, b, seen)
    return out


def preset_functions(bridge):
    path = pathlib.Path(bridge, "src/megatron/bridge/training/mixed_precision.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bridge", required=True, help="Megatron-Bridge checkout")
    ap.add_argument("--megatron", required=True, help="Megatron-LM checkout")
    opts = ap.parse_args()
    epo = os.environ.get("EPO_BIN", "build/cli/epo")
    classes = read_classes([pathlib.Path(opts.bridge, "src/megatron/bridge"),
                            pathlib.Path(opts.megatron, "megatron")])
    fields = {s: set().union(*(all_fields(classes, c) for c in names))
              for s, names in SECTIONS.items()}
    presets = preset_functions(opts.bridge)
    bad_total = checked_total = 0
    for title, args in PLANS.items():
        p = subprocess.run([epo, "plan", "--emit", "bridge"] + args.split(),
                           capture_output=True, text=True)
        if p.returncode != 0:
            print("%-50s epo plan exit %d: %s" % (title, p.returncode, p.stderr.strip()[-200:]))
            bad_total += 1
            continue
        bad, checked = [], 0
        for line in p.stdout.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            key = key.lstrip("+~")
            checked += 1
            section, _, name = key.partition(".")
            if key == "mixed_precision":
                ok = value in presets
            elif key == "comm_overlap._target_":
                ok = value.endswith(".CommOverlapConfig") and "CommOverlapConfig" in classes
            elif section in fields:
                ok = name in fields[section]
            else:
                ok = False
            if not ok:
                bad.append(key + "=" + value)
        checked_total += checked
        bad_total += len(bad)
        print("%-50s %3d keys, %d not a field%s" % (title, checked, len(bad),
                                                    (": " + ", ".join(bad)) if bad else ""))
    print("%d keys checked over %d plans, %d not fields of Bridge's config classes"
          % (checked_total, len(PLANS), bad_total))
    return 1 if bad_total else 0


if __name__ == "__main__":
    sys.exit(main())
