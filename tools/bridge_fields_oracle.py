#!/usr/bin/env python3
"""Every key `epo plan --emit bridge` writes names a field of Megatron-Bridge's real config classes.

Reads the config dataclasses from a Megatron-Bridge and a Megatron-LM checkout without importing
them (their annotated class attributes, bases followed by name): ConfigContainer's sections
model (GPTModelProvider, MLAModelProvider, HybridModelProvider), train (TrainingConfig), dataset
(GPTDatasetConfig), ddp (DistributedDataParallelConfig), optimizer (OptimizerConfig) and
comm_overlap (CommOverlapConfig); mixed_precision must name a preset function of
training/mixed_precision.py and comm_overlap._target_ the CommOverlapConfig class. Then runs
`epo plan --emit bridge` for each plan below and checks every key it writes.

  EPO_BIN=build/cli/epo python3 tools/bridge_fields_oracle.py --bridge BRIDGE_CHECKOUT \\
      --megatron MEGATRON_CHECKOUT [--record tests/data/bridge/config_fields.json]

--record writes what the CPU test (tests/cli/test_cli_bridge_fields.cpp) checks every emitted
override against: each section's fields with their annotations, the mixed-precision presets with
the values their functions set (MixedPrecisionConfig.setup copies every one of its fields into the
model, optimizer and DDP configs that have it, over any override), and the fields
CommOverlapConfig.setup copies into those configs the same way (_CommOverlapConfig).
"""
import argparse
import ast
import json
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
                fields, bases = classes.setdefault(node.name, ({}, set()))
                for b in node.bases:
                    name = b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None)
                    if name:
                        bases.add(name)
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        fields.setdefault(stmt.target.id, ast.unparse(stmt.annotation))
    return classes


def all_fields(classes, name, seen=None):
    """field -> annotation of a class and its bases (the class's own annotation wins)."""
    seen = seen if seen is not None else set()
    if name in seen or name not in classes:
        return {}
    seen.add(name)
    fields, bases = classes[name]
    out = {}
    for b in bases:
        out.update(all_fields(classes, b, seen))
    out.update(fields)
    return out


def mixed_precision_tree(bridge):
    """The module of MixedPrecisionConfig: its fields' defaults and each preset function's values
    (a MixedPrecisionConfig(...) call, another preset's result, then `cfg.field = value` lines)."""
    path = pathlib.Path(bridge, "src/megatron/bridge/training/mixed_precision.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def value(node):
        try:
            return ast.literal_eval(node)
        except ValueError:
            return ast.unparse(node)  # e.g. torch.bfloat16, kept as written

    defaults = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "MixedPrecisionConfig":
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    defaults[st.target.id] = value(st.value) if st.value is not None else None
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    presets = {}

    def evaluate(name):
        if name in presets:
            return presets[name]
        values = dict(defaults)
        for st in ast.walk(funcs[name]):
            call = st.value if isinstance(st, (ast.Assign, ast.Return)) else None
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                if call.func.id == "MixedPrecisionConfig":
                    values.update({k.arg: value(k.value) for k in call.keywords})
                elif call.func.id in funcs:
                    values.update(evaluate(call.func.id))
        for st in funcs[name].body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute):
                values[st.targets[0].attr] = value(st.value)
        # MixedPrecisionConfig.finalize(): an unset fp8_param / fp4_param follows its *_gather.
        for kind in ("fp8", "fp4"):
            if values.get(kind + "_param") is None:
                values[kind + "_param"] = values.get(kind + "_param_gather", False)
        presets[name] = values
        return values

    for name, fn in funcs.items():
        returns = ast.unparse(fn.returns) if fn.returns is not None else ""
        if "MixedPrecisionConfig" in returns and not name.startswith("_") and \
                name != "get_mixed_precision_config":
            evaluate(name)
    return sorted(defaults), presets


def preset_functions(bridge):
    return set(mixed_precision_tree(bridge)[1])


def record(opts, classes, fields, path):
    """Writes the config tree the CPU test reads (see the module's doc)."""
    def commit(repo):
        p = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                           text=True)
        return p.stdout.strip() or "unknown"
    mp_fields, presets = mixed_precision_tree(opts.bridge)
    tree = {
        "source": "Megatron-Bridge and Megatron-LM config dataclasses, read by "
                  "tools/bridge_fields_oracle.py --record",
        "bridge_commit": opts.bridge_commit or commit(opts.bridge),
        "megatron_commit": opts.megatron_commit or commit(opts.megatron),
        "sections": {s: dict(sorted(f.items())) for s, f in fields.items()},
        "mixed_precision_fields": mp_fields,
        "mixed_precision_presets": presets,
        "comm_overlap_copied_fields": sorted(all_fields(classes, "_CommOverlapConfig")),
    }
    with open(path, "w") as f:
        json.dump(tree, f, indent=1, sort_keys=False)
        f.write("\n")
    print("wrote %s: %d sections, %d presets" % (path, len(fields), len(presets)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bridge", required=True, help="Megatron-Bridge checkout")
    ap.add_argument("--megatron", required=True, help="Megatron-LM checkout")
    ap.add_argument("--record", help="write the config tree the CPU test checks against")
    ap.add_argument("--bridge-commit", help="commit to record (a checkout without .git)")
    ap.add_argument("--megatron-commit", help="commit to record (a checkout without .git)")
    opts = ap.parse_args()
    epo = os.environ.get("EPO_BIN", "build/cli/epo")
    classes = read_classes([pathlib.Path(opts.bridge, "src/megatron/bridge"),
                            pathlib.Path(opts.megatron, "megatron")])
    fields = {}
    for s, names in SECTIONS.items():
        fields[s] = {}
        for c in names:
            for k, v in all_fields(classes, c).items():
                fields[s].setdefault(k, v)
    if opts.record:
        record(opts, classes, fields, opts.record)
        return 0
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
